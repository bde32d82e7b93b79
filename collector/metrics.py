"""The collector's own metrics, in Kafka's ``client-metrics`` vocabulary.

Kafka registers these sensors in ``ClientMetricsManager.ClientMetricsStats`` (group
``client-metrics``); the JMX->Prometheus rendering operators know is
``kafka_server_client_metrics_<name>``.  Kafka tags the per-instance ones with
``client_instance_id``; in Prometheus that label is unbounded (every client restart is a
new id), so here it is opt-in (``telemetry.metrics.instance.labels``) and the default
series are aggregates.

| Kafka sensor                          | Prometheus series                                               |
|---------------------------------------|-----------------------------------------------------------------|
| instance-count                        | kafka_server_client_metrics_instance_count (gauge)               |
| unknown-subscription-request-count    | kafka_server_client_metrics_unknown_subscription_request_total   |
| throttle-count                        | kafka_server_client_metrics_throttle_total                       |
| plugin-export-count                   | kafka_server_client_metrics_plugin_export_total                  |
| plugin-export-time-avg / -max         | kafka_server_client_metrics_plugin_export_time_seconds (histogram)|
| plugin-error-count                    | kafka_server_client_metrics_plugin_error_total                   |

Plus the server's own: requests by api key and error code, open connections, and
connections closed for protocol errors.  One ``CollectorRegistry`` per server, so several
servers in one process (tests) never share series.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["CollectorMetrics"]

_PREFIX = "kafka_server_client_metrics_"

# Export into the landing log is a local append: microseconds to a few milliseconds.
_EXPORT_BUCKETS_SECONDS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0,
)


class CollectorMetrics:
    """Implements ``ClientMetricsStats`` and ``RequestObserver``."""

    def __init__(
        self,
        *,
        instance_labels: bool = False,
        api_names: Callable[[int], str] = str,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._instance_labels = instance_labels
        self._api_names = api_names
        labels = ("client_instance_id",) if instance_labels else ()
        r = self.registry
        self.instance_count = Gauge(
            _PREFIX + "instance_count",
            "The current number of client metrics instances being managed by the collector",
            registry=r,
        )
        self.unknown_subscription_request = Counter(
            _PREFIX + "unknown_subscription_request",
            "Pushes rejected with UNKNOWN_SUBSCRIPTION_ID",
            registry=r,
        )
        self.throttle = Counter(
            _PREFIX + "throttle",
            "Get/Push requests rejected with THROTTLING_QUOTA_EXCEEDED (too early)",
            labels,
            registry=r,
        )
        self.plugin_export = Counter(
            _PREFIX + "plugin_export", "Pushes handed to the exporter successfully", labels, registry=r
        )
        self.plugin_export_time = Histogram(
            _PREFIX + "plugin_export_time_seconds",
            "Time spent decompressing, validating and exporting a push",
            labels,
            buckets=_EXPORT_BUCKETS_SECONDS,
            registry=r,
        )
        self.plugin_error = Counter(
            _PREFIX + "plugin_error",
            "Pushes answered INVALID_RECORD (decompression, payload or exporter failure)",
            labels,
            registry=r,
        )
        self.requests = Counter(
            "ktc_requests", "Kafka requests answered, by API and error code",
            ("api", "error_code"), registry=r,
        )
        self.connections = Gauge("ktc_connections", "Open Kafka connections", ("listener",), registry=r)
        self.connections_closed_for_errors = Counter(
            "ktc_connections_closed_on_error",
            "Connections closed because the peer broke the protocol",
            registry=r,
        )
        self.connections_rejected = Counter(
            "ktc_connections_rejected", "Connections refused by the connection quota", registry=r
        )
        # Children resolved once: a labels() lookup per request would cost more than the
        # increment itself.
        self._request_children: dict[tuple[int, int], Counter] = {}
        if not instance_labels:
            self._throttle = self.throttle
            self._export = self.plugin_export
            self._export_time = self.plugin_export_time
            self._error = self.plugin_error

    # ClientMetricsStats -------------------------------------------------------------
    def record_throttle(self, client_instance_id: str) -> None:
        (self.throttle.labels(client_instance_id) if self._instance_labels else self._throttle).inc()

    def record_unknown_subscription(self) -> None:
        self.unknown_subscription_request.inc()

    def record_plugin_export(self, client_instance_id: str, seconds: float) -> None:
        if self._instance_labels:
            self.plugin_export.labels(client_instance_id).inc()
            self.plugin_export_time.labels(client_instance_id).observe(seconds)
        else:
            self._export.inc()
            self._export_time.observe(seconds)

    def record_plugin_error(self, client_instance_id: str) -> None:
        (self.plugin_error.labels(client_instance_id) if self._instance_labels else self._error).inc()

    def instance_removed(self, client_instance_id: str) -> None:
        # Kafka unregisters the per-instance sensors with the instance.
        if self._instance_labels:
            for metric in (self.throttle, self.plugin_export, self.plugin_export_time, self.plugin_error):
                try:
                    metric.remove(client_instance_id)
                except KeyError:
                    pass

    # RequestObserver ------------------------------------------------------------------
    def observe(self, api_key: int, error_code: int) -> None:
        child = self._request_children.get((api_key, error_code))
        if child is None:
            child = self.requests.labels(self._api_names(api_key), str(error_code))
            self._request_children[(api_key, error_code)] = child
        child.inc()
