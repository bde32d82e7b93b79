"""The Spark ingest: landing logs -> lakehouse tables, exactly once.

Extract (:func:`extract`, the landing reader), transform (:class:`PointRowsBuilder`)
and load (:func:`load`, Spark) are separate; :class:`IngestJob` sequences them with
the journal so that killing the process at any moment and running it again leaves
every landing record in the tables exactly once:

1. **plan**: read each landing directory from where the last committed batch ended
   (bounded per directory), and write ``_ingest/offsets/<batch>.json`` with the exact
   ``[from, to)`` of every directory.
2. **write**: every row carries ``batch_id`` as its last partition column and is
   written with dynamic partition overwrite, so writing a batch again replaces
   exactly what an interrupted attempt left, and touches nothing else.
3. **commit**: ``_ingest/commits/<batch>.json``, then the landing consumer positions
   ("lakehouse-ingest", which let the landing log delete what was ingested).

On start, a plan without a commit is replayed with the same offsets and batch id
before anything new is read; positions behind the last commit are committed again.
The journal, not the consumer positions, says where to continue.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Self

import pyarrow as pa
from google.protobuf.message import DecodeError

from exporters.lakehouse import failpoints
from exporters.lakehouse.catalog import ensure_catalog
from exporters.lakehouse.flatten import PointRowsBuilder
from exporters.lakehouse.journal import (
    BatchCommit,
    BatchPlan,
    IngestJournal,
    SourceRange,
    WriterLock,
)
from exporters.lakehouse.schema import PUSHES_TABLE, TABLE_BY_POINT_TYPE
from exporters.lakehouse.session import LakehouseConfig, open_session
from exporters.landing import (
    ConsumerPositions,
    LandingReader,
    LandingRecord,
    node_directories,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "CONSUMER_NAME",
    "BatchResult",
    "IngestJob",
    "IngestSettings",
    "extract",
    "landing_dirs_under",
    "load",
]

log = logging.getLogger(__name__)

CONSUMER_NAME = "lakehouse-ingest"
_TABLE_NAME_BY_KIND = {k: t.name for k, t in TABLE_BY_POINT_TYPE.items()} | {
    "pushes": PUSHES_TABLE.name
}


@dataclasses.dataclass(frozen=True, slots=True)
class IngestSettings:
    # Bounds of one batch per landing directory.  20,000 librdkafka pushes are about
    # 200,000 points, a few hundred MB of Python lists at most.
    max_records_per_source: int = 20_000
    max_bytes_per_source: int = 64 * 1024 * 1024
    # Streaming: a batch starts at most this long after the previous one ended; with
    # a batch taking seconds, a push is queryable well within a minute.
    trigger_interval_s: float = 10.0
    keep_batches: int = 100  # journal entries kept for inspection
    maintenance_interval_s: float | None = (
        3600.0  # compaction (+ retention) between batches
    )
    retention_days: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class BatchResult:
    batch_id: int
    records: int
    rows: dict[str, int]
    replayed: bool
    rejected: int = 0


def landing_dirs_under(data_dir: Path) -> Callable[[], list[Path]]:
    """Every ``<data-dir>/landing/node-*`` directory, looked up again before each batch
    so a collector node that starts later is picked up."""
    return lambda: node_directories(Path(data_dir))


def extract(
    source: SourceRange, *, max_records: int | None = None, max_bytes: int | None = None
) -> Iterator[LandingRecord]:
    """The landing records of a source from ``from_offset``: up to ``to_offset`` for a
    planned range (replay), or up to the bounds for a new one (``to_offset`` ignored
    when ``max_records`` is given)."""
    reader = LandingReader(Path(source.directory))
    planning = max_records is not None
    for record in reader.read(
        source.from_offset, max_records=max_records, max_bytes=max_bytes
    ):
        if not planning and record.offset >= source.to_offset:
            return
        yield record


def load(
    spark: SparkSession,
    database: str,
    tables: dict[str, pa.Table],
    batch_id: int,
    after_each_table: Callable[[], None] = lambda: None,
) -> dict[str, int]:
    """Write one batch: dynamic partition overwrite of ``(dt, hour, batch_id)``."""
    rows: dict[str, int] = {}
    for kind, table in tables.items():
        if table.num_rows == 0:
            continue
        with_batch = table.append_column(
            "batch_id", pa.array([batch_id] * table.num_rows, pa.int64())
        )
        # insertInto matches columns by position; the Arrow schema is the table's order.
        spark.createDataFrame(with_batch).write.mode("overwrite").insertInto(
            f"`{database}`.`{_TABLE_NAME_BY_KIND[kind]}`"
        )
        rows[_TABLE_NAME_BY_KIND[kind]] = table.num_rows
        after_each_table()
    return rows


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Flattening allocates millions of small objects and no reference cycles; with
    the cyclic collector running, its repeated scans of the growing column lists took
    more time than the flattening itself (10,000 pushes: 2.4-3.5 s instead of 1.5 s).
    Reference counting still frees everything."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _transform(
    builder: PointRowsBuilder,
    source_name: str,
    record: LandingRecord,
    rejected: list[dict[str, object]],
) -> None:
    try:
        builder.add_payload(
            record.payload,
            record.context,
            source_name,
            record.offset,
            appended_time_unix_nano=record.appended_time_unix_nano,
        )
    except DecodeError as exc:
        # The collector lands only payloads it decompressed; one that still does not
        # parse is recorded in the batch's commit file instead of failing every retry.
        log.error(
            "%s offset %d: not OTLP MetricsData: %s", source_name, record.offset, exc
        )
        rejected.append(
            {"source": source_name, "offset": record.offset, "error": str(exc)}
        )


class IngestJob:
    """One writer of one lakehouse; ``run_once`` drains, ``run_forever`` keeps draining."""

    def __init__(
        self,
        config: LakehouseConfig,
        landing_dirs: Callable[[], list[Path]],
        settings: IngestSettings = IngestSettings(),
        *,
        spark: SparkSession | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
        maintenance: Callable[[SparkSession], None] | None = None,
    ) -> None:
        self.config = config
        self.settings = settings
        self._landing_dirs = landing_dirs
        self._spark = spark
        self._clock_ns = clock_ns
        self._maintenance = maintenance
        self.journal = IngestJournal(config.state_dir)
        self._lock = WriterLock(config.state_dir)
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = open_session(self.config, "ktc-ingest")
        return self._spark

    def start(self) -> None:
        """Take the writer lock (fails fast if another writer runs), create the catalog."""
        if self._started:
            return
        self._lock.acquire()
        try:
            ensure_catalog(self.spark, self.config.database)
        except BaseException:
            self._lock.release()
            raise
        self._started = True

    def close(self) -> None:
        self._lock.release()
        self._started = False

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ batches

    def recover(self) -> BatchResult | None:
        """Replay the latest plan if it has no commit; re-commit positions if it has."""
        plan = self.journal.latest_plan()
        if plan is None:
            return None
        if self.journal.is_committed(plan.batch_id):
            self._commit_positions(plan)
            return None
        log.warning("replaying uncommitted batch %d", plan.batch_id)
        builder = PointRowsBuilder()
        records = 0
        rejected: list[dict[str, object]] = []
        with _cyclic_gc_paused():
            for source in plan.sources:
                if not source.empty:
                    for record in extract(source):
                        records += 1
                        _transform(builder, source.name, record, rejected)
        return self._write_and_commit(plan, builder, records, rejected, replayed=True)

    def run_batch(self) -> BatchResult | None:
        """Plan, write and commit one new batch; None if there was nothing new.

        If the latest plan has no commit yet it is replayed instead: planning past it
        would skip its records."""
        previous = self.journal.latest_plan()
        if previous is not None and not self.journal.is_committed(previous.batch_id):
            return self.recover()
        ranges = self._next_ranges(previous)
        builder = PointRowsBuilder()
        planned: list[SourceRange] = []
        records = 0
        rejected: list[dict[str, object]] = []
        with _cyclic_gc_paused():
            for source in ranges:
                to_offset = source.from_offset
                for record in extract(
                    source,
                    max_records=self.settings.max_records_per_source,
                    max_bytes=self.settings.max_bytes_per_source,
                ):
                    records += 1
                    to_offset = record.offset + 1
                    _transform(builder, source.name, record, rejected)
                planned.append(dataclasses.replace(source, to_offset=to_offset))
        if records == 0:
            return None
        batch_id = (previous.batch_id + 1) if previous else 0
        plan = BatchPlan(batch_id, tuple(planned), self._clock_ns() // 1_000_000)
        self.journal.write_plan(plan)
        failpoints.reached("after_plan", batch_id)
        return self._write_and_commit(plan, builder, records, rejected, replayed=False)

    def run_once(self) -> list[BatchResult]:
        """Recover, then ingest until the landing logs hold nothing new."""
        self.start()
        results = []
        recovered = self.recover()
        if recovered:
            results.append(recovered)
        while (result := self.run_batch()) is not None:
            results.append(result)
        return results

    def run_forever(
        self,
        stop: threading.Event,
        on_batch: Callable[[BatchResult], None] = lambda r: None,
    ) -> None:
        """Drain every ``trigger_interval_s`` until ``stop`` is set; between batches run
        maintenance every ``maintenance_interval_s`` (same process, so it never races
        a batch)."""
        self.start()
        last_maintenance = time.monotonic()
        while not stop.is_set():
            started = time.monotonic()
            for result in self.run_once():
                on_batch(result)
                if stop.is_set():
                    break
            interval = self.settings.maintenance_interval_s
            if (
                self._maintenance
                and interval is not None
                and time.monotonic() - last_maintenance >= interval
            ):
                self._maintenance(self.spark)
                last_maintenance = time.monotonic()
            stop.wait(
                max(
                    0.0, self.settings.trigger_interval_s - (time.monotonic() - started)
                )
            )

    # ------------------------------------------------------------------ internals

    def _next_ranges(self, previous: BatchPlan | None) -> list[SourceRange]:
        """Every source, starting where the last committed batch ended.  A directory
        seen for the first time starts at its committed consumer position (0 if none);
        one that disappeared is carried along unchanged."""
        ranges = previous.next_offsets() if previous else {}
        for directory in self._landing_dirs():
            name = directory.name
            known = ranges.get(name)
            if known is None:
                start = ConsumerPositions(directory, CONSUMER_NAME).load()
                ranges[name] = SourceRange(name, str(directory), start, start)
            elif Path(known.directory) != directory:
                if Path(known.directory).exists():
                    raise ValueError(
                        f"two landing directories are named {name!r}: {known.directory} "
                        f"and {directory}; rows record the name, so it must be unique"
                    )
                ranges[name] = dataclasses.replace(
                    known, directory=str(directory)
                )  # moved
        return [ranges[name] for name in sorted(ranges)]

    def _write_and_commit(
        self,
        plan: BatchPlan,
        builder: PointRowsBuilder,
        records: int,
        rejected: list[dict[str, object]],
        *,
        replayed: bool,
    ) -> BatchResult:
        with _cyclic_gc_paused():
            tables = builder.finish()
        timer = failpoints.arm_timer(plan.batch_id)
        rows = load(
            self.spark,
            self.config.database,
            tables,
            plan.batch_id,
            after_each_table=lambda: failpoints.reached("mid_write", plan.batch_id),
        )
        if timer:
            timer.cancel()
        failpoints.reached("after_write", plan.batch_id)
        commit = BatchCommit(
            plan.batch_id, records, rows, self._clock_ns() // 1_000_000, tuple(rejected)
        )
        self.journal.write_commit(commit)
        failpoints.reached("after_commit", plan.batch_id)
        self._commit_positions(plan)
        self.journal.prune(self.settings.keep_batches)
        log.info(
            "batch %d: %d records, rows %s%s",
            plan.batch_id,
            records,
            rows,
            " (replayed)" if replayed else "",
        )
        return BatchResult(plan.batch_id, records, rows, replayed, len(rejected))

    def _commit_positions(self, plan: BatchPlan) -> None:
        for source in plan.sources:
            directory = Path(source.directory)
            if not directory.is_dir():
                continue
            positions = ConsumerPositions(directory, CONSUMER_NAME)
            if positions.load() != source.to_offset:
                positions.commit(source.to_offset)
