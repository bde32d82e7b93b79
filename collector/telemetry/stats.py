"""The ClientMetricsManager's metrics, in Kafka's ``client-metrics`` vocabulary.

Kafka registers these sensors in ``ClientMetricsManager.ClientMetricsStats`` (group
``client-metrics``); the JMX->Prometheus rendering operators know is
``kafka_server_client_metrics_<name>``.  Kafka tags the per-instance ones with
``client_instance_id``; in Prometheus that label is unbounded (every client restart is a
new id), so here it is opt-in (``telemetry.metrics.instance.labels``) and the default
series are aggregates.

| Kafka sensor                          | Prometheus series                                                  |
|---------------------------------------|--------------------------------------------------------------------|
| instance-count                        | kafka_server_client_metrics_instance_count (gauge)                 |
| unknown-subscription-request-count    | kafka_server_client_metrics_unknown_subscription_request_total     |
| throttle-count                        | kafka_server_client_metrics_throttle_total                         |
| plugin-export-count                   | kafka_server_client_metrics_plugin_export_total                    |
| plugin-export-time-avg / -max         | kafka_server_client_metrics_plugin_export_time_seconds (histogram) |
| plugin-error-count                    | kafka_server_client_metrics_plugin_error_total                     |

The node's request and connection counts are ``collector.pipeline.request_metrics``.
Beside Kafka's sensors, one of ktc's own: ``ktc_client_empty_pushes_total`` by client
library (``client_software_name``, ``client_software_version``), the accepted pushes that held
no metric while their subscription asked for some; at most ``MAX_EMPTY_PUSH_LIBRARIES``
series, the rest under ``other``.

Why a custom collector instead of ``Counter``/``Histogram`` objects: every push touches
four of these series, and prometheus_client's metric objects take a lock and make several
Python calls per increment (about 25 us per push on the bench machine, more than the
landing-log append).  Here the hot path adds to plain ints on one event-loop thread;
:meth:`ClientMetricsStats.collect` turns them into metric families when scraped.  One
registry per server, so several servers in one process (tests) never share series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from collector.core.scrape import ScrapeCollector

__all__ = ["ClientMetricsStats"]

_PREFIX = "kafka_server_client_metrics_"

# Client libraries (name, version) with a series of their own on ktc_client_empty_pushes_total:
# the names and versions are the clients' to choose, so past this many they share one.
MAX_EMPTY_PUSH_LIBRARIES: Final = 200
_OTHER_LIBRARY: Final = ("other", "other")

# Export into the landing log is a local append: tens of microseconds to a few ms.
EXPORT_BUCKETS_SECONDS: Final[tuple[float, ...]] = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.5,
    1.0,
)


class _Histogram:
    """Bucket counts of export times; their total is also the export count (Kafka's
    plugin-export-count and plugin-export-time sensors are recorded together)."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(EXPORT_BUCKETS_SECONDS) + 1)  # last = +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # A scan from the smallest bound, not bisect: exports take tens of microseconds,
        # so it stops at the first or second bound, without a call or a boxed float.
        index = 0
        for bound in EXPORT_BUCKETS_SECONDS:
            if value <= bound:
                break
            index += 1
        self.counts[index] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0.0
        for bound, count in zip(
            (*EXPORT_BUCKETS_SECONDS, float("inf")), self.counts, strict=True
        ):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return out


class ClientMetricsStats:
    """What the manager records (Kafka's ``ClientMetricsStats`` sensors)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        instance_labels: bool = False,
    ) -> None:
        self.registry = (
            registry if registry is not None else CollectorRegistry(auto_describe=True)
        )
        self._instance_labels = instance_labels
        self.instance_count: Callable[[], int] = lambda: 0
        self.unknown_subscription_requests = 0
        # Keyed by client_instance_id with labels on, else by "" (one aggregate series).
        self.throttles: dict[str, int] = {}
        self.plugin_errors: dict[str, int] = {}
        # (client_software_name, client_software_version) -> empty pushes.
        self.empty_pushes: dict[tuple[str, str], int] = {}
        # Export times (and so export counts), by client_instance_id with labels on, else
        # one aggregate series under "" that the per-push path holds directly (no lookup).
        self._all_export_time = _Histogram()
        self.plugin_export_time: dict[str, _Histogram] = (
            {} if instance_labels else {"": self._all_export_time}
        )
        self.registry.register(ScrapeCollector(self.collect))

    # ClientMetricsStats (Kafka's) ------------------------------------------------------
    def record_throttle(self, client_instance_id: str) -> None:
        key = client_instance_id if self._instance_labels else ""
        self.throttles[key] = self.throttles.get(key, 0) + 1

    def record_unknown_subscription(self) -> None:
        self.unknown_subscription_requests += 1

    def record_plugin_export(self, client_instance_id: str, seconds: float) -> None:
        if not self._instance_labels:
            self._all_export_time.observe(seconds)
            return
        histogram = self.plugin_export_time.get(client_instance_id)
        if histogram is None:
            histogram = self.plugin_export_time[client_instance_id] = _Histogram()
        histogram.observe(seconds)

    def record_empty_push(self, software_name: str, software_version: str) -> None:
        key = (software_name, software_version)
        if key not in self.empty_pushes and (
            len(self.empty_pushes) >= MAX_EMPTY_PUSH_LIBRARIES
        ):
            key = _OTHER_LIBRARY
        self.empty_pushes[key] = self.empty_pushes.get(key, 0) + 1

    def record_plugin_error(self, client_instance_id: str) -> None:
        key = client_instance_id if self._instance_labels else ""
        self.plugin_errors[key] = self.plugin_errors.get(key, 0) + 1

    def instance_removed(self, client_instance_id: str) -> None:
        # Kafka unregisters the per-instance sensors together with the instance.
        if self._instance_labels:
            self.throttles.pop(client_instance_id, None)
            self.plugin_errors.pop(client_instance_id, None)
            self.plugin_export_time.pop(client_instance_id, None)

    def _export_times(self) -> dict[str, _Histogram]:
        # Series with at least one export (the aggregate exists from the start).
        return {
            key: hist for key, hist in self.plugin_export_time.items() if hist.count
        }

    def _export_counts(self) -> dict[str, int]:
        return {key: hist.count for key, hist in self._export_times().items()}

    # scrape ------------------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        labels = ["client_instance_id"] if self._instance_labels else []

        def per_instance(family: CounterMetricFamily, series: dict[str, int]) -> None:
            for key, value in list(series.items()):
                family.add_metric([key] if labels else [], value)

        gauge = GaugeMetricFamily(
            _PREFIX + "instance_count",
            "The current number of client metrics instances being managed by the collector",
        )
        gauge.add_metric([], self.instance_count())
        yield gauge
        yield CounterMetricFamily(
            _PREFIX + "unknown_subscription_request",
            "Pushes rejected with UNKNOWN_SUBSCRIPTION_ID",
            value=self.unknown_subscription_requests,
        )
        for name, doc, series in (
            (
                "throttle",
                "Get/Push requests rejected with THROTTLING_QUOTA_EXCEEDED (too early)",
                self.throttles,
            ),
            (
                "plugin_export",
                "Pushes handed to the exporter successfully",
                self._export_counts(),
            ),
            (
                "plugin_error",
                "Pushes answered INVALID_RECORD (decompression, payload or exporter failure)",
                self.plugin_errors,
            ),
        ):
            family = CounterMetricFamily(_PREFIX + name, doc, labels=labels)
            if not labels and not series:
                family.add_metric([], 0)
            per_instance(family, series)
            yield family
        empty = CounterMetricFamily(
            "ktc_client_empty_pushes",
            "Accepted pushes that held no metric while their subscription asked for some",
            labels=["client_software_name", "client_software_version"],
        )
        for (name, version), count in list(self.empty_pushes.items()):
            empty.add_metric([name, version], count)
        yield empty
        histogram = HistogramMetricFamily(
            _PREFIX + "plugin_export_time_seconds",
            "Time spent decompressing, validating and exporting a push",
            labels=labels,
        )
        for key, hist in self._export_times().items():
            histogram.add_metric([key] if labels else [], hist.buckets(), hist.sum)
        yield histogram
