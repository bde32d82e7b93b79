"""``ktc gateway``: the node in front of any Kafka-compatible cluster.

The gateway mode of :class:`~collector.app.node.Node`: the same node as ``ktc serve`` —
subscription store, landing log, ClientMetricsManager, quota engine, authorizer, forwarder,
metrics and health, started in the node's steps — with a different answer to "what handles
a request": each client connection gets its own
:class:`~collector.gateway.forwarding.ClientPair` (telemetry and client-metrics
administration answered by a dispatcher over the node's own telemetry and admin APIs, so
authorized exactly as in serve; everything else forwarded on the client's own upstream
connection).

Listeners: the configured ``listeners`` are the bootstrap listener(s); upstream node ``n``
gets its own listener on ``gateway.broker.port.start + n - gateway.min.node.id``, bound the
first time a response reveals the node (``collector.gateway.topology``), with the bootstrap
listener's name, security protocol and interface, by the node's one listener factory (so
listener-level connection quotas and TLS settings cover every port of the gateway).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from collector.app.config import CollectorConfig, parse_host_ports
from collector.app.node import Node, StartupError
from collector.broker.acl_apis import AclApis
from collector.broker.scram_apis import ScramCredentialApis
from collector.core.handler import FunctionHandler, RequestHandler
from collector.core.scrape import ScrapeCollector
from collector.gateway.admin_split import AdminSplitter
from collector.gateway.authentication import (
    SASL_PROTOCOLS,
    AuthenticationPolicy,
    UpstreamAuthentication,
)
from collector.gateway.cluster_admin import ClusterAdmin
from collector.gateway.discovery import (
    Discovered,
    ask_authentication,
    discover_brokers,
)
from collector.gateway.forwarding import ClientPair
from collector.gateway.quotas import GatewayQuotas
from collector.gateway.service import Gateway
from collector.gateway.topology import Topology, TopologyError
from collector.gateway.upstream_login import LoginSink, UpstreamLogin, log_in
from collector.net.listeners import EndPoint
from collector.net.protocol import KafkaProtocol
from collector.net.upstream import open_upstream
from proto import SUPPORTED_VERSIONS, ApiKeys
from proto.request_limits import RequestSizeLimits, request_size_limits
from subscriptions.cluster_store import ClusterSubscriptionStore
from subscriptions.store import ConfigStore

__all__ = ["GatewayServer"]

log = logging.getLogger(__name__)

# What the gateway answers itself on every listener, with the collector's versions:
# telemetry, the client-metrics administration it splits from the rest, and the client
# quotas its engine enforces.
_TELEMETRY_APIS = (ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, ApiKeys.PUSH_TELEMETRY)
_LOCAL_APIS = (
    *_TELEMETRY_APIS,
    ApiKeys.DESCRIBE_CONFIGS,
    ApiKeys.INCREMENTAL_ALTER_CONFIGS,
    ApiKeys.LIST_CONFIG_RESOURCES,
    ApiKeys.DESCRIBE_CLIENT_QUOTAS,
    ApiKeys.ALTER_CLIENT_QUOTAS,
)


# A SASL listener on the gateway in front of a cluster that requires SASL: the gateway would
# have to log in to the cluster with credentials of its own, which it does not hold.
_TWO_LOGINS = (
    "listeners {0} authenticate clients at the gateway (SASL), but the cluster requires "
    "SASL too ({1}) and the gateway has no login of its own for it: set "
    "gateway.upstream.security.protocol SASL_PLAINTEXT or SASL_SSL and "
    "gateway.upstream.sasl.mechanism, .username, .password; or give the gateway PLAINTEXT "
    "or SSL listeners (clients' SASL then passes through to the cluster)"
)
# The gateway's own upstream login on a connection of a client that did not log in at the
# gateway: the cluster would take that client for the gateway's user.
_BORROWED_LOGIN = (
    "gateway.upstream.sasl.mechanism: the gateway logs in to the cluster for its clients, "
    "so every listener must authenticate them (SASL_PLAINTEXT or SASL_SSL); {0} does not"
)


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
        self.gateway: Gateway | None = None
        self.topology: Topology | None = None
        self._pairs: dict[int, ClientPair] = {}  # connection id -> its pair
        self._bootstrap_endpoint: EndPoint | None = None
        self._upstream_ssl: ssl.SSLContext | None = None
        # The gateway's own login to a SASL cluster (gateway.upstream.sasl.*), if any.
        self._upstream_login: UpstreamLogin | None = None
        if config.gateway_upstream_sasl_mechanism is not None:
            assert config.gateway_upstream_sasl_username is not None
            assert config.gateway_upstream_sasl_password is not None
            self._upstream_login = UpstreamLogin(
                config.gateway_upstream_sasl_mechanism,
                config.gateway_upstream_sasl_username,
                config.gateway_upstream_sasl_password,
            )

    # ------------------------------------------------------------------ start steps
    def _open_store(self) -> Any:
        """The local store; with ``gateway.subscriptions.store: cluster``, wrapped in the
        store whose subscriptions are the cluster's (read once the cluster is reachable,
        in ``bind_mode_listeners``)."""
        store = super()._open_store()
        if self.config.gateway_subscriptions_store == "cluster" and isinstance(
            store, ConfigStore
        ):
            self._store = store = ClusterSubscriptionStore(
                store, self.config.gateway_upstream_bootstrap_servers or ""
            )
        return store

    def _subscriptions_in_cluster(self) -> bool:
        store = self._store
        return isinstance(store, ClusterSubscriptionStore) and store.in_cluster

    def _subscriptions_altered(self) -> None:
        if self.subscription_refresh is not None:
            self.subscription_refresh.soon()

    def _build_handler(self) -> None:
        config = self.config
        assert self._apis is not None and self.admin_apis is not None
        assert self.quotas is not None
        self._upstream_ssl = self._upstream_ssl_context()
        # The node's own telemetry and admin APIs (the same objects, and so the same
        # authorizer, as serve's): what the gateway answers itself.
        table = {k: v for k, v in self._apis.table().items() if k in _TELEMETRY_APIS}
        table.update(self.admin_apis.table())
        local_apis: list[int] = list(_LOCAL_APIS)
        if self.authorizer is not None:
            # The ACLs it checks are the gateway's, managed through it as on serve
            # (kafka-acls.sh, ktc acls); the cluster's are managed at the cluster.
            acl_apis = AclApis(self.authorizer).table()
            table.update(acl_apis)
            local_apis.extend(acl_apis)
        sasl_listeners = any(
            endpoint.security_protocol in SASL_PROTOCOLS for endpoint in self._listeners
        )
        if sasl_listeners:
            # Its SASL listeners' users are the gateway's, managed through it as on serve
            # (kafka-configs.sh --entity-type users, ktc users); the cluster's at the cluster.
            scram_apis = ScramCredentialApis(
                self._open_credentials(), self.authorizer
            ).table()
            table.update(scram_apis)
            local_apis.extend(scram_apis)
        self.dispatcher = self._dispatcher(table)
        local_versions = {key: SUPPORTED_VERSIONS[key] for key in local_apis}
        self.gateway = Gateway(
            dispatcher=self.dispatcher,
            quotas=GatewayQuotas(self.quotas),
            admin=AdminSplitter(
                self.dispatcher,
                config.socket_request_max_bytes,
                in_cluster=self._subscriptions_in_cluster,
                altered_in_cluster=self._subscriptions_altered,
            ),
            open_upstream=self._open_upstream,
            discover=self._discover,
            local_api_versions=local_versions,
            clock=self.clock,
            authentication=AuthenticationPolicy(
                upstream_security_protocol=config.gateway_upstream_security_protocol,
                require_when_unknown=config.gateway_telemetry_require_authentication,
            ),
            answers_acls=self.authorizer is not None,
            answers_scram=sasl_listeners,
        )
        self.handler = FunctionHandler(self._no_pair)  # every connection has its own
        # Telemetry is answered here only, at its own limits; every other API is (at least
        # partly) forwarded, and a Produce may be as large as the cluster accepts.
        self.request_size_limits = RequestSizeLimits(
            request_size_limits(
                _TELEMETRY_APIS,
                telemetry_max_bytes=config.telemetry_max_bytes,
                max_request_size=config.socket_request_max_bytes,
            ),
            other=config.socket_request_max_bytes,
        )
        self.registry.register(ScrapeCollector(self._collect_gateway_metrics))

    async def _bind_mode_listeners(self) -> None:
        """The upstream nodes' listeners already known (the topology's saved ports); then
        whether the cluster lets in clients that did not authenticate."""
        self._build_topology()
        await self._learn_upstream_authentication()
        await self._read_cluster_subscriptions()

    async def _read_cluster_subscriptions(self) -> None:
        """With the subscriptions kept in the cluster: read them once now (bounded by the
        upstream connect timeout; a cluster that cannot be read now is read later), then
        every ``gateway.subscriptions.refresh.ms``."""
        store = self._store
        if not isinstance(store, ClusterSubscriptionStore):
            return
        assert self.gateway is not None and self.topology is not None
        config = self.config
        login = self._upstream_login
        if login is None and config.gateway_subscriptions_sasl_mechanism is not None:
            assert config.gateway_subscriptions_sasl_username is not None
            assert config.gateway_subscriptions_sasl_password is not None
            login = UpstreamLogin(
                config.gateway_subscriptions_sasl_mechanism,
                config.gateway_subscriptions_sasl_username,
                config.gateway_subscriptions_sasl_password,
            )
        if (
            self.gateway.authentication.state is UpstreamAuthentication.REQUIRED
            and login is None
        ):
            log.warning(
                "the upstream cluster (%s) requires SASL and the gateway has no login to "
                "read its CLIENT_METRICS configs with (gateway.subscriptions.sasl.*): "
                "client-metrics subscriptions come from the local store (%s)",
                store.cluster,
                store.config_dir,
            )
            store.use_local()
            return
        admin = ClusterAdmin(
            self.topology.bootstrap,
            ssl_context=self._upstream_ssl,
            login=login,
            timeout_s=config.gateway_upstream_connect_timeout_ms / 1000.0,
            max_response_size=config.gateway_upstream_max_response_bytes,
        )
        await self._keep_cluster_subscriptions(
            admin, config.gateway_subscriptions_refresh_ms
        )

    def _build_topology(self) -> None:
        config = self.config
        assert self.gateway is not None
        bootstrap = next(iter(self.bound.values()))
        self._bootstrap_endpoint = bootstrap
        advertised_host = (
            config.gateway_advertised_host
            or self.advertised[bootstrap.listener_name].host
        )
        try:
            self.topology = Topology(
                bootstrap=parse_host_ports(
                    config.gateway_upstream_bootstrap_servers or ""
                ),
                broker_port_start=config.gateway_broker_port_start,
                min_node_id=config.gateway_min_node_id,
                max_nodes=config.gateway_max_nodes,
                advertised_host=advertised_host,
                bind_node=self._bind_node,
                state_dir=config.data_dir,
            )
            self.topology.load()
            self.topology.bind_range()
        except TopologyError as exc:
            raise StartupError(str(exc)) from exc
        self.gateway.topology = self.topology

    def _bind_node(self, node_id: int, port: int) -> int:
        """Bind upstream node ``node_id``'s listener (synchronously: a response that
        names the node is being rewritten right now) and start accepting on it."""
        template = self._bootstrap_endpoint
        assert template is not None
        acceptor = self._listener(template.with_port(port), node_id)
        bound = acceptor.endpoint
        self._accept(acceptor, f"acceptor-{bound.listener_name}-node-{node_id}")
        log.info("listening on %s for upstream node %d", bound, node_id)
        return bound.port

    def _upstream_ssl_context(self) -> ssl.SSLContext | None:
        config = self.config
        if config.gateway_upstream_security_protocol not in {"SSL", "SASL_SSL"}:
            return None
        try:
            context = ssl.create_default_context(
                cafile=config.gateway_upstream_ssl_truststore_location
            )
            if config.gateway_upstream_ssl_keystore_location:
                context.load_cert_chain(
                    config.gateway_upstream_ssl_keystore_location,
                    password=config.gateway_upstream_ssl_key_password,
                )
        except (OSError, ssl.SSLError) as exc:
            raise StartupError(f"gateway.upstream.ssl: {exc}") from exc
        if config.gateway_upstream_ssl_endpoint_identification_algorithm == "":
            context.check_hostname = False
        return context

    async def _learn_upstream_authentication(self) -> None:
        """Ask the cluster, without credentials, whether it lets such a client in, unless
        configuration said so or no client would be refused either way
        (``authentication.py``). Bounded by the upstream connect timeout: a cluster that
        cannot be asked now is learned from its answers to clients."""
        assert self.gateway is not None and self.topology is not None
        policy = self.gateway.authentication
        config = self.config
        sasl_listeners = sorted(
            endpoint.listener_name
            for endpoint in self.bound.values()
            if endpoint.security_protocol in SASL_PROTOCOLS
        )
        if self._upstream_login is not None:
            # Told (the config requires a SASL protocol with a login); no client's SASL
            # passes through, so every client must log in at the gateway.
            plain = sorted(
                endpoint.listener_name
                for endpoint in self.bound.values()
                if endpoint.security_protocol not in SASL_PROTOCOLS
            )
            if plain:
                raise StartupError(_BORROWED_LOGIN.format(", ".join(plain)))
            return
        if sasl_listeners and policy.told:
            raise StartupError(
                _TWO_LOGINS.format(
                    ", ".join(sasl_listeners),
                    "gateway.upstream.security.protocol "
                    + config.gateway_upstream_security_protocol,
                )
            )
        if policy.told or not (policy.require_when_unknown or sasl_listeners):
            return
        requires, _ = await ask_authentication(
            self.topology.bootstrap,
            ssl_context=self._upstream_ssl,
            timeout_s=config.gateway_upstream_connect_timeout_ms / 1000.0,
            max_response_size=config.gateway_upstream_max_response_bytes,
        )
        if requires and sasl_listeners:
            raise StartupError(
                _TWO_LOGINS.format(
                    ", ".join(sasl_listeners),
                    "it closed the connection on the gateway's Metadata request",
                )
            )
        if requires:
            policy.learned_required(
                "it closed the connection on the gateway's Metadata request"
            )
        elif requires is False:
            policy.learned_not_required(
                "it answered the gateway's Metadata request without credentials"
            )
        if policy.state is UpstreamAuthentication.UNKNOWN:
            log.warning(
                "cannot tell yet whether the upstream cluster requires authentication: "
                "until it answers a client, only clients that authenticated are served "
                "telemetry and administration (gateway.telemetry.require.authentication)"
            )

    async def _discover(self) -> Discovered | None:
        config = self.config
        assert self.topology is not None
        return await discover_brokers(
            self.topology.bootstrap,
            ssl_context=self._upstream_ssl,
            timeout_s=config.gateway_upstream_connect_timeout_ms / 1000.0,
            max_response_size=config.gateway_upstream_max_response_bytes,
        )

    async def _open_upstream(self, host: str, port: int, pair: ClientPair) -> Any:
        config = self.config
        timeout_s = config.gateway_upstream_connect_timeout_ms / 1000.0
        login = self._upstream_login
        sink: Any = pair if login is None else LoginSink()
        upstream = await open_upstream(
            host,
            port,
            sink,
            max_response_size=config.gateway_upstream_max_response_bytes,
            ssl_context=self._upstream_ssl,
            connect_timeout_s=timeout_s,
        )
        if login is None:
            return upstream
        try:
            await asyncio.wait_for(log_in(upstream, sink, login), timeout_s)
        except BaseException:
            upstream.close()
            raise
        upstream.set_sink(pair)
        return upstream

    # ------------------------------------------------------------------ connections
    @staticmethod
    def _no_pair(frame: Any, session: Any, channel: Any) -> object:
        raise AssertionError("a gateway connection always has its own handler")

    def _connection_handler(
        self, connection_id: int, endpoint: EndPoint, node_id: int | None
    ) -> RequestHandler:
        assert self.gateway is not None
        pair = self.gateway.new_pair(node_id)
        self._pairs[connection_id] = pair
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
        pair = self._pairs.get(protocol.session.connection_id)
        if pair is None:
            return False
        session = protocol.session
        session.upstream_node_id = pair.node_id
        assert self.gateway is not None
        session.upstream_cluster_id = self.gateway.cluster_id
        protocol.on_write_congested = pair.write_congested
        pair.opened(protocol, session)
        return True

    def connection_closed(self, protocol: KafkaProtocol) -> None:
        super().connection_closed(protocol)
        pair = self._pairs.pop(protocol.session.connection_id, None)
        if pair is not None and self.gateway is not None:
            self.gateway.pair_closed(pair)

    # ------------------------------------------------------------------ metrics
    def _collect_gateway_metrics(self) -> Iterator[Metric]:
        gateway = self.gateway
        if gateway is None:
            return
        stats = gateway.stats
        failures = CounterMetricFamily(
            "ktc_gateway_upstream_failures",
            "Upstream connections that could not be opened (unreachable), were dropped with "
            "requests in flight (lost) or with none (closed), or broke the protocol "
            "(protocol), by upstream node (bootstrap: the bootstrap listener's).",
            labels=["node", "reason"],
        )
        for (node, reason), count in sorted(stats.upstream_failures.items()):
            failures.add_metric([node, reason], count)
        yield failures
        refused = CounterMetricFamily(
            "ktc_gateway_unauthenticated_refused",
            "Client connections closed for a request the gateway answers itself, sent "
            "before the client authenticated where that is required, by API.",
            labels=["api"],
        )
        for api, count in sorted(stats.refused_unauthenticated.items()):
            refused.add_metric([api], count)
        yield refused
        down = GaugeMetricFamily(
            "ktc_gateway_upstream_down",
            "1 while an upstream node is down: from a failed or lost connection until a "
            "connection to it succeeds again.",
            labels=["node"],
        )
        for node in stats.health.down:
            down.add_metric([node], 1)
        yield down
        yield GaugeMetricFamily(
            "ktc_gateway_client_pairs",
            "Client connections paired with an upstream connection.",
            value=len(gateway.pairs),
        )
        yield GaugeMetricFamily(
            "ktc_gateway_requests_in_flight",
            "Forwarded requests waiting for the upstream broker's response.",
            value=sum(pair.in_flight for pair in gateway.pairs),
        )
        nodes = GaugeMetricFamily(
            "ktc_gateway_node_port",
            "The gateway port that stands for each upstream node.",
            labels=["node", "upstream"],
        )
        if self.topology is not None:
            for node_id, port in sorted(self.topology.ports.items()):
                host, upstream_port = self.topology.upstream.get(node_id, ("", 0))
                nodes.add_metric([str(node_id), f"{host}:{upstream_port}"], port)
        yield nodes
