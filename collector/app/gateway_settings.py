"""The gateway's parts as the node's configuration sets them up: the upstream cluster's
settings, the topology (the gateway port of each upstream node) and the request-size
limits of the gateway's listeners."""

from __future__ import annotations

from collections.abc import Callable

from collector.app.config import CollectorConfig
from collector.gateway.topology import Topology
from collector.gateway.upstream_cluster import UpstreamSettings
from collector.net.kafka_cluster import SaslLogin
from proto import ApiKeys
from proto.request_limits import RequestSizeLimits
from proto.request_limits import request_size_limits as limits_of

__all__ = ["request_size_limits", "topology", "upstream_settings"]

# Answered at the gateway, at their own request-size limits; every other API is (at least
# partly) forwarded, and a Produce may be as large as the cluster accepts.
_TELEMETRY_APIS = (ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, ApiKeys.PUSH_TELEMETRY)


def request_size_limits(config: CollectorConfig) -> RequestSizeLimits:
    return RequestSizeLimits(
        limits_of(
            _TELEMETRY_APIS,
            telemetry_max_bytes=config.telemetry_max_bytes,
            max_request_size=config.socket_request_max_bytes,
        ),
        other=config.socket_request_max_bytes,
    )


def topology(
    config: CollectorConfig,
    bootstrap: tuple[tuple[str, int], ...],
    listener_host: str,
    bind_node: Callable[[int, int], int],
) -> Topology:
    """The topology of the gateway's ports (``gateway.broker.port.start`` and on), advertised
    on ``gateway.advertised.host`` or else the bootstrap listener's ``listener_host``;
    ``bind_node(node_id, port)`` binds a node's listener. Raises ``TopologyError``."""
    return Topology(
        bootstrap=bootstrap,
        broker_port_start=config.gateway_broker_port_start,
        min_node_id=config.gateway_min_node_id,
        max_nodes=config.gateway_max_nodes,
        advertised_host=config.gateway_advertised_host or listener_host,
        bind_node=bind_node,
        state_dir=config.data_dir,
    )


def upstream_settings(config: CollectorConfig) -> UpstreamSettings:
    """``gateway.upstream.*`` (and the subscriptions' login) as the upstream cluster uses them."""
    subscriptions_login = None
    if config.gateway_subscriptions_sasl_mechanism is not None:
        assert (
            config.gateway_subscriptions_sasl_username is not None
        )  # the config checks
        assert config.gateway_subscriptions_sasl_password is not None
        subscriptions_login = SaslLogin(
            config.gateway_subscriptions_sasl_mechanism,
            config.gateway_subscriptions_sasl_username,
            config.gateway_subscriptions_sasl_password,
        )
    return UpstreamSettings(
        config.gateway_upstream.settings(),
        subscriptions_login=subscriptions_login,
        connect_timeout_s=config.gateway_upstream_connect_timeout_ms / 1000.0,
        max_response_size=config.gateway_upstream_max_response_bytes,
        require_authentication_when_unknown=config.gateway_telemetry_require_authentication,
    )
