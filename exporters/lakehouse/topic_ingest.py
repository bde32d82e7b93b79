"""The Spark ingest from the landing topic: Kafka -> Iceberg tables, exactly once.

The landing-log ingest's job (ingest.py) with the topic as its source: each partition of
the topic is a source like a landing directory (topic_source.py), and everything that
makes a batch exactly once is the same code: the positions are the offsets in the tables'
snapshot summaries (commits.py), the plan decides what each table gets (plan.py), the
appends are in :func:`ingest.load`'s order with its snapshot summaries, and the failpoints
are the same.  The rows themselves never pass through the driver: they go from the
executors that flatten them to the executors that write them.

A batch:

1. **bounds**: each partition's earliest and latest offsets, asked by a Kafka consumer
   in the driver's JVM; the batch reads each partition from the ``pushes`` table's
   position up to the latest offset or ``max_records_per_source`` records, whichever
   is first.  The bounds are fixed before anything is read, so a batch is a fixed
   offset range per partition, which is what the summaries record.
2. **read and flatten on the executors**: one Spark job, Spark's Kafka source in batch
   mode (``startingOffsets``/``endingOffsets`` as JSON) and ``mapInArrow`` running
   :func:`topic_source.flatten_topic_batches` where the records are, its output
   persisted there (Kafka is read once per batch).  The driver gets back the small
   things only: each table's row count, the records read, the rejected records and
   which processes flattened them.
3. **plan, append, in that order**: as the landing-log ingest (the point tables side by
   side, ``pushes`` last, each append with its ranges and positions in its summary).
   Each table's append is a Spark write of a frame derived from the persisted output,
   in the JVM alone (the output holds the rows in Spark's types: the rows tagged with
   the table's name, the fields of its struct column; for a table already holding part
   of the batch, a filter on ``landing_node`` and ``landing_offset`` keeps the rows past
   its position), so the executors write the rows they flattened.

Nothing is committed to Kafka: the tables hold the positions, so a consumer group's
offsets could only disagree with them.  One ingest per topic: two would both read from
the same positions.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import operator
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from clock import SYSTEM_CLOCK, Clock
from exporters.lakehouse import failpoints
from exporters.lakehouse.commits import SourceRange
from exporters.lakehouse.ingest import (
    BatchResult,
    IngestJob,
    IngestSettings,
    append_in_order,
    append_with_summary,
)
from exporters.lakehouse.plan import (
    WRITE_ORDER,
    BatchPlan,
    TablePlan,
    appends,
    batch_start,
    plan_batch,
)
from exporters.lakehouse.session import LakehouseConfig, open_session
from exporters.lakehouse.topic_source import (
    FLATTENED_SCHEMA,
    PartitionOffsets,
    TopicSource,
    TopicUnavailable,
    flatten_topic_batches,
    kafka_source_jars,
    source_name,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

__all__ = ["TopicBatchResult", "TopicIngestJob", "TopicOffsetsReset", "executor_conf"]

log = logging.getLogger(__name__)

# The directory holding the ``exporters`` package: the executors' Python workers import
# the flattening from there.
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True, slots=True)
class _Flattened:
    """What the driver gets back of a batch's flattening: small things only."""

    frame: DataFrame  # FLATTENED_SCHEMA, persisted on the executors
    rows: dict[str, int]  # per table, the rows flattened
    records: int
    rejected: list[dict[str, object]]
    flattened_by: tuple[str, ...]


class TopicOffsetsReset(TopicUnavailable):
    """A partition ends before the position the tables hold for it: the topic was
    deleted and created again, and its offsets no longer name the records ingested."""


@dataclasses.dataclass(frozen=True, slots=True)
class TopicBatchResult(BatchResult):
    # The processes that flattened the batch's records, "host:pid" each.
    flattened_by: tuple[str, ...] = ()


def executor_conf() -> dict[str, str]:
    """What executors need to import the flattening: the project on their Python path.
    On a cluster of other machines, pass ``spark.executorEnv.PYTHONPATH`` naming the
    project's install there (and ``PYSPARK_PYTHON``, the interpreter)."""
    return {"spark.executorEnv.PYTHONPATH": str(_PROJECT_ROOT)}


def _python_for_executors() -> None:
    """PySpark runs its Python workers with ``PYSPARK_PYTHON`` (default ``python3``,
    which may lack pyarrow and protobuf): this interpreter, unless it is set."""
    if not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable


class TopicIngestJob(IngestJob):
    """The writer of one landing topic's records; ``run_once`` drains, ``run_forever``
    keeps draining (ingest.py's)."""

    def __init__(
        self,
        config: LakehouseConfig,
        source: TopicSource,
        settings: IngestSettings | None = None,
        *,
        spark: SparkSession | None = None,
        maintenance: Callable[[SparkSession], object] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(
            config,
            lambda: [],
            settings or IngestSettings(),
            spark=spark,
            maintenance=maintenance,
            clock=clock,
        )
        self.source = source

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            _python_for_executors()
            self._spark = open_session(
                self.config,
                "ktc-ingest",
                extra_jars=kafka_source_jars(),
                defaults=executor_conf(),
            )
        return self._spark

    def run_batch(self) -> TopicBatchResult | None:
        """Read, flatten (on the executors), write and commit one batch; None if the
        topic held nothing new."""
        started = self._clock.monotonic()
        committed = self.positions
        ranges = self._bounds(committed, self.source.offsets(self.spark))
        wanted = [r for r in ranges if not r.empty]
        if not wanted:
            return None
        flattened = self._read_flattened(wanted)
        try:
            self._batches += 1
            batch = self._batches
            failpoints.reached("after_read", batch)
            planned = plan_batch(ranges, committed, flattened.rejected)
            rows = self._write(batch, planned, flattened)
        finally:
            flattened.frame.unpersist()
        self._positions = planned.positions_after()
        failpoints.reached("after_write", batch)
        result = TopicBatchResult(
            batch,
            flattened.records,
            rows,
            {r.name: (r.from_offset, r.to_offset) for r in wanted},
            planned.replayed,
            len(flattened.rejected),
            self._clock.monotonic() - started,
            len(flattened.flattened_by),
            flattened.flattened_by,
        )
        log.info(
            "batch %d: %d records, rows %s%s",
            batch,
            flattened.records,
            rows,
            " (replayed)" if planned.replayed else "",
        )
        return result

    def _bounds(
        self,
        committed: Mapping[str, Mapping[str, int]],
        offsets: list[PartitionOffsets],
    ) -> list[SourceRange]:
        """Each partition's range of this batch: from the ``pushes`` table's position
        (or the earliest offset the topic holds), at most ``max_records_per_source``."""
        topic = self.source.topic
        names = {p.partition: source_name(topic, p.partition) for p in offsets}
        read_from = batch_start(committed, names.values())
        known = committed.get("pushes", {})
        ranges = []
        for partition in offsets:
            name = names[partition.partition]
            start = read_from[name]
            if start > partition.latest:
                raise TopicOffsetsReset(
                    f"{topic} partition {partition.partition} ends at offset "
                    f"{partition.latest}, but the tables hold it up to {start}: the "
                    "topic was created again; ingest it into another --database"
                )
            if start < partition.earliest:
                if name in known:
                    log.error(
                        "%s: offsets %d-%d were deleted by the topic's retention "
                        "before they were ingested",
                        name,
                        start,
                        partition.earliest,
                    )
                start = partition.earliest
            end = min(partition.latest, start + self.settings.max_records_per_source)
            ranges.append(SourceRange(name, topic, start, end))
        return ranges

    def _read_flattened(self, ranges: list[SourceRange]) -> _Flattened:
        """One Spark job: the ranges read by Spark's Kafka source and flattened by
        ``mapInArrow`` on the executors, kept there (persisted) for the writes; the
        driver gets the counts, the rejected records and who flattened."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        partitions = {r.name: int(r.name.rsplit(":", 1)[1]) for r in ranges}
        options = self.source.read_options(
            {partitions[r.name]: r.from_offset for r in ranges},
            {partitions[r.name]: r.to_offset for r in ranges},
        )
        # Spark makes one task per partition's range; fewer partitions than cores get
        # their ranges split, so every core flattens.
        parallelism = self.spark.sparkContext.defaultParallelism
        if len(ranges) < parallelism:
            options["minPartitions"] = str(parallelism)
        frame = self.spark.read.format("kafka").options(**options).load()
        flattened = (
            frame.select(
                "topic", "partition", "offset", "value", "headers", "timestamp"
            )
            .mapInArrow(flatten_topic_batches, from_arrow_schema(FLATTENED_SCHEMA))  # type: ignore[arg-type]
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        try:
            collected = (
                flattened.filter(F.col("table").isNull())
                .select("rows", "records", "rejected", "flattened_by")
                .toArrow()
            )
        except BaseException:
            flattened.unpersist()
            raise
        rows: dict[str, int] = {}
        records = 0
        rejected: list[dict[str, object]] = []
        flattened_by: set[str] = set()
        for entry in collected.to_pylist():
            for name, count in entry["rows"]:
                rows[name] = rows.get(name, 0) + count
            records += entry["records"]
            rejected.extend(json.loads(entry["rejected"]))
            flattened_by.add(entry["flattened_by"])
        for item in rejected:
            log.error(
                "%s offset %d: not a format-1 OTLP record: %s",
                item["source"],
                item["offset"],
                item["error"],
            )
        return _Flattened(
            flattened, rows, records, rejected, tuple(sorted(flattened_by))
        )

    def _write(
        self, batch: int, planned: BatchPlan, flattened: _Flattened
    ) -> dict[str, int]:
        """Each table's planned rows appended with its summary, in :func:`ingest.load`'s
        order (the point tables side by side, then ``pushes`` whenever it has a summary)
        and with its failpoints; the rows written by the executors."""
        frames: dict[str, tuple[DataFrame, int]] = {}
        try:
            for name in WRITE_ORDER:
                own = planned.tables[name]
                if own.summary:
                    frames[name] = self._table_frame(flattened, own)
            timer = failpoints.arm_timer(batch)
            try:
                return _append_frames(
                    self.config.table,
                    frames,
                    planned.summaries,
                    after_each_table=lambda: failpoints.reached("mid_write", batch),
                    before_pushes=lambda: failpoints.reached("before_pushes", batch),
                )
            finally:
                if timer:
                    timer.cancel()
        except BaseException:
            # Committed or not is unknown (a commit can fail after it succeeded): the
            # tables say, the next batch asks them again.
            self._positions = None
            raise

    def _table_frame(
        self, flattened: _Flattened, own: TablePlan
    ) -> tuple[DataFrame, int]:
        """A table's rows of the batch as a frame in its schema, and how many: for a
        table that holds part of the batch already, only the rows past its position
        (:meth:`plan.TablePlan.keeps`, as a filter)."""
        from pyspark.sql import functions as F

        frame = flattened.frame.filter(F.col("table") == own.name).select(
            f"{own.name}.*"
        )
        rows = flattened.rows.get(own.name, 0)
        keep_from = own.keep_from
        if own.replayed and keep_from and rows:
            keep = functools.reduce(
                operator.or_,
                [
                    (F.col("landing_node") == node) & (F.col("landing_offset") >= start)
                    for node, start in sorted(keep_from.items())
                ],
            )
            frame = frame.filter(keep)
            rows = frame.count()
        return frame, rows


def _append_frames(
    table_name: Callable[[str], str],
    frames: Mapping[str, tuple[DataFrame, int]],
    summaries: Mapping[str, Mapping[str, str]],
    after_each_table: Callable[[], None],
    before_pushes: Callable[[], None],
) -> dict[str, int]:
    """:func:`ingest.load`'s appends, of frames: one per table with rows and a summary
    (and ``pushes`` whenever it has a summary, rows or not), each with its snapshot
    summary; the point tables side by side, then ``pushes``, always last."""

    def append(name: str) -> int:
        frame, rows = frames[name]
        append_with_summary(frame, table_name(name), summaries[name])
        after_each_table()
        return rows

    def wanted(name: str) -> bool:
        return name in frames and name in summaries and appends(name, frames[name][1])

    return append_in_order(append, wanted, before_pushes)
