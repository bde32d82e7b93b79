"""The inventory of every client connection (docs/prometheus.md, "Inventory"): per client
software name and version, client id and principal, the connections open, whether the
client uses telemetry, and the request API versions it sent, the versions Kafka 4 removed
flagged.  It needs nothing but request headers, so it sees every client: those that never
push (telemetry off, librdkafka < 2.5, Java < 3.7) and those an upgrade to Kafka 4 breaks.

Every connection's handler is wrapped (:meth:`ClientInventory.observing`, in both modes:
serve's dispatcher, the gateway's client pair), and each request is recorded after it was
handled, so an ApiVersions request is recorded under the software name it carried.  A
connection counts under the identity of its latest request: it moves once, from the
anonymous identity of its first requests to its software and principal.

The series budget (``clients.inventory.max.series``) bounds the ``ktc_client_requests_total``
series, one per identity, API and version.  A series that does not fit:

| step | rule |
|---|---|
| 1 | the identity seen longest ago with no connection open is dropped, all its series with it |
| 2 | with none to drop, the request is counted under the overflow identity, every label ``(other)``; a connection whose identity has no series yet counts there too |

The overflow identity's series are outside the budget; there are at most as many as there
are API versions.  ``ktc_client_inventory_overflow_requests_total`` counts what went there.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from collector.core.handler import FunctionHandler, RequestHandler
from proto import ApiKeys
from proto.api_table import API_TABLE
from proto.removed_api_versions import is_removed

if TYPE_CHECKING:
    from collector.core.channel import Channel
    from collector.core.session import Session
    from proto import RequestFrame

__all__ = ["IDENTITY_LABELS", "OVERFLOW", "ClientInventory"]

# The identity an inventory row is kept per, in this order.
IDENTITY_LABELS: Final = (
    "client_software_name",
    "client_software_version",
    "client_id",
    "principal",
)
Identity = tuple[str, str, str, str]
# Every label of the identity requests over the budget are counted under.
OVERFLOW: Final = "(other)"
_OVERFLOW_IDENTITY: Final[Identity] = (OVERFLOW, OVERFLOW, OVERFLOW, OVERFLOW)
# A client that sends either uses KIP-714 telemetry (enable.metrics.push=false sends neither).
_TELEMETRY_APIS: Final = frozenset(
    {ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, ApiKeys.PUSH_TELEMETRY}
)


class _Row:
    """One identity: its open connections, telemetry, requests per (api key, version)."""

    __slots__ = ("connections", "requests", "telemetry")

    def __init__(self) -> None:
        self.connections = 0
        self.telemetry = False
        self.requests: dict[tuple[int, int], int] = {}


class ClientInventory:
    def __init__(self, max_series: int) -> None:
        self.max_series = max_series
        self._rows: dict[Identity, _Row] = {}
        # Identities with no connection open, the longest idle first: what step 1 drops.
        self._idle: OrderedDict[Identity, None] = OrderedDict()
        # connection id -> the identity it counts under.
        self._connections: dict[int, Identity] = {}
        self._overflow = _Row()
        self.series = 0
        self.overflow_requests = 0

    # -- recording -----------------------------------------------------------------------
    def observing(self, inner: RequestHandler) -> RequestHandler:
        """``inner`` (one connection's handler), with every request it handles recorded
        after it (the session then carries what an ApiVersions request told).

        The push path pays for this on every push, so a request of the same identity in a
        version its row already counts takes a fast path: the identity's parts compared by
        object (a new ApiVersions or login replaces them) and one dictionary update;
        anything else goes through :meth:`record`."""
        handle = inner.handle
        record = self.record
        # What this connection's last request was counted under: its row (None: take the
        # slow path), and the client id, principal and software it was resolved with.
        row: _Row | None = None
        client_id: str | None = None
        principal = name = version = ""

        def observed(frame: RequestFrame, session: Session, channel: Channel) -> object:
            nonlocal row, client_id, principal, name, version
            try:
                return handle(frame, session, channel)
            finally:
                key = (frame.api_key, frame.api_version)
                count = None
                if (
                    row is not None
                    and session.principal is principal
                    and session.client_software_name is name
                    and session.client_software_version is version
                    and frame.client_id == client_id
                ):
                    count = row.requests.get(key)
                if count is not None:
                    row.requests[key] = count + 1  # type: ignore[union-attr]
                else:
                    row = record(frame, session)
                    client_id, principal = frame.client_id, session.principal
                    name = session.client_software_name
                    version = session.client_software_version

        return FunctionHandler(observed)

    def record(self, frame: RequestFrame, session: Session) -> _Row | None:
        """Count one request; the row it was counted in, None when that is the overflow
        identity's (or nothing was counted)."""
        api_key = frame.api_key
        if api_key not in API_TABLE:
            return None  # an unknown API: its connection is closed, nothing to list
        identity: Identity = (
            session.client_software_name,
            session.client_software_version,
            frame.client_id or "",
            session.principal,
        )
        connection_id = session.connection_id
        current = self._connections.get(connection_id)
        if current != identity:
            self._move(connection_id, current, identity)
        row = self._rows.get(identity, self._overflow)
        key = (api_key, frame.api_version)
        count = row.requests.get(key)
        if count is None and row is not self._overflow and not self._room():
            row = self._overflow
            count = row.requests.get(key)
        if count is None:
            count = 0
            if row is not self._overflow:
                self.series += 1
        row.requests[key] = count + 1
        if api_key in _TELEMETRY_APIS:
            row.telemetry = True
        if row is self._overflow:
            self.overflow_requests += 1
            return None
        return row

    def closed(self, connection_id: int) -> None:
        identity = self._connections.pop(connection_id, None)
        if identity is not None:
            self._release(identity)

    def _move(
        self, connection_id: int, current: Identity | None, identity: Identity
    ) -> None:
        if current is not None:
            self._release(current)
        row = self._rows.get(identity)
        if row is None and self._room():
            row = self._rows[identity] = _Row()
        if row is None:
            self._overflow.connections += 1
            self._connections[connection_id] = _OVERFLOW_IDENTITY
            return
        row.connections += 1
        self._idle.pop(identity, None)
        self._connections[connection_id] = identity

    def _release(self, identity: Identity) -> None:
        row = self._rows.get(identity)
        if row is None:
            self._overflow.connections -= 1
            return
        row.connections -= 1
        if row.connections == 0:
            self._idle[identity] = None

    def _room(self) -> bool:
        """Whether one more series fits, after dropping idle identities if it must (step 1).
        A new identity's row is made only where it fits: its first series then does."""
        while self.series >= self.max_series and self._idle:
            gone, _ = self._idle.popitem(last=False)
            self.series -= len(self._rows.pop(gone).requests)
        return self.series < self.max_series

    # -- reading -------------------------------------------------------------------------
    def _each(self) -> Iterator[tuple[Identity, _Row]]:
        yield from self._rows.items()
        overflow = self._overflow
        if overflow.requests or overflow.connections:
            yield _OVERFLOW_IDENTITY, overflow

    def collect(self) -> Iterator[Metric]:
        """The inventory's families for the collector's own ``/metrics``."""
        labels = list(IDENTITY_LABELS)
        connections = GaugeMetricFamily(
            "ktc_client_connections",
            "Client connections open, per client software, client id and principal "
            "(each under the identity of its latest request).",
            labels=labels,
        )
        telemetry = GaugeMetricFamily(
            "ktc_client_telemetry_enabled",
            "1 when a connection of this client sent GetTelemetrySubscriptions or "
            "PushTelemetry (KIP-714 telemetry on), else 0.",
            labels=labels,
        )
        requests = CounterMetricFamily(
            "ktc_client_requests",
            "Requests per API and version, per client software, client id and principal "
            "(bounded by clients.inventory.max.series).",
            labels=["api", "version", *labels],
        )
        removed = CounterMetricFamily(
            "ktc_client_removed_api_versions",
            "Requests in a version Kafka 4 removed (KIP-896), per API and version, per "
            "client software, client id and principal.",
            labels=["api", "version", *labels],
        )
        for identity, row in self._each():
            values = list(identity)
            connections.add_metric(values, row.connections)
            telemetry.add_metric(values, 1 if row.telemetry else 0)
            for (api_key, version), count in row.requests.items():
                series = [API_TABLE[api_key].name, str(version), *values]
                requests.add_metric(series, count)
                if is_removed(api_key, version):
                    removed.add_metric(series, count)
        yield connections
        yield telemetry
        yield requests
        yield removed
        yield GaugeMetricFamily(
            "ktc_client_inventory_series",
            "ktc_client_requests_total series kept (the overflow identity's not counted).",
            value=self.series,
        )
        yield GaugeMetricFamily(
            "ktc_client_inventory_series_limit",
            "clients.inventory.max.series.",
            value=self.max_series,
        )
        yield CounterMetricFamily(
            "ktc_client_inventory_overflow_requests",
            "Requests counted under the overflow identity (every label (other)): no "
            "room in clients.inventory.max.series.",
            value=self.overflow_requests,
        )

    def entries(self) -> list[dict[str, Any]]:
        """One JSON object per identity (``GET /v1/clients/inventory``), most connections
        first."""
        found: list[dict[str, Any]] = []
        for identity, row in self._each():
            requests = sorted(row.requests.items())
            found.append(
                {
                    **dict(zip(IDENTITY_LABELS, identity, strict=True)),
                    "connections": row.connections,
                    "telemetry": row.telemetry,
                    "requests": [
                        {
                            "api": API_TABLE[api_key].name,
                            "version": version,
                            "count": count,
                            "removed": is_removed(api_key, version),
                        }
                        for (api_key, version), count in requests
                    ],
                }
            )
        found.sort(
            key=lambda e: (
                -int(e["connections"]),
                *(str(e[k]) for k in IDENTITY_LABELS),
            )
        )
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "clients": self.entries(),
            "series": self.series,
            "max_series": self.max_series,
            "overflow_requests": self.overflow_requests,
        }
