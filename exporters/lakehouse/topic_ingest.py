"""The Spark ingest from the landing topic: Kafka -> Iceberg tables, exactly once.

The landing topic as a source of the ingest loop (ingest_loop.py): each partition of the
topic is a source like a landing directory (topic_source.py), and everything that makes a
batch exactly once is the loop's, the same as the landing logs': the positions are the
offsets in the tables' snapshot summaries (commits.py), the plan decides what each table
gets (plan.py), the appends are in :func:`ingest_loop.append_tables`' order with their
snapshot summaries, and the failpoints are the same.  The rows themselves never pass through the driver: they go from the
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
offsets could only disagree with them.

Any number of ingests may run on one topic (docs/scale-out.md, "Fencing the ingests"):
each table's append is fenced by the positions it was planned from.  Spark writes the
table's files as a staged snapshot (Iceberg's write-audit-publish: files and a
snapshot, not the table's current one, no positions in its summary); the driver then
publishes those files with an append of its own, which checks that every position the
append starts from is still the table's (:func:`plan.moved_positions`) and commits only
on the snapshot it checked (Iceberg's ``validateWith``: the check is run again on the
refreshed table at each of Iceberg's commit attempts, and the commit itself is the
catalog's compare-and-swap of the table's metadata).  Another ingest that committed
those records first moved the positions: the append is not made, the batch is planned
again from the tables, and what the other committed is not appended twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import operator
import os
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from clock import SYSTEM_CLOCK, Clock
from exporters.lakehouse.commits import SourceRange, committed_positions
from exporters.lakehouse.iceberg_java import iceberg_table, table_state
from exporters.lakehouse.ingest_loop import Ingest, IngestSettings, PositionsMoved
from exporters.lakehouse.plan import (
    WRITE_ORDER,
    BatchPlan,
    OffsetsReset,
    TablePlan,
    batch_start,
    moved_positions,
    partition_bounds,
)
from exporters.lakehouse.schema import TABLES
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
    from collections.abc import Callable, Iterator

    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "PositionsMoved",
    "TopicIngestJob",
    "TopicIngestSource",
    "TopicOffsetsReset",
    "executor_conf",
]

log = logging.getLogger(__name__)

# The directory holding the ``exporters`` package: the executors' Python workers import
# the flattening from there.
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Iceberg's write-audit-publish: with the table property on, a Spark write in a session
# whose ``spark.wap.id`` is set commits a staged snapshot (SparkWrite.commitOperation).
_WAP_PROPERTY = "write.wap.enabled"
_WAP_ID_CONF = "spark.wap.id"
_STAGED_WAP_ID = "wap.id"  # SnapshotSummary.STAGED_WAP_ID_PROP
# The fence's validator names itself in Iceberg's ValidationException.
_FENCE_MESSAGE = "ktc: the table moved since its positions were checked"


class TopicOffsetsReset(TopicUnavailable):
    """A partition ends before the position the tables hold for it: the topic was
    deleted and created again, and its offsets no longer name the records ingested."""


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


class TopicIngestSource:
    """The partitions of one landing topic, read by Spark's Kafka source and flattened
    on the executors; any number of ingests may read them (the appends are fenced)."""

    def __init__(self, config: LakehouseConfig, kafka: TopicSource) -> None:
        self._config = config
        self.kafka = kafka

    @property
    def topic(self) -> str:
        return self.kafka.topic

    def open_session(self) -> SparkSession:
        _python_for_executors()
        return open_session(
            self._config,
            "ktc-ingest",
            extra_jars=kafka_source_jars(),
            defaults=executor_conf(),
        )

    def start(self, spark: SparkSession, catalog: Callable[[], None]) -> None:
        """The catalog, then write-audit-publish on the tables: their appends are staged
        by Spark and published by the fenced append."""
        catalog()
        for table in TABLES:
            jtable = iceberg_table(spark, self._config.table(table.name))
            if jtable.properties().get(_WAP_PROPERTY) != "true":
                jtable.updateProperties().set(_WAP_PROPERTY, "true").commit()

    def close(self) -> None:
        pass  # nothing claimed

    def after_commit(self, pushes: Mapping[str, int]) -> None:
        pass  # nothing is committed to Kafka: the tables hold the positions

    def read(
        self,
        spark: SparkSession,
        committed: Mapping[str, Mapping[str, int]],
        settings: IngestSettings,
    ) -> _TopicBatch | None:
        ranges = self.bounds(
            committed, self.kafka.offsets(spark), settings.max_records_per_source
        )
        wanted = [r for r in ranges if not r.empty]
        if not wanted:
            return None
        return self._read_flattened(spark, ranges, wanted)

    def bounds(
        self,
        committed: Mapping[str, Mapping[str, int]],
        offsets: list[PartitionOffsets],
        max_records: int,
    ) -> list[SourceRange]:
        """Each partition's range of this batch (:func:`plan.partition_bounds`): from the
        ``pushes`` table's position (or the earliest offset the topic holds), at most
        ``max_records``; a retention gap is logged with the range lost."""
        topic = self.topic
        names = {p.partition: source_name(topic, p.partition) for p in offsets}
        read_from = batch_start(committed, names.values())
        known = committed.get("pushes", {})
        ranges = []
        for partition in offsets:
            name = names[partition.partition]
            try:
                bounds = partition_bounds(
                    read_from[name] if name in known else None,
                    partition.earliest,
                    partition.latest,
                    max_records,
                )
            except OffsetsReset as exc:
                raise TopicOffsetsReset(
                    f"{topic} partition {partition.partition} {exc}: the topic was "
                    "created again (or its log truncated); ingest it into another "
                    "--database"
                ) from None
            if bounds.lost:
                log.error(
                    "%s: offsets %d-%d (%d records) were deleted by the topic's "
                    "retention before they were ingested; ingesting from %d",
                    name,
                    bounds.lost[0],
                    bounds.lost[1],
                    bounds.lost_records,
                    bounds.from_offset,
                )
            ranges.append(
                SourceRange(name, topic, bounds.from_offset, bounds.to_offset)
            )
        return ranges

    def _read_flattened(
        self,
        spark: SparkSession,
        ranges: list[SourceRange],
        wanted: list[SourceRange],
    ) -> _TopicBatch:
        """One Spark job: the ``wanted`` ranges read by Spark's Kafka source and
        flattened by ``mapInArrow`` on the executors, kept there (persisted) for the
        writes; the driver gets the counts, the rejected records and who flattened."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        partitions = {r.name: int(r.name.rsplit(":", 1)[1]) for r in wanted}
        options = self.kafka.read_options(
            {partitions[r.name]: r.from_offset for r in wanted},
            {partitions[r.name]: r.to_offset for r in wanted},
        )
        # Spark makes one task per partition's range; fewer partitions than cores get
        # their ranges split, so every core flattens.
        parallelism = spark.sparkContext.defaultParallelism
        if len(wanted) < parallelism:
            options["minPartitions"] = str(parallelism)
        frame = spark.read.format("kafka").options(**options).load()
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
        return _TopicBatch(
            spark,
            self._config,
            ranges,
            records,
            rejected,
            tuple(sorted(flattened_by)),
            flattened,
            rows,
        )


@dataclasses.dataclass(slots=True)
class _TopicBatch:
    """A batch of the topic: its rows persisted on the executors that flattened them
    (:data:`FLATTENED_SCHEMA`); the driver holds the small things only."""

    spark: SparkSession
    config: LakehouseConfig
    ranges: list[SourceRange]
    records: int
    rejected: list[dict[str, object]]
    flattened_by: tuple[str, ...]
    frame: DataFrame
    rows: dict[str, int]  # per table, the rows flattened

    @property
    def flattened_on(self) -> int:
        return len(self.flattened_by)

    @contextlib.contextmanager
    def appending(
        self, planned: BatchPlan, committed: Mapping[str, Mapping[str, int]]
    ) -> Iterator[_FencedAppends]:
        """Each planned table's rows as a frame, appended by the executors, each append
        fenced by the positions the batch was planned from (:func:`_fenced_append`)."""
        from pyspark.java_gateway import ensure_callback_server_started

        frames = {
            name: self._table_frame(planned.tables[name])
            for name in WRITE_ORDER
            if planned.tables[name].summary
        }
        # The validator of the fenced appends is a py4j callback: started once, here,
        # not by the appends side by side.
        ensure_callback_server_started(self.spark.sparkContext._gateway)  # type: ignore[attr-defined]
        wap_id = f"ktc-ingest-{uuid.uuid4()}"
        self.spark.conf.set(_WAP_ID_CONF, wap_id)
        try:
            yield _FencedAppends(self, planned, committed, wap_id, frames)
        finally:
            self.spark.conf.unset(_WAP_ID_CONF)

    def release(self) -> None:
        self.frame.unpersist()

    def _table_frame(self, own: TablePlan) -> tuple[DataFrame, int]:
        """A table's rows of the batch as a frame in its schema, and how many: for a
        table that holds part of the batch already, only the rows past its position
        (:meth:`plan.TablePlan.keeps`, as a filter)."""
        from pyspark.sql import functions as F

        frame = self.frame.filter(F.col("table") == own.name).select(f"{own.name}.*")
        rows = self.rows.get(own.name, 0)
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


@dataclasses.dataclass(slots=True)
class _FencedAppends:
    """A topic batch's appends (ingest_loop.TableAppends), each fenced."""

    batch: _TopicBatch
    planned: BatchPlan
    committed: Mapping[str, Mapping[str, int]]
    wap_id: str
    frames: dict[str, tuple[DataFrame, int]]
    rows: dict[str, int] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.rows = {name: rows for name, (_, rows) in self.frames.items()}

    def append(self, table: str, summary: Mapping[str, str]) -> None:
        _fenced_append(
            self.batch.spark,
            self.batch.config.table(table),
            self.frames[table][0],
            summary,
            self.wap_id,
            self.planned.tables[table],
            self.committed.get(table, {}),
        )


class TopicIngestJob(Ingest):
    """The writer of one landing topic's records (the ingest loop over a
    :class:`TopicIngestSource`); ``run_once`` drains, ``run_forever`` keeps draining."""

    source: TopicIngestSource

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
            TopicIngestSource(config, source),
            settings or IngestSettings(),
            spark=spark,
            maintenance=maintenance,
            clock=clock,
        )


def _fenced_append(
    spark: SparkSession,
    table_name: str,
    frame: DataFrame,
    summary: Mapping[str, str],
    wap_id: str,
    own: TablePlan,
    planned: Mapping[str, int],
) -> None:
    """``frame`` appended to the table with ``summary``, only while the table's positions
    of the sources the append covers are still ``planned`` (:class:`PositionsMoved`
    otherwise).

    Spark writes the files as a staged snapshot (``spark.wap.id`` is the batch's); the
    driver appends that snapshot's files with the summary, validated by
    :class:`_HeadIs`: Iceberg commits the append only on the snapshot whose positions
    were just checked, running the validator again on the refreshed table at each
    commit attempt.  A commit between the check and the append (a maintenance commit,
    a landing-log ingest's) fails the validation: the positions are checked again on
    the new snapshot, and the append retried."""
    # Checked before the files are written too: an ingest that lost the race to
    # another does not write what it would not publish.
    _, _, snapshots = table_state(spark, table_name)
    if moved := moved_positions(planned, committed_positions(snapshots), own):
        raise PositionsMoved(table_name, moved)
    frame.writeTo(table_name).append()
    jtable, _, snapshots = table_state(spark, table_name)
    staged = [s for s in snapshots if s.summary.get(_STAGED_WAP_ID) == wap_id]
    if len(staged) != 1:
        raise RuntimeError(f"{table_name}: {len(staged)} snapshots staged by {wap_id}")
    files = jtable.snapshot(staged[0].snapshot_id).addedDataFiles(jtable.io())
    from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]

    while True:
        jtable, head, snapshots = table_state(spark, table_name)
        moved = moved_positions(planned, committed_positions(snapshots), own)
        if moved:
            raise PositionsMoved(table_name, moved)
        append = jtable.newAppend()
        found = files.iterator()
        while found.hasNext():
            append.appendFile(found.next())
        for key, value in summary.items():
            append.set(key, value)
        append.validateWith(_HeadIs(head))
        try:
            append.commit()
            return
        except Py4JJavaError as exc:
            if _FENCE_MESSAGE not in str(exc.java_exception.getMessage()):
                raise
            log.info(
                "%s moved since its positions were checked; checking again", table_name
            )


class _HeadIs:
    """Iceberg's ``SnapshotAncestryValidator`` (a py4j callback): valid when the table's
    current snapshot, on the metadata the commit is built on, is ``head``."""

    def __init__(self, head: int | None) -> None:
        self.head = head

    def validate(self, ancestry: object) -> bool:
        snapshots = ancestry.iterator()  # type: ignore[attr-defined]
        current = int(snapshots.next().snapshotId()) if snapshots.hasNext() else None
        return current == self.head

    def errorMessage(self) -> str:
        return _FENCE_MESSAGE

    class Java:
        implements: ClassVar[list[str]] = [
            "org.apache.iceberg.SnapshotAncestryValidator"
        ]
