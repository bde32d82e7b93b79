"""The Spark ingest: landing logs -> Iceberg tables, exactly once.

Extract (:func:`extract`, the landing reader), transform (flatten_pool.py)
and load (:func:`load`, Spark appends) are separate; :class:`IngestJob` sequences them
so that killing the process at any moment and running it again leaves every landing
record in the tables exactly once, with no state of its own beside the tables:

1. **where to start**: each table's snapshots say, per landing directory, the end of
   what it has committed (commits.py).  The job reads each directory from the
   ``pushes`` table's position, up to the batch bounds.
2. **write**: one Iceberg append per table that has rows, the ``pushes`` table last,
   each recording the offsets it covers in its snapshot summary, atomically with its
   rows.  A table whose committed position is ahead of the batch start (a batch the
   previous process was killed in the middle of) gets only the rows past its position.
3. **consumer positions**: then the landing consumer position ``lakehouse-ingest`` of
   each directory moves, which lets the landing log's retention delete what is in.

What to commit where is decided by plan.py, without I/O; :meth:`IngestJob.run_batch`
reads (extract, flatten), plans, loads and then advances the positions.

One writer per landing directory (an ``flock`` in that directory); several ingest
processes, one per collector node, append to the same tables at once: Iceberg retries
a commit that lost the race on a fresh snapshot, and each process only ever asks about
its own directories' positions.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import pyarrow as pa
import pyarrow.compute as pc

from clock import SYSTEM_CLOCK, Clock
from exporters.lakehouse import failpoints
from exporters.lakehouse.catalog import ensure_catalog
from exporters.lakehouse.commits import SourceRange, committed_positions
from exporters.lakehouse.flatten_pool import (
    Flattened,
    SourceRecord,
    default_processes,
    shared_flattener,
)
from exporters.lakehouse.iceberg_java import table_snapshots
from exporters.lakehouse.plan import (
    PUSHES,
    WRITE_ORDER,
    BatchPlan,
    appends,
    batch_start,
    plan_batch,
)
from exporters.lakehouse.schema import TABLE_NAME_BY_KIND, TABLES
from exporters.lakehouse.session import LakehouseConfig, open_session
from exporters.landing import (
    ConsumerPositions,
    LandingReader,
    LandingRecord,
    node_directories,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "CONSUMER_NAME",
    "BatchResult",
    "IngestJob",
    "IngestSettings",
    "LandingDirBusy",
    "append_in_order",
    "append_with_summary",
    "extract",
    "landing_dirs_under",
    "load",
]

log = logging.getLogger(__name__)

CONSUMER_NAME = "lakehouse-ingest"
_CATALOG_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True, slots=True)
class IngestSettings:
    # Bounds of one batch per landing directory.  20,000 librdkafka pushes are about
    # 200,000 points, a few hundred MB of Python lists at most.
    max_records_per_source: int = 20_000
    max_bytes_per_source: int = 64 * 1024 * 1024
    # Streaming: a batch starts at most this long after the previous one ended; with
    # a batch taking seconds, a push is queryable well within 30 s.
    trigger_interval_s: float = 10.0
    # Maintenance (compaction, retention, snapshot expiry) between batches.
    maintenance_interval_s: float | None = 3600.0
    retention_days: int | None = None
    # Processes that flatten a large batch (flatten_pool.py), this one included.
    flatten_processes: int = dataclasses.field(default_factory=default_processes)


@dataclasses.dataclass(frozen=True, slots=True)
class BatchResult:
    batch: int  # this process's batch number, from 1
    records: int
    rows: dict[str, int]
    ranges: dict[str, tuple[int, int]]  # landing directory -> [from, to)
    replayed: bool  # some table already held part of it (a batch killed midway)
    rejected: int = 0
    seconds: float = 0.0
    flattened_on: int = 1  # processes that flattened it (flatten_pool.py)


class LandingDirBusy(RuntimeError):
    """Another ingest process writes this landing directory's records."""


def landing_dirs_under(data_dir: Path) -> Callable[[], list[Path]]:
    """Every ``<data-dir>/landing/node-*`` directory, looked up again before each batch
    so a collector node that starts later is picked up."""
    return lambda: node_directories(Path(data_dir))


def extract(
    source: SourceRange, *, max_records: int | None = None, max_bytes: int | None = None
) -> Iterator[LandingRecord]:
    """The landing records of a directory from ``from_offset``, up to the bounds."""
    reader = LandingReader(Path(source.directory))
    yield from reader.read(
        source.from_offset, max_records=max_records, max_bytes=max_bytes
    )


def load(
    spark: SparkSession,
    config: LakehouseConfig,
    tables: Mapping[str, pa.Table],
    summaries: Mapping[str, Mapping[str, str]],
    after_each_table: Callable[[], None] = lambda: None,
    before_pushes: Callable[[], None] = lambda: None,
) -> dict[str, int]:
    """One Iceberg append per table with rows and a summary (and one for ``pushes``
    whenever it has a summary, rows or not), each with its snapshot summary: the point
    tables' side by side, then ``pushes``, always last (a batch is in once ``pushes``
    holds it).

    Side by side because each append ends in a commit that is mostly waiting (the
    manifest list, the metadata file, the catalog's transaction) while the other's files
    are written: a 5,000-push batch's appends take about 0.2 s less.  Each table commits
    on its own either way, which the positions in its snapshots account for.
    """

    def append(name: str) -> int:
        table = tables[name]
        frame = spark.createDataFrame(table, schema=_spark_schema(table.schema))
        append_with_summary(frame, config.table(name), summaries[name])
        after_each_table()
        return int(table.num_rows)

    def wanted(name: str) -> bool:
        table = tables.get(name)
        return (
            table is not None
            and name in summaries
            and appends(name, int(table.num_rows))
        )

    return append_in_order(append, wanted, before_pushes)


def append_with_summary(
    frame: DataFrame, table: str, summary: Mapping[str, str]
) -> None:
    """One Iceberg append of ``frame`` to ``table``, ``summary`` in its snapshot's
    summary (the ranges and positions the exactly-once plan reads back)."""
    writer: Any = frame.writeTo(table)
    for key, value in summary.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    writer.append()


def append_in_order(
    append: Callable[[str], int],
    wanted: Callable[[str], bool],
    before_pushes: Callable[[], None],
) -> dict[str, int]:
    """The order every batch's appends keep (the landing logs' and the topic's): the
    wanted point tables side by side, then ``pushes``, always last; rows appended per
    table.  Every point-table append has ended (committed or failed) before the first
    failure is raised: a commit in flight cannot be called back."""
    point_tables = [n for n in WRITE_ORDER if n != PUSHES and wanted(n)]
    appended: dict[str, Future[int]] = {}
    if point_tables:
        with ThreadPoolExecutor(
            max_workers=len(point_tables), thread_name_prefix="ktc-append"
        ) as pool:
            appended = {name: pool.submit(append, name) for name in point_tables}
        for future in appended.values():
            if (error := future.exception()) is not None:
                raise error
    rows = {name: future.result() for name, future in appended.items()}
    if wanted(PUSHES):
        before_pushes()
        rows[PUSHES] = append(PUSHES)
    return rows


def _spark_schema(schema: pa.Schema) -> Any:
    """The Spark schema of an Arrow schema (an empty table needs one given)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def _rows_from(table: pa.Table, keep_from: Mapping[str, int]) -> pa.Table:
    """The rows whose landing offset is at or past ``keep_from`` of their directory
    (:meth:`plan.TablePlan.keeps`, on Arrow columns)."""
    if table.num_rows == 0 or not keep_from:
        return table
    keep = None
    nodes = table.column("landing_node")
    offsets = table.column("landing_offset")
    for name in set(nodes.to_pylist()):
        mask = pc.and_(
            pc.equal(nodes, name), pc.greater_equal(offsets, keep_from.get(name, 0))
        )
        keep = mask if keep is None else pc.or_(keep, mask)
    return table.filter(keep)


class _DirectoryLock:
    """``flock`` on ``<landing dir>/lakehouse-ingest.lock``: one ingest per directory."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / f"{CONSUMER_NAME}.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise LandingDirBusy(
                    f"another `ktc ingest` is ingesting {self.path.parent} (it holds {self.path})"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


class IngestJob:
    """The writer of some landing directories; ``run_once`` drains, ``run_forever`` keeps
    draining."""

    def __init__(
        self,
        config: LakehouseConfig,
        landing_dirs: Callable[[], list[Path]],
        settings: IngestSettings = IngestSettings(),
        *,
        spark: SparkSession | None = None,
        maintenance: Callable[[SparkSession], object] | None = None,
        on_progress: Callable[[str], None] = lambda line: None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.config = config
        self.settings = settings
        self._clock = clock
        self._landing_dirs = landing_dirs
        self._spark = spark
        self._maintenance = maintenance
        self._on_progress = on_progress
        self._locks: dict[str, _DirectoryLock] = {}
        self._directories: dict[str, Path] = {}
        # Per table, per landing directory: the end of what the table has committed.
        self._positions: dict[str, dict[str, int]] | None = None
        self._batches = 0
        self._started = False
        self._flattener = shared_flattener(settings.flatten_processes)

    # ------------------------------------------------------------------ lifecycle

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = open_session(self.config, "ktc-ingest")
        return self._spark

    def start(self) -> None:
        """Create the catalog's namespace, tables and views; lock the landing directories."""
        if self._started:
            return
        self._refresh_directories()
        for attempt in range(_CATALOG_ATTEMPTS):
            try:
                ensure_catalog(self.spark, self.config.database)
                break
            except Exception as exc:
                # Two nodes' ingests starting together both create the views: the second
                # commit of a view fails on the first's; the next attempt finds it done.
                if attempt + 1 == _CATALOG_ATTEMPTS:
                    raise
                log.warning(
                    "creating the catalog raced another process (%s); again", exc
                )
        self._started = True

    def close(self) -> None:
        for lock in self._locks.values():
            lock.release()
        self._locks.clear()
        self._started = False

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ positions

    def reload_positions(self) -> dict[str, dict[str, int]]:
        """Every table's committed positions, from its snapshots."""
        self._positions = {
            table.name: committed_positions(
                table_snapshots(self.spark, self.config.table(table.name))
            )
            for table in TABLES
        }
        return self._positions

    @property
    def positions(self) -> dict[str, dict[str, int]]:
        if self._positions is None:
            return self.reload_positions()
        return self._positions

    # ------------------------------------------------------------------ batches

    def run_batch(self) -> BatchResult | None:
        """Read, write and commit one batch; None if there was nothing new."""
        started = self._clock.monotonic()
        self._refresh_directories()
        committed = self.positions
        ranges, records = self._extract(batch_start(committed, self._directories))
        if not records:
            self._commit_consumer_positions()
            return None
        flattened = self._flatten(records)
        self._batches += 1
        batch = self._batches
        failpoints.reached("after_read", batch)
        planned = plan_batch(ranges, committed, flattened.rejected)
        rows = self._load(batch, planned, flattened)
        self._positions = planned.positions_after()
        failpoints.reached("after_write", batch)
        self._commit_consumer_positions()
        result = BatchResult(
            batch,
            len(records),
            rows,
            {r.name: (r.from_offset, r.to_offset) for r in ranges if not r.empty},
            planned.replayed,
            len(flattened.rejected),
            self._clock.monotonic() - started,
            flattened.processes,
        )
        log.info(
            "batch %d: %d records, rows %s%s",
            batch,
            len(records),
            rows,
            " (replayed)" if planned.replayed else "",
        )
        return result

    def _extract(
        self, read_from: Mapping[str, int]
    ) -> tuple[list[SourceRange], list[SourceRecord]]:
        """Each landing directory's records from ``read_from``, up to the batch bounds,
        and the range read of each."""
        ranges: list[SourceRange] = []
        records: list[SourceRecord] = []
        for name, directory in sorted(self._directories.items()):
            source = SourceRange(name, str(directory), read_from[name], 0)
            to_offset = source.from_offset
            for record in extract(
                source,
                max_records=self.settings.max_records_per_source,
                max_bytes=self.settings.max_bytes_per_source,
            ):
                to_offset = record.offset + 1
                records.append(SourceRecord(name, record))
            ranges.append(
                dataclasses.replace(
                    source, to_offset=max(to_offset, source.from_offset)
                )
            )
        return ranges, records

    def _flatten(self, records: list[SourceRecord]) -> Flattened:
        """The batch's rows (flatten_pool.py); the records that are not OTLP logged."""
        flattened = self._flattener.flatten(records)
        for entry in flattened.rejected:
            log.error(
                "%s offset %d: not OTLP MetricsData: %s",
                entry["source"],
                entry["offset"],
                entry["error"],
            )
        return flattened

    def _load(
        self, batch: int, planned: BatchPlan, flattened: Flattened
    ) -> dict[str, int]:
        """Append each table's planned rows with its summary (:func:`load`)."""
        tables = {}
        for kind, table in flattened.tables.items():
            name = TABLE_NAME_BY_KIND[kind]
            own = planned.tables[name]
            tables[name] = _rows_from(table, own.keep_from) if own.replayed else table
        timer = failpoints.arm_timer(batch)
        try:
            return load(
                self.spark,
                self.config,
                tables,
                planned.summaries,
                after_each_table=lambda: failpoints.reached("mid_write", batch),
                before_pushes=lambda: failpoints.reached("before_pushes", batch),
            )
        except BaseException:
            # Committed or not is unknown (a commit can fail after it succeeded): the
            # tables say, the next batch asks them again.
            self._positions = None
            raise
        finally:
            if timer:
                timer.cancel()

    def run_once(self) -> list[BatchResult]:
        """Ingest until the landing logs hold nothing new."""
        self.start()
        results = []
        while (result := self.run_batch()) is not None:
            results.append(result)
        return results

    def run_forever(
        self,
        stop: threading.Event,
        on_batch: Callable[[BatchResult], None] = lambda r: None,
    ) -> None:
        """Drain every ``trigger_interval_s`` until ``stop`` is set; between batches run
        maintenance every ``maintenance_interval_s``."""
        self.start()
        last_maintenance = self._clock.monotonic()
        while not stop.is_set():
            started = self._clock.monotonic()
            while not stop.is_set() and (result := self.run_batch()) is not None:
                on_batch(result)
            interval = self.settings.maintenance_interval_s
            if (
                self._maintenance
                and interval is not None
                and self._clock.monotonic() - last_maintenance >= interval
                and not stop.is_set()
            ):
                self._maintenance(self.spark)
                self._positions = None  # maintenance commits carry them; read again
                last_maintenance = self._clock.monotonic()
            self._clock.wait(
                stop,
                max(
                    0.0,
                    self.settings.trigger_interval_s
                    - (self._clock.monotonic() - started),
                ),
            )

    # ------------------------------------------------------------------ internals

    def _refresh_directories(self) -> None:
        """Lock every landing directory not seen before (fails if another ingest has it)."""
        for directory in self._landing_dirs():
            name = directory.name
            known = self._directories.get(name)
            if known is not None and known != directory and known.exists():
                raise ValueError(
                    f"two landing directories are named {name!r}: {known} and {directory}; "
                    "rows record the name, so it must be unique"
                )
            if name not in self._locks:
                lock = _DirectoryLock(directory)
                lock.acquire()
                self._locks[name] = lock
            self._directories[name] = directory

    def _commit_consumer_positions(self) -> None:
        committed = self.positions[PUSHES]
        for name, directory in self._directories.items():
            if name not in committed or not directory.is_dir():
                continue
            positions = ConsumerPositions(directory, CONSUMER_NAME)
            if positions.load() != committed[name]:
                positions.commit(committed[name])
