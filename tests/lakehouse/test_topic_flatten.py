"""The executors' side of the topic ingest, without Spark: Kafka records as Spark's
Kafka source hands them to ``mapInArrow`` -> the same rows as the landing-log ingest's,
records not in format 1 rejected, the partitions' source names."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from exporters.kafka_topic.record import encode_headers
from exporters.lakehouse.flatten_pool import SourceRecord, flatten_records
from exporters.lakehouse.schema import TABLE_NAME_BY_KIND, TABLES
from exporters.lakehouse.topic_source import (
    FLATTENED_SCHEMA,
    TopicSource,
    flatten_topic_batches,
    parse_source_name,
    source_name,
)
from exporters.landing import LandingRecord
from tests.lakehouse.lakehouse_otlp import make_context, sample_metrics_data

# What Spark's Kafka source gives mapInArrow (includeHeaders=true), the columns read.
KAFKA_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("value", pa.binary()),
        (
            "headers",
            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
        ),
        ("timestamp", pa.timestamp("us", tz="UTC")),
    ]
)


def _batch(records: list[tuple[int, int, bytes, list[tuple[str, bytes]], int]]):
    return pa.RecordBatch.from_pylist(
        [
            {
                "topic": "landing",
                "partition": partition,
                "offset": offset,
                "value": value,
                "headers": [{"key": k, "value": v} for k, v in headers],
                "timestamp": datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC),
            }
            for partition, offset, value, headers, ms in records
        ],
        schema=KAFKA_SCHEMA,
    )


def _tables(out: list[pa.RecordBatch]) -> dict[str, pa.Table]:
    """Each table's rows of the flattening's output, as the writes read them: the rows
    tagged with its name, the fields of its own column (every table, empty ones too)."""
    assert all(b.schema == FLATTENED_SCHEMA for b in out)
    output = pa.Table.from_batches(out)
    own = output.filter(pc.is_null(output.column("table")))
    counted: dict[str, int] = {}
    for rows in own.column("rows").to_pylist():
        for name, n in rows:
            counted[name] = counted.get(name, 0) + n
    tables = {}
    for spec in TABLES:
        mine = output.filter(pc.equal(output.column("table"), spec.name))
        assert mine.column(spec.name).null_count == 0, spec.name
        others = [t.name for t in TABLES if t.name != spec.name]
        assert all(mine.column(o).null_count == mine.num_rows for o in others)
        tables[spec.name] = pa.Table.from_struct_array(mine.column(spec.name)).cast(
            spec.data_schema
        )
        assert counted.get(spec.name, 0) == tables[spec.name].num_rows, spec.name
    return tables


def _own_rows(out: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    """The output's rows that are each input batch's own (no table)."""
    return [row for b in out for row in b.to_pylist() if row["table"] is None]


def test_kafka_records_flatten_to_the_landing_ingests_rows() -> None:
    pushes = [
        (make_context(client_instance_id=f"c{i:021d}"), sample_metrics_data(i))
        for i in range(6)
    ]
    timestamp_ms = 1_795_000_123_456
    records = [
        (
            i % 2,
            100 + i,
            md.SerializeToString(),
            [
                (k, v if isinstance(v, bytes) else str(v).encode())
                for k, v in encode_headers(ctx)
            ],
            timestamp_ms,
        )
        for i, (ctx, md) in enumerate(pushes)
    ]
    out = list(flatten_topic_batches(iter([_batch(records[:4]), _batch(records[4:])])))
    # Per input batch, one Arrow batch per table with rows (all six here), then its own.
    assert [b.column("table")[0].as_py() for b in out] == (
        [TABLE_NAME_BY_KIND[kind] for kind in TABLE_NAME_BY_KIND] + [None]
    ) * 2
    topic_tables = _tables(out)

    expected = flatten_records(
        [
            SourceRecord(
                source_name("landing", i % 2),
                LandingRecord(
                    100 + i, ctx, md.SerializeToString(), timestamp_ms * 1_000_000
                ),
            )
            for i, (ctx, md) in enumerate(pushes)
        ]
    ).tables
    assert set(topic_tables) == {TABLE_NAME_BY_KIND[kind] for kind in expected}
    for kind, table in expected.items():
        assert topic_tables[TABLE_NAME_BY_KIND[kind]].equals(table), kind
    own = _own_rows(out)
    assert [row["records"] for row in own] == [4, 2]
    assert all(json.loads(row["rejected"]) == [] for row in own)
    # Not in a Spark executor: the parent is no Spark JVM.
    assert all(row["flattened_by"].endswith(" executor ?") for row in own)


def test_records_not_in_format_1_are_rejected_not_fatal() -> None:
    ctx = make_context()
    good = encode_headers(ctx)
    headers = [(k, v if isinstance(v, bytes) else str(v).encode()) for k, v in good]
    out = list(
        flatten_topic_batches(
            iter(
                [
                    _batch(
                        [
                            (0, 0, b"\xff\xff not protobuf", headers, 0),
                            (0, 1, b"", [("ktc.format", b"2")], 0),
                            (
                                0,
                                2,
                                sample_metrics_data(1).SerializeToString(),
                                headers,
                                0,
                            ),
                        ]
                    )
                ]
            )
        )
    )
    rejected = json.loads(_own_rows(out)[0]["rejected"])
    assert [(r["source"], r["offset"]) for r in rejected] == [
        ("kafka:landing:0", 0),
        ("kafka:landing:0", 1),
    ]
    assert _tables(out)["pushes"].column("landing_offset").to_pylist() == [2]


@pytest.mark.parametrize(
    ("topic", "partition"), [("landing", 0), ("client.telemetry-v2_x", 17)]
)
def test_source_names_round_trip(topic: str, partition: int) -> None:
    assert parse_source_name(source_name(topic, partition)) == (topic, partition)


def test_a_landing_directory_is_not_a_partition() -> None:
    assert parse_source_name("node-1") is None


def test_read_options_name_the_offsets_of_each_partition() -> None:
    source = TopicSource("h:1", "landing", {"security.protocol": "SSL"})
    options = source.read_options({0: 5, 2: 7}, {0: 9, 2: 8})
    assert json.loads(options["startingOffsets"]) == {"landing": {"0": 5, "2": 7}}
    assert json.loads(options["endingOffsets"]) == {"landing": {"0": 9, "2": 8}}
    assert json.loads(options["assign"]) == {"landing": [0, 2]}
    assert options["kafka.bootstrap.servers"] == "h:1"
    assert options["kafka.security.protocol"] == "SSL"
