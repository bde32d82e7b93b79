"""``ktc gateway``: the node in front of any Kafka-compatible cluster, wired.

The gateway mode of :class:`~collector.app.node.Node` (the same node as ``ktc serve``,
started in the same steps) with a different answer to "what handles a request": each client
connection gets its own :class:`~collector.gateway.forwarding.ClientPair`.  This module only
wires: the gateway's policy is in ``collector.gateway`` (the filter table and what it
answers here, ``upstream_cluster.py``, ``service.py``, ``metrics.py``), its settings in
``gateway_settings.py``.  The configured ``listeners`` are the bootstrap listener(s); each
upstream node gets its own (``collector.gateway.topology``) from the node's one listener
factory, so connection quotas and TLS cover every port of the gateway.
"""

from __future__ import annotations

import logging
from typing import Any

from collector.app.config import CollectorConfig
from collector.app.gateway_settings import (
    request_size_limits,
    topology,
    upstream_settings,
)
from collector.app.node import Node, StartupError
from collector.broker.acl_apis import AclApis
from collector.broker.scram_apis import ScramCredentialApis
from collector.core.handler import FunctionHandler, RequestHandler
from collector.core.scrape import ScrapeCollector
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
from subscriptions.cluster_store import ClusterSubscriptionStore
from subscriptions.store import ConfigStore

__all__ = ["GatewayServer"]

log = logging.getLogger(__name__)


class GatewayServer(Node):
    """``ktc gateway``: the node forwarding to an upstream cluster, a pair per connection."""

    mode_name = "gateway"

    def __init__(self, config: CollectorConfig, **kwargs: Any) -> None:
        if not config.gateway_upstream_bootstrap_servers:
            raise StartupError(
                "gateway mode needs the upstream cluster: --upstream HOST:PORT[,HOST:PORT...] "
                "or gateway.upstream.bootstrap.servers"
            )
        super().__init__(config, **kwargs)
        self.upstream: UpstreamCluster | None = None
        self.gateway: Gateway | None = None
        self.topology: Topology | None = None

    # ------------------------------------------------------------------ start steps
    def _open_store(self) -> Any:
        """The local store; with ``gateway.subscriptions.store: cluster``, wrapped in the
        store whose subscriptions are the cluster's (read in ``bind_mode_listeners``)."""
        store = super()._open_store()
        if self.config.gateway_subscriptions_store == "cluster" and isinstance(
            store, ConfigStore
        ):
            self._store = store = ClusterSubscriptionStore(
                store, self.config.gateway_upstream_bootstrap_servers or ""
            )
        return store

    def _build_handler(self) -> None:
        config = self.config
        assert self._apis is not None and self.admin_apis is not None
        assert self.quotas is not None
        try:
            self.upstream = upstream = UpstreamCluster(upstream_settings(config))
        except UpstreamClusterError as exc:
            raise StartupError(str(exc)) from exc
        # The ACLs and SASL users the gateway checks are its own, managed through it as on
        # serve; without an authorizer or SASL listeners, the cluster's (forwarded).
        answers = LocalAnswerSettings(
            answers_acls=self.authorizer is not None,
            answers_scram=any(
                e.security_protocol in SASL_PROTOCOLS for e in self._listeners
            ),
        )
        handlers = {**self._apis.table(), **self.admin_apis.table()}
        if answers.answers_acls:
            handlers.update(AclApis(self.authorizer).table())
        if answers.answers_scram:
            credentials = self._open_credentials()
            handlers.update(ScramCredentialApis(credentials, self.authorizer).table())
        # The node's own API objects (so the same authorizer as serve's), over exactly the
        # APIs the filter table answers here.
        local = sorted(answered_here(answers))
        assert handlers.keys() >= set(local), "an API answered here has no handler"
        self.dispatcher = self._dispatcher({key: handlers[key] for key in local})
        self.gateway = gateway = Gateway(
            dispatcher=self.dispatcher,
            quotas=GatewayQuotas(self.quotas),
            admin=AdminSplitter(
                self.dispatcher,
                config.socket_request_max_bytes,
                in_cluster=self._subscriptions_in_cluster,
                altered_in_cluster=self._subscriptions_altered,
            ),
            open_upstream=upstream.open,
            discover=upstream.discover,
            clock=self.clock,
            authentication=upstream.authentication,
            answers_acls=answers.answers_acls,
            answers_scram=answers.answers_scram,
        )
        self.handler = FunctionHandler(self._no_pair)  # every connection has its own
        self.request_size_limits = request_size_limits(config)
        self.registry.register(ScrapeCollector(lambda: gateway_metrics(gateway)))

    async def _bind_mode_listeners(self) -> None:
        """The upstream nodes' listeners already known (the topology's saved ports); then
        whether the cluster lets in clients that did not authenticate; then, with the
        subscriptions kept in the cluster, read them (now and every refresh)."""
        assert self.gateway is not None and self.upstream is not None
        config = self.config
        bootstrap = next(iter(self.bound.values()))
        try:
            self.topology = topology(
                config,
                self.upstream.bootstrap,
                self.advertised[bootstrap.listener_name].host,
                lambda node_id, port: self._bind_node(bootstrap, node_id, port),
            )
            self.topology.load()
            self.topology.bind_range()
            self.gateway.topology = self.topology
            await self.upstream.learn_authentication(
                {e.listener_name: e.security_protocol for e in self.bound.values()}
            )
        except (TopologyError, UpstreamClusterError) as exc:
            raise StartupError(str(exc)) from exc
        store = self._store
        if isinstance(store, ClusterSubscriptionStore):
            admin = self.upstream.subscriptions_admin(str(store.config_dir))
            if admin is None:
                store.use_local()
            else:
                await self._keep_cluster_subscriptions(
                    admin, config.gateway_subscriptions_refresh_ms
                )

    def _bind_node(self, template: EndPoint, node_id: int, port: int) -> int:
        """Bind upstream node ``node_id``'s listener (synchronously: a response that
        names the node is being rewritten right now) and start accepting on it."""
        acceptor = self._listener(template.with_port(port), node_id)
        bound = acceptor.endpoint
        self._accept(acceptor, f"acceptor-{bound.listener_name}-node-{node_id}")
        log.info("listening on %s for upstream node %d", bound, node_id)
        return bound.port

    def _subscriptions_in_cluster(self) -> bool:
        store = self._store
        return isinstance(store, ClusterSubscriptionStore) and store.in_cluster

    def _subscriptions_altered(self) -> None:
        if self.subscription_refresh is not None:
            self.subscription_refresh.soon()

    # ------------------------------------------------------------------ connections
    @staticmethod
    def _no_pair(frame: Any, session: Any, channel: Any) -> object:
        raise AssertionError("a gateway connection always has its own handler")

    def _connection_handler(
        self, connection_id: int, endpoint: EndPoint, node_id: int | None
    ) -> RequestHandler:
        assert self.gateway is not None
        pair = self.gateway.new_pair(node_id, connection_id)
        handler = FunctionHandler(pair.handle)
        if endpoint.security_protocol not in SASL_PROTOCOLS:
            return handler
        # The gateway's own SASL listener: clients log in here, with the mechanisms and
        # credentials of a serve node's SASL listener, before anything reaches the pair.
        pair.listener_authenticates = True
        return self._sasl_gate(endpoint, handler)

    def connection_opened(self, protocol: KafkaProtocol) -> bool:
        if not super().connection_opened(protocol):
            return False
        return self.gateway is not None and self.gateway.connection_opened(protocol)

    def connection_closed(self, protocol: KafkaProtocol) -> None:
        super().connection_closed(protocol)
        if self.gateway is not None:
            self.gateway.connection_closed(protocol.session.connection_id)

    @property
    def _pairs(self) -> dict[int, ClientPair]:
        """Connection id -> its pair."""
        return {} if self.gateway is None else self.gateway.by_connection
