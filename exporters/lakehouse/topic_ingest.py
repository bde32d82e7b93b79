"""The Spark ingest from the landing topic: Kafka -> Iceberg tables, exactly once.

The landing-log ingest's job (ingest.py) with the topic as its source: each partition of
the topic is a source like a landing directory (topic_source.py), and everything that
makes a batch exactly once is the same code: the positions are the offsets in the tables'
snapshot summaries (commits.py), the plan decides what each table gets (plan.py), the
appends are :func:`ingest.load`, and the failpoints are the same.

A batch:

1. **bounds**: each partition's earliest and latest offsets, asked by a Kafka consumer
   in the driver's JVM; the batch reads each partition from the ``pushes`` table's
   position up to the latest offset or ``max_records_per_source`` records, whichever
   is first.  The bounds are fixed before anything is read, so a batch is a fixed
   offset range per partition, which is what the summaries record.
2. **read and flatten on the executors**: one Spark job, Spark's Kafka source in batch
   mode (``startingOffsets``/``endingOffsets`` as JSON) and ``mapInArrow`` running
   :func:`topic_source.flatten_topic_batches` where the records are: the driver gets
   back the flattened rows, never the records.
3. **plan, append, in that order**: as the landing-log ingest (the point tables side by
   side, ``pushes`` last, each append with its ranges and positions in its summary).

Nothing is committed to Kafka: the tables hold the positions, so a consumer group's
offsets could only disagree with them.  One ingest per topic: two would both read from
the same positions.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from clock import SYSTEM_CLOCK, Clock
from exporters.lakehouse import failpoints
from exporters.lakehouse.commits import SourceRange
from exporters.lakehouse.flatten import PointRowsBuilder, assemble
from exporters.lakehouse.flatten_pool import Flattened
from exporters.lakehouse.ingest import BatchResult, IngestJob, IngestSettings
from exporters.lakehouse.plan import batch_start, plan_batch
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

    from pyspark.sql import SparkSession

__all__ = ["TopicBatchResult", "TopicIngestJob", "TopicOffsetsReset", "executor_conf"]

log = logging.getLogger(__name__)

# The directory holding the ``exporters`` package: the executors' Python workers import
# the flattening from there.
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


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
        flattened, records, flattened_by = self._read_flattened(wanted)
        self._batches += 1
        batch = self._batches
        failpoints.reached("after_read", batch)
        planned = plan_batch(ranges, committed, flattened.rejected)
        rows = self._load(batch, planned, flattened)
        self._positions = planned.positions_after()
        failpoints.reached("after_write", batch)
        result = TopicBatchResult(
            batch,
            records,
            rows,
            {r.name: (r.from_offset, r.to_offset) for r in wanted},
            planned.replayed,
            len(flattened.rejected),
            self._clock.monotonic() - started,
            len(flattened_by),
            flattened_by,
        )
        log.info(
            "batch %d: %d records, rows %s%s",
            batch,
            records,
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

    def _read_flattened(
        self, ranges: list[SourceRange]
    ) -> tuple[Flattened, int, tuple[str, ...]]:
        """One Spark job: the ranges read by Spark's Kafka source and flattened by
        ``mapInArrow`` on the executors; (rows, records read, who flattened them)."""
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
        flattened = frame.select(
            "topic", "partition", "offset", "value", "headers", "timestamp"
        ).mapInArrow(flatten_topic_batches, FLATTENED_SCHEMA)  # type: ignore[arg-type]
        collected = flattened.toArrow()
        parts = [pickle.loads(b) for b in collected.column("parts").to_pylist()]
        if not parts:  # every record in the ranges deleted since the offsets were asked
            parts = [PointRowsBuilder().finish_parts()]
        rejected: list[dict[str, object]] = []
        for entry in collected.column("rejected").to_pylist():
            rejected.extend(json.loads(entry))
        for entry in rejected:
            log.error(
                "%s offset %d: not a format-1 OTLP record: %s",
                entry["source"],
                entry["offset"],
                entry["error"],
            )
        records = sum(collected.column("records").to_pylist())
        flattened_by = tuple(sorted(set(collected.column("flattened_by").to_pylist())))
        return (
            Flattened(assemble(parts), rejected, len(flattened_by)),
            records,
            flattened_by,
        )
