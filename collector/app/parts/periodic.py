"""A node's periodic work on its clock: instance expiry, quota sensor expiry, the idle
connection sweep (``connections.max.idle.ms``), the ``/metrics/clients`` fold."""

from __future__ import annotations

from clock import Clock
from collector.app.config import CollectorConfig
from collector.app.parts.connections import Connections
from collector.app.parts.tasks import BackgroundTasks
from collector.net.idle import IdleConnections, sweep_period_ms
from collector.pipeline.quota_enforcer import QuotaEnforcer
from collector.telemetry.client_metrics import ClientMetricsManager
from collector.telemetry.prometheus.client_series import ClientSeries

__all__ = ["start_periodic"]

EXPIRY_TICK_MS = 1000
# Kafka expires idle per-client and per-IP quota sensors; it checks every 30 s.
QUOTA_SENSOR_EXPIRY_TICK_MS = 30_000
# How often pushes waiting for /metrics/clients are handed to its worker thread.
CLIENT_SERIES_FOLD_TICK_MS = 1000


def start_periodic(
    config: CollectorConfig,
    clock: Clock,
    tasks: BackgroundTasks,
    manager: ClientMetricsManager,
    quotas: QuotaEnforcer,
    connections: Connections,
    client_series: ClientSeries | None,
) -> IdleConnections | None:
    """Start the periodic tasks; returns the idle sweep's registry (None when
    ``connections.max.idle.ms`` is 0: connections never idle out)."""
    tasks.every(
        EXPIRY_TICK_MS, "instance-expiry", lambda: manager.expire(clock.now_ms())
    )
    tasks.every(
        QUOTA_SENSOR_EXPIRY_TICK_MS, "quota-sensors", quotas.expire_inactive_sensors
    )
    idle: IdleConnections | None = None
    max_idle_ms = config.connections_max_idle_ms
    if max_idle_ms > 0:
        sweep = idle = IdleConnections(max_idle_ms, connections.by_id)
        tasks.every(
            sweep_period_ms(max_idle_ms),
            "idle-connections",
            lambda: sweep.sweep(clock.now_ms()),
        )
    if client_series is not None:
        tasks.every(
            CLIENT_SERIES_FOLD_TICK_MS, "client-series", client_series.fold_soon
        )
    return idle
