"""``ktc serve``: the node as a standalone broker for client telemetry.

:class:`ServeMode` is what makes a :class:`~collector.app.node.Node` serve: its handling is
the dispatcher over every API the node answers itself (telemetry, ApiVersions, Metadata,
the admin APIs, ACLs, SCRAM credentials), behind a SASL gate on SASL listeners.  Start,
listeners and shutdown are the node's (collector/app/node.py).

With ``subscriptions.store: kafka`` the subscriptions are a Kafka cluster's client-metrics
configs (``subscriptions.kafka.*``), read during start and every ``refresh.ms``, so a fleet
of serve nodes shares one set; they are altered at the cluster.
"""

from __future__ import annotations

import ssl

from clock import SYSTEM_CLOCK, Clock
from collector.app.config import CollectorConfig
from collector.app.node import (
    Handling,
    Node,
    StartupError,
    Store,
    install_uvloop,
    quota_settings,
)
from collector.broker.acl_apis import AclApis
from collector.broker.scram_apis import ScramCredentialApis
from collector.core.handler import RequestHandler
from collector.gateway.cluster_admin import ClusterAdmin
from collector.net.listeners import EndPoint
from collector.net.protocol import KafkaProtocol
from exporters.base import Exporter
from proto.request_limits import (
    REQUEST_HEADER_MAX_BYTES,
    RequestSizeLimits,
    request_size_limits,
)
from subscriptions.cluster_store import ClusterSubscriptionStore
from subscriptions.store import ConfigStore

__all__ = [
    "CollectorServer",
    "ServeMode",
    "StartupError",
    "install_uvloop",
    "quota_settings",
]

# Listeners whose connections authenticate with SASL before anything else is answered.
_SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


class ServeMode:
    """``ktc serve``: every request answered by the node's own dispatcher."""

    name = "collector"

    def __init__(self, config: CollectorConfig) -> None:
        self._config = config
        self._node: Node | None = None

    def open_store(self, node: Node, local: ConfigStore) -> Store:
        """The local store; with ``subscriptions.store: kafka``, wrapped in the store whose
        subscriptions are the cluster's (read in :meth:`bind_listeners`)."""
        if self._config.subscriptions_store != "kafka":
            return local
        servers = self._config.subscriptions_kafka.bootstrap_servers
        return ClusterSubscriptionStore(local, servers or "")

    def build_handling(self, node: Node) -> Handling:
        assert node.apis is not None and node.admin_apis is not None
        self._node = node
        config = self._config
        table = node.apis.table()
        table.update(node.admin_apis.table())
        table.update(AclApis(node.authorizer).table())
        credentials = node.authentication.open_credentials()
        table.update(ScramCredentialApis(credentials, node.authorizer).table())
        dispatcher = node.dispatcher_over(table)
        node.apis.set_served_apis(dispatcher.api_keys)
        # An API this node does not serve closes the connection once its header is read:
        # its body is never needed.
        limits = RequestSizeLimits(
            request_size_limits(
                dispatcher.api_keys,
                telemetry_max_bytes=config.telemetry_max_bytes,
                max_request_size=config.socket_request_max_bytes,
            ),
            other=min(REQUEST_HEADER_MAX_BYTES, config.socket_request_max_bytes),
        )
        return Handling(dispatcher, dispatcher, limits)

    async def bind_listeners(self, node: Node) -> None:
        """No listeners of its own; the cluster's subscriptions are read here, once the
        node's listeners are bound and before it is ready."""
        if isinstance(node.store, ClusterSubscriptionStore):
            await node.keep_cluster_subscriptions(
                _kafka_store_admin(self._config),
                self._config.subscriptions_kafka_refresh_ms,
                self._config.subscriptions_kafka_stale_after_ms,
            )

    def connection_handler(
        self, connection_id: int, endpoint: EndPoint, node_id: int | None
    ) -> RequestHandler | None:
        """A SASL listener's connection gets its own handler: its authenticator in front
        of the dispatcher (None elsewhere: the dispatcher itself)."""
        if endpoint.security_protocol not in _SASL_PROTOCOLS:
            return None
        assert self._node is not None
        return self._node.authentication.gate(
            endpoint, self._node.open_connections.handler
        )

    def connection_opened(self, protocol: KafkaProtocol) -> bool:
        return True

    def connection_closed(self, protocol: KafkaProtocol) -> None:
        return None

    def ready_file(self) -> dict[str, object]:
        return {}

    def state_clusters(self, node: Node) -> dict[str, str]:
        """The subscriptions, with ``subscriptions.store: kafka`` while the cluster serves
        them; the client quotas, SCRAM users and ACLs are always the data directory's."""
        store = node.store
        if isinstance(store, ClusterSubscriptionStore) and store.in_cluster:
            return {"subscriptions": store.cluster}
        return {}


class CollectorServer(Node):
    """A node in :class:`ServeMode` (what ``ktc serve`` runs)."""

    def __init__(
        self,
        config: CollectorConfig,
        *,
        exporter: Exporter | None = None,
        store: ConfigStore | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(
            config, ServeMode(config), exporter=exporter, store=store, clock=clock
        )


def _kafka_store_admin(config: CollectorConfig) -> ClusterAdmin:
    """The admin connection to the subscriptions' cluster (``subscriptions.kafka.*``)."""
    cluster = config.subscriptions_kafka.settings()
    try:
        context = cluster.ssl_context()
    except (OSError, ssl.SSLError) as exc:
        raise StartupError(f"subscriptions.kafka.ssl: {exc}") from exc
    try:
        servers = cluster.bootstrap()
    except ValueError as exc:
        raise StartupError(f"subscriptions.kafka.bootstrap.servers: {exc}") from exc
    return ClusterAdmin(servers, ssl_context=context, login=cluster.login)
