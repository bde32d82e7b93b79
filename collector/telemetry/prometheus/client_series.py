"""The series behind ``/metrics/clients``: every cached client instance's latest points.

Who does what, so the event loop never folds, renders or copies the cache:

| where | what | cost |
|---|---|---|
| push path (event loop) | nothing: the landing log's flush makes a push readable (``landed.py``) | none |
| every second (event loop) | :meth:`ClientSeries.fold_soon`: wake the worker | O(1) |
| worker thread (one) | read what landed since the last fold (``LandedRecords``: the landing log, read back), decode each payload, fold its points into its instance (``points.py``: at most ``max_series_per_instance`` each), forget terminated instances and those the manager no longer caches, keep at most ``RETAINED_FACTOR`` x the budget in memory | per push and per instance |
| scrape (worker thread) | expire the series no push refreshed for ``series_expiry_ms``, the budget (``budget.py``) and the exposition (``exposition.py``); the bytes are kept until the next change | per series |

What the fold reads is what landed: a push refused because its flush or fsync failed is
not in the log and never counts; the client's next push of the same delta counts once,
as the forwarder and the lakehouse count it; the same holds for the landing topic
(``landed_topic.py``).  A node given another exporter records through
:class:`ClientSeriesTap` instead: after the
exporter took the push, (context, payload) appended to a pending list (a push over
``PENDING_MAX_BYTES`` pending is counted and skipped), handed to the worker each second.

Time is the injected clock's (``Clock.now_ms``), read on the event loop when a batch is
handed over and passed to the worker with it.

Only the worker touches the folded state, so nothing here takes a lock; the manager is
asked whether an instance is still cached with one dictionary lookup, which the GIL keeps
atomic against the event loop's changes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from clock import SYSTEM_CLOCK, Clock
from collector.telemetry.prometheus.budget import Selection, select
from collector.telemetry.prometheus.exposition import Rendered, render
from collector.telemetry.prometheus.landed import Landed
from collector.telemetry.prometheus.metrics_wire import resources
from collector.telemetry.prometheus.naming import MetricType
from collector.telemetry.prometheus.points import (
    IDENTITY_LABELS,
    FamilyMeta,
    InstancePoints,
)
from exporters.base import Exporter, ExportResult
from exporters.context import TelemetryContext

__all__ = [
    "DEFAULT_MAX_SERIES_PER_INSTANCE",
    "DEFAULT_SERIES_EXPIRY_MS",
    "PENDING_MAX_BYTES",
    "ClientSeriesClosed",
    "RETAINED_FACTOR",
    "ClientSeries",
    "ClientSeriesSettings",
    "ClientSeriesTap",
]

# Payload bytes waiting for the worker at most (about a second of pushes at 30 MB/s).
PENDING_MAX_BYTES = 64 * 1024 * 1024
# Capped instances named (the conformance view's flag), at most: a fleet with more has a
# cap set too low, and the count says so.
CAPPED_IDS_KEPT = 1_000
# A fold bounded in time reads this much at a time (about a thousand pushes).
CATCH_UP_BATCH_BYTES = 1024 * 1024
# Series kept in memory at most, as a multiple of the budget (the least recently pushed
# instances beyond it are forgotten: they would only be part of an overflow aggregate).
RETAINED_FACTOR = 2
# Families (help and type) remembered before those no instance has are forgotten.
_FAMILIES_KEPT = 1_000
# prometheus.clients.max.series.per.instance: about twice the busiest instance of a real
# Kafka Streams 4.4.0 application at metrics.recording.level=DEBUG, its StreamThread's main
# consumer (Streams' thread, task, processor and store metrics ride on its pushes): 1,171
# series at 12 tasks, 2,328 at 24 (about 97 a task; tests/prometheus/measure_streams_series.py).
DEFAULT_MAX_SERIES_PER_INSTANCE = 5_000
# prometheus.clients.series.expiry.ms: the OpenTelemetry Collector's Prometheus exporter's
# metric_expiration (5 min).
DEFAULT_SERIES_EXPIRY_MS = 300_000


class ClientSeriesClosed(RuntimeError):
    """A scrape after shutdown began (the worker is gone)."""


@dataclass(frozen=True, slots=True)
class ClientSeriesSettings:
    max_series: int
    # The identity labels shown, in IDENTITY_LABELS order.
    labels: tuple[str, ...] = IDENTITY_LABELS
    # OTLP metric-name prefixes shown; empty: every metric.
    metric_prefixes: tuple[str, ...] = ()
    # Samples one instance holds at most, its refused-series flag included (bounded by
    # max_series: one instance never holds more than the page).
    max_series_per_instance: int = DEFAULT_MAX_SERIES_PER_INSTANCE
    # A series no push refreshed for this long is removed.
    series_expiry_ms: int = DEFAULT_SERIES_EXPIRY_MS

    @property
    def instance_room(self) -> int:
        """Samples of its own series one instance may hold: its cap, less the one its
        refused-series flag takes (so with the flag it holds at most its cap)."""
        return max(min(self.max_series_per_instance, self.max_series) - 1, 0)

    @classmethod
    def parse(
        cls,
        max_series: int,
        labels: str | None,
        metrics: str | None,
        *,
        max_series_per_instance: int = DEFAULT_MAX_SERIES_PER_INSTANCE,
        series_expiry_ms: int = DEFAULT_SERIES_EXPIRY_MS,
    ) -> ClientSeriesSettings:
        """From the config's comma-separated lists; ValueError names an unknown label."""
        chosen: tuple[str, ...] = IDENTITY_LABELS
        if labels is not None and labels.strip() != "*":
            names = [n.strip() for n in labels.split(",") if n.strip()]
            unknown = sorted(set(names) - set(IDENTITY_LABELS))
            if unknown:
                raise ValueError(
                    f"unknown label {', '.join(unknown)} "
                    f"(known: {', '.join(IDENTITY_LABELS)})"
                )
            chosen = tuple(n for n in IDENTITY_LABELS if n in names)
        prefixes = tuple(p.strip() for p in (metrics or "").split(",") if p.strip())
        return cls(
            max_series, chosen, prefixes, max_series_per_instance, series_expiry_ms
        )


def _instance_identity(context: TelemetryContext) -> dict[str, str]:
    identity = {
        "client_id": context.client_id or "",
        "client_instance_id": context.client_instance_id,
        "client_software_name": context.client_software_name,
        "client_software_version": context.client_software_version,
        "principal": context.principal,
        "listener": context.listener_name,
    }
    # Gateway mode only: a standalone collector has no upstream.
    if context.upstream_cluster_id is not None:
        identity["upstream_cluster_id"] = context.upstream_cluster_id
    if context.upstream_node_id is not None:
        identity["upstream_node_id"] = str(context.upstream_node_id)
    return identity


class ClientSeries:
    """``record`` on the push path, ``fold_soon`` every second, ``await scrape()``."""

    def __init__(
        self,
        settings: ClientSeriesSettings,
        is_cached: Callable[[str], bool],
        *,
        executor: concurrent.futures.Executor | None = None,
        clock: Clock = SYSTEM_CLOCK,
        landed: Landed | None = None,
    ) -> None:
        """``landed``: what the worker folds (the landing log read back, or the landing
        topic); None: the pushes :meth:`record` is given."""
        self.settings = settings
        self._landed = landed
        self._clock = clock
        self._is_cached = is_cached  # the manager still caches this instance id
        self._owns_executor = executor is None
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(
            1, "prometheus-clients"
        )
        # Loop side.
        self._pending: list[tuple[TelemetryContext, bytes]] = []
        self._pending_bytes = 0
        self._folding: concurrent.futures.Future[None] | None = None
        self._closed = False
        self.pushes_skipped = 0  # over PENDING_MAX_BYTES
        # Worker side.
        self._instances: OrderedDict[str, InstancePoints] = OrderedDict()  # LRU: push
        self._families: dict[str, FamilyMeta] = {}
        self._names: dict[tuple[str, str, MetricType], str] = {}
        self._retained_samples = 0
        self._generation = 0
        self._cache: dict[bool, tuple[int, Rendered]] = {}
        # For the collector's own /metrics (read on the loop; ints written by the worker).
        self.instances_forgotten = 0
        self.last_selection = Selection()
        self.last_scrape_seconds = 0.0
        self.type_conflicts = 0
        self.undecodable = 0
        self.pushes_folded = 0  # landed pushes (or recorded ones) the worker folded
        self.series_refused = 0  # points of new series refused: an instance at its cap
        self.series_expired = 0
        self.capped_instances = 0  # flagged at the last scrape
        # Their instance ids (at most CAPPED_IDS_KEPT): the conformance view flags them.
        self.capped_ids: list[str] = []

    # ------------------------------------------------------------------ loop side
    def record(self, context: TelemetryContext, payload: bytes) -> None:
        size = len(payload)
        if self._pending_bytes + size > PENDING_MAX_BYTES:
            self.pushes_skipped += 1
            return
        if type(payload) is not bytes:
            payload = bytes(payload)  # never hold on to a connection's buffer
        self._pending.append((context, payload))
        self._pending_bytes += size

    def _take_pending(self) -> list[tuple[TelemetryContext, bytes]]:
        batch, self._pending, self._pending_bytes = self._pending, [], 0
        return batch

    def fold_soon(self) -> concurrent.futures.Future[None] | None:
        """Hand what is pending to the worker (None: nothing was pending, or the worker is
        still folding the last batch: what waits stays counted against
        PENDING_MAX_BYTES, so a worker that falls behind bounds memory by skipping pushes
        rather than by queueing batches)."""
        if (not self._pending and self._landed is None) or (
            self._folding is not None and not self._folding.done()
        ):
            return None
        self._folding = self._executor.submit(
            self._fold_all, self._take_pending(), self._clock.now_ms()
        )
        return self._folding

    async def scrape(self, open_metrics: bool) -> bytes:
        if self._closed:
            raise ClientSeriesClosed("the collector is shutting down")
        batch = self._take_pending()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor,
            self._fold_and_render,
            batch,
            open_metrics,
            self._clock.now_ms(),
        )

    def close(self) -> None:
        self._closed = True
        if self._owns_executor:
            self._executor.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------ worker side
    def _fold_all(
        self,
        batch: Sequence[tuple[TelemetryContext, bytes]],
        now_ms: int,
        within_s: float | None = None,
    ) -> None:
        """``batch`` (what :meth:`record` was given), then what landed since the last
        fold, read ``PENDING_MAX_BYTES`` at a time; with ``within_s``, read
        ``CATCH_UP_BATCH_BYTES`` at a time until that much time has passed (one batch at
        least): the rest is folded by the next fold."""
        self._fold(batch, now_ms)
        landed = self._landed
        if landed is None:
            return
        if within_s is None:
            while read := landed.take(PENDING_MAX_BYTES):
                self._fold(read, now_ms)
            return
        until = time.monotonic() + within_s
        while read := landed.take(CATCH_UP_BATCH_BYTES):
            self._fold(read, now_ms)
            if time.monotonic() >= until:
                return

    def _fold(
        self, batch: Sequence[tuple[TelemetryContext, bytes]], now_ms: int | None = None
    ) -> None:
        """``now_ms``: the clock when the batch was handed over (None: now)."""
        if now_ms is None:
            now_ms = self._clock.now_ms()
        settings = self.settings
        instances = self._instances
        max_samples = settings.instance_room
        expiry_ms = settings.series_expiry_ms
        prefixes = settings.metric_prefixes
        self.pushes_folded += len(batch)
        for context, payload in batch:
            try:
                data = resources(payload)
            except ValueError:  # validated on the push path; counted, never raised
                self.undecodable += 1
                continue
            instance_id = context.client_instance_id
            instance = instances.get(instance_id)
            if instance is None:
                instance = instances[instance_id] = InstancePoints(instance_id, None)
            else:
                instances.move_to_end(instance_id)
            if context.terminating:
                # The client's last push: its series go with it.
                del instances[instance_id]
                self._retained_samples -= instance.samples
                continue
            instance.identity = _instance_identity(context)
            instance.last_push_ns = context.received_time_unix_nano
            # Stale series first, so they do not hold the room of this push's new ones.
            expired = instance.expire(now_ms, expiry_ms)
            if expired:
                self._retained_samples -= expired
                self.series_expired += expired
            before = instance.samples
            refused = instance.refused
            for resource in data:
                instance.fold(
                    (
                        resource.metrics
                        if not prefixes
                        else [
                            m for m in resource.metrics if m.name.startswith(prefixes)
                        ]
                    ),
                    self._families,
                    self._names,
                    max_samples,
                    resource.attributes,
                    now_ms,
                )
            self._retained_samples += instance.samples - before
            self.series_refused += instance.refused - refused
        self._forget_beyond_retention()
        if batch:
            self._generation += 1

    def _forget_beyond_retention(self) -> None:
        limit = self.settings.max_series * RETAINED_FACTOR
        instances = self._instances
        while self._retained_samples > limit and instances:
            _, oldest = instances.popitem(last=False)
            self._retained_samples -= oldest.samples
            self.instances_forgotten += 1

    def holds(self, instance_id: str) -> bool:
        """Worker side: whether the fold holds this instance."""
        return instance_id in self._instances

    def instance_ids(self) -> list[str]:
        """The instances held (worker side: the fold process lists them for the node)."""
        return list(self._instances)

    def forget_uncached(self) -> None:
        """Worker side: :meth:`_forget_uncached` (the fold process, told by the node)."""
        self._forget_uncached()

    def _forget_uncached(self) -> None:
        """Drop the instances the manager no longer caches (expired, evicted, their
        connection closed)."""
        gone = [key for key in self._instances if not self._is_cached(key)]
        for key in gone:
            instance = self._instances.pop(key)
            self._retained_samples -= instance.samples
        if gone:
            self._generation += 1

    def _expire(self, now_ms: int) -> None:
        """Remove the series no push refreshed for ``series_expiry_ms``; count the
        instances left flagged (at their cap)."""
        expiry_ms = self.settings.series_expiry_ms
        expired = 0
        capped: list[str] = []
        for instance in self._instances.values():
            gone = instance.expire(now_ms, expiry_ms)
            expired += gone
            self._retained_samples -= gone
            if instance.flagged:
                capped.append(instance.instance_id)
        self.capped_instances = len(capped)
        self.capped_ids = capped[:CAPPED_IDS_KEPT]
        if expired:
            self.series_expired += expired
            self._generation += 1

    def _fold_and_render(
        self,
        batch: Sequence[tuple[TelemetryContext, bytes]],
        open_metrics: bool,
        now_ms: int | None = None,
        catch_up_s: float | None = None,
    ) -> bytes:
        """The page, after folding what is pending (for at most ``catch_up_s``)."""
        started = time.perf_counter()
        if now_ms is None:
            now_ms = self._clock.now_ms()
        self._fold_all(batch, now_ms, catch_up_s)
        self._forget_uncached()
        self._expire(now_ms)
        cached = self._cache.get(open_metrics)
        if cached is not None and cached[0] == self._generation:
            return cached[1].body
        selection = select(
            reversed(self._instances.values()),
            self._retained_samples,
            self.settings.max_series,
            self.settings.labels,
        )
        self._prune_families()
        rendered = render(selection.groups, self._families, open_metrics)
        self._cache = {open_metrics: (self._generation, rendered)}
        self.last_selection = selection
        self.type_conflicts = rendered.type_conflicts
        self.last_scrape_seconds = time.perf_counter() - started
        return rendered.body

    def _prune_families(self) -> None:
        """Forget the help and type of families no instance has any more (bounded by
        what is cached, not by every name ever pushed)."""
        if len(self._families) <= _FAMILIES_KEPT:
            return
        live = {key[0] for i in self._instances.values() for key in i.points}
        self._families = {k: v for k, v in self._families.items() if k in live}

    # ------------------------------------------------------------------ own metrics
    def collect(self) -> Iterator[Metric]:
        """The collector's own series about this endpoint (on ``/metrics``)."""
        selection = self.last_selection
        yield GaugeMetricFamily(
            "ktc_prometheus_clients_series",
            "Series /metrics/clients showed at its last scrape",
            value=selection.samples,
        )
        yield GaugeMetricFamily(
            "ktc_prometheus_clients_series_limit",
            "prometheus.clients.max.series",
            value=self.settings.max_series,
        )
        yield GaugeMetricFamily(
            "ktc_prometheus_clients_series_limit_per_instance",
            "prometheus.clients.max.series.per.instance (at most the budget)",
            value=min(self.settings.max_series_per_instance, self.settings.max_series),
        )
        yield GaugeMetricFamily(
            "ktc_prometheus_clients_capped_instances",
            "Client instances at their series cap (flagged with "
            "ktc_client_series_refused_total) at the last scrape",
            value=self.capped_instances,
        )
        yield CounterMetricFamily(
            "ktc_prometheus_clients_series_refused",
            "Points of new series refused because their instance was at its series cap",
            value=self.series_refused,
        )
        yield CounterMetricFamily(
            "ktc_prometheus_clients_series_expired",
            "Series removed because no push refreshed them within "
            "prometheus.clients.series.expiry.ms",
            value=self.series_expired,
        )
        yield GaugeMetricFamily(
            "ktc_prometheus_clients_overflow_instances",
            "Client instances folded into an overflow aggregate at the last scrape",
            value=selection.overflow_instances,
        )
        yield GaugeMetricFamily(
            "ktc_prometheus_clients_series_dropped",
            "Series of overflow aggregates left out of the last scrape (no room)",
            value=selection.dropped_samples,
        )
        yield GaugeMetricFamily(
            "ktc_prometheus_clients_scrape_seconds",
            "Time the last /metrics/clients exposition took to build (worker thread)",
            value=self.last_scrape_seconds,
        )
        yield CounterMetricFamily(
            "ktc_prometheus_clients_instances_forgotten",
            "Client instances whose points were forgotten beyond the retained series",
            value=self.instances_forgotten,
        )
        yield CounterMetricFamily(
            "ktc_prometheus_clients_pushes_folded",
            "Pushes folded into /metrics/clients (read back from the landing log: "
            "the pushes that landed)",
            value=self.pushes_folded,
        )
        yield CounterMetricFamily(
            "ktc_prometheus_clients_pushes_skipped",
            "Pushes not folded into /metrics/clients (too many bytes waiting)",
            value=self.pushes_skipped,
        )


class ClientSeriesTap:
    """The manager's exporter when ``/metrics/clients`` is on and the node does not land
    on its own landing log: the exporter first, and a push it took is recorded for the
    endpoint."""

    def __init__(self, inner: Exporter, series: ClientSeries) -> None:
        self._inner = inner
        self._series = series

    def export(self, context: TelemetryContext, payload: bytes) -> ExportResult:
        result = self._inner.export(context, payload)
        if result.ok:
            self._series.record(context, payload)
        return result

    def close(self) -> None:
        self._inner.close()
