"""One collector node: what ``ktc serve`` and ``ktc gateway`` both are.

:class:`Node` is a composition root: it makes the node's parts (``collector.app.parts``,
one job each: connections, listeners, authentication, landing, config watchers, tasks)
and the objects every node has (the config store, the ClientMetricsManager, the quota
engine, the authorizer, the API tables, the HTTP endpoints), and :meth:`Node.start` starts
them in order, as plain calls.  What differs between serve and gateway is the node's
:class:`Mode`, an object given to it (``collector.app.modes.serve.ServeMode``,
``collector.app.modes.gateway.GatewayMode``): where its subscriptions are kept, what
answers a connection's requests, the listeners beyond ``listeners``, and what a
connection's opening and closing mean to it.  The mode sees the node's services through
one typed value the node makes, :class:`~collector.app.modes.services.ModeServices`,
never the node itself.

Only once ``start`` returns is ``/readyz`` green.  Shutdown (SIGTERM/SIGINT, or
:meth:`Node.stop`) is the ``lifecycle`` part's (``parts/lifecycle.py``); SIGHUP reloads
the config store, the ACLs and the credentials.

Quota configuration reaches the running engine in one place, :meth:`Node.apply_store_quotas`:
at start, after an AlterClientQuotas, when the store's files change, on SIGHUP.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from prometheus_client import CollectorRegistry

from clock import SYSTEM_CLOCK, Clock
from collector.app.client_inventory import ClientInventory
from collector.app.config import CollectorConfig
from collector.app.http import HealthEndpoints
from collector.app.modes.services import Handling, Mode, ModeServices, Store
from collector.app.parts.access import open_authorizer
from collector.app.parts.authentication import Authentication
from collector.app.parts.cluster_subscriptions import ClusterSubscriptionReads
from collector.app.parts.connections import Connections
from collector.app.parts.data_dir import (
    StateLocations,
    open_data_dir,
    record_state_locations,
)
from collector.app.parts.endpoints import start_http
from collector.app.parts.errors import StartupError
from collector.app.parts.landing import Landing
from collector.app.parts.lifecycle import Lifecycle
from collector.app.parts.listeners import Listeners
from collector.app.parts.node_metrics import ConnectionLimitSeries
from collector.app.parts.periodic import start_periodic
from collector.app.parts.quota_engine import build_quota_enforcer, quota_settings
from collector.app.parts.tasks import BackgroundTasks
from collector.app.parts.telemetry import build_manager
from collector.app.parts.watchers import ConfigWatchers
from collector.broker.admin_apis import AdminApis
from collector.broker.kafka_apis import KafkaApis, api_name
from collector.core.scrape import ScrapeCollector
from collector.gateway.cluster_subscriptions import SubscriptionRefresh
from collector.net.idle import IdleConnections
from collector.net.listeners import EndPoint
from collector.net.protocol import KafkaProtocol
from collector.pipeline.dispatch import Dispatcher
from collector.pipeline.quota_enforcer import QuotaEnforcer
from collector.pipeline.request_metrics import RequestMetrics
from collector.security.acls_file import DurableAclStore
from collector.security.authorizer import StandardAuthorizer
from collector.security.credentials_file import DurableCredentialStore
from collector.telemetry.client_metrics import ClientMetricsManager
from collector.telemetry.prometheus.client_series import ClientSeries
from collector.telemetry.stats import ClientMetricsStats
from exporters.base import Exporter
from subscriptions.store import ConfigStore

__all__ = [
    "Handling",
    "Mode",
    "Node",
    "NodeInMode",
    "StartupError",
    "Store",
    "install_uvloop",
    "quota_settings",
]

log = logging.getLogger(__name__)


class Node:
    """One collector node in ``mode``.  ``await start()``, then ``await wait_stopped()``
    or ``stop()``."""

    def __init__(
        self,
        config: CollectorConfig,
        mode: Mode,
        *,
        exporter: Exporter | None = None,
        store: ConfigStore | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.config = config
        self.mode = mode
        self.clock = clock
        self._given_store = store
        # One registry per node (several nodes in one process never share series): the
        # manager's client-metrics series first, then requests and connections.
        self.registry = CollectorRegistry(auto_describe=True)
        self.client_metrics_stats = ClientMetricsStats(
            self.registry, instance_labels=config.telemetry_metrics_instance_labels
        )
        self.request_metrics = RequestMetrics(self.registry, api_names=api_name)
        self.health = HealthEndpoints(self.registry, clock=clock)
        # The inventory of every connection (clients.inventory.enable): each connection's
        # handler is wrapped to record its requests' headers (client_inventory.py).
        self.inventory: ClientInventory | None = None
        if config.clients_inventory_enable:
            self.inventory = ClientInventory(config.clients_inventory_max_series)
        # The parts.
        self.tasks = BackgroundTasks(clock)
        self.open_connections = Connections(
            config, mode, self.request_metrics, self.inventory
        )
        self.listeners = Listeners(config, clock, self.open_connections, self.tasks)
        self.authentication = Authentication(config, clock)
        self.landing = Landing(config, clock, self.registry, exporter)
        self.watchers = ConfigWatchers(self.tasks)
        self.lifecycle = Lifecycle(
            config,
            self.health,
            self.listeners,
            self.open_connections,
            self.tasks,
            self.landing,
        )
        self._limits = ConnectionLimitSeries(
            self.open_connections.request_memory, self.authentication
        )
        self.registry.register(ScrapeCollector(self._limits.collect))
        if self.inventory is not None:
            self.registry.register(ScrapeCollector(self.inventory.collect))
        # What start() builds, in its order.
        self.cluster_id = ""
        self._store: Store | None = None
        self.manager: ClientMetricsManager | None = None
        self.client_series: ClientSeries | None = None  # /metrics/clients
        self.quotas: QuotaEnforcer | None = None
        self.acls: DurableAclStore | None = None
        self.authorizer: StandardAuthorizer | None = None
        self.apis: KafkaApis | None = None
        # The admin APIs (client-metrics configs, client quotas), with the node's
        # authorizer: both modes answer them from this one object.
        self.admin_apis: AdminApis | None = None
        self.dispatcher: Dispatcher | None = None
        self.idle_connections: IdleConnections | None = None
        # Set once the config store's directory is watched (a change after it is seen).
        self.store_watching = asyncio.Event()
        # When the mode's settings keep the subscriptions in a Kafka cluster: the store
        # over the local one, and what reads the cluster's client-metrics configs into it.
        self.cluster_subscriptions: ClusterSubscriptionReads | None = None

    # ------------------------------------------------------------------ start
    async def start(self) -> None:
        """Start the node's parts, in this order (each line one step)."""
        config = self.config
        self.listeners.plan()  # parsed, nothing bound yet
        self.cluster_id = open_data_dir(config)
        self._store = self._open_store()
        self.authentication.open_credentials()
        await self.authentication.open_oauthbearer()
        self.landing.open()
        self.open_connections.durability = self.landing.durability
        self.manager = self._build_manager()
        self.quotas = self._build_quotas()
        self.authorizer = self._open_authorizer()
        self.apis, self.admin_apis = self._build_apis()
        self._use(self.mode.build_handling(self._mode_services()))
        self.record_state_locations()
        await self.listeners.bind()
        self.apis.set_advertised(self.listeners.advertised)
        await self.mode.bind_listeners()
        await self._read_cluster_subscriptions()
        self.record_state_locations()  # the subscriptions may have fallen back to local
        self.health.add_readiness_check("listeners", self.listeners.not_ready_reason)
        self.health.add_readiness_check("landing", self.landing.not_ready_reason)
        await start_http(
            self.health,
            config,
            self.manager,
            self.store,
            self.clock,
            inventory=self.inventory,
            client_series=self.client_series,
        )
        self._start_background()
        await self.watchers.watching()
        log.info(
            "%s node %d of cluster %s started (data dir %s)",
            self.mode.name,
            config.node_id,
            self.cluster_id,
            config.data_dir,
        )

    def _open_store(self) -> Store:
        """The local config store; when the mode's settings keep the subscriptions in a
        Kafka cluster, the cluster's subscriptions over it (read from
        :meth:`_read_cluster_subscriptions` on)."""
        local = self._open_local_store()
        kept = self.mode.kept_subscriptions()
        if kept is None:
            return local
        self.cluster_subscriptions = ClusterSubscriptionReads(
            local,
            kept,
            clock=self.clock,
            registry=self.registry,
            tasks=self.tasks,
            # Where the subscriptions live changes with a switch to or back from the
            # local store: recorded for the ktc commands (parts/data_dir.py).
            on_change=self.record_state_locations,
        )
        return self.cluster_subscriptions.store

    def _open_local_store(self) -> ConfigStore:
        if self._given_store is not None:
            return self._given_store
        try:
            return ConfigStore(self.config.data_dir)
        except Exception as exc:
            raise StartupError(f"subscription store: {exc}") from exc

    def _build_manager(self) -> ClientMetricsManager:
        assert self.landing.exporter is not None
        manager, self.client_series = build_manager(
            self.config,
            self.store,
            self.landing.exporter,
            cluster_id=self.cluster_id,
            stats=self.client_metrics_stats,
            registry=self.registry,
            clock=self.clock,
        )
        self.open_connections.manager = manager
        if self.client_series is not None:
            self.lifecycle.at_stop(self.client_series.close)
        return manager

    def _build_quotas(self) -> QuotaEnforcer:
        quotas = build_quota_enforcer(self.config, self.clock)
        self.quotas = self.open_connections.quotas = quotas
        self.apply_store_quotas()
        self.registry.register(ScrapeCollector(quotas.collect))
        self.lifecycle.at_stop(quotas.close)
        self.request_metrics.connections_rejected = self.listeners.rejected
        return quotas

    def _open_authorizer(self) -> StandardAuthorizer | None:
        opened = open_authorizer(self.config)
        if opened is None:
            return None
        self.acls, authorizer = opened
        return authorizer

    def _build_apis(self) -> tuple[KafkaApis, AdminApis]:
        """The APIs both modes answer themselves: telemetry (KafkaApis) and the admin APIs
        over the store, authorized by the node's one authorizer."""
        assert self.manager is not None
        apis = KafkaApis(
            manager=self.manager,
            node_id=self.config.node_id,
            cluster_id=self.cluster_id,
            advertised={},
        )
        apis.set_authorizer(self.authorizer)
        admin = AdminApis(
            self.store, self.apply_store_quotas, self.quotas, self.authorizer
        )
        return apis, admin

    def _mode_services(self) -> ModeServices:
        """What the mode builds its handling on (and uses until shutdown)."""
        assert self.apis is not None and self.admin_apis is not None
        assert self.quotas is not None
        return ModeServices(
            clock=self.clock,
            registry=self.registry,
            listeners=self.listeners,
            gate=self.authentication.gate,
            apis=self.apis,
            admin_apis=self.admin_apis,
            authorizer=self.authorizer,
            credentials=self.authentication.open_credentials(),
            quotas=self.quotas,
            request_metrics=self.request_metrics,
            cluster_subscriptions=self.cluster_subscriptions,
        )

    def _use(self, handling: Handling) -> None:
        self.dispatcher = handling.dispatcher
        self.open_connections.handler = handling.handler
        self.open_connections.request_size_limits = handling.request_size_limits

    def _start_background(self) -> None:
        """The periodic work, the config watchers, the JWKS refresh, the OTLP forwarder."""
        assert self.manager is not None and self.quotas is not None
        self.idle_connections = self._limits.idle = start_periodic(
            self.config,
            self.clock,
            self.tasks,
            self.manager,
            self.quotas,
            self.open_connections,
            self.client_series,
        )
        self.watchers.watch_node_stores(
            self.store,
            self.credentials,
            self.acls,
            on_store_change=self._store_changed,
            store_ready=self.store_watching,
        )
        self.authentication.keep_keys_fresh(self.tasks)
        self.landing.start_forwarder(self.tasks)

    async def _read_cluster_subscriptions(self) -> None:
        """With the subscriptions kept in a Kafka cluster: read them now with the mode's
        admin client, then every refresh (once the mode's listeners are bound: the
        gateway's client depends on what the upstream said of its authentication). Until
        a read works the node is not ready and answers no subscription."""
        if self.cluster_subscriptions is not None:
            assert self.apis is not None
            admin = self.mode.subscriptions_admin()
            await self.cluster_subscriptions.start(admin, self.health, self.apis)

    def record_state_locations(self) -> None:
        """Record in the data directory where the node keeps each kind of state, when
        that changed (``parts/data_dir.py``: what ``ktc subscriptions|quotas|users|acls
        --data-dir`` read to refuse a change the node would never see)."""
        reads = self.cluster_subscriptions
        clusters = {} if reads is None else reads.state_clusters()
        clusters.update(self.mode.state_clusters())
        locations = StateLocations(self.mode.name, clusters)
        if record_state_locations(self.config.data_dir, locations):
            log.info(
                "state kept in a Kafka cluster: %s",
                ", ".join(f"{k} ({v})" for k, v in locations.clusters.items())
                or "none (every state in the data directory)",
            )

    # ------------------------------------------------------------------ the parts, read
    @property
    def store(self) -> Store:
        assert self._store is not None, "the store is opened first in start()"
        return self._store

    @property
    def subscription_refresh(self) -> SubscriptionRefresh | None:
        """What reads the cluster's subscriptions, once reading (None with the local
        store, and before)."""
        reads = self.cluster_subscriptions
        return None if reads is None else reads.refresh

    @property
    def credentials(self) -> DurableCredentialStore | None:
        return self.authentication.credentials

    @property
    def bound(self) -> dict[str, EndPoint]:
        return self.listeners.bound

    @property
    def landing_directory(self) -> Path:
        return self.landing.directory

    @property
    def http_port(self) -> int | None:
        return self.health.port

    def port(self, listener_name: str | None = None) -> int:
        """The bound port of a listener (the first one by default)."""
        if listener_name is None:
            return next(iter(self.bound.values())).port
        return self.bound[listener_name.upper()].port

    def connections(self) -> list[KafkaProtocol]:
        """The open Kafka connections, oldest first (each with its ``session``)."""
        return self.open_connections.listed()

    # ------------------------------------------------------------------ configuration
    def apply_store_quotas(self) -> None:
        """Make the running quota engine's entity quotas the store's (the one place quota
        configuration reaches it: start, AlterClientQuotas, a file change, SIGHUP)."""
        if self.quotas is not None and self._store is not None:
            self.quotas.apply_entity_quotas(self._store.snapshot().quotas)

    def _store_changed(self) -> None:
        log.info("config store at version %s", self.store.snapshot().version)
        self.apply_store_quotas()

    def reload(self) -> None:
        """SIGHUP: re-read the config store, the credentials and the ACLs (the last good
        content stays in force on error)."""
        self.watchers.reload()

    # ------------------------------------------------------------------ lifecycle
    def install_signal_handlers(self) -> None:
        self.lifecycle.install_signal_handlers(self.reload)

    async def wait_stopped(self) -> None:
        await self.lifecycle.stopped.wait()

    async def stop(self) -> None:
        await self.lifecycle.stop()


class NodeInMode(Node):
    """A :class:`Node` in its class's ``mode_class``, built from ``config``: the servers
    of ``ktc serve`` and ``ktc gateway`` (collector/app/server.py, gateway_server.py)."""

    @staticmethod
    def mode_class(config: CollectorConfig) -> Mode:
        """The mode of this class's nodes, for ``config``."""
        raise NotImplementedError

    def __init__(
        self,
        config: CollectorConfig,
        *,
        exporter: Exporter | None = None,
        store: ConfigStore | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(
            config, self.mode_class(config), exporter=exporter, store=store, clock=clock
        )


def install_uvloop() -> bool:
    """Use uvloop's event loop policy when it is installed (faster I/O callbacks)."""
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True
