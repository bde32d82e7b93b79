"""One collector node: what ``ktc serve`` and ``ktc gateway`` both are.

:class:`Node` owns what every node has — config, clock, subscription store, credentials,
ACLs and the authorizer, landing log, ClientMetricsManager, quota engine, the API tables
(telemetry and the authorized admin APIs), listeners, HTTP endpoints, background tasks,
the OTLP forwarder and shutdown — and :meth:`Node.start` runs :data:`START_STEPS`, the one
list of start steps, in order (each a method of the same name with a leading underscore):

| step | what it does |
|---|---|
| ``plan_listeners`` | parse ``listeners`` / ``advertised.listeners`` (nothing bound yet) |
| ``open_data_dir`` | the data directory and the cluster id (``meta.properties``) |
| ``open_store`` | **the mode's**: the subscription and quota store (local, or the subscriptions a Kafka cluster holds) |
| ``open_credentials`` | the SCRAM credential store (``config/scram-credentials.yaml``) |
| ``open_oauthbearer`` | OAUTHBEARER's JWKS and token validator, when configured |
| ``open_landing`` | the landing log, or the landing topic (``landing.kafka.topic``), unless an exporter was given, and the gate answers wait on |
| ``build_manager`` | the ClientMetricsManager over the store's subscriptions |
| ``build_quotas`` | the quota engine and enforcer, with the store's quotas applied |
| ``build_authorizer`` | Kafka's StandardAuthorizer over ``config/acls.yaml``, when configured |
| ``build_apis`` | the telemetry APIs and the admin APIs, authorized by that authorizer |
| ``build_handler`` | **the mode's**: what answers a connection's requests |
| ``bind_listeners`` | bind every listener (port 0: the bound port is what Metadata advertises) and start accepting |
| ``bind_mode_listeners`` | **the mode's**: listeners beyond ``listeners`` (the gateway's per-node ports) |
| ``start_http`` | ``/metrics``, ``/healthz``, ``/readyz``, the admin endpoints (``/v1/...``) |
| ``start_background`` | instance expiry, quota sensor expiry, idle connections, store, ACL and credentials watch, OTLP forwarder |
| ``store_watch_started`` | wait until the store's directory is watched (a change after start is seen) |

Only then is ``/readyz`` green.  The modes are subclasses that fill in the two steps marked
as theirs and :meth:`Node._connection_handler` (the handler of one new connection):
``collector.app.server.CollectorServer`` (serve: the dispatcher, behind a SASL gate on SASL
listeners) and ``collector.app.gateway_server.GatewayServer`` (gateway: a client pair per
connection, forwarding upstream; per-node listeners).  Every listener of either mode is made
by one factory, :meth:`Node._listener`, for every security protocol.

Shutdown (SIGTERM/SIGINT, or :meth:`Node.stop`): readiness off first, so load balancers
stop routing; listeners stop accepting; every connection finishes writing what it already
answered and closes; the landing log is flushed, fsynced and closed; the forwarder drains
and stops; the HTTP endpoint goes last.  SIGHUP reloads the config store, the ACLs and the
credentials.

Quota configuration reaches the running engine in one place, :meth:`Node.apply_store_quotas`:
at start, after an AlterClientQuotas, when the store's files change, on SIGHUP.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import os
import signal
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from clock import SYSTEM_CLOCK, Clock
from collector.app.client_inventory import ClientInventory
from collector.app.config import CollectorConfig
from collector.app.http import HealthEndpoints
from collector.broker.admin_apis import AdminApis
from collector.broker.kafka_apis import KafkaApis, api_name
from collector.core.handler import RequestHandler
from collector.core.scrape import ScrapeCollector
from collector.net.acceptor import Acceptor, bind_listener
from collector.net.flush import DurabilityGate
from collector.net.idle import IdleConnections, sweep_period_ms
from collector.net.listeners import (
    EndPoint,
    advertised_endpoint,
    parse_listeners,
    parse_security_protocol_map,
)
from collector.net.protocol import KafkaProtocol
from collector.net.request_memory import RequestMemory
from collector.net.tls import TlsError, server_ssl_context
from collector.pipeline.dispatch import Dispatcher
from collector.pipeline.quota_enforcer import QuotaEnforcer
from collector.pipeline.request_metrics import RequestMetrics
from collector.security.acls_file import DurableAclStore
from collector.security.authorizer import StandardAuthorizer, parse_super_users
from collector.security.credentials_file import DurableCredentialStore
from collector.telemetry.client_metrics import ClientMetricsManager
from collector.telemetry.stats import ClientMetricsStats
from collector.telemetry.subscription_source import StoreSubscriptions
from exporters.base import Exporter
from proto.request_limits import RequestSizeLimits
from quota import QuotaEngine
from quota.errors import QuotaConfigError
from subscriptions.kafka_uuid import (
    kafka_uuid_from_str,
    kafka_uuid_to_str,
    random_instance_id,
)

__all__ = ["START_STEPS", "Node", "StartupError", "install_uvloop", "quota_settings"]

log = logging.getLogger(__name__)

EXPIRY_TICK_MS = 1000
# Listeners whose connections start with TLS.
_TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})

QUOTA_SENSOR_EXPIRY_TICK_MS = 30_000
# How often pushes waiting for /metrics/clients are handed to its worker thread.
CLIENT_SERIES_FOLD_TICK_MS = 1000
# How long a graceful shutdown waits for connections to write what they answered.
CONNECTIONS_DRAIN_S = 5.0


class StartupError(RuntimeError):
    """The server cannot start with this configuration (message says why)."""


def quota_settings(config: CollectorConfig) -> dict[str, object]:
    """The broker keys QuotaEngineConfig.from_mapping reads, from the collector config:
    Kafka's names, plus ``inter.broker.listener.name`` (the protected listener) and the
    ``listener.name.<name>.`` connection limits as given."""
    return {
        "quota.window.num": config.quota_window_num,
        "quota.window.size.seconds": config.quota_window_size_seconds,
        "max.connections": config.max_connections,
        "max.connections.per.ip": config.max_connections_per_ip,
        "max.connections.per.ip.overrides": config.max_connections_per_ip_overrides,
        "max.connection.creation.rate": config.max_connection_creation_rate,
        "listeners": config.listeners,
        **config.connection_quota_overrides,
    }


def _read_or_create_cluster_id(
    data_dir: Path, node_id: int, configured: str | None
) -> str:
    """Like a KRaft broker's ``meta.properties``: the cluster id survives restarts."""
    meta = data_dir / "meta.properties"
    stored: dict[str, str] = {}
    if meta.exists():
        for line in meta.read_text(encoding="utf-8").splitlines():
            key, sep, value = line.partition("=")
            if sep and not line.startswith("#"):
                stored[key.strip()] = value.strip()
    cluster_id = (
        configured
        or stored.get("cluster.id")
        or kafka_uuid_to_str(random_instance_id())
    )
    if stored.get("cluster.id") not in (None, cluster_id):
        log.warning(
            "cluster.id %s differs from %s in %s; using the configured one",
            cluster_id,
            stored.get("cluster.id"),
            meta,
        )
    if stored.get("cluster.id") != cluster_id or stored.get("node.id") != str(node_id):
        tmp = meta.with_suffix(".tmp")
        tmp.write_text(
            f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n", encoding="utf-8"
        )
        tmp.replace(meta)
    return cluster_id


# Node.start's steps, in order; the mode's are ``build_handler`` and ``bind_mode_listeners``.
START_STEPS: Final = (
    "plan_listeners",
    "open_data_dir",
    "open_store",
    "open_credentials",
    "open_oauthbearer",
    "open_landing",
    "build_manager",
    "build_quotas",
    "build_authorizer",
    "build_apis",
    "build_handler",
    "bind_listeners",
    "bind_mode_listeners",
    "start_http",
    "start_background",
    "store_watch_started",
)


class Node:
    """One collector node, in the mode its subclass gives.  ``await start()``, then
    ``await wait_stopped()`` or ``stop()``."""

    # Written in the logs at start ("collector node 1 ... started").
    mode_name = "collector"

    def __init__(
        self,
        config: CollectorConfig,
        *,
        exporter: Exporter | None = None,
        store: Any | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.config = config
        self.clock = clock
        self._exporter = exporter
        self._owns_exporter = exporter is None
        self._store: Any = store
        self.quotas: QuotaEnforcer | None = None
        # One registry per server (several servers in one process never share series): the
        # manager's client-metrics series first, then requests and connections.
        self.registry = CollectorRegistry(auto_describe=True)
        self.client_metrics_stats = ClientMetricsStats(
            self.registry, instance_labels=config.telemetry_metrics_instance_labels
        )
        self.request_metrics = RequestMetrics(self.registry, api_names=api_name)
        self.health = HealthEndpoints(self.registry, clock=clock)
        self.max_request_size = config.socket_request_max_bytes
        # SASL exchanges that failed (ktc_failed_authentication_total).
        self.failed_authentications = 0
        self.reauthentications = 0
        self.max_inflight_requests = config.connection_max_inflight_requests
        # queued.max.request.bytes, shared by every connection; and each API's request size
        # limit, from the API table this node serves (set with the dispatcher).
        self.request_memory = RequestMemory(config.queued_max_request_bytes)
        self.request_size_limits = RequestSizeLimits(
            other=config.socket_request_max_bytes
        )
        self.idle_connections: IdleConnections | None = None
        self.registry.register(ScrapeCollector(self._collect_connection_limits))
        # The inventory of every connection (clients.inventory.enable): each connection's
        # handler is wrapped to record its requests' headers (client_inventory.py).
        self.inventory: ClientInventory | None = None
        if config.clients_inventory_enable:
            self.inventory = ClientInventory(config.clients_inventory_max_series)
            self.registry.register(ScrapeCollector(self.inventory.collect))
        self.cluster_id = ""
        self.manager: ClientMetricsManager | None = None
        # /metrics/clients (prometheus.clients.enable), set with the manager.
        self.client_series: Any = None
        self.dispatcher: Dispatcher  # set in start()
        self.handler: RequestHandler  # what connections call: the dispatcher
        self._apis: KafkaApis | None = None
        # The admin APIs (client-metrics configs, client quotas), with the node's authorizer:
        # both modes answer them from this one object.
        self.admin_apis: AdminApis | None = None
        self._listeners: list[EndPoint] = []
        self._advertised_config: dict[str, EndPoint] = {}
        self._acceptors: list[Acceptor] = []
        self._slot_freed = asyncio.Event()
        self.bound: dict[str, EndPoint] = {}
        self.advertised: dict[str, EndPoint] = {}
        self._connections: dict[int, KafkaProtocol] = {}
        self._all_closed = asyncio.Event()
        self._next_connection_id = 0
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopped = asyncio.Event()
        self._forwarder: Any = None
        self._forwarder_stop = asyncio.Event()
        # Set once the config store's directory is watched (a change after it is seen).
        self.store_watching = asyncio.Event()
        # Reads a Kafka cluster's client-metrics configs into the store, when the
        # subscriptions are kept there (collector/gateway/cluster_subscriptions.py).
        self.subscription_refresh: Any = None
        # SCRAM credentials (SASL SCRAM and PLAIN check against them), set in start().
        self.credentials: DurableCredentialStore | None = None
        # SASL/OAUTHBEARER: the JWKS and the token validator over it, set in start().
        self.jwks: Any = None
        self._token_validator: Any = None
        # ACLs and the authorizer over them, when authorizer.class.name is set.
        self.acls: DurableAclStore | None = None
        self.authorizer: StandardAuthorizer | None = None
        self._started = False
        self._stopping = False
        self._landing: Any = None  # the LandingLog this server owns
        self._sync_executor: Any = None
        # What answers wait for (the landing log's per-turn flush), set with the landing log.
        self.durability: DurabilityGate | None = None
        # Readiness and /metrics of the landing log's writes, set with the landing log.
        self._landing_health: Any = None
        # The TLS context of the SSL and SASL_SSL listeners (made once, on first use).
        self._tls: ssl.SSLContext | None = None

    # ------------------------------------------------------------------ ports
    def port(self, listener_name: str | None = None) -> int:
        """The bound port of a listener (the first one by default)."""
        if listener_name is None:
            return next(iter(self.bound.values())).port
        return self.bound[listener_name.upper()].port

    def connections(self) -> list[KafkaProtocol]:
        """The open Kafka connections, oldest first (each with its ``session``)."""
        return [self._connections[key] for key in sorted(self._connections)]

    @property
    def http_port(self) -> int | None:
        return self.health.port

    @property
    def exporter(self) -> Exporter | None:
        """Where accepted pushes go: the landing log this server opened, or the one given."""
        return self._exporter

    @property
    def landing_directory(self) -> Path:
        from exporters.landing.layout import landing_directory

        return landing_directory(self.config.data_dir, self.config.node_id)

    # ------------------------------------------------------------------ start
    async def start(self) -> None:
        for step in START_STEPS:
            done = getattr(self, f"_{step}")()
            if inspect.isawaitable(done):
                await done
        self._started = True
        log.info(
            "%s node %d of cluster %s started (data dir %s)",
            self.mode_name,
            self.config.node_id,
            self.cluster_id,
            self.config.data_dir,
        )

    def _plan_listeners(self) -> None:
        """The listeners to bind, and what each advertises by name (as configured)."""
        config = self.config
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
        self._listeners, self._advertised_config = listeners, advertised

    def _open_data_dir(self) -> None:
        config = self.config
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = _read_or_create_cluster_id(
            config.data_dir, config.node_id, config.cluster_id
        )

    def _open_store(self) -> Any:
        if self._store is None:
            from subscriptions.store import ConfigStore

            try:
                self._store = ConfigStore(self.config.data_dir)
            except Exception as exc:
                raise StartupError(f"subscription store: {exc}") from exc
        return self._store

    def _open_credentials(self) -> DurableCredentialStore:
        if self.credentials is None:
            try:
                self.credentials = DurableCredentialStore(self.config.data_dir)
            except Exception as exc:
                raise StartupError(f"credentials: {exc}") from exc
        return self.credentials

    def _open_landing(self) -> None:
        """The landing log this node owns (unless an exporter was given): the config's
        ``landing`` options, with retention protecting the forwarder's position.

        Write-behind (the default): a push is staged by the manager and written, one
        ``writev`` per event-loop turn for all connections, before that turn's answers go
        out (collector/net/flush.py: DurabilityGate)."""
        if self._exporter is not None:
            return
        config = self.config
        if config.landing_kafka_topic is not None:  # the topic instead of the log
            self._open_landing_topic()
            return
        from exporters.landing import LandingLog, LandingOptions

        try:
            options = LandingOptions.from_mapping(config.landing)
        except (TypeError, ValueError) as exc:
            raise StartupError(f"landing: {exc}") from exc
        if config.exporters_otlp is not None:
            # Retention must not delete what the forwarder has not sent, even before its
            # first commit (a consumer that never committed protects nothing).
            from exporters.otlp import consumer_name_for

            options = options.with_required_consumer(consumer_name_for("otlp"))
        self._exporter = self._landing = LandingLog(
            self.landing_directory, options, clock=self.clock
        )
        self.durability = DurabilityGate(
            self._landing, self._pending_sync if options.group_commit else None
        )
        from collector.app.landing_health import LandingHealth

        self._landing_health = LandingHealth(self._landing, self.durability)
        self.registry.register(ScrapeCollector(self._landing_health.collect))

    def _open_landing_topic(self) -> None:
        from collector.app.landing_topic import open_topic_landing
        from exporters.kafka_topic.topic import TopicUnavailable

        try:
            landing, self.durability, health = open_topic_landing(self.config)
        except TopicUnavailable as exc:
            raise StartupError(f"landing.kafka.topic: {exc}") from exc
        self._exporter = landing
        self.registry.register(ScrapeCollector(health.collect))

    def _build_manager(self) -> ClientMetricsManager:
        config = self.config
        store = self._store
        assert self._exporter is not None
        exporter = self._exporter
        if config.prometheus_clients_enable:
            exporter = self._client_series_tap(exporter)
        manager = self.manager = ClientMetricsManager(
            subscriptions=StoreSubscriptions(
                store, honour_long_intervals=config.telemetry_honour_long_intervals
            ),
            exporter=exporter,
            instance_id_to_str=kafka_uuid_to_str,
            new_instance_id=random_instance_id,
            telemetry_max_bytes=config.telemetry_max_bytes,
            node_id=config.node_id,
            cluster_id=self.cluster_id,
            cache_max_size=config.telemetry_instance_cache_max_size,
            cache_expiry_ms=config.telemetry_instance_cache_expiry_ms,
            stats=self.client_metrics_stats,
            clock=self.clock,
        )
        self.client_metrics_stats.instance_count = lambda: manager.instance_count
        return manager

    def _client_series_tap(self, exporter: Exporter) -> Exporter:
        """``/metrics/clients``: the series of every cached instance, fed by a tap after
        the landing log (docs/prometheus.md)."""
        from collector.telemetry.prometheus.client_series import (
            ClientSeries,
            ClientSeriesSettings,
            ClientSeriesTap,
        )

        config = self.config
        settings = ClientSeriesSettings.parse(
            config.prometheus_clients_max_series,
            config.prometheus_clients_labels,
            config.prometheus_clients_metrics,
        )

        def is_cached(instance_id: str) -> bool:
            manager = self.manager
            return manager is not None and (
                manager.instance(kafka_uuid_from_str(instance_id)) is not None
            )

        self.client_series = ClientSeries(settings, is_cached)
        self.registry.register(ScrapeCollector(self.client_series.collect))
        return ClientSeriesTap(exporter, self.client_series)

    def _build_quotas(self) -> QuotaEnforcer:
        try:
            engine = QuotaEngine.from_config(
                quota_settings(self.config), self.clock.now_ms()
            )
        except QuotaConfigError as exc:
            raise StartupError(str(exc)) from exc
        self.quotas = QuotaEnforcer(engine, clock=self.clock)
        self.apply_store_quotas()
        self.registry.register(ScrapeCollector(self.quotas.collect))
        self.request_metrics.connections_rejected = lambda: sum(
            a.rejected for a in self._acceptors
        )
        return self.quotas

    def _build_authorizer(self) -> StandardAuthorizer | None:
        """Kafka's StandardAuthorizer over ``config/acls.yaml`` when
        ``authorizer.class.name`` is set (any value: the collector has this one)."""
        config = self.config
        if not config.authorizer_class_name:
            return None
        try:
            self.acls = DurableAclStore(config.data_dir)
            super_users = parse_super_users(config.super_users)
        except Exception as exc:
            raise StartupError(f"authorizer: {exc}") from exc
        self.authorizer = StandardAuthorizer(
            self.acls,
            super_users=super_users,
            allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
        )
        log.info(
            "authorizer %s: %d ACLs, super.users=%s, allow.everyone.if.no.acl.found=%s",
            config.authorizer_class_name,
            len(self.acls.bindings()),
            ",".join(sorted(super_users)),
            config.allow_everyone_if_no_acl_found,
        )
        return self.authorizer

    def _build_apis(self) -> None:
        """The APIs both modes answer themselves: telemetry (KafkaApis) and the admin APIs
        over the store, authorized by the node's one authorizer."""
        assert self.manager is not None and self.quotas is not None
        config = self.config
        self._apis = KafkaApis(
            manager=self.manager,
            node_id=config.node_id,
            cluster_id=self.cluster_id,
            advertised={},
        )
        self._apis.set_authorizer(self.authorizer)
        self.admin_apis = AdminApis(
            self._store, self.apply_store_quotas, self.quotas, self.authorizer
        )

    def _build_handler(self) -> None:
        """The mode's: set ``dispatcher``, ``handler`` and ``request_size_limits``."""
        raise NotImplementedError

    def _dispatcher(self, table: dict[int, Any]) -> Dispatcher:
        """The dispatcher over ``table``, with the node's quotas and request metrics."""
        return Dispatcher(
            table, clock=self.clock, quota=self.quotas, observer=self.request_metrics
        )

    async def _bind_listeners(self) -> None:
        try:
            for endpoint in self._listeners:
                bound = self._listener(endpoint).endpoint
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
            await self._close_listeners()
            raise StartupError(f"listeners: cannot bind: {exc}") from exc
        for acceptor in self._acceptors:
            self._accept(acceptor, f"acceptor-{acceptor.endpoint.listener_name}")
        await asyncio.sleep(0)  # let the acceptors start before readiness is asked
        assert self._apis is not None
        self._apis.set_advertised(self.advertised)

    async def _bind_mode_listeners(self) -> None:
        """The mode's listeners beyond ``listeners`` (none by default)."""

    def _listener(self, endpoint: EndPoint, node_id: int | None = None) -> Acceptor:
        """Bind ``endpoint`` (port 0: any free port) and make its acceptor, for every
        security protocol: TLS on SSL and SASL_SSL, connections made by
        :meth:`_new_connection` (``node_id``: the upstream node a gateway listener stands
        for).  Raises OSError when the address cannot be bound; accepting starts with
        :meth:`_accept`."""
        sock = bind_listener(endpoint)
        bound = endpoint.with_port(int(sock.getsockname()[1]))
        acceptor = Acceptor(
            bound,
            sock,
            protocol_factory=functools.partial(self._new_connection, bound, node_id),
            decide=self._quotas().on_accept,
            slot_freed=self._slot_freed,
            ssl_context=self._tls_context()
            if bound.security_protocol in _TLS_PROTOCOLS
            else None,
            clock=self.clock,
            memory=self.request_memory,
        )
        acceptor.on_failed_setup = self._setup_failed
        self._acceptors.append(acceptor)
        return acceptor

    def _accept(self, acceptor: Acceptor, name: str) -> None:
        """Start ``acceptor``'s accept loop (cancelled at shutdown)."""
        task = asyncio.get_running_loop().create_task(acceptor.run(), name=name)
        self._tasks.append(task)

    def _quotas(self) -> QuotaEnforcer:
        assert self.quotas is not None, "build_quotas runs before any listener is bound"
        return self.quotas

    def _tls_context(self) -> ssl.SSLContext:
        """The server TLS context every SSL and SASL_SSL listener of this node shares."""
        if self._tls is None:
            self._tls = self._ssl_context()
        return self._tls

    def _ssl_context(self) -> ssl.SSLContext:
        config = self.config
        try:
            return server_ssl_context(
                keystore_location=config.ssl_keystore_location,
                key_password=config.ssl_key_password,
                truststore_location=config.ssl_truststore_location,
                client_auth=config.ssl_client_auth,
                enabled_protocols=config.ssl_enabled_protocols.split(","),
            )
        except TlsError as exc:
            raise StartupError(str(exc)) from exc

    async def _start_http(self) -> None:
        self.health.add_readiness_check("listeners", self._listeners_ready)
        self.health.add_readiness_check("landing", self._landing_ready)
        if self.config.http_host_port is not None:
            if self.manager is not None and self._store is not None:
                from collector.app.admin_http import AdminEndpoints

                admin = AdminEndpoints(
                    self.manager,
                    self._store,
                    self.clock,
                    secret=self.config.http_admin_secret,
                    authorizer_configured=bool(self.config.authorizer_class_name),
                    inventory=self.inventory,
                )
                self.health.add_routes(admin.routes())
            if self.client_series is not None:
                from collector.app.clients_http import client_metrics_routes

                self.health.add_routes(client_metrics_routes(self.client_series))
            host, port = self.config.http_host_port
            await self.health.start(host, port)

    def _start_background(self) -> None:
        clock = self.clock
        store, manager, quotas = self._store, self.manager, self._quotas()
        assert manager is not None
        self._every(
            EXPIRY_TICK_MS, "instance-expiry", lambda: manager.expire(clock.now_ms())
        )
        # Kafka expires idle per-client and per-IP quota sensors; it checks every 30 s.
        self._every(
            QUOTA_SENSOR_EXPIRY_TICK_MS, "quota-sensors", quotas.expire_inactive_sensors
        )
        max_idle_ms = self.config.connections_max_idle_ms
        if max_idle_ms > 0:
            idle = self.idle_connections = IdleConnections(
                max_idle_ms, lambda: list(self._connections.items())
            )
            self._every(
                sweep_period_ms(max_idle_ms),
                "idle-connections",
                lambda: idle.sweep(clock.now_ms()),
            )
        watch = getattr(store, "watch", None)
        if watch is not None:
            self._tasks.append(
                asyncio.create_task(self._watch_store(watch), name="store-watch")
            )
        if self.credentials is not None:
            watcher = self._watch_credentials(self.credentials)
            self._tasks.append(asyncio.create_task(watcher, name="credentials-watch"))
        if self.acls is not None:
            self._tasks.append(
                asyncio.create_task(self._watch_acls(self.acls), name="acls-watch")
            )
        if self.jwks is not None:
            from collector.security.jwks import refresh_forever

            refresh = refresh_forever(
                self.jwks, clock, self.config.sasl_oauthbearer_jwks_endpoint_refresh_ms
            )
            self._tasks.append(asyncio.create_task(refresh, name="jwks-refresh"))
        if self.config.exporters_otlp is not None:
            self._start_forwarder(self.config.exporters_otlp)
        series = self.client_series
        if series is not None:
            self._every(CLIENT_SERIES_FOLD_TICK_MS, "client-series", series.fold_soon)

    async def _store_watch_started(self) -> None:
        """Return once the config store's directory is watched (or its watcher stopped):
        a change made after start() returns is seen without a SIGHUP."""
        watcher = next((t for t in self._tasks if t.get_name() == "store-watch"), None)
        if watcher is None:
            return
        watching = asyncio.ensure_future(self.store_watching.wait())
        try:
            await asyncio.wait({watching, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watching.cancel()

    async def _keep_cluster_subscriptions(self, admin: Any, refresh_ms: int) -> None:
        """With the subscriptions kept in a Kafka cluster (the store a
        ``ClusterSubscriptionStore``): read them once now, before the node is ready
        (bounded by ``admin``'s timeout; a cluster that cannot be read now is read later),
        then every ``refresh_ms`` until shutdown."""
        from collector.gateway.cluster_subscriptions import (
            SubscriptionRefresh,
            read_client_metrics,
        )

        refresh = self.subscription_refresh = SubscriptionRefresh(
            self._store,
            lambda: read_client_metrics(admin),
            clock=self.clock,
            refresh_ms=refresh_ms,
        )
        self.registry.register(ScrapeCollector(self._collect_subscription_reads))
        if not await refresh.refresh():
            admin.close()
            return

        async def keep() -> None:
            try:
                await refresh.run()
            finally:
                admin.close()

        self._tasks.append(asyncio.create_task(keep(), name="subscriptions-refresh"))

    def _collect_subscription_reads(self) -> Iterator[Metric]:
        refresh = self.subscription_refresh
        if refresh is None:
            return
        reads = CounterMetricFamily(
            "ktc_subscriptions_cluster_reads",
            "Reads of the Kafka cluster's client-metrics subscriptions, by result.",
            labels=["result"],
        )
        reads.add_metric(["ok"], refresh.reads)
        reads.add_metric(["failed"], refresh.failures)
        yield reads
        yield GaugeMetricFamily(
            "ktc_subscriptions_in_cluster",
            "1 while the subscriptions are the Kafka cluster's, 0 when the local store's "
            "(the cluster does not serve CLIENT_METRICS configs).",
            value=1 if refresh.store.in_cluster else 0,
        )
        if refresh.last_read_ms is not None:
            yield GaugeMetricFamily(
                "ktc_subscriptions_cluster_read_age_seconds",
                "Seconds since the cluster's subscriptions were last read.",
                value=(self.clock.now_ms() - refresh.last_read_ms) / 1000,
            )

    def _every(self, period_ms: int, name: str, work: Callable[[], object]) -> None:
        """Run ``work`` every ``period_ms`` on the clock, until shutdown."""

        async def loop() -> None:
            while True:
                await self.clock.sleep(period_ms)
                work()

        self._tasks.append(asyncio.create_task(loop(), name=name))

    def _start_forwarder(self, otlp: dict[str, Any]) -> None:
        from exporters.otlp import OtlpExporterConfig, OtlpForwarder

        source: Any = self.landing_directory
        if (
            self.config.landing_kafka_topic is not None
        ):  # the forwarder follows the pushes
            from collector.app.landing_topic import topic_settings
            from exporters.kafka_topic import TopicSource

            settings = topic_settings(self.config)
            source = TopicSource(settings, settings.forwarder_group)
        self._forwarder = OtlpForwarder(
            [source],
            OtlpExporterConfig.model_validate(otlp),
            clock=self.clock,
            registry=self.registry,
        )
        self._tasks.append(
            asyncio.create_task(
                self._forwarder.run(self._forwarder_stop), name="otlp-forwarder"
            )
        )

    # ------------------------------------------------------------------ quota configuration
    def apply_store_quotas(self) -> None:
        """Make the running quota engine's entity quotas the store's (the one place quota
        configuration reaches it: start, AlterClientQuotas, a file change, SIGHUP)."""
        if self.quotas is not None and self._store is not None:
            self.quotas.apply_entity_quotas(self._store.snapshot().quotas)

    # ------------------------------------------------------------------ connections
    def new_connection(self, endpoint: EndPoint) -> KafkaProtocol:
        """A connection on listener ``endpoint``, as the acceptor makes one (tests and the
        profiler feed one bytes in process)."""
        return self._new_connection(endpoint)

    def _new_connection(
        self, endpoint: EndPoint, node_id: int | None = None
    ) -> KafkaProtocol:
        # Every acceptor's protocol factory; the mode says what handles its requests.
        self._next_connection_id += 1
        connection_id = self._next_connection_id
        handler = self._connection_handler(connection_id, endpoint, node_id)
        if self.inventory is not None:
            handler = self.inventory.observing(handler or self.handler)
        return KafkaProtocol(
            self,
            connection_id,
            endpoint.listener_name,
            endpoint.security_protocol,
            handler,
            size_limits=self.request_size_limits,
            memory=self.request_memory,
            ssl_principal_mapper=self.config.ssl_principal_mapper(
                endpoint.listener_name
            )
            if endpoint.security_protocol == "SSL"
            else None,
        )

    def _connection_handler(
        self, connection_id: int, endpoint: EndPoint, node_id: int | None
    ) -> RequestHandler | None:
        """The mode's: the handler of one new connection (None: the node's ``handler``)."""
        raise NotImplementedError

    def _sasl_gate(self, endpoint: EndPoint, inner: RequestHandler) -> RequestHandler:
        """``inner`` behind a SASL authenticator with the listener's mechanisms: nothing
        but ApiVersions and the SASL exchange reaches ``inner`` before it succeeds."""
        from collector.net.sasl_gate import SaslGate
        from collector.security.sasl.authenticator import SaslAuthenticator

        config = self.config
        authenticator = SaslAuthenticator(
            config.sasl_mechanisms(endpoint.listener_name),
            self._sasl_credentials(),
            max_reauth_ms=config.connections_max_reauth_ms,
            token_validator=self._token_validator,
            wall_ms=self._wall_ms,
        )
        return SaslGate(
            inner,
            authenticator,
            clock=self.clock,
            failed_delay_ms=config.connection_failed_authentication_delay_ms,
            on_failure=self._authentication_failed,
            on_reauthenticated=self._reauthenticated,
        ).handler()

    async def _open_oauthbearer(self) -> None:
        """OAUTHBEARER's keys, read once before the listeners open (in a worker thread:
        an http(s) JWKS is a network fetch); a set that cannot be read fails the start."""
        config = self.config
        if (
            not config.oauthbearer_enabled()
            or config.sasl_oauthbearer_jwks_endpoint_url is None
        ):
            return
        from collector.security.jwks import JwksError, JwksSource
        from collector.security.jwt_validator import JwtValidator

        source = JwksSource(config.sasl_oauthbearer_jwks_endpoint_url)
        try:
            await asyncio.to_thread(source.load)
        except JwksError as exc:
            raise StartupError(f"sasl.oauthbearer.jwks.endpoint.url: {exc}") from exc
        self.jwks = source
        self._token_validator = JwtValidator(
            source,
            self._wall_ms,
            expected_issuer=config.sasl_oauthbearer_expected_issuer,
            expected_audiences=config.oauthbearer_audiences(),
            sub_claim_name=config.sasl_oauthbearer_sub_claim_name,
            scope_claim_name=config.sasl_oauthbearer_scope_claim_name,
            clock_skew_seconds=config.sasl_oauthbearer_clock_skew_seconds,
        )

    def _wall_ms(self) -> int:
        return self.clock.time_ns() // 1_000_000

    def _sasl_credentials(self) -> Any:
        """What SASL checks passwords against: the node's durable credential store
        (``credentials``, opened before the listeners), else an empty one (nobody gets in)."""
        credentials = getattr(self, "credentials", None)
        if credentials is None:
            from collector.security.credentials import CredentialStore

            credentials = CredentialStore()
        return credentials

    def _authentication_failed(self, session: Any) -> None:
        self.failed_authentications += 1

    def _reauthenticated(self, session: Any) -> None:
        self.reauthentications += 1

    def connection_opened(self, protocol: KafkaProtocol) -> bool:
        # The acceptor already counted this connection in the connection quotas.
        self._connections[protocol.session.connection_id] = protocol
        self._all_closed.clear()
        self.request_metrics.connection_opened(protocol.session.listener_name)
        return not self._stopping

    def _setup_failed(self, listener: str, ip: str) -> None:
        if self.quotas is not None:
            self.quotas.on_close(listener, ip)
        self._slot_freed.set()

    def connection_closed(self, protocol: KafkaProtocol) -> None:
        session = protocol.session
        if self._connections.pop(session.connection_id, None) is None:
            return
        if self.quotas is not None:
            self.quotas.on_close(session.listener_name, session.peer_ip)
        self._slot_freed.set()  # an acceptor waiting for a slot may retry
        if not self._connections:
            self._all_closed.set()
        self.request_metrics.connection_closed(session.listener_name)
        if self.inventory is not None:
            self.inventory.closed(session.connection_id)
        if self.manager is not None:
            self.manager.connection_closed(session.connection_id)

    def protocol_error(self, protocol: KafkaProtocol) -> None:
        self.request_metrics.connections_closed_on_error += 1

    def _collect_connection_limits(self) -> Iterator[Metric]:
        memory = self.request_memory
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
            value=self.idle_connections.closed
            if self.idle_connections is not None
            else 0,
        )
        # Kafka's failed-authentication-total (every SASL exchange refused or broken off).
        yield CounterMetricFamily(
            "ktc_failed_authentication",
            "SASL authentications that failed (the connection was closed)",
            value=self.failed_authentications,
        )
        # Kafka's successful-reauthentication-total (KIP-368, connections.max.reauth.ms).
        yield CounterMetricFamily(
            "ktc_reauthentications",
            "SASL re-authentications that succeeded on a live connection (KIP-368)",
            value=self.reauthentications,
        )

    def _pending_sync(self) -> asyncio.Future[None] | None:
        """The group-commit fsync still owed for what is written, or None."""
        log = self._landing
        if log is None or log.durable_offset >= log.next_offset:
            return None
        if self._sync_executor is None:
            import concurrent.futures

            self._sync_executor = concurrent.futures.ThreadPoolExecutor(
                1, "landing-sync"
            )
        return asyncio.get_running_loop().run_in_executor(self._sync_executor, log.sync)

    # ------------------------------------------------------------------ readiness
    def _listeners_ready(self) -> str | None:
        if not self._acceptors or not all(a.serving for a in self._acceptors):
            return "listeners not accepting"
        return None

    def _landing_ready(self) -> str | None:
        if self._owns_exporter and self._landing is not None:
            directory = self.landing_directory
            if not directory.is_dir():
                return f"{directory} missing"
            if not os.access(directory, os.W_OK):
                return f"{directory} not writable"
        if self._landing_health is not None:  # a full or failing disk
            return self._landing_health.not_ready_reason()  # type: ignore[no-any-return]
        return None

    # ------------------------------------------------------------------ background
    async def _watch_store(self, watch: Callable[..., Any]) -> None:
        store = self._store

        def changed(*_: Any) -> None:
            log.info("config store changed (version %s)", store.snapshot().version)
            self.apply_store_quotas()

        try:
            await watch(changed, ready=self.store_watching)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("subscription store watcher stopped; SIGHUP still reloads")

    async def _watch_acls(self, acls: DurableAclStore) -> None:
        try:
            await acls.watch()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("ACL watcher stopped; SIGHUP still reloads")

    async def _watch_credentials(self, credentials: DurableCredentialStore) -> None:
        try:
            await credentials.watch()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("credentials watcher stopped; SIGHUP still reloads")

    def reload(self) -> None:
        """SIGHUP: re-read the subscription store and the credentials (last good set
        stays on error)."""
        if self.credentials is not None:
            self.credentials.reload()
        if self.acls is not None:
            self.acls.reload()
        store = self._store
        if store is None:
            return
        try:
            store.reload()
            log.info("config store reloaded (version %s)", store.snapshot().version)
            self.apply_store_quotas()
        except Exception as exc:
            log.error("reload failed, keeping the last good subscriptions: %s", exc)

    # ------------------------------------------------------------------ lifecycle
    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._signalled, sig)
        loop.add_signal_handler(signal.SIGHUP, self.reload)

    def _signalled(self, sig: signal.Signals) -> None:
        log.info("received %s, shutting down", sig.name)
        asyncio.get_running_loop().create_task(self.stop())

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def stop(self) -> None:
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        try:
            await asyncio.wait_for(
                self._shutdown(), self.config.shutdown_timeout_seconds
            )
        except TimeoutError:
            log.error(
                "shutdown did not finish in %.0f s",
                self.config.shutdown_timeout_seconds,
            )
        finally:
            self._stopped.set()

    async def _shutdown(self) -> None:
        self.health.begin_shutdown()  # readiness off before anything closes
        await self._close_listeners()
        for protocol in list(self._connections.values()):
            protocol.close_when_idle()
        if self._connections:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_closed.wait(), CONNECTIONS_DRAIN_S)
        for task in self._tasks:
            if task.get_name() != "otlp-forwarder":
                task.cancel()
        exporter = self._exporter
        if exporter is not None and self._owns_exporter:
            flush = getattr(exporter, "flush", None)
            sync = getattr(exporter, "sync", None)
            with contextlib.suppress(Exception):
                if flush:
                    flush()
                if sync:
                    sync()
            exporter.close()
        if self._forwarder is not None:
            self._forwarder_stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._forwarder is not None:
            self._forwarder.close()
        if self._sync_executor is not None:
            self._sync_executor.shutdown(wait=True)
        if self.client_series is not None:
            self.client_series.close()
        if self.quotas is not None:
            self.quotas.close()
        await self.health.stop()
        log.info("collector stopped")

    async def _close_listeners(self) -> None:
        for task in self._tasks:
            if task.get_name().startswith("acceptor-"):
                task.cancel()
        for acceptor in self._acceptors:
            acceptor.close()


def install_uvloop() -> bool:
    """Use uvloop's event loop policy when it is installed (faster I/O callbacks)."""
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True
