"""A node's quota engine (``quota/``, a port of Kafka's quota managers) and the enforcer
that applies it as a broker does (``collector.pipeline.quota_enforcer``)."""

from __future__ import annotations

from clock import Clock
from collector.app.config import CollectorConfig
from collector.app.parts.errors import StartupError
from collector.pipeline.quota_enforcer import QuotaEnforcer
from quota import QuotaEngine
from quota.errors import QuotaConfigError

__all__ = ["build_quota_enforcer", "quota_settings"]


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


def build_quota_enforcer(config: CollectorConfig, clock: Clock) -> QuotaEnforcer:
    try:
        engine = QuotaEngine.from_config(quota_settings(config), clock.now_ms())
    except QuotaConfigError as exc:
        raise StartupError(str(exc)) from exc
    return QuotaEnforcer(engine, clock=clock)
