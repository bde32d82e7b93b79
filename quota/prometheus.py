"""Quota metrics as Prometheus gauges, named the way Kafka's JMX ones are usually exported.

A Kafka quota metric is ``(group, name, tags)``, e.g. ``(Produce, byte-rate, {user,
client-id})``; JMX shows it as ``kafka.server:type=Produce,user=..,client-id=..`` and the
common JMX-exporter rules turn that into ``kafka_server_produce_byte_rate{user, client_id}``.
This collector renders the engine's metrics the same way, read at scrape time:

    Produce / byte-rate                      kafka_server_produce_byte_rate{user,client_id}
    Request / request-time                   kafka_server_request_request_time{user,client_id}
    ControllerMutation / tokens              kafka_server_controllermutation_tokens{user,client_id}
    Produce / queue-size                     kafka_server_produce_queue_size
    socket-server-metrics / connection-accept-rate
                            kafka_server_socket_server_metrics_connection_accept_rate{listener,ip}

Series of one name that carry different tags (the listener and the IP accept rates) share
one family; a missing label is the empty string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from quota.metrics import MetricValue

__all__ = ["QuotaMetricsCollector", "prometheus_name"]

PREFIX = "kafka_server_"
_NOT_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(group: str, name: str) -> str:
    """``("socket-server-metrics", "connection-accept-rate")`` ->
    ``kafka_server_socket_server_metrics_connection_accept_rate``."""
    return PREFIX + _NOT_NAME_CHARS.sub("_", f"{group}_{name}").lower()


def _label(tag: str) -> str:
    return _NOT_NAME_CHARS.sub("_", tag)


class QuotaMetricsCollector(Collector):
    """Register with ``registry.register(QuotaMetricsCollector(engine.metrics_snapshot,
    clock.milliseconds))``; each scrape reads the current values."""

    def __init__(
        self,
        snapshot: Callable[[int], list[MetricValue]],
        milliseconds: Callable[[], int],
    ) -> None:
        self._snapshot = snapshot
        self._milliseconds = milliseconds

    def collect(self) -> Iterator[GaugeMetricFamily]:
        by_family: dict[str, list[MetricValue]] = {}
        for value in self._snapshot(self._milliseconds()):
            by_family.setdefault(
                prometheus_name(value.name.group, value.name.name), []
            ).append(value)
        for family_name, values in sorted(by_family.items()):
            label_names = sorted(
                {_label(key) for v in values for key, _ in v.name.tags}
            )
            family = GaugeMetricFamily(
                family_name,
                values[0].name.description or family_name,
                labels=label_names,
            )
            for value in values:
                labels = {_label(key): tag for key, tag in value.name.tags}
                family.add_metric(
                    [labels.get(name, "") for name in label_names], value.value
                )
            yield family
