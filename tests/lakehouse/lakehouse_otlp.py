"""Test helpers: Hypothesis strategies for OTLP MetricsData, canonical form, contexts."""

from __future__ import annotations

import dataclasses
from typing import Any

from google.protobuf import json_format
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric, MetricsData

from exporters.context import TelemetryContext

U64 = st.integers(0, (1 << 64) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
U32 = st.integers(0, (1 << 32) - 1)
DOUBLES = st.floats(allow_nan=True, allow_infinity=True)
TEXT = st.text(max_size=12)
KEYS = st.text(min_size=1, max_size=10)


def _scalar_any_value() -> st.SearchStrategy[AnyValue]:
    return st.one_of(
        TEXT.map(lambda v: AnyValue(string_value=v)),
        st.booleans().map(lambda v: AnyValue(bool_value=v)),
        I64.map(lambda v: AnyValue(int_value=v)),
        DOUBLES.map(lambda v: AnyValue(double_value=v)),
        st.binary(max_size=8).map(lambda v: AnyValue(bytes_value=v)),
        st.integers(-(1 << 31), (1 << 31) - 1).map(
            lambda v: AnyValue(string_value_strindex=v)
        ),
        st.just(AnyValue()),
    )


def _nest(children: st.SearchStrategy[AnyValue]) -> st.SearchStrategy[AnyValue]:
    def array(values: list[AnyValue]) -> AnyValue:
        v = AnyValue()
        v.array_value.values.extend(values)
        return v

    def kvlist(pairs: dict[str, AnyValue]) -> AnyValue:
        v = AnyValue()
        v.kvlist_value.values.extend(KeyValue(key=k, value=x) for k, x in pairs.items())
        return v

    return st.one_of(
        st.lists(children, max_size=3).map(array),
        st.dictionaries(KEYS, children, max_size=3).map(kvlist),
    )


ANY_VALUES = st.recursive(_scalar_any_value(), _nest, max_leaves=6)

# librdkafka sends string attributes only: weight them so the hot path is covered too.
ATTRIBUTES = st.one_of(
    st.dictionaries(KEYS, TEXT.map(lambda v: AnyValue(string_value=v)), max_size=3),
    st.dictionaries(KEYS, ANY_VALUES, max_size=3),
).map(lambda d: [KeyValue(key=k, value=v) for k, v in d.items()])


@st.composite
def exemplars(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(0, 2))):
        ex: dict[str, Any] = {
            "filtered_attributes": draw(ATTRIBUTES),
            "time_unix_nano": draw(U64),
            "span_id": draw(st.binary(max_size=8)),
            "trace_id": draw(st.binary(max_size=16)),
        }
        value = draw(st.sampled_from(["as_double", "as_int", None]))
        if value == "as_double":
            ex["as_double"] = draw(DOUBLES)
        elif value == "as_int":
            ex["as_int"] = draw(I64)
        out.append(ex)
    return out


@st.composite
def _point_common(draw: st.DrawFn, point: Any) -> None:
    point.attributes.extend(draw(ATTRIBUTES))
    point.start_time_unix_nano = draw(U64)
    point.time_unix_nano = draw(U64)
    point.flags = draw(U32)


@st.composite
def _fill_exemplars(draw: st.DrawFn, point: Any) -> None:
    for ex in draw(exemplars()):
        point.exemplars.add(**ex)


@st.composite
def metric(draw: st.DrawFn) -> Metric:
    m = Metric(name=draw(TEXT), description=draw(TEXT), unit=draw(TEXT))
    m.metadata.extend(draw(ATTRIBUTES))
    kind = draw(
        st.sampled_from(
            ["gauge", "sum", "histogram", "exponential_histogram", "summary"]
        )
    )
    data = getattr(m, kind)
    if kind in ("sum", "histogram", "exponential_histogram"):
        data.aggregation_temporality = draw(st.integers(0, 2))
    if kind == "sum":
        data.is_monotonic = draw(st.booleans())
    for _ in range(draw(st.integers(1, 3))):
        p = data.data_points.add()
        draw(_point_common(p))
        if kind in ("gauge", "sum"):
            value = draw(st.sampled_from(["as_double", "as_int", None]))
            if value == "as_double":
                p.as_double = draw(DOUBLES)
            elif value == "as_int":
                p.as_int = draw(I64)
        else:
            p.count = draw(U64)
        if kind in ("histogram", "exponential_histogram"):
            for field in ("sum", "min", "max"):
                if draw(st.booleans()):
                    setattr(p, field, draw(DOUBLES))
        if kind == "histogram":
            p.bucket_counts.extend(draw(st.lists(U64, max_size=4)))
            p.explicit_bounds.extend(draw(st.lists(DOUBLES, max_size=3)))
        if kind == "exponential_histogram":
            p.scale = draw(st.integers(-10, 20))
            p.zero_count = draw(U64)
            p.zero_threshold = draw(DOUBLES)
            for side in (p.positive, p.negative):
                if draw(st.booleans()):
                    side.offset = draw(st.integers(-(1 << 31), (1 << 31) - 1))
                    side.bucket_counts.extend(draw(st.lists(U64, max_size=4)))
        if kind == "summary":
            p.sum = draw(DOUBLES)
            for _ in range(draw(st.integers(0, 3))):
                p.quantile_values.add(quantile=draw(DOUBLES), value=draw(DOUBLES))
        if kind != "summary":
            draw(_fill_exemplars(p))
    return m


@st.composite
def metrics_data(draw: st.DrawFn) -> MetricsData:
    md = MetricsData()
    for _ in range(draw(st.integers(1, 2))):
        rm = md.resource_metrics.add()
        rm.resource.attributes.extend(draw(ATTRIBUTES))
        rm.resource.dropped_attributes_count = draw(U32)
        rm.schema_url = draw(TEXT)
        for _ in range(draw(st.integers(1, 2))):
            sm = rm.scope_metrics.add()
            sm.scope.name = draw(TEXT)
            sm.scope.version = draw(TEXT)
            sm.scope.attributes.extend(draw(ATTRIBUTES))
            sm.scope.dropped_attributes_count = draw(U32)
            sm.schema_url = draw(TEXT)
            sm.metrics.extend(draw(st.lists(metric(), min_size=1, max_size=3)))
    return md


def canonical(md: MetricsData) -> dict[str, Any]:
    """What a round trip must preserve: empty sub-messages count as absent, attribute
    maps are compared as maps, NaNs compare equal (MessageToDict spells them "NaN")."""
    md = MetricsData.FromString(md.SerializeToString())
    for rm in md.resource_metrics:
        if rm.HasField("resource") and rm.resource.ByteSize() == 0:
            rm.ClearField("resource")
        for sm in rm.scope_metrics:
            if sm.HasField("scope") and sm.scope.ByteSize() == 0:
                sm.ClearField("scope")
            for m in sm.metrics:
                if m.HasField("exponential_histogram"):
                    for p in m.exponential_histogram.data_points:
                        for side in ("positive", "negative"):
                            if p.HasField(side) and getattr(p, side).ByteSize() == 0:
                                p.ClearField(side)
    as_dict = json_format.MessageToDict(md)
    return _sort_attribute_lists(as_dict)


def _sort_attribute_lists(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _sort_attribute_lists(v) for k, v in node.items()}
        for key in ("attributes", "filteredAttributes", "metadata"):
            if key in out:
                out[key] = sorted(out[key], key=lambda kv: kv["key"])
        return out
    if isinstance(node, list):
        return [_sort_attribute_lists(v) for v in node]
    return node


CONTEXTS = st.builds(
    TelemetryContext,
    client_instance_id=st.text(min_size=22, max_size=22),
    client_id=st.none() | TEXT,
    client_software_name=TEXT,
    client_software_version=TEXT,
    client_source_address=st.just("127.0.0.1"),
    client_source_port=st.integers(0, 65535),
    listener_name=st.just("PLAINTEXT"),
    security_protocol=st.just("PLAINTEXT"),
    principal=st.just("User:ANONYMOUS"),
    push_interval_ms=st.integers(100, 3_600_000),
    terminating=st.booleans(),
    received_time_unix_nano=st.integers(0, 4_102_444_800 * 10**9),  # up to 2100
    node_id=st.integers(0, 100),
    cluster_id=TEXT,
    subscription_id=st.integers(-(1 << 31), (1 << 31) - 1),
    compression_type=st.integers(0, 4),
    upstream_cluster_id=st.none() | TEXT,
    upstream_node_id=st.none() | st.integers(0, (1 << 31) - 1),
)


def make_context(**overrides: Any) -> TelemetryContext:
    base = TelemetryContext(
        client_instance_id="AAAAAAAAAAAAAAAAAAAAAA",
        client_id="producer-1",
        client_software_name="confluent-kafka-python",
        client_software_version="2.16.1-rdkafka-2.16.0",
        client_source_address="127.0.0.1",
        client_source_port=50000,
        listener_name="PLAINTEXT",
        security_protocol="PLAINTEXT",
        principal="User:ANONYMOUS",
        push_interval_ms=1000,
        terminating=False,
        received_time_unix_nano=1_795_000_000 * 10**9,
        node_id=1,
        cluster_id="ktc-cluster",
        subscription_id=12345,
        compression_type=4,
    )
    return dataclasses.replace(base, **overrides)


def sample_metrics_data(seed: int) -> MetricsData:
    """A deterministic push with all five point types, ints and doubles, attributes of
    several kinds: the fixed workload of the fault and query tests."""
    t = 1_795_000_000 * 10**9 + seed * 10**9
    md = MetricsData()
    sm = md.resource_metrics.add().scope_metrics.add()
    sm.scope.name = "librdkafka"
    gauge = sm.metrics.add(
        name="org.apache.kafka.producer.node.request.latency.max", unit="ms"
    )
    for node in (1, 2):
        p = gauge.gauge.data_points.add(time_unix_nano=t, as_double=seed * 1.5 + node)
        p.attributes.add(key="node.id", value=AnyValue(string_value=str(node)))
    total = sm.metrics.add(name="org.apache.kafka.producer.record.send.total")
    total.sum.aggregation_temporality = 2
    total.sum.is_monotonic = True
    total.sum.data_points.add(
        start_time_unix_nano=t - 10**9, time_unix_nano=t, as_int=seed * 10
    )
    hist = sm.metrics.add(name="test.histogram")
    hist.histogram.aggregation_temporality = 1
    h = hist.histogram.data_points.add(
        time_unix_nano=t, count=3, sum=6.0, min=1.0, max=3.0
    )
    h.bucket_counts.extend([1, 2])
    h.explicit_bounds.append(2.0)
    h.attributes.add(key="shard", value=AnyValue(int_value=seed))
    exp = sm.metrics.add(name="test.exponential_histogram")
    e = exp.exponential_histogram.data_points.add(
        time_unix_nano=t, count=2, scale=3, zero_count=1
    )
    e.positive.offset = -2
    e.positive.bucket_counts.extend([1])
    summary = sm.metrics.add(name="test.summary")
    s = summary.summary.data_points.add(time_unix_nano=t, count=4, sum=10.0)
    s.quantile_values.add(quantile=0.99, value=4.0)
    return md
