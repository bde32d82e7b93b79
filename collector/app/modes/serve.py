"""``ktc serve``'s mode: the node as a standalone broker for client telemetry.

:class:`ServeMode` is what makes a node serve: its handling is the dispatcher over every
API the node answers itself (telemetry, ApiVersions, Metadata, the admin APIs, ACLs, SCRAM
credentials: ``ModeServices.local_apis``), behind a SASL gate on SASL listeners.  Start,
listeners and shutdown are the node's (collector/app/node.py).

With ``subscriptions.store: kafka`` the subscriptions are a Kafka cluster's client-metrics
configs (``subscriptions.kafka.*``), read during start and every ``refresh.ms``, so a fleet
of serve nodes shares one set; they are altered at the cluster.
"""

from __future__ import annotations

import ssl

from collector.app.config import CollectorConfig
from collector.app.modes.services import Handling, ModeServices
from collector.app.parts.cluster_subscriptions import KeptSubscriptions
from collector.app.parts.errors import StartupError
from collector.core.handler import RequestHandler
from collector.gateway.cluster_admin import ClusterAdmin
from collector.net.listeners import EndPoint
from collector.net.protocol import KafkaProtocol
from proto.request_limits import (
    REQUEST_HEADER_MAX_BYTES,
    RequestSizeLimits,
    request_size_limits,
)

__all__ = ["ServeMode", "kafka_store_admin"]

# Listeners whose connections authenticate with SASL before anything else is answered.
_SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


class ServeMode:
    """``ktc serve``: every request answered by the node's own dispatcher."""

    name = "collector"

    def __init__(self, config: CollectorConfig) -> None:
        self._config = config
        self._services: ModeServices | None = None
        self._handler: RequestHandler | None = None

    def kept_subscriptions(self) -> KeptSubscriptions | None:
        """With ``subscriptions.store: kafka``, the cluster of ``subscriptions.kafka.*``."""
        config = self._config
        if config.subscriptions_store != "kafka":
            return None
        return KeptSubscriptions(
            config.subscriptions_kafka.bootstrap_servers or "",
            config.subscriptions_kafka_refresh_ms,
            config.subscriptions_kafka_stale_after_ms,
        )

    def build_handling(self, services: ModeServices) -> Handling:
        self._services = services
        config = self._config
        dispatcher = services.dispatcher_over(services.local_apis())
        services.apis.set_served_apis(dispatcher.api_keys)
        self._handler = dispatcher
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

    async def bind_listeners(self) -> None:
        """No listeners of its own."""

    def subscriptions_admin(self) -> ClusterAdmin:
        return kafka_store_admin(self._config)

    def connection_handler(
        self, connection_id: int, endpoint: EndPoint, node_id: int | None
    ) -> RequestHandler | None:
        """A SASL listener's connection gets its own handler: its authenticator in front
        of the dispatcher (None elsewhere: the dispatcher itself)."""
        if endpoint.security_protocol not in _SASL_PROTOCOLS:
            return None
        assert self._services is not None and self._handler is not None
        return self._services.gate(endpoint, self._handler)

    def connection_opened(self, protocol: KafkaProtocol) -> bool:
        return True

    def connection_closed(self, protocol: KafkaProtocol) -> None:
        return None

    def ready_file(self) -> dict[str, object]:
        return {}

    def state_clusters(self) -> dict[str, str]:
        """None besides the kept subscriptions: the client quotas, SCRAM users and ACLs
        are always the data directory's."""
        return {}


def kafka_store_admin(config: CollectorConfig) -> ClusterAdmin:
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
