"""The ingest loop: what makes a batch exactly once, written once for every source.

A source (:class:`IngestSource`) is where landed pushes are numbered by offset: the
landing directories of the nodes (ingest.py) or the partitions of the landing topic
(topic_ingest.py).  The loop owns everything else:

1. **bounds from the tables**: each table's snapshots say, per source, the end of what it
   has committed (commits.py); the source reads each of its sources from the
   ``pushes`` table's position up to its batch bounds (:meth:`IngestSource.read`).
2. **plan** (plan.py, no I/O): what each table gets of the batch, its ranges and
   positions, what a table already holding part of it keeps.
3. **append in order** (:func:`append_tables`): the point tables side by side, then
   ``pushes``, always last, each with its snapshot summary; the failpoints between them.
4. **result**: the positions the appends made, then the source's after-commit
   (:meth:`IngestSource.after_commit`: the landing consumer positions that let the
   landing log's retention delete what is in).

A failure while appending leaves what was committed unknown (a commit can fail after it
succeeded): the loop forgets its positions and the next batch asks the tables again.  A
source whose appends are fenced raises :class:`PositionsMoved` when another ingest
committed part of the batch first: the loop plans the batch again from the tables.

| source | claims it (:meth:`~IngestSource.start`) | reads | flattens | appends |
|---|---|---|---|---|
| landing directories (ingest.py) | an ``flock`` per directory | the landing reader, in the driver | the flatten pool, in the driver | Arrow tables, unfenced (one writer per directory) |
| landing topic (topic_ingest.py) | nothing (any number may run) | Spark's Kafka source | ``mapInArrow`` on the executors | frames written by the executors, fenced |
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol, Self

from clock import SYSTEM_CLOCK, Clock
from exporters.lakehouse import failpoints
from exporters.lakehouse.catalog import ensure_catalog
from exporters.lakehouse.commits import SourceRange, committed_positions
from exporters.lakehouse.flatten_pool import default_processes
from exporters.lakehouse.iceberg_java import table_snapshots
from exporters.lakehouse.plan import PUSHES, WRITE_ORDER, BatchPlan, appends, plan_batch
from exporters.lakehouse.schema import TABLES
from exporters.lakehouse.session import LakehouseConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "BatchResult",
    "Ingest",
    "IngestSettings",
    "IngestSource",
    "PositionsMoved",
    "SourceBatch",
    "TableAppends",
    "append_tables",
]

log = logging.getLogger(__name__)

_CATALOG_ATTEMPTS = 3
Positions = Mapping[str, Mapping[str, int]]


@dataclasses.dataclass(frozen=True, slots=True)
class IngestSettings:
    # Bounds of one batch per source.  20,000 librdkafka pushes are about 200,000
    # points, a few hundred MB of Python lists at most.
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
    ranges: dict[str, tuple[int, int]]  # source -> [from, to)
    replayed: bool  # some table already held part of it (a batch killed midway)
    rejected: int = 0
    seconds: float = 0.0
    flattened_on: int = 1  # processes that flattened it (flatten_pool.py)
    # The processes that flattened it, "host:pid" each, where the source names them.
    flattened_by: tuple[str, ...] | None = None


class PositionsMoved(RuntimeError):
    """Another ingest committed some of the batch's records to a table after the batch
    was planned: the batch is planned again."""

    def __init__(self, table: str, moved: Mapping[str, tuple[int, int]]) -> None:
        self.table = table
        self.moved = dict(moved)
        super().__init__(
            f"another ingest committed {table} up to "
            + ", ".join(
                f"{n} {now} (planned from {was})"
                for n, (was, now) in sorted(moved.items())
            )
        )


class TableAppends(Protocol):
    """A batch's appends, ready: the rows each table would get, and the append."""

    @property
    def rows(self) -> Mapping[str, int]:
        """Per table with rows prepared: how many it gets (after what it keeps)."""
        ...

    def append(self, table: str, summary: Mapping[str, str]) -> None:
        """Append ``table``'s rows of the batch with ``summary`` in its snapshot."""
        ...


class SourceBatch(Protocol):
    """One batch read (and flattened) from a source."""

    @property
    def ranges(self) -> list[SourceRange]:
        """Every source's range of the batch, empty ones included."""
        ...

    @property
    def records(self) -> int: ...

    @property
    def rejected(self) -> list[dict[str, object]]: ...

    @property
    def flattened_by(self) -> tuple[str, ...] | None:
        """The processes that flattened it, "host:pid" each; None: not named."""
        ...

    @property
    def flattened_on(self) -> int:
        """How many processes flattened it."""
        ...

    def appending(
        self, planned: BatchPlan, committed: Positions
    ) -> contextlib.AbstractContextManager[TableAppends]:
        """The batch's appends as ``planned`` from ``committed``, while the block runs."""
        ...

    def release(self) -> None:
        """Frees what the batch holds (rows persisted on the executors)."""
        ...


class IngestSource(Protocol):
    """Where landed pushes are read from (the table in the module docstring)."""

    def open_session(self) -> SparkSession:
        """The Spark session the source's batches are read and appended with."""
        ...

    def start(self, spark: SparkSession, catalog: Callable[[], None]) -> None:
        """Claims the source and has ``catalog()`` create the tables and views."""
        ...

    def read(
        self, spark: SparkSession, committed: Positions, settings: IngestSettings
    ) -> SourceBatch | None:
        """The next batch from the ``pushes`` table's positions; None if nothing new."""
        ...

    def after_commit(self, pushes: Mapping[str, int]) -> None:
        """Called with the ``pushes`` table's positions after a batch, or when none."""
        ...

    def close(self) -> None: ...


def append_tables(
    tables: TableAppends,
    summaries: Mapping[str, Mapping[str, str]],
    after_each_table: Callable[[], None] = lambda: None,
    before_pushes: Callable[[], None] = lambda: None,
) -> dict[str, int]:
    """The order every batch's appends keep: one append per table with rows and a
    summary (and one for ``pushes`` whenever it has a summary, rows or not), each with
    its snapshot summary; the point tables side by side, then ``pushes``, always last (a
    batch is in once ``pushes`` holds it).  Rows appended per table.  Every point-table
    append has ended (committed or failed) before the first failure is raised: a commit
    in flight cannot be called back.

    Side by side because each append ends in a commit that is mostly waiting (the
    manifest list, the metadata file, the catalog's transaction) while the other's files
    are written: a 5,000-push batch's appends take about 0.2 s less.  Each table commits
    on its own either way, which the positions in its snapshots account for."""

    def append(name: str) -> int:
        tables.append(name, summaries[name])
        after_each_table()
        return tables.rows[name]

    def wanted(name: str) -> bool:
        return (
            name in tables.rows
            and name in summaries
            and appends(name, tables.rows[name])
        )

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


class Ingest:
    """The writer of one source's records into the tables; ``run_once`` drains,
    ``run_forever`` keeps draining."""

    def __init__(
        self,
        config: LakehouseConfig,
        source: IngestSource,
        settings: IngestSettings,
        *,
        spark: SparkSession | None = None,
        maintenance: Callable[[SparkSession], object] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.config = config
        self.source = source
        self.settings = settings
        self._clock = clock
        self._spark = spark
        self._maintenance = maintenance
        # Per table, per source: the end of what the table has committed.
        self._positions: dict[str, dict[str, int]] | None = None
        self._batches = 0
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = self.source.open_session()
        return self._spark

    def start(self) -> None:
        """Claim the source; create the catalog's namespace, tables and views."""
        if self._started:
            return
        self.source.start(self.spark, self._ensure_catalog)
        self._started = True

    def _ensure_catalog(self) -> None:
        for attempt in range(_CATALOG_ATTEMPTS):
            try:
                ensure_catalog(self.spark, self.config.database)
                return
            except Exception as exc:
                # Two ingests starting together both create the views: the second
                # commit of a view fails on the first's; the next attempt finds it done.
                if attempt + 1 == _CATALOG_ATTEMPTS:
                    raise
                log.warning(
                    "creating the catalog raced another process (%s); again", exc
                )

    def close(self) -> None:
        self.source.close()
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
        """Read, write and commit one batch; None if there was nothing new.  A batch
        another ingest committed part of meanwhile (:class:`PositionsMoved`) is planned
        again from the tables."""
        while True:
            try:
                return self._run_batch()
            except PositionsMoved as exc:
                log.warning("%s: planning the batch again", exc)

    def _run_batch(self) -> BatchResult | None:
        started = self._clock.monotonic()
        committed = self.positions
        read = self.source.read(self.spark, committed, self.settings)
        if read is None:
            self.source.after_commit(committed.get(PUSHES, {}))
            return None
        try:
            self._batches += 1
            batch = self._batches
            failpoints.reached("after_read", batch)
            planned = plan_batch(read.ranges, committed, read.rejected)
            rows = self._append(batch, planned, committed, read)
        finally:
            read.release()
        self._positions = planned.positions_after()
        failpoints.reached("after_write", batch)
        self.source.after_commit(self._positions[PUSHES])
        result = BatchResult(
            batch,
            read.records,
            rows,
            {r.name: (r.from_offset, r.to_offset) for r in read.ranges if not r.empty},
            planned.replayed,
            len(read.rejected),
            self._clock.monotonic() - started,
            read.flattened_on,
            read.flattened_by,
        )
        log.info(
            "batch %d: %d records, rows %s%s",
            batch,
            read.records,
            rows,
            " (replayed)" if planned.replayed else "",
        )
        return result

    def _append(
        self, batch: int, planned: BatchPlan, committed: Positions, read: SourceBatch
    ) -> dict[str, int]:
        """Each table's planned rows appended with its summary, in :func:`append_tables`'
        order and with its failpoints."""
        timer = failpoints.arm_timer(batch)
        try:
            with read.appending(planned, committed) as tables:
                return append_tables(
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
        """Ingest until the source holds nothing new."""
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
