"""Flatten/rebuild without Spark: every OTLP point type survives payload -> rows -> payload."""

from __future__ import annotations

import dataclasses
import datetime

import pyarrow as pa
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.lakehouse.anyvalue import decode_value, encode_attributes, encode_value
from exporters.lakehouse.flatten import (
    PointRowsBuilder,
    flatten,
    to_signed64,
    to_unsigned64,
)
from exporters.lakehouse.rebuild import rebuild
from exporters.lakehouse.schema import TABLES, create_table_sql
from tests.lakehouse.lakehouse_otlp import (
    ANY_VALUES,
    CONTEXTS,
    canonical,
    make_context,
    metrics_data,
)


def _rows(tables: dict[str, pa.Table]) -> dict[str, list[dict]]:
    return {point_type: table.to_pylist() for point_type, table in tables.items()}


def _points(md: MetricsData) -> int:
    total = 0
    for rm in md.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                which = m.WhichOneof("data")
                total += len(getattr(m, which).data_points) if which else 0
    return total


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(md=metrics_data(), context=CONTEXTS, offset=st.integers(0, 1 << 40))
def test_round_trip_through_arrow_rows(md: MetricsData, context, offset: int) -> None:
    tables = flatten(md, context, "node-1", offset)
    pushes = tables.pop("pushes").to_pylist()
    assert sum(t.num_rows for t in tables.values()) == _points(md)
    assert [(p["landing_offset"], p["point_count"]) for p in pushes] == [
        (offset, _points(md))
    ]
    upstream = (context.upstream_cluster_id, context.upstream_node_id)
    assert (pushes[0]["upstream_cluster_id"], pushes[0]["upstream_node_id"]) == upstream
    rebuilt = rebuild(_rows(tables))
    assert list(rebuilt) == [("node-1", offset)]
    assert canonical(rebuilt[("node-1", offset)]) == canonical(md)


@settings(max_examples=300, deadline=None)
@given(value=ANY_VALUES)
def test_any_value_text_and_kind_round_trip(value: AnyValue) -> None:
    text, kind = encode_value(value)
    back = AnyValue()
    decode_value(text, kind, back)
    assert canonical_any(back) == canonical_any(value)


def canonical_any(value: AnyValue) -> object:
    # MessageToDict spells every NaN "NaN": a NaN's sign and payload bits are not kept.
    return json_format.MessageToDict(value)


def test_attribute_encoding_table() -> None:
    kvs = [
        KeyValue(key="s", value=AnyValue(string_value="5")),
        KeyValue(key="i", value=AnyValue(int_value=5)),
        KeyValue(key="d", value=AnyValue(double_value=0.1)),
        KeyValue(key="b", value=AnyValue(bool_value=True)),
        KeyValue(key="x", value=AnyValue(bytes_value=b"\x00\xff")),
        KeyValue(key="e", value=AnyValue()),
    ]
    arr = KeyValue(key="a")
    arr.value.array_value.values.add(int_value=1)
    arr.value.array_value.values.add(string_value="1")
    kvs.append(arr)
    values, types = encode_attributes(kvs)
    assert values == {
        "s": "5",
        "i": "5",
        "d": "0.1",
        "b": "true",
        "x": "AP8=",
        "e": "",
        "a": '{"values": [{"intValue": "1"}, {"stringValue": "1"}]}',
    }
    assert types == {
        "i": "int",
        "d": "double",
        "b": "bool",
        "x": "bytes",
        "e": "empty",
        "a": "array",
    }


def test_all_string_attributes_have_no_types_map() -> None:
    assert encode_attributes([KeyValue(key="k", value=AnyValue(string_value="v"))]) == (
        {"k": "v"},
        None,
    )


@pytest.mark.parametrize("value", [0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1])
def test_unsigned64_is_stored_in_the_same_bits(value: int) -> None:
    signed = to_signed64(value)
    assert -(1 << 63) <= signed < (1 << 63)
    assert to_unsigned64(signed) == value


def test_context_columns_and_partitions_follow_receive_time() -> None:
    md = MetricsData()
    metric = md.resource_metrics.add().scope_metrics.add().metrics.add(name="m")
    point = metric.gauge.data_points.add(as_int=7, time_unix_nano=5_000_000_001)
    point.attributes.add(key="node.id", value=AnyValue(string_value="1"))
    received = (
        int(datetime.datetime(2026, 11, 21, 13, 59, tzinfo=datetime.UTC).timestamp())
        * 10**9
    )
    context = make_context(received_time_unix_nano=received, terminating=True)
    row = flatten(md, context, "node-3", 42)["gauge"].to_pylist()[0]
    assert row["dt"] == datetime.date(2026, 11, 21)
    assert row["hour"] == 13
    assert row["client_instance_id"] == context.client_instance_id
    assert row["client_software_version"] == "2.16.1-rdkafka-2.16.0"
    assert row["listener"] == "PLAINTEXT" and row["terminating"] is True
    assert (row["landing_node"], row["landing_offset"]) == ("node-3", 42)
    assert (row["as_int"], row["as_double"]) == (7, None)
    assert row["time"] == datetime.datetime(1970, 1, 1, 0, 0, 5, tzinfo=datetime.UTC)
    assert row["start_time"] is None  # 0 is OTLP's "unset", not 1970
    assert row["attributes"] == [("node.id", "1")]


def test_upstream_columns_carry_the_gateway_context_and_null_without_it() -> None:
    md = MetricsData()
    md.resource_metrics.add().scope_metrics.add().metrics.add(
        name="m"
    ).sum.data_points.add(as_int=1)
    builder = PointRowsBuilder()
    gateway = make_context(
        upstream_cluster_id="Yw3dJ2xXQ6qRbtJmPMOxZw", upstream_node_id=2
    )
    builder.add(md, gateway, "node-1", 0)
    builder.add(md, dataclasses.replace(gateway, upstream_node_id=None), "node-1", 1)
    builder.add(md, make_context(), "node-1", 2)  # standalone
    tables = builder.finish()
    for kind in ("sum", "pushes"):
        rows = tables[kind].to_pylist()
        assert [(r["upstream_cluster_id"], r["upstream_node_id"]) for r in rows] == [
            ("Yw3dJ2xXQ6qRbtJmPMOxZw", 2),
            ("Yw3dJ2xXQ6qRbtJmPMOxZw", None),
            (None, None),
        ]


def test_builder_accumulates_many_pushes_and_resets() -> None:
    md = MetricsData()
    metric = md.resource_metrics.add().scope_metrics.add().metrics.add(name="m")
    metric.sum.data_points.add(as_double=1.5)
    metric.sum.data_points.add(as_double=2.5)
    builder = PointRowsBuilder()
    for offset in range(3):
        builder.add_payload(md.SerializeToString(), make_context(), "node-1", offset)
    assert builder.points == 6
    tables = builder.finish()
    assert tables["sum"].num_rows == 6 and tables["gauge"].num_rows == 0
    assert tables["pushes"].column("point_count").to_pylist() == [2, 2, 2]
    assert set(rebuild(_rows(tables))) == {("node-1", 0), ("node-1", 1), ("node-1", 2)}
    assert builder.points == 0 and builder.finish()["sum"].num_rows == 0


def test_table_ddl_is_an_iceberg_table_partitioned_by_receive_day() -> None:
    assert {t.name for t in TABLES} >= {"pushes", "metrics_gauge", "metrics_summary"}
    for table in TABLES:
        ddl = create_table_sql("ktc", table)
        assert f"lake.`ktc`.`{table.name}`" in ddl
        assert "USING iceberg" in ddl and "PARTITIONED BY (days(received_time))" in ddl
        assert "'format-version' = '2'" in ddl
        assert table.column_names[-2:] == ("dt", "hour")
        for name in table.column_names:
            assert f"`{name}`" in ddl


def test_upstream_columns_are_in_every_table() -> None:
    for table in TABLES:
        assert table.arrow_schema.field("upstream_cluster_id").type == pa.string()
        assert table.arrow_schema.field("upstream_node_id").type == pa.int32()
        assert table.arrow_schema.field("upstream_node_id").nullable
