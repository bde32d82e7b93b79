"""``ktc gateway``: the node in front of any Kafka-compatible cluster, wired.

:class:`GatewayMode` is what makes a :class:`~collector.app.node.Node` a gateway (the same
node as ``ktc serve``, started the same way) with a different answer to "what handles a
request": each client connection gets its own
:class:`~collector.gateway.forwarding.ClientPair`.  This module only wires: the gateway's
policy is in ``collector.gateway`` (the filter table and what it answers here,
``upstream_cluster.py``, ``service.py``, ``metrics.py``), its settings in
``gateway_settings.py``.  The configured ``listeners`` are the bootstrap listener(s); each
upstream node gets its own (``collector.gateway.topology``) from the node's one listener
factory, so connection quotas and TLS cover every port of the gateway.
"""

from __future__ import annotations

import logging

from clock import SYSTEM_CLOCK, Clock
from collector.app.config import CollectorConfig
from collector.app.gateway_settings import (
    request_size_limits,
    topology,
    upstream_settings,
)
from collector.app.node import Handling, Node, StartupError, Store
from collector.broker.acl_apis import AclApis
from collector.broker.scram_apis import ScramCredentialApis
from collector.core.channel import Channel
from collector.core.handler import FunctionHandler, RequestHandler
from collector.core.scrape import ScrapeCollector
from collector.core.session import Session
from collector.gateway.admin_split import AdminSplitter
from collector.gateway.authentication import SASL_PROTOCOLS
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
from exporters.base import Exporter
from proto import RequestFrame
from subscriptions.cluster_store import ClusterSubscriptionStore
from subscriptions.store import ConfigStore

__all__ = ["GatewayMode", "GatewayServer"]

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
        self._node: Node | None = None
        self.upstream: UpstreamCluster | None = None
        self.gateway: Gateway | None = None
        self.topology: Topology | None = None
        # What the gateway answers itself (its ACLs, its SCRAM users), once built.
        self._answers: LocalAnswerSettings | None = None

    def open_store(self, node: Node, local: ConfigStore) -> Store:
        """The local store; with ``gateway.subscriptions.store: cluster``, wrapped in the
        store whose subscriptions are the cluster's (read in :meth:`bind_listeners`)."""
        config = self._config
        if config.gateway_subscriptions_store != "cluster":
            return local
        return ClusterSubscriptionStore(
            local, config.gateway_upstream.bootstrap_servers or ""
        )

    def build_handling(self, node: Node) -> Handling:
        config = self._config
        assert node.apis is not None and node.admin_apis is not None
        assert node.quotas is not None
        self._node = node
        try:
            self.upstream = upstream = UpstreamCluster(upstream_settings(config))
        except UpstreamClusterError as exc:
            raise StartupError(str(exc)) from exc
        # The ACLs and SASL users the gateway checks are its own, managed through it as on
        # serve; without an authorizer or SASL listeners, the cluster's (forwarded).
        answers = self._answers = LocalAnswerSettings(
            answers_acls=node.authorizer is not None,
            answers_scram=any(
                e.security_protocol in SASL_PROTOCOLS for e in node.listeners.planned
            ),
        )
        handlers = {**node.apis.table(), **node.admin_apis.table()}
        if answers.answers_acls:
            handlers.update(AclApis(node.authorizer).table())
        if answers.answers_scram:
            credentials = node.authentication.open_credentials()
            handlers.update(ScramCredentialApis(credentials, node.authorizer).table())
        # The node's own API objects (so the same authorizer as serve's), over exactly the
        # APIs the filter table answers here.
        local = sorted(answered_here(answers))
        assert handlers.keys() >= set(local), "an API answered here has no handler"
        dispatcher = node.dispatcher_over({key: handlers[key] for key in local})
        self.gateway = gateway = Gateway(
            dispatcher=dispatcher,
            quotas=GatewayQuotas(node.quotas),
            admin=AdminSplitter(
                dispatcher,
                config.socket_request_max_bytes,
                in_cluster=self._subscriptions_in_cluster,
                altered_in_cluster=self._subscriptions_altered,
            ),
            open_upstream=upstream.open,
            discover=upstream.discover,
            clock=node.clock,
            authentication=upstream.authentication,
            answers_acls=answers.answers_acls,
            answers_scram=answers.answers_scram,
        )
        node.registry.register(ScrapeCollector(lambda: gateway_metrics(gateway)))
        # Every connection has its own handler (its pair).
        return Handling(
            dispatcher, FunctionHandler(_no_pair), request_size_limits(config)
        )

    async def bind_listeners(self, node: Node) -> None:
        """The upstream nodes' listeners already known (the topology's saved ports); then
        whether the cluster lets in clients that did not authenticate; then, with the
        subscriptions kept in the cluster, read them (now and every refresh)."""
        assert self.gateway is not None and self.upstream is not None
        config = self._config
        bootstrap = next(iter(node.bound.values()))
        try:
            self.topology = topology(
                config,
                self.upstream.bootstrap,
                node.listeners.advertised[bootstrap.listener_name].host,
                lambda node_id, port: self._bind_node(bootstrap, node_id, port),
            )
            self.topology.load()
            self.topology.bind_range()
            self.gateway.topology = self.topology
            await self.upstream.learn_authentication(
                {e.listener_name: e.security_protocol for e in node.bound.values()}
            )
        except (TopologyError, UpstreamClusterError) as exc:
            raise StartupError(str(exc)) from exc
        store = node.store
        if isinstance(store, ClusterSubscriptionStore):
            admin = self.upstream.subscriptions_admin(str(store.config_dir))
            if admin is None:
                store.use_local()
            else:
                await node.keep_cluster_subscriptions(
                    admin,
                    config.gateway_subscriptions_refresh_ms,
                    config.gateway_subscriptions_stale_after_ms,
                )

    def _bind_node(self, template: EndPoint, node_id: int, port: int) -> int:
        """Bind upstream node ``node_id``'s listener (synchronously: a response that
        names the node is being rewritten right now) and start accepting on it."""
        assert self._node is not None
        listeners = self._node.listeners
        acceptor = listeners.listener(template.with_port(port), node_id)
        bound = acceptor.endpoint
        listeners.accept(acceptor, f"acceptor-{bound.listener_name}-node-{node_id}")
        log.info("listening on %s for upstream node %d", bound, node_id)
        return bound.port

    def _subscriptions_in_cluster(self) -> bool:
        store = None if self._node is None else self._node.store
        return isinstance(store, ClusterSubscriptionStore) and store.in_cluster

    def _subscriptions_altered(self) -> None:
        if self._node is not None and self._node.subscription_refresh is not None:
            self._node.subscription_refresh.soon()

    # ------------------------------------------------------------------ connections
    def connection_handler(
        self, connection_id: int, endpoint: EndPoint, node_id: int | None
    ) -> RequestHandler:
        assert self.gateway is not None and self._node is not None
        pair = self.gateway.new_pair(node_id, connection_id)
        handler = FunctionHandler(pair.handle)
        if endpoint.security_protocol not in SASL_PROTOCOLS:
            return handler
        # The gateway's own SASL listener: clients log in here, with the mechanisms and
        # credentials of a serve node's SASL listener, before anything reaches the pair.
        pair.listener_authenticates = True
        return self._node.authentication.gate(endpoint, handler)

    def connection_opened(self, protocol: KafkaProtocol) -> bool:
        return self.gateway is not None and self.gateway.connection_opened(protocol)

    def connection_closed(self, protocol: KafkaProtocol) -> None:
        if self.gateway is not None:
            self.gateway.connection_closed(protocol.session.connection_id)

    def pairs(self) -> dict[int, ClientPair]:
        """Connection id -> its pair."""
        return {} if self.gateway is None else self.gateway.by_connection

    def state_clusters(self, node: Node) -> dict[str, str]:
        """The cluster's: the subscriptions with ``gateway.subscriptions.store: cluster``
        while it serves them, the SCRAM users without a SASL listener here and the ACLs
        without an authorizer here (their APIs are forwarded, the local files unread).
        The client quotas are always the gateway's own: its engine enforces them."""
        cluster = self._config.gateway_upstream.bootstrap_servers or ""
        clusters: dict[str, str] = {}
        store = node.store
        if isinstance(store, ClusterSubscriptionStore) and store.in_cluster:
            clusters["subscriptions"] = store.cluster
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


class GatewayServer(Node):
    """A node in :class:`GatewayMode` (what ``ktc gateway`` runs); ``gateway``,
    ``topology`` and ``upstream`` are its mode's."""

    mode: GatewayMode

    def __init__(
        self,
        config: CollectorConfig,
        *,
        exporter: Exporter | None = None,
        store: ConfigStore | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(
            config, GatewayMode(config), exporter=exporter, store=store, clock=clock
        )

    @property
    def gateway(self) -> Gateway | None:
        return self.mode.gateway

    @property
    def topology(self) -> Topology | None:
        return self.mode.topology

    @property
    def upstream(self) -> UpstreamCluster | None:
        return self.mode.upstream

    @property
    def _pairs(self) -> dict[int, ClientPair]:
        return self.mode.pairs()
