"""The subscriptions a Kafka cluster keeps (``subscriptions.store: kafka`` on serve,
``gateway.subscriptions.store: cluster`` on a gateway): read once during start, before the
node is ready (bounded by the admin client's timeout; a cluster that cannot be read now is
read later), then every refresh until shutdown (collector/gateway/cluster_subscriptions.py
reads them into subscriptions/cluster_store.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from clock import Clock
from collector.app.parts.tasks import BackgroundTasks
from collector.core.scrape import ScrapeCollector
from collector.gateway.cluster_admin import ClusterAdmin
from collector.gateway.cluster_subscriptions import (
    SubscriptionRefresh,
    read_client_metrics,
)
from subscriptions.cluster_store import ClusterSubscriptionStore

__all__ = ["cluster_subscription_refresh", "keep_reading"]


def cluster_subscription_refresh(
    store: ClusterSubscriptionStore,
    admin: ClusterAdmin,
    refresh_ms: int,
    *,
    clock: Clock,
    registry: CollectorRegistry,
) -> SubscriptionRefresh:
    """What reads the cluster's subscriptions into ``store`` with ``admin`` every
    ``refresh_ms`` (started by :func:`keep_reading`); its reads in ``registry``."""
    refresh = SubscriptionRefresh(
        store, lambda: read_client_metrics(admin), clock=clock, refresh_ms=refresh_ms
    )
    registry.register(ScrapeCollector(lambda: _collect_reads(refresh, clock)))
    return refresh


async def keep_reading(
    refresh: SubscriptionRefresh,
    admin: ClusterAdmin,
    tasks: BackgroundTasks,
    *,
    on_local: Callable[[], object] = lambda: None,
) -> None:
    """Read now, then every refresh until shutdown (``admin`` is closed when that
    stops; at once when the cluster does not serve the subscriptions, and ``on_local``
    is called: the local store's subscriptions are served from then on)."""
    if not await refresh.refresh():
        admin.close()
        on_local()
        return

    async def keep() -> None:
        try:
            await refresh.run()
        finally:
            admin.close()
        on_local()  # run() returns only when the cluster turned out not to serve them

    tasks.start(keep(), "subscriptions-refresh")


def _collect_reads(refresh: SubscriptionRefresh, clock: Clock) -> Iterator[Metric]:
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
            value=(clock.now_ms() - refresh.last_read_ms) / 1000,
        )
