"""The forwarder's own metrics, in the OpenTelemetry Collector's vocabulary.

Names match the Collector's exporterhelper ``metadata.yaml`` so existing dashboards and
alerts apply; prometheus_client adds ``_total`` to counters in the exposition, as the
Collector's Prometheus reader does.  One label, ``exporter`` (``otlp`` or ``otlp/<name>``),
never a client id: per-client data belongs in the OTLP stream, not in Prometheus.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["ForwarderMetrics"]


class ForwarderMetrics:
    def __init__(self, registry: CollectorRegistry, exporter: str = "otlp") -> None:
        labels = ("exporter",)
        self.sent_metric_points = Counter(
            "otelcol_exporter_sent_metric_points",
            "Metric points the receiver accepted.",
            labels,
            registry=registry,
        ).labels(exporter)
        self.send_failed_metric_points = Counter(
            "otelcol_exporter_send_failed_metric_points",
            "Metric points dropped: permanently rejected, partially rejected, or undecodable.",
            labels,
            registry=registry,
        ).labels(exporter)
        self.queue_size = Gauge(
            "otelcol_exporter_queue_size",
            "Read ahead from the landing log and not yet acknowledged, in sizer units.",
            labels,
            registry=registry,
        ).labels(exporter)
        self.queue_capacity = Gauge(
            "otelcol_exporter_queue_capacity",
            "Read-ahead capacity (sending_queue.queue_size), in sizer units.",
            labels,
            registry=registry,
        ).labels(exporter)
        self.lag_records = Gauge(
            "ktc_forwarder_lag_records",
            "Landing-log records not yet delivered: records landed minus the committed "
            "position, read from the log when scraped.",
            labels,
            registry=registry,
        ).labels(exporter)
        self.retries = Counter(
            "ktc_forwarder_retries",
            "Export attempts that failed with a retryable error and will be retried.",
            labels,
            registry=registry,
        ).labels(exporter)
        self.dropped_records = Counter(
            "ktc_forwarder_dropped_records",
            "Landing-log records skipped because they could not be delivered.",
            ("exporter", "reason"),
            registry=registry,
        )
        self._exporter = exporter
        self.batches_past_max_elapsed = Gauge(
            "ktc_forwarder_batches_past_max_elapsed_time",
            "Batches failing for longer than retry_on_failure.max_elapsed_time: kept in the "
            "landing log and retried every max_interval (the Collector would drop them).",
            labels,
            registry=registry,
        ).labels(exporter)
        self._lock = threading.Lock()
        self._lag_by_dir: dict[str, Callable[[], int]] = {}
        self.lag_records.set_function(self._total_lag)

    def dropped(self, reason: str, records: int) -> None:
        self.dropped_records.labels(self._exporter, reason).inc(records)

    def watch_lag(self, directory: str, lag: Callable[[], int]) -> None:
        """Report ``lag()`` of ``directory``, summed into one series (directories are not
        labels).  It is called at every scrape, not set by the consumer: during an outage
        the consumer sits in a backoff while pushes keep landing, and a value it set would
        stand still exactly when operators alert on its growth."""
        with self._lock:
            self._lag_by_dir[directory] = lag

    def _total_lag(self) -> float:
        with self._lock:
            return sum(lag() for lag in self._lag_by_dir.values())
