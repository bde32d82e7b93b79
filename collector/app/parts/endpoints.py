"""A node's HTTP endpoint: ``/metrics``, ``/healthz``, ``/readyz`` (collector/app/http.py),
the admin endpoints (``/v1/...``, collector/app/admin_http.py) and ``/metrics/clients``."""

from __future__ import annotations

from clock import Clock
from collector.app.client_inventory import ClientInventory
from collector.app.config import CollectorConfig
from collector.app.http import HealthEndpoints
from collector.telemetry.client_metrics import ClientMetricsManager
from collector.telemetry.prometheus.client_series import ClientSeries
from subscriptions.cluster_store import SubscriptionStore

__all__ = ["start_http"]


async def start_http(
    health: HealthEndpoints,
    config: CollectorConfig,
    manager: ClientMetricsManager,
    store: SubscriptionStore,
    clock: Clock,
    *,
    inventory: ClientInventory | None,
    client_series: ClientSeries | None,
) -> None:
    """Serve ``health`` with the admin routes on ``http.listener`` (none: not served)."""
    if config.http_host_port is None:
        return
    from collector.app.admin_http import AdminEndpoints

    admin = AdminEndpoints(
        manager,
        store,
        clock,
        secret=config.http_admin_secret,
        authorizer_configured=bool(config.authorizer_class_name),
        inventory=inventory,
        conformance=config.clients_conformance_enable,
        applications=config.clients_applications_enable,
        capped_ids=(lambda: client_series.capped_ids) if client_series else tuple,
    )
    health.add_routes(admin.routes())
    if client_series is not None:
        from collector.app.clients_http import client_metrics_routes

        health.add_routes(client_metrics_routes(client_series))
    host, port = config.http_host_port
    await health.start(host, port)
