"""A node's ClientMetricsManager (the port of Kafka's) over its config store's
subscriptions and its landing, with ``/metrics/clients`` (``prometheus.clients.enable``:
the series of every cached instance, folded from the landing log or the landing topic
once pushes landed, or fed by a tap after another exporter, docs/prometheus.md)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry

from clock import Clock
from collector.app.config import CollectorConfig
from collector.core.scrape import ScrapeCollector
from collector.telemetry.client_metrics import ClientMetricsManager
from collector.telemetry.prometheus.client_series import (
    ClientSeries,
    ClientSeriesSettings,
    ClientSeriesTap,
)
from collector.telemetry.prometheus.fold_process import FoldProcess
from collector.telemetry.prometheus.landed import LandedRecords
from collector.telemetry.stats import ClientMetricsStats
from collector.telemetry.subscription_source import StoreSubscriptions
from exporters.base import Exporter
from exporters.kafka_topic import TopicLanding
from exporters.landing import LandingLog
from subscriptions.cluster_store import SubscriptionStore
from subscriptions.kafka_uuid import (
    kafka_uuid_from_str,
    kafka_uuid_to_str,
    random_instance_id,
)

__all__ = ["build_manager"]


def build_manager(
    config: CollectorConfig,
    store: SubscriptionStore,
    exporter: Exporter,
    *,
    cluster_id: str,
    stats: ClientMetricsStats,
    registry: CollectorRegistry,
    clock: Clock,
) -> tuple[ClientMetricsManager, ClientSeries | None]:
    """The manager, landing pushes through ``exporter``; and ``/metrics/clients``'s
    series when they are on (registered in ``registry``)."""
    series: ClientSeries | None = None
    if config.prometheus_clients_enable:
        settings = ClientSeriesSettings.parse(
            config.prometheus_clients_max_series,
            config.prometheus_clients_labels,
            config.prometheus_clients_metrics,
            max_series_per_instance=config.prometheus_clients_max_series_per_instance,
            series_expiry_ms=config.prometheus_clients_series_expiry_ms,
        )

        def is_cached(instance_id: str) -> bool:
            # ``manager`` is made below, before the first push reaches the series.
            return manager.instance(kafka_uuid_from_str(instance_id)) is not None

        if isinstance(exporter, LandingLog):
            # What landed, read back from the log by a process of its own (the push
            # path does nothing for it).
            series = fold_process(exporter, settings, is_cached, clock)
        elif isinstance(exporter, TopicLanding):
            # What landed on the topic, read by a process of its own, which folds the
            # records of the instances this node caches only.
            series = FoldProcess(
                settings, is_cached, topic=exporter.settings, clock=clock
            )
        else:
            series = ClientSeries(settings, is_cached, clock=clock)
            exporter = ClientSeriesTap(exporter, series)
        registry.register(ScrapeCollector(series.collect))
    manager = ClientMetricsManager(
        subscriptions=StoreSubscriptions(
            store,
            honour_long_intervals=config.telemetry_honour_long_intervals,
            wildcard_as_empty_prefix_for=frozenset(
                config.subscriptions_wildcard_as_empty_prefix_for
            ),
        ),
        exporter=exporter,
        instance_id_to_str=kafka_uuid_to_str,
        new_instance_id=random_instance_id,
        telemetry_max_bytes=config.telemetry_max_bytes,
        node_id=config.node_id,
        cluster_id=cluster_id,
        cache_max_size=config.telemetry_instance_cache_max_size,
        cache_expiry_ms=config.telemetry_instance_cache_expiry_ms,
        stats=stats,
        clock=clock,
        read_shapes=config.clients_conformance_enable,
        read_applications=config.clients_applications_enable,
    )
    stats.instance_count = lambda: manager.instance_count
    return manager, series


def fold_process(
    log: LandingLog,
    settings: ClientSeriesSettings,
    is_cached: Callable[[str], bool],
    clock: Clock,
) -> FoldProcess:
    """The fold of ``log``'s records from its next offset on, in a child process; with
    ``fsync: always`` and group commit, of those below its durable offset."""
    return FoldProcess(
        settings,
        is_cached,
        directory=log.directory,
        start_offset=log.stats().next_offset,
        durable_below=_durable_below(log),
        next_offset=lambda: log.stats().next_offset,
        clock=clock,
    )


def landed_records(log: LandingLog) -> LandedRecords:
    """The records of ``log`` from its next offset on; with ``fsync: always`` and group
    commit, those below its durable offset (what the answers waited for)."""
    return LandedRecords(log.directory, log.stats().next_offset, _durable_below(log))


def _durable_below(log: LandingLog) -> Callable[[], int] | None:
    """With group commit (only with ``fsync: always``) an answer waits for the fsync: what
    landed is below the log's durable offset; otherwise every record read has landed."""
    if not log.options.group_commit:
        return None
    return lambda: log.durable_offset
