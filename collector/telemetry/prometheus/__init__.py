"""``/metrics/clients``: the pushed client metrics as Prometheus series (docs/prometheus.md).

``naming`` (OTLP names as Prometheus names), ``points`` (one instance's points, folded push
by push), ``budget`` (the series budget and its overflow rule), ``exposition`` (text and
OpenMetrics), ``client_series`` (the push-path tap, the worker, the scrape)."""
