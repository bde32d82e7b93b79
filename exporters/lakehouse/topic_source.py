"""The landing topic as a lakehouse source: its partitions' offsets, and the flattening
that runs on Spark's executors.

A topic partition plays the part of a landing directory: its records are numbered by
offset, and the rows of a record carry ``landing_node`` = :func:`source_name`
(``kafka:<topic>:<partition>``; ``:`` is not allowed in topic names, so the name is never
a landing directory's) and ``landing_offset`` = the record's offset.  The snapshot
summaries then hold the partitions' offsets with the same keys as the directories'
(commits.py), e.g. ``ktc.landing.kafka:ktc-landing:3 = 1200-1450``.

:func:`flatten_topic_batches` is what ``mapInArrow`` runs on the executors over Spark's
Kafka source (its ``key``, ``value``, ``partition``, ``offset``, ``timestamp`` and
``headers`` columns): format-1 records (exporters/kafka_topic/record.py) flattened by the
same :class:`~exporters.lakehouse.flatten.PointRowsBuilder` as the landing-log ingest's.
Its output (:data:`FLATTENED_SCHEMA`) stays on the executors and holds the rows in the
tables' own types: one struct column per table, so a table's rows are a filter on
``table`` and a ``select`` of its column's fields, and the writes run no Python.  This
module imports only what an executor needs.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from exporters.kafka_topic.record import TopicRecordError, decode_record
from exporters.lakehouse.flatten import PointRowsBuilder, RecordToFlatten, add_records
from exporters.lakehouse.schema import TABLE_NAME_BY_KIND, TABLES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "FLATTENED_SCHEMA",
    "SPARK_KAFKA_VERSION",
    "KafkaSourceJarsMissing",
    "PartitionOffsets",
    "TopicUnavailable",
    "TopicSource",
    "flatten_topic_batches",
    "kafka_source_jars",
    "parse_source_name",
    "source_name",
]

SPARK_KAFKA_VERSION: Final = "4.1.1"
_JARS_ENV: Final = "KTC_SPARK_KAFKA_LIBS"
# What `make spark-kafka-libs` fetches into the cache (.ci/provision.py).
_REQUIRED_JARS: Final = (
    "spark-sql-kafka-0-10_2.13-",
    "spark-token-provider-kafka-0-10_2.13-",
    "kafka-clients-",
    "commons-pool2-",
)
_SOURCE_PREFIX: Final = "kafka:"

# mapInArrow's output, per input Arrow batch: each table's rows (``table`` = its name,
# its own struct column holding the row, every other table's column null), and one row
# whose ``table`` is null with ``rows`` (per table, how many), ``records``, ``rejected``
# (JSON) and ``flattened_by``.  The struct columns are the tables' Arrow schemas, which
# Spark's types represent exactly (from_arrow_schema and back gives the same schema), so
# Spark reads the rows without a conversion of its own.
FLATTENED_SCHEMA: Final = pa.schema(
    [
        ("table", pa.string()),
        *[(t.name, pa.struct(list(t.data_schema))) for t in TABLES],
        ("rows", pa.map_(pa.string(), pa.int64())),
        ("records", pa.int64()),
        ("rejected", pa.string()),
        ("flattened_by", pa.string()),
    ]
)


class KafkaSourceJarsMissing(RuntimeError):
    """Spark's Kafka source is not where Spark is told to look."""


def kafka_source_jars() -> list[Path]:
    """Spark's Kafka source and the Kafka client it runs on (``make spark-kafka-libs``)."""
    directory = Path(
        os.environ.get(_JARS_ENV)
        or Path.home() / ".cache" / "ktc" / f"spark-kafka-{SPARK_KAFKA_VERSION}"
    )
    jars = sorted(directory.glob("*.jar")) if directory.is_dir() else []
    missing = [p for p in _REQUIRED_JARS if not any(j.name.startswith(p) for j in jars)]
    if missing:
        raise KafkaSourceJarsMissing(
            f"Spark's Kafka source is not in {directory} (set {_JARS_ENV}, or run "
            "`make spark-kafka-libs` in the source tree)"
        )
    return jars


def source_name(topic: str, partition: int) -> str:
    """The ``landing_node`` of a partition's rows and its summary keys' name."""
    return f"{_SOURCE_PREFIX}{topic}:{partition}"


def parse_source_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a :func:`source_name`; None for a landing directory's."""
    if not name.startswith(_SOURCE_PREFIX):
        return None
    topic, _, partition = name[len(_SOURCE_PREFIX) :].rpartition(":")
    return (topic, int(partition)) if topic and partition.isdigit() else None


# ---------------------------------------------------------------- executors


def _flattened_by() -> str:
    """``host:pid executor <id>`` of this Python worker: the Spark executor it works for,
    from its parent JVM's command line (``driver`` in local mode, where the driver's JVM
    runs the tasks; ``?`` where /proc cannot tell)."""
    return f"{socket.gethostname()}:{os.getpid()} executor {_executor_id()}"


def _executor_id() -> str:
    pid = os.getppid()
    for _ in range(4):  # worker <- pyspark's daemon <- the JVM
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return "?"
        if b"--executor-id" in args:
            return args[args.index(b"--executor-id") + 1].decode()
        if b"org.apache.spark.deploy.SparkSubmit" in args:
            return "driver"
        # ppid is the 4th field, after the command name in parentheses
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return "?"


def flatten_topic_batches(
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Runs on the executors (``mapInArrow``): each batch of Kafka records -> its rows
    of :data:`FLATTENED_SCHEMA` (an Arrow batch per table with rows, then the batch's
    own row)."""
    builder = PointRowsBuilder()
    by = _flattened_by()
    for batch in batches:
        rejected: list[dict[str, object]] = []
        add_records(builder, _decoded(batch, rejected), rejected)
        tables = builder.finish()
        counts: dict[str, int] = {}
        for kind, table in tables.items():
            if table.num_rows:
                name = TABLE_NAME_BY_KIND[kind]
                counts[name] = table.num_rows
                yield _table_batch(name, table)
        yield pa.RecordBatch.from_pydict(
            {
                "table": [None],
                "rows": [list(counts.items())],
                "records": [batch.num_rows],
                "rejected": [json.dumps(rejected)],
                "flattened_by": [by],
            }
            | {name: _NO_ROWS[name] for name in _TABLE_NAMES},
            schema=FLATTENED_SCHEMA,
        )


def _decoded(
    batch: pa.RecordBatch, rejected: list[dict[str, object]]
) -> Iterator[RecordToFlatten]:
    """A batch of Spark's Kafka source as landed records; one that is not a format-1
    record is listed in ``rejected``."""
    columns = batch.to_pydict()
    for topic, partition, offset, value, headers, timestamp in zip(
        columns["topic"],
        columns["partition"],
        columns["offset"],
        columns["value"],
        columns["headers"],
        columns["timestamp"],
        strict=True,
    ):
        source = source_name(topic, partition)
        try:
            context, payload = decode_record(
                [(h["key"], h["value"]) for h in headers or ()], value
            )
        except TopicRecordError as exc:
            rejected.append({"source": source, "offset": offset, "error": str(exc)})
            continue
        yield source, offset, context, payload, _unix_nano(timestamp)


_TABLE_NAMES: Final = tuple(t.name for t in TABLES)
_NO_ROWS: Final = {
    name: pa.nulls(1, FLATTENED_SCHEMA.field(name).type) for name in _TABLE_NAMES
}


def _table_batch(name: str, table: pa.Table) -> pa.RecordBatch:
    """A table's rows as :data:`FLATTENED_SCHEMA`: its struct column filled, every other
    table's null (a null struct is its validity bits and children of nulls)."""
    rows = table.num_rows
    columns = {
        "table": pa.array([name] * rows, pa.string()),
        "rows": pa.nulls(rows, FLATTENED_SCHEMA.field("rows").type),
        "records": pa.nulls(rows, pa.int64()),
        "rejected": pa.nulls(rows, pa.string()),
        "flattened_by": pa.nulls(rows, pa.string()),
    }
    for other in _TABLE_NAMES:
        kind = FLATTENED_SCHEMA.field(other).type
        if other == name:
            columns[other] = table.to_struct_array().combine_chunks().cast(kind)
        else:
            columns[other] = pa.nulls(rows, kind)
    return pa.RecordBatch.from_pydict(columns, schema=FLATTENED_SCHEMA)


def _unix_nano(timestamp: Any) -> int:
    """A Kafka record's timestamp (a datetime from Arrow, in microseconds) in
    nanoseconds, exactly."""
    if timestamp is None:
        return 0
    if timestamp.tzinfo is None:  # Spark hands TimestampType over in UTC
        timestamp = timestamp.replace(tzinfo=datetime.UTC)
    return (timestamp - _EPOCH) // _MICROSECOND * 1000


_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MICROSECOND: Final = datetime.timedelta(microseconds=1)


# ---------------------------------------------------------------- the driver


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionOffsets:
    partition: int
    earliest: int  # the first offset the topic still holds
    latest: int  # the offset the next record produced will get


@dataclasses.dataclass(frozen=True, slots=True)
class TopicSource:
    """Where the topic is: bootstrap servers, name, and the Kafka consumer properties
    (security) both Spark's source and the offset lookups use (Java client names)."""

    bootstrap_servers: str
    topic: str
    properties: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def consumer_properties(self) -> dict[str, str]:
        return {**self.properties, "bootstrap.servers": self.bootstrap_servers}

    def offsets(self, spark: SparkSession) -> list[PartitionOffsets]:
        """Each partition's earliest and latest offsets, asked by a Kafka consumer in
        the driver's JVM (the client Spark's source uses, with the same properties)."""
        jvm: Any = spark.sparkContext._jvm  # type: ignore[attr-defined]
        props = jvm.java.util.Properties()
        for key, value in self.consumer_properties().items():
            props.setProperty(key, value)
        deserializer = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
        props.setProperty("key.deserializer", deserializer)
        props.setProperty("value.deserializer", deserializer)
        props.setProperty("client.id", "ktc-ingest-offsets")
        from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]

        try:
            consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(props)
        except Py4JJavaError as exc:
            raise TopicUnavailable(
                f"Kafka consumer for {self.topic}: {_java_message(exc)}"
            ) from None
        try:
            timeout = jvm.java.time.Duration.ofSeconds(60)
            infos = consumer.partitionsFor(self.topic, timeout)
            if infos is None or infos.isEmpty():
                raise TopicUnavailable(
                    f"topic {self.topic} not found at {self.bootstrap_servers}"
                )
            partitions = sorted(int(info.partition()) for info in infos)
            wanted = jvm.java.util.ArrayList()
            for partition in partitions:
                wanted.add(
                    jvm.org.apache.kafka.common.TopicPartition(self.topic, partition)
                )
            earliest = _by_partition(consumer.beginningOffsets(wanted, timeout))
            latest = _by_partition(consumer.endOffsets(wanted, timeout))
            return [PartitionOffsets(p, earliest[p], latest[p]) for p in partitions]
        except Py4JJavaError as exc:
            raise TopicUnavailable(
                f"topic {self.topic} at {self.bootstrap_servers}: {_java_message(exc)}"
            ) from None
        finally:
            consumer.close()

    def read_options(
        self, starting: Mapping[int, int], ending: Mapping[int, int]
    ) -> dict[str, str]:
        """Spark's Kafka source options for offsets ``[starting, ending)`` per partition."""
        options = {
            f"kafka.{key}": value for key, value in self.consumer_properties().items()
        }
        return options | {
            "assign": json.dumps({self.topic: sorted(starting)}),
            "includeHeaders": "true",
            "startingOffsets": json.dumps(
                {self.topic: {str(p): o for p, o in sorted(starting.items())}}
            ),
            "endingOffsets": json.dumps(
                {self.topic: {str(p): o for p, o in sorted(ending.items())}}
            ),
            # The range is decided here from the offsets asked just before; records
            # deleted in between (retention) are reported by the job, not a failure.
            "failOnDataLoss": "false",
        }


def _java_message(exc: Any) -> str:
    """The first line of a Java exception's message (its class and text)."""
    return str(exc.java_exception.toString()).splitlines()[0]


def _by_partition(offsets: Any) -> dict[int, int]:
    """A Java ``Map<TopicPartition, Long>`` as partition -> offset."""
    return {
        int(entry.getKey().partition()): int(entry.getValue())
        for entry in offsets.entrySet()
    }


class TopicUnavailable(RuntimeError):
    """The topic's cluster cannot be reached, or the topic is not there."""
