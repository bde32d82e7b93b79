"""A node's own series beside the request metrics: the request-bytes budget shared by its
connections, idle connections closed, and SASL authentications (docs/prometheus.md)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from collector.app.parts.authentication import Authentication
from collector.net.idle import IdleConnections
from collector.net.request_memory import RequestMemory

__all__ = ["ConnectionLimitSeries"]


class ConnectionLimitSeries:
    """The series of the limits on a node's connections, read at each scrape."""

    def __init__(self, memory: RequestMemory, authentication: Authentication) -> None:
        self._memory = memory
        self._authentication = authentication
        # connections.max.idle.ms's sweep, once started (none when it is 0).
        self.idle: IdleConnections | None = None

    def collect(self) -> Iterator[Metric]:
        memory = self._memory
        yield GaugeMetricFamily(
            "ktc_queued_request_bytes",
            "Bytes of requests held across connections (a request in progress at its "
            "announced size), counted against queued.max.request.bytes",
            value=memory.held,
        )
        yield GaugeMetricFamily(
            "ktc_queued_request_bytes_limit",
            "queued.max.request.bytes",
            value=memory.limit,
        )
        yield GaugeMetricFamily(
            "ktc_connections_waiting_for_memory",
            "Connections not read from because queued.max.request.bytes is used up",
            value=memory.waiting,
        )
        yield CounterMetricFamily(
            "ktc_queued_request_bytes_exhausted",
            "Times queued.max.request.bytes was used up (reading stopped until it had room)",
            value=memory.exhaustions,
        )
        yield CounterMetricFamily(
            "ktc_connections_closed_idle",
            "Connections closed after connections.max.idle.ms without traffic",
            value=self.idle.closed if self.idle is not None else 0,
        )
        # Kafka's failed-authentication-total (every SASL exchange refused or broken off).
        yield CounterMetricFamily(
            "ktc_failed_authentication",
            "SASL authentications that failed (the connection was closed)",
            value=self._authentication.failed,
        )
        # Kafka's successful-reauthentication-total (KIP-368, connections.max.reauth.ms).
        yield CounterMetricFamily(
            "ktc_reauthentications",
            "SASL re-authentications that succeeded on a live connection (KIP-368)",
            value=self._authentication.reauthentications,
        )
