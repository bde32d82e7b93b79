"""The node's request and connection counts: ``ktc_requests_total{api,error_code}``,
``ktc_connections{listener}``, connections closed for protocol errors and refused by the
connection limits.

Plain ints on one event-loop thread, turned into metric families when scraped (see
``collector.telemetry.stats`` for why not prometheus_client's metric objects); compiled,
because the dispatcher counts every request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from collector.core.scrape import ScrapeCollector

__all__ = ["RequestMetrics"]


class RequestMetrics:
    """What the dispatcher counts per request (api key x error code) and the server per
    connection."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        api_names: Callable[[int], str] = str,
    ) -> None:
        self.registry = (
            registry if registry is not None else CollectorRegistry(auto_describe=True)
        )
        self._api_names = api_names
        # Requests answered: api key -> error code -> count (small int keys: no tuple to
        # build and hash per request).
        self._requests_by_api: dict[int, dict[int, int]] = {}
        self.connections: dict[str, int] = {}
        self.connections_closed_on_error = 0
        # Connections the acceptors refused under the connection quotas (set by the server).
        self.connections_rejected: Callable[[], int] = lambda: 0
        self.registry.register(ScrapeCollector(self.collect))

    # requests (the dispatcher) ---------------------------------------------------------
    def observe(self, api_key: int, error_code: int) -> None:
        by_error = self._requests_by_api.get(api_key)
        if by_error is None:
            by_error = self._requests_by_api[api_key] = {}
        by_error[error_code] = by_error.get(error_code, 0) + 1

    @property
    def requests(self) -> dict[tuple[int, int], int]:
        """Requests answered, by (api key, error code)."""
        return {
            (api_key, error_code): count
            for api_key, by_error in self._requests_by_api.items()
            for error_code, count in by_error.items()
        }

    # connections -----------------------------------------------------------------------
    def connection_opened(self, listener: str) -> None:
        self.connections[listener] = self.connections.get(listener, 0) + 1

    def connection_closed(self, listener: str) -> None:
        self.connections[listener] = self.connections.get(listener, 0) - 1

    # scrape ------------------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "ktc_requests",
            "Kafka requests answered, by API and error code",
            labels=["api", "error_code"],
        )
        for (api_key, error_code), count in sorted(self.requests.items()):
            requests.add_metric([self._api_names(api_key), str(error_code)], count)
        yield requests
        connections = GaugeMetricFamily(
            "ktc_connections", "Open Kafka connections", labels=["listener"]
        )
        for listener, count in sorted(self.connections.items()):
            connections.add_metric([listener], count)
        yield connections
        yield CounterMetricFamily(
            "ktc_connections_closed_on_error",
            "Connections closed because the peer broke the protocol",
            value=self.connections_closed_on_error,
        )
        yield CounterMetricFamily(
            "ktc_connections_rejected",
            "Connections refused by the connection limits",
            value=self.connections_rejected(),
        )
