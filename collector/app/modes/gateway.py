"""``ktc gateway``'s mode: the node in front of any Kafka-compatible cluster, wired.

:class:`GatewayMode` is what makes a node a gateway (the same node as ``ktc serve``, started
the same way) with a different answer to "what handles a request": each client connection
gets its own :class:`~collector.gateway.forwarding.ClientPair`.  This module only wires: the
gateway's policy is in ``collector.gateway`` (the filter table and what it answers here,
``upstream_cluster.py``, ``service.py``, ``metrics.py``), its settings in
``gateway_settings.py``.  The configured ``listeners`` are the bootstrap listener(s); each
upstream node gets its own (``collector.gateway.topology``) from the node's one listener
factory, so connection quotas and TLS cover every port of the gateway.
"""

from __future__ import annotations

import logging

from collector.app.config import CollectorConfig
from collector.app.gateway_settings import (
    request_size_limits,
    topology,
    upstream_settings,
)
from collector.app.modes.services import Handling, ModeServices
from collector.app.parts.cluster_subscriptions import KeptSubscriptions
from collector.app.parts.errors import StartupError
from collector.core.channel import Channel
from collector.core.handler import FunctionHandler, RequestHandler
from collector.core.scrape import ScrapeCollector
from collector.core.session import Session
from collector.gateway.admin_split import AdminSplitter
from collector.gateway.authentication import SASL_PROTOCOLS
from collector.gateway.cluster_admin import ClusterAdmin
from collector.gateway.filters import answered_here
from collector.gateway.filters.base import LocalAnswerSettings
from collector.gateway.forwarded_quotas import GatewayQuotas
from collector.gateway.forwarding import ClientPair
from collector.gateway.metrics import gateway_metrics
from collector.gateway.service import Gateway
from collector.gateway.topology import Topology, TopologyError
from collector.gateway.upstream_cluster import UpstreamCluster, UpstreamClusterError
from collector.net.listeners import EndPoint
from collector.net.protocol import KafkaProtocol
from proto import RequestFrame

__all__ = ["GatewayMode"]

log = logging.getLogger(__name__)


class GatewayMode:
    """``ktc gateway``: the node forwarding to an upstream cluster, a pair per connection.
    ``upstream``, ``gateway`` and ``topology`` are set as the node starts."""

    name = "gateway"

    def __init__(self, config: CollectorConfig) -> None:
        if not config.gateway_upstream.bootstrap_servers:
            raise StartupError(
                "gateway mode needs the upstream cluster: --upstream HOST:PORT[,HOST:PORT...] "
                "or gateway.upstream.bootstrap.servers"
            )
        self._config = config
        self._services: ModeServices | None = None
        self.upstream: UpstreamCluster | None = None
        self.gateway: Gateway | None = None
        self.topology: Topology | None = None
        # What the gateway answers itself (its ACLs, its SCRAM users), once built.
        self._answers: LocalAnswerSettings | None = None

    def kept_subscriptions(self) -> KeptSubscriptions | None:
        """With ``gateway.subscriptions.store: cluster`` (the default), the upstream."""
        config = self._config
        if config.gateway_subscriptions_store != "cluster":
            return None
        return KeptSubscriptions(
            config.gateway_upstream.bootstrap_servers or "",
            config.gateway_subscriptions_refresh_ms,
            config.gateway_subscriptions_stale_after_ms,
        )

    def build_handling(self, services: ModeServices) -> Handling:
        self._services = services
        config = self._config
        try:
            self.upstream = upstream = UpstreamCluster(upstream_settings(config))
        except UpstreamClusterError as exc:
            raise StartupError(str(exc)) from exc
        # The ACLs and SASL users the gateway checks are its own, managed through it as on
        # serve; without an authorizer or SASL listeners, the cluster's (forwarded).
        answers = self._answers = LocalAnswerSettings(
            answers_acls=services.authorizer is not None,
            answers_scram=any(
                e.security_protocol in SASL_PROTOCOLS
                for e in services.listeners.planned
            ),
        )
        handlers = services.local_apis(
            acls=answers.answers_acls, scram=answers.answers_scram
        )
        # The node's own API objects (so the same authorizer as serve's), over exactly the
        # APIs the filter table answers here.
        local = sorted(answered_here(answers))
        assert handlers.keys() >= set(local), "an API answered here has no handler"
        dispatcher = services.dispatcher_over({key: handlers[key] for key in local})
        self.gateway = gateway = Gateway(
            dispatcher=dispatcher,
            quotas=GatewayQuotas(services.quotas),
            admin=AdminSplitter(
                dispatcher,
                config.socket_request_max_bytes,
                in_cluster=services.subscriptions_in_cluster,
                altered_in_cluster=services.subscriptions_altered,
            ),
            open_upstream=upstream.open,
            discover=upstream.discover,
            clock=services.clock,
            authentication=upstream.authentication,
            answers_acls=answers.answers_acls,
            answers_scram=answers.answers_scram,
        )
        services.registry.register(ScrapeCollector(lambda: gateway_metrics(gateway)))
        # Every connection has its own handler (its pair).
        return Handling(
            dispatcher, FunctionHandler(_no_pair), request_size_limits(config)
        )

    async def bind_listeners(self) -> None:
        """The upstream nodes' listeners already known (the topology's saved ports); then
        whether the cluster lets in clients that did not authenticate (which decides
        :meth:`subscriptions_admin`)."""
        assert self._services is not None
        assert self.gateway is not None and self.upstream is not None
        listeners = self._services.listeners
        bootstrap = next(iter(listeners.bound.values()))
        try:
            self.topology = topology(
                self._config,
                self.upstream.bootstrap,
                listeners.advertised[bootstrap.listener_name].host,
                lambda node_id, port: self._bind_node(bootstrap, node_id, port),
            )
            self.topology.load()
            self.topology.bind_range()
            self.gateway.topology = self.topology
            await self.upstream.learn_authentication(
                {e.listener_name: e.security_protocol for e in listeners.bound.values()}
            )
        except (TopologyError, UpstreamClusterError) as exc:
            raise StartupError(str(exc)) from exc

    def subscriptions_admin(self) -> ClusterAdmin | None:
        """The upstream's admin client; None when it requires SASL and the gateway has no
        login to read the subscriptions with (said once, naming the local store)."""
        services = self._services
        assert services is not None and self.upstream is not None
        assert services.cluster_subscriptions is not None
        local = services.cluster_subscriptions.store.config_dir
        return self.upstream.subscriptions_admin(str(local))

    def _bind_node(self, template: EndPoint, node_id: int, port: int) -> int:
        """Bind upstream node ``node_id``'s listener (synchronously: a response that
        names the node is being rewritten right now) and start accepting on it."""
        assert self._services is not None
        listeners = self._services.listeners
        acceptor = listeners.listener(template.with_port(port), node_id)
        bound = acceptor.endpoint
        listeners.accept(acceptor, f"acceptor-{bound.listener_name}-node-{node_id}")
        log.info("listening on %s for upstream node %d", bound, node_id)
        return bound.port

    # ------------------------------------------------------------------ connections
    def connection_handler(
        self, connection_id: int, endpoint: EndPoint, node_id: int | None
    ) -> RequestHandler:
        assert self.gateway is not None and self._services is not None
        pair = self.gateway.new_pair(node_id, connection_id)
        handler = FunctionHandler(pair.handle)
        if endpoint.security_protocol not in SASL_PROTOCOLS:
            return handler
        # The gateway's own SASL listener: clients log in here, with the mechanisms and
        # credentials of a serve node's SASL listener, before anything reaches the pair.
        pair.listener_authenticates = True
        return self._services.gate(endpoint, handler)

    def connection_opened(self, protocol: KafkaProtocol) -> bool:
        return self.gateway is not None and self.gateway.connection_opened(protocol)

    def connection_closed(self, protocol: KafkaProtocol) -> None:
        if self.gateway is not None:
            self.gateway.connection_closed(protocol.session.connection_id)

    def pairs(self) -> dict[int, ClientPair]:
        """Connection id -> its pair."""
        return {} if self.gateway is None else self.gateway.by_connection

    def state_clusters(self) -> dict[str, str]:
        """The cluster's, besides the kept subscriptions: the SCRAM users without a SASL
        listener here and the ACLs without an authorizer here (their APIs are forwarded,
        the local files unread).  The client quotas are always the gateway's own: its
        engine enforces them."""
        cluster = self._config.gateway_upstream.bootstrap_servers or ""
        clusters: dict[str, str] = {}
        if self._answers is not None and not self._answers.answers_scram:
            clusters["users"] = cluster
        if self._answers is not None and not self._answers.answers_acls:
            clusters["acls"] = cluster
        return clusters

    def ready_file(self) -> dict[str, object]:
        if self.topology is None:
            return {}
        ports = self.topology.ports.items()
        return {"node_ports": {str(node): port for node, port in ports}}


def _no_pair(frame: RequestFrame, session: Session, channel: Channel) -> object:
    raise AssertionError("a gateway connection always has its own handler")
