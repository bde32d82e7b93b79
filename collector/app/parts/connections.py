"""Every open Kafka connection of a node: the host each ``KafkaProtocol`` reports to.

A new connection gets an id and its handler (the mode's, see :class:`ConnectionMode`;
recorded by the client inventory when it is on); opening and closing one keeps the
registry, the request metrics, the connection quotas, the inventory and the manager's
per-connection state; at shutdown every connection finishes writing what it answered.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from collector.app.client_inventory import ClientInventory
from collector.app.config import CollectorConfig
from collector.core.handler import RequestHandler
from collector.net.flush import DurabilityGate
from collector.net.listeners import EndPoint
from collector.net.protocol import KafkaProtocol
from collector.net.request_memory import RequestMemory
from collector.pipeline.quota_enforcer import QuotaEnforcer
from collector.pipeline.request_metrics import RequestMetrics
from collector.telemetry.client_metrics import ClientMetricsManager
from proto.request_limits import RequestSizeLimits

__all__ = ["ConnectionMode", "Connections"]


class ConnectionMode(Protocol):
    """What a node's mode says about each connection."""

    def connection_handler(
        self, connection_id: int, endpoint: EndPoint, node_id: int | None
    ) -> RequestHandler | None:
        """The handler of one new connection (None: the node's ``handler``)."""

    def connection_opened(self, protocol: KafkaProtocol) -> bool:
        """Whether the mode takes the connection (False: it is closed)."""

    def connection_closed(self, protocol: KafkaProtocol) -> None: ...


class Connections:
    """The registry of open connections and the ``ConnectionHost`` of each of them."""

    def __init__(
        self,
        config: CollectorConfig,
        mode: ConnectionMode,
        request_metrics: RequestMetrics,
        inventory: ClientInventory | None,
    ) -> None:
        self._config = config
        self._mode = mode
        self._request_metrics = request_metrics
        self._inventory = inventory
        # What every connection's host offers (collector.net.protocol.ConnectionHost).
        self.handler: RequestHandler  # the mode's handling sets it
        self.max_request_size = config.socket_request_max_bytes
        self.max_inflight_requests = config.connection_max_inflight_requests
        # What answers wait for (the landing's per-turn flush), set with the landing.
        self.durability: DurabilityGate | None = None
        # queued.max.request.bytes, shared by every connection; and each API's request
        # size limit, from the API table this node serves (set with the handling).
        self.request_memory = RequestMemory(config.queued_max_request_bytes)
        self.request_size_limits = RequestSizeLimits(
            other=config.socket_request_max_bytes
        )
        # Set once built (before any listener is bound).
        self.quotas: QuotaEnforcer | None = None
        self.manager: ClientMetricsManager | None = None
        # Set when a connection closes: an acceptor waiting for a slot may retry.
        self.slot_freed = asyncio.Event()
        self.stopping = False
        self._open: dict[int, KafkaProtocol] = {}
        self._all_closed = asyncio.Event()
        self._next_id = 0

    def listed(self) -> list[KafkaProtocol]:
        """The open connections, oldest first."""
        return [self._open[key] for key in sorted(self._open)]

    def by_id(self) -> list[tuple[int, KafkaProtocol]]:
        return list(self._open.items())

    def new(self, endpoint: EndPoint, node_id: int | None = None) -> KafkaProtocol:
        """A connection on listener ``endpoint`` (``node_id``: the upstream node a gateway
        listener stands for): every acceptor's protocol factory."""
        self._next_id += 1
        connection_id = self._next_id
        handler = self._mode.connection_handler(connection_id, endpoint, node_id)
        if self._inventory is not None:
            handler = self._inventory.observing(handler or self.handler)
        return KafkaProtocol(
            self,
            connection_id,
            endpoint.listener_name,
            endpoint.security_protocol,
            handler,
            size_limits=self.request_size_limits,
            memory=self.request_memory,
            ssl_principal_mapper=self._config.ssl_principal_mapper(
                endpoint.listener_name
            )
            if endpoint.security_protocol == "SSL"
            else None,
        )

    def connection_opened(self, protocol: KafkaProtocol) -> bool:
        # The acceptor already counted this connection in the connection quotas.
        self._open[protocol.session.connection_id] = protocol
        self._all_closed.clear()
        self._request_metrics.connection_opened(protocol.session.listener_name)
        return not self.stopping and self._mode.connection_opened(protocol)

    def connection_closed(self, protocol: KafkaProtocol) -> None:
        session = protocol.session
        if self._open.pop(session.connection_id, None) is not None:
            if self.quotas is not None:
                self.quotas.on_close(session.listener_name, session.peer_ip)
            self.slot_freed.set()
            if not self._open:
                self._all_closed.set()
            self._request_metrics.connection_closed(session.listener_name)
            if self._inventory is not None:
                self._inventory.closed(session.connection_id)
            if self.manager is not None:
                self.manager.connection_closed(session.connection_id)
        self._mode.connection_closed(protocol)

    def protocol_error(self, protocol: KafkaProtocol) -> None:
        self._request_metrics.connections_closed_on_error += 1

    def setup_failed(self, listener: str, ip: str) -> None:
        """A connection accepted but never set up (a TLS handshake that failed)."""
        if self.quotas is not None:
            self.quotas.on_close(listener, ip)
        self.slot_freed.set()

    async def drain(self, timeout_s: float) -> None:
        """Close every connection once it has written what it answered; wait up to
        ``timeout_s`` for them all."""
        for protocol in list(self._open.values()):
            protocol.close_when_idle()
        if self._open:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_closed.wait(), timeout_s)
