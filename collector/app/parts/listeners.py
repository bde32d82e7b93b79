"""A node's listeners: planned from ``listeners`` and ``advertised.listeners``, bound, TLS
on SSL and SASL_SSL, connection quotas on every accept, accepting until shutdown.

Every listener of either mode comes from one factory, :meth:`Listeners.listener`, so TLS,
connection quotas and the request-bytes budget are the same on every port (a gateway's
per-node listeners included).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl

from clock import Clock
from collector.app.config import CollectorConfig
from collector.app.parts.connections import Connections
from collector.app.parts.errors import StartupError
from collector.app.parts.tasks import BackgroundTasks
from collector.net.acceptor import Acceptor, bind_listener
from collector.net.listeners import (
    EndPoint,
    advertised_endpoint,
    parse_listeners,
    parse_security_protocol_map,
)
from collector.net.tls import TlsError, server_ssl_context

__all__ = ["Listeners"]

log = logging.getLogger(__name__)

# Listeners whose connections start with TLS.
_TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
# The names of the accept loops' tasks start with this.
_ACCEPTOR = "acceptor-"


class Listeners:
    """The node's listeners: ``planned`` (as configured), ``bound`` (with the bound port)
    and ``advertised`` (what Metadata tells clients), by listener name."""

    def __init__(
        self,
        config: CollectorConfig,
        clock: Clock,
        connections: Connections,
        tasks: BackgroundTasks,
    ) -> None:
        self._config = config
        self._clock = clock
        self._connections = connections
        self._tasks = tasks
        self.planned: list[EndPoint] = []
        self._advertised_config: dict[str, EndPoint] = {}
        self._acceptors: list[Acceptor] = []
        self.bound: dict[str, EndPoint] = {}
        self.advertised: dict[str, EndPoint] = {}
        # The TLS context of the SSL and SASL_SSL listeners (made once, on first use).
        self._tls: ssl.SSLContext | None = None

    def plan(self) -> None:
        """The listeners to bind, and what each advertises by name (as configured)."""
        config = self._config
        protocol_map = parse_security_protocol_map(
            config.listener_security_protocol_map
        )
        listeners = parse_listeners(config.listeners, protocol_map)
        advertised: dict[str, EndPoint] = {}
        if config.advertised_listeners:
            for endpoint in parse_listeners(
                config.advertised_listeners, protocol_map, key="advertised.listeners"
            ):
                advertised[endpoint.listener_name] = endpoint
        unknown = set(advertised) - {e.listener_name for e in listeners}
        if unknown:
            raise StartupError(
                f"advertised.listeners names {', '.join(sorted(unknown))} not in listeners"
            )
        self.planned, self._advertised_config = listeners, advertised

    async def bind(self) -> None:
        """Bind every planned listener (port 0: any free port; the bound port is what
        Metadata advertises) and start accepting."""
        try:
            for endpoint in self.planned:
                bound = self.listener(endpoint).endpoint
                self.bound[bound.listener_name] = bound
                self.advertised[bound.listener_name] = advertised_endpoint(
                    bound, self._advertised_config.get(bound.listener_name)
                )
                log.info(
                    "listening on %s (advertised as %s)",
                    bound,
                    self.advertised[bound.listener_name],
                )
        except OSError as exc:
            self.close()
            raise StartupError(f"listeners: cannot bind: {exc}") from exc
        for acceptor in self._acceptors:
            self.accept(acceptor, f"{_ACCEPTOR}{acceptor.endpoint.listener_name}")
        await asyncio.sleep(0)  # let the acceptors start before readiness is asked

    def listener(self, endpoint: EndPoint, node_id: int | None = None) -> Acceptor:
        """Bind ``endpoint`` (port 0: any free port) and make its acceptor, for every
        security protocol: TLS on SSL and SASL_SSL, connections made by the node's
        :class:`Connections` (``node_id``: the upstream node a gateway listener stands
        for).  Raises OSError when the address cannot be bound; accepting starts with
        :meth:`accept`."""
        quotas = self._connections.quotas
        assert quotas is not None, "the quotas are built before any listener is bound"
        sock = bind_listener(endpoint)
        bound = endpoint.with_port(int(sock.getsockname()[1]))
        acceptor = Acceptor(
            bound,
            sock,
            protocol_factory=functools.partial(self._connections.new, bound, node_id),
            decide=quotas.on_accept,
            slot_freed=self._connections.slot_freed,
            ssl_context=self._tls_context()
            if bound.security_protocol in _TLS_PROTOCOLS
            else None,
            clock=self._clock,
            memory=self._connections.request_memory,
        )
        acceptor.on_failed_setup = self._connections.setup_failed
        self._acceptors.append(acceptor)
        return acceptor

    def accept(self, acceptor: Acceptor, name: str) -> None:
        """Start ``acceptor``'s accept loop (cancelled at shutdown); ``name`` starts
        with ``acceptor-``."""
        assert name.startswith(_ACCEPTOR)
        self._tasks.start(acceptor.run(), name)

    def close(self) -> None:
        """Stop accepting on every listener."""
        self._tasks.cancel(lambda name: name.startswith(_ACCEPTOR))
        for acceptor in self._acceptors:
            acceptor.close()

    def rejected(self) -> int:
        """Connections the connection quotas refused, on every listener."""
        return sum(a.rejected for a in self._acceptors)

    def not_ready_reason(self) -> str | None:
        if not self._acceptors or not all(a.serving for a in self._acceptors):
            return "listeners not accepting"
        return None

    def _tls_context(self) -> ssl.SSLContext:
        """The server TLS context every SSL and SASL_SSL listener of this node shares."""
        if self._tls is None:
            config = self._config
            try:
                self._tls = server_ssl_context(
                    keystore_location=config.ssl_keystore_location,
                    key_password=config.ssl_key_password,
                    truststore_location=config.ssl_truststore_location,
                    client_auth=config.ssl_client_auth,
                    enabled_protocols=config.ssl_enabled_protocols.split(","),
                )
            except TlsError as exc:
                raise StartupError(str(exc)) from exc
        return self._tls
