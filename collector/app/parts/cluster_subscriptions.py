"""The subscriptions a Kafka cluster keeps (``subscriptions.store: kafka`` on serve,
``gateway.subscriptions.store: cluster`` on a gateway): read once during start (bounded by the
admin client's timeout), then every refresh until shutdown
(collector/gateway/cluster_subscriptions.py reads them into subscriptions/cluster_store.py).
A node whose reads have not worked yet starts, but is not ready and answers no
subscription (its readiness check and GetTelemetrySubscriptions gate are the refresh's).

The node makes the part, :class:`ClusterSubscriptionReads`, when its mode's settings keep
the subscriptions in a cluster (:class:`KeptSubscriptions`), and starts it once the mode's
listeners are bound, with the admin client the mode names."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from clock import Clock
from collector.app.http import HealthEndpoints
from collector.app.parts.tasks import BackgroundTasks
from collector.broker.kafka_apis import KafkaApis
from collector.core.scrape import ScrapeCollector
from collector.gateway.cluster_admin import ClusterAdmin
from collector.gateway.cluster_subscriptions import (
    SubscriptionRefresh,
    read_client_metrics,
)
from subscriptions.cluster_store import ClusterSubscriptionStore
from subscriptions.store import ConfigStore

__all__ = [
    "ClusterSubscriptionReads",
    "KeptSubscriptions",
    "cluster_subscription_refresh",
    "keep_reading",
]


@dataclasses.dataclass(frozen=True, slots=True)
class KeptSubscriptions:
    """Where a Kafka cluster keeps a node's subscriptions, as its mode's settings name it."""

    # The cluster's bootstrap servers as configured ("host:port,..."), for log lines,
    # errors and state-locations.json.
    cluster: str
    refresh_ms: int
    stale_after_ms: int


class ClusterSubscriptionReads:
    """The cluster's subscriptions over the node's local store (``store``, the node's
    config store) and, once :meth:`start` is given an admin client, the ``refresh`` that
    reads them into it; ``on_change`` after each change of where the set in force lives."""

    def __init__(
        self,
        local: ConfigStore,
        kept: KeptSubscriptions,
        *,
        clock: Clock,
        registry: CollectorRegistry,
        tasks: BackgroundTasks,
        on_change: Callable[[], object],
    ) -> None:
        self.store = ClusterSubscriptionStore(local, kept.cluster)
        self.refresh: SubscriptionRefresh | None = None
        self._kept = kept
        self._clock = clock
        self._registry = registry
        self._tasks = tasks
        self._on_change = on_change

    @property
    def in_cluster(self) -> bool:
        """Whether the cluster serves the subscriptions (False once fallen back to local)."""
        return self.store.in_cluster

    def state_clusters(self) -> dict[str, str]:
        """``{"subscriptions": cluster}`` while the cluster serves them (data_dir.py)."""
        return {"subscriptions": self.store.cluster} if self.store.in_cluster else {}

    def read_soon(self) -> None:
        """Read again without waiting for the refresh (a CLIENT_METRICS alter went to the
        cluster); nothing before the reads started."""
        if self.refresh is not None:
            self.refresh.soon()

    async def start(
        self, admin: ClusterAdmin | None, health: HealthEndpoints, apis: KafkaApis
    ) -> None:
        """Read with ``admin`` now, then every refresh until shutdown; until a read works
        the node is not ready (the ``subscriptions`` check) and ``apis`` answer no
        subscription. ``admin`` None (the cluster cannot be read, the mode said why): the
        local store's subscriptions are served."""
        if admin is None:
            self.store.use_local()
            return
        kept = self._kept
        refresh = self.refresh = cluster_subscription_refresh(
            self.store,
            admin,
            kept.refresh_ms,
            stale_after_ms=kept.stale_after_ms,
            clock=self._clock,
            registry=self._registry,
            on_change=self._on_change,
        )
        health.add_readiness_check("subscriptions", refresh.not_ready_reason)
        apis.subscriptions_unknown = lambda: refresh.unread
        await keep_reading(refresh, admin, self._tasks)


def cluster_subscription_refresh(
    store: ClusterSubscriptionStore,
    admin: ClusterAdmin,
    refresh_ms: int,
    *,
    stale_after_ms: int,
    clock: Clock,
    registry: CollectorRegistry,
    on_change: Callable[[], object] = lambda: None,
) -> SubscriptionRefresh:
    """What reads the cluster's subscriptions into ``store`` with ``admin`` every
    ``refresh_ms`` (started by :func:`keep_reading`); its reads in ``registry``;
    ``on_change`` after each change of the set in force (a new set read, or the switch to
    or back from the local store)."""
    refresh = SubscriptionRefresh(
        store,
        lambda: read_client_metrics(admin),
        clock=clock,
        refresh_ms=refresh_ms,
        stale_after_ms=stale_after_ms,
        on_change=on_change,
    )
    registry.register(ScrapeCollector(lambda: _collect_reads(refresh, clock)))
    return refresh


async def keep_reading(
    refresh: SubscriptionRefresh, admin: ClusterAdmin, tasks: BackgroundTasks
) -> None:
    """Read now, then every refresh until shutdown (``admin`` is closed when that
    stops)."""
    await refresh.refresh()

    async def keep() -> None:
        try:
            await refresh.run()
        finally:
            admin.close()

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
        "1 while the subscriptions in force are a set read from the Kafka cluster; 0 "
        "before the first read worked (none is served) and while they are the local "
        "store's (the cluster does not serve CLIENT_METRICS configs).",
        value=1 if refresh.store.read_from_cluster else 0,
    )
    age_ms = refresh.read_age_ms()
    if age_ms is not None:
        yield GaugeMetricFamily(
            "ktc_subscriptions_cluster_read_age_seconds",
            "Seconds since a read of the cluster's subscriptions last worked.",
            value=age_ms / 1000,
        )
    yield GaugeMetricFamily(
        "ktc_subscriptions_cluster_stale_after_seconds",
        "How old the last set read may be before the node says it may not be the "
        "cluster's any more (gateway.subscriptions.stale.after.ms, "
        "subscriptions.kafka.stale.after.ms).",
        value=refresh.stale_after_ms / 1000,
    )
    yield GaugeMetricFamily(
        "ktc_subscriptions_cluster_stale",
        "1 while the cluster's subscriptions are unknown: never read, or the last read "
        "that worked is older than the stale-after bound.",
        value=1 if refresh.stale else 0,
    )
