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

This module is the landing directories as a source of the ingest loop (ingest_loop.py,
which plans and appends every source's batches the same way): it claims the directories,
reads (:func:`extract`) and flattens (flatten_pool.py) each batch in the driver, appends
its Arrow tables (:func:`load`) and, after each batch, moves the consumer positions.

One writer per landing directory (an ``flock`` in that directory); several ingest
processes, one per collector node, append to the same tables at once: Iceberg retries
a commit that lost the race on a fresh snapshot, and each process only ever asks about
its own directories' positions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from clock import SYSTEM_CLOCK, Clock
from exporters.lakehouse.commits import SourceRange
from exporters.lakehouse.flatten_pool import Flattened, SourceRecord, shared_flattener
from exporters.lakehouse.ingest_loop import (
    BatchResult,
    Ingest,
    IngestSettings,
    append_tables,
)
from exporters.lakehouse.plan import BatchPlan, batch_start
from exporters.lakehouse.schema import TABLE_NAME_BY_KIND
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
    "LandingSource",
    "append_with_summary",
    "extract",
    "landing_dirs_under",
    "load",
]

log = logging.getLogger(__name__)

CONSUMER_NAME = "lakehouse-ingest"


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
    """Arrow tables appended as a batch's (:func:`ingest_loop.append_tables`: one append
    per table with rows and a summary, ``pushes`` last)."""
    return append_tables(
        _TableAppends(spark, config, dict(tables)),
        summaries,
        after_each_table,
        before_pushes,
    )


def append_with_summary(
    frame: DataFrame, table: str, summary: Mapping[str, str]
) -> None:
    """One Iceberg append of ``frame`` to ``table``, ``summary`` in its snapshot's
    summary (the ranges and positions the exactly-once plan reads back)."""
    writer: Any = frame.writeTo(table)
    for key, value in summary.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    writer.append()


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


@dataclasses.dataclass(slots=True)
class _TableAppends:
    """Arrow tables to append, each a Spark append in the driver."""

    spark: SparkSession
    config: LakehouseConfig
    tables: dict[str, pa.Table]
    rows: dict[str, int] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.rows = {name: int(table.num_rows) for name, table in self.tables.items()}

    def append(self, table: str, summary: Mapping[str, str]) -> None:
        rows = self.tables[table]
        frame = self.spark.createDataFrame(rows, schema=_spark_schema(rows.schema))
        append_with_summary(frame, self.config.table(table), summary)


@dataclasses.dataclass(slots=True)
class _LandingBatch:
    """A batch of the landing directories, flattened in the driver."""

    spark: SparkSession
    config: LakehouseConfig
    ranges: list[SourceRange]
    records: int
    flattened: Flattened
    flattened_by: tuple[str, ...] | None = None

    @property
    def rejected(self) -> list[dict[str, object]]:
        return self.flattened.rejected

    @property
    def flattened_on(self) -> int:
        return self.flattened.processes

    @contextlib.contextmanager
    def appending(
        self, planned: BatchPlan, committed: Mapping[str, Mapping[str, int]]
    ) -> Iterator[_TableAppends]:
        tables = {}
        for kind, table in self.flattened.tables.items():
            name = TABLE_NAME_BY_KIND[kind]
            own = planned.tables[name]
            tables[name] = _rows_from(table, own.keep_from) if own.replayed else table
        yield _TableAppends(self.spark, self.config, tables)

    def release(self) -> None:
        pass  # the rows are this process's, freed with the batch


class LandingSource:
    """The landing directories ``landing_dirs()`` lists (again before each batch, so a
    collector node that starts later is picked up), one ingest each (an ``flock``)."""

    def __init__(
        self,
        config: LakehouseConfig,
        landing_dirs: Callable[[], list[Path]],
        flatten_processes: int,
    ) -> None:
        self._config = config
        self._landing_dirs = landing_dirs
        self._locks: dict[str, _DirectoryLock] = {}
        self._directories: dict[str, Path] = {}
        self._flattener = shared_flattener(flatten_processes)

    def open_session(self) -> SparkSession:
        return open_session(self._config, "ktc-ingest")

    def start(self, spark: SparkSession, catalog: Callable[[], None]) -> None:
        self._refresh_directories()
        catalog()

    def close(self) -> None:
        for lock in self._locks.values():
            lock.release()
        self._locks.clear()

    def read(
        self,
        spark: SparkSession,
        committed: Mapping[str, Mapping[str, int]],
        settings: IngestSettings,
    ) -> _LandingBatch | None:
        self._refresh_directories()
        ranges, records = self._extract(
            batch_start(committed, self._directories), settings
        )
        if not records:
            return None
        return _LandingBatch(
            spark, self._config, ranges, len(records), self._flatten(records)
        )

    def after_commit(self, pushes: Mapping[str, int]) -> None:
        """The landing consumer position of each directory moves to what ``pushes``
        holds, which lets the landing log's retention delete what is in."""
        for name, directory in self._directories.items():
            if name not in pushes or not directory.is_dir():
                continue
            positions = ConsumerPositions(directory, CONSUMER_NAME)
            if positions.load() != pushes[name]:
                positions.commit(pushes[name])

    def _extract(
        self, read_from: Mapping[str, int], settings: IngestSettings
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
                max_records=settings.max_records_per_source,
                max_bytes=settings.max_bytes_per_source,
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


class IngestJob(Ingest):
    """The writer of some landing directories' records (the ingest loop over a
    :class:`LandingSource`); ``run_once`` drains, ``run_forever`` keeps draining."""

    source: LandingSource

    def __init__(
        self,
        config: LakehouseConfig,
        landing_dirs: Callable[[], list[Path]],
        settings: IngestSettings | None = None,
        *,
        spark: SparkSession | None = None,
        maintenance: Callable[[SparkSession], object] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        settings = settings or IngestSettings()
        super().__init__(
            config,
            LandingSource(config, landing_dirs, settings.flatten_processes),
            settings,
            spark=spark,
            maintenance=maintenance,
            clock=clock,
        )
