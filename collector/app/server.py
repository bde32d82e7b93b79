"""``ktc serve``: the node as a standalone broker for client telemetry.

The serve mode of :class:`~collector.app.node.Node` adds one thing to the node: its handler,
the dispatcher over every API this node answers itself (telemetry, ApiVersions, Metadata,
the admin APIs, ACLs, SCRAM credentials), behind a SASL gate on SASL listeners.  Start
steps, listeners and shutdown are the node's (collector/app/node.py).

With ``subscriptions.store: kafka`` the subscriptions are a Kafka cluster's client-metrics
configs (``subscriptions.kafka.*``), read during start and every ``refresh.ms``, so a fleet
of serve nodes shares one set; they are altered at the cluster.
"""

from __future__ import annotations

from typing import Any

from collector.app.node import Node, StartupError, install_uvloop, quota_settings
from collector.core.handler import RequestHandler
from collector.net.listeners import EndPoint
from proto.request_limits import (
    REQUEST_HEADER_MAX_BYTES,
    RequestSizeLimits,
    request_size_limits,
)

__all__ = ["CollectorServer", "StartupError", "install_uvloop", "quota_settings"]

# Listeners whose connections authenticate with SASL before anything else is answered.
_SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


class CollectorServer(Node):
    """``ktc serve``: the node answering every request with its own dispatcher."""

    mode_name = "collector"

    def _open_store(self) -> Any:
        """The local store; with ``subscriptions.store: kafka``, wrapped in the store whose
        subscriptions are the cluster's (read in ``bind_mode_listeners``)."""
        from subscriptions.cluster_store import ClusterSubscriptionStore
        from subscriptions.store import ConfigStore

        store = super()._open_store()
        servers = self.config.subscriptions_kafka_bootstrap_servers
        if self.config.subscriptions_store == "kafka" and isinstance(
            store, ConfigStore
        ):
            self._store = store = ClusterSubscriptionStore(store, servers or "")
        return store

    async def _bind_mode_listeners(self) -> None:
        """No listeners of its own; the cluster's subscriptions are read here, once the
        node's listeners are bound and before it is ready."""
        from subscriptions.cluster_store import ClusterSubscriptionStore

        if isinstance(self._store, ClusterSubscriptionStore):
            await self._keep_cluster_subscriptions(
                self._kafka_store_admin(), self.config.subscriptions_kafka_refresh_ms
            )

    def _kafka_store_admin(self) -> Any:
        """The admin connection to the subscriptions' cluster (``subscriptions.kafka.*``)."""
        import ssl

        from collector.app.config import parse_host_ports
        from collector.gateway.cluster_admin import ClusterAdmin
        from collector.gateway.upstream_login import UpstreamLogin

        config = self.config
        context = None
        if config.subscriptions_kafka_security_protocol in {"SSL", "SASL_SSL"}:
            try:
                context = ssl.create_default_context(
                    cafile=config.subscriptions_kafka_ssl_truststore_location
                )
                if config.subscriptions_kafka_ssl_keystore_location:
                    context.load_cert_chain(
                        config.subscriptions_kafka_ssl_keystore_location,
                        password=config.subscriptions_kafka_ssl_key_password,
                    )
            except (OSError, ssl.SSLError) as exc:
                raise StartupError(f"subscriptions.kafka.ssl: {exc}") from exc
            if config.subscriptions_kafka_ssl_endpoint_identification_algorithm == "":
                context.check_hostname = False
        login = None
        if config.subscriptions_kafka_sasl_mechanism is not None:
            assert config.subscriptions_kafka_sasl_username is not None
            assert config.subscriptions_kafka_sasl_password is not None
            login = UpstreamLogin(
                config.subscriptions_kafka_sasl_mechanism,
                config.subscriptions_kafka_sasl_username,
                config.subscriptions_kafka_sasl_password,
            )
        try:
            servers = parse_host_ports(
                config.subscriptions_kafka_bootstrap_servers or ""
            )
        except ValueError as exc:
            raise StartupError(f"subscriptions.kafka.bootstrap.servers: {exc}") from exc
        return ClusterAdmin(servers, ssl_context=context, login=login)

    def _build_handler(self) -> None:
        from collector.broker.acl_apis import AclApis
        from collector.broker.scram_apis import ScramCredentialApis

        assert self._apis is not None and self.admin_apis is not None
        config = self.config
        table: dict[int, Any] = self._apis.table()
        table.update(self.admin_apis.table())
        table.update(AclApis(self.authorizer).table())
        table.update(
            ScramCredentialApis(self._open_credentials(), self.authorizer).table()
        )
        self.dispatcher = self.handler = self._dispatcher(table)
        self._apis.set_served_apis(self.dispatcher.api_keys)
        # An API this node does not serve closes the connection once its header is read:
        # its body is never needed.
        self.request_size_limits = RequestSizeLimits(
            request_size_limits(
                self.dispatcher.api_keys,
                telemetry_max_bytes=config.telemetry_max_bytes,
                max_request_size=config.socket_request_max_bytes,
            ),
            other=min(REQUEST_HEADER_MAX_BYTES, config.socket_request_max_bytes),
        )

    def _connection_handler(
        self, connection_id: int, endpoint: EndPoint, node_id: int | None
    ) -> RequestHandler | None:
        """A SASL listener's connection gets its own handler: its authenticator in front
        of the dispatcher (None elsewhere: the dispatcher itself)."""
        if endpoint.security_protocol not in _SASL_PROTOCOLS:
            return None
        return self._sasl_gate(endpoint, self.handler)
