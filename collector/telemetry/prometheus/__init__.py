"""``/metrics/clients``: the pushed client metrics as Prometheus series (docs/prometheus.md).

``naming`` (OTLP names as Prometheus names), ``points`` (one instance's points, folded push
by push), ``budget`` (the series budget and its overflow rule), ``exposition`` (text and
OpenMetrics), ``landed`` (what landed, read back from the landing log), ``landed_topic``
(what landed on the landing topic, every partition), ``client_series`` (the fold, the
scrape; the tap of a node given another exporter), ``fold_process`` (the fold in a child
process of the node, fed from the landing log or the landing topic)."""
