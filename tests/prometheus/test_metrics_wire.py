"""The fold's walk of a push's bytes (metrics_wire.py) reads what protobuf-python's decode
reads: every field the fold uses, for random MetricsData of every kind (hypothesis), and
the labels it renders from raw attribute bytes are those rendered from the decoded
attributes; a cut or corrupt payload is refused with ValueError, never read wrong."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
    Summary,
    SummaryDataPoint,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from collector.telemetry.prometheus.metrics_wire import resources
from collector.telemetry.prometheus.naming import label_name
from collector.telemetry.prometheus.points import (
    IDENTITY_LABELS,
    attribute_labels,
    point_labels,
)

_u64 = st.integers(0, 2**64 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_doubles = st.floats(allow_nan=False)
_text = st.text(max_size=12)
_keys = st.sampled_from(
    ["a", "b", "topic", "client_id", "le", "quantile", "__x", "node.id", "", "é"]
)


def _any_values() -> st.SearchStrategy[AnyValue]:
    scalar = st.one_of(
        _text.map(lambda v: AnyValue(string_value=v)),
        st.booleans().map(lambda v: AnyValue(bool_value=v)),
        _i64.map(lambda v: AnyValue(int_value=v)),
        _doubles.map(lambda v: AnyValue(double_value=v)),
        st.binary(max_size=4).map(lambda v: AnyValue(bytes_value=v)),
        st.just(AnyValue()),
    )
    return st.one_of(
        scalar,
        st.lists(scalar, max_size=2).map(
            lambda vs: AnyValue(array_value=ArrayValue(values=vs))
        ),
        st.lists(st.tuples(_text, scalar), max_size=2).map(
            lambda kvs: AnyValue(
                kvlist_value=KeyValueList(
                    values=[KeyValue(key=k, value=v) for k, v in kvs]
                )
            )
        ),
    )


_attributes = st.lists(st.builds(KeyValue, key=_keys, value=_any_values()), max_size=4)
_times = {"start_time_unix_nano": _u64, "time_unix_nano": _u64}
_number_points = st.one_of(
    st.builds(NumberDataPoint, attributes=_attributes, as_double=_doubles,
              flags=st.integers(0, 3), **_times),
    st.builds(NumberDataPoint, attributes=_attributes, as_int=_i64,
              flags=st.integers(0, 3), **_times),
)  # fmt: skip
_histogram_points = st.builds(
    HistogramDataPoint,
    attributes=_attributes,
    count=_u64,
    sum=_doubles,
    bucket_counts=st.lists(_u64, max_size=4),
    explicit_bounds=st.lists(_doubles, max_size=3),
    flags=st.integers(0, 3),
    **_times,
)
_summary_points = st.builds(
    SummaryDataPoint,
    attributes=_attributes,
    count=_u64,
    sum=_doubles,
    quantile_values=st.lists(
        st.builds(SummaryDataPoint.ValueAtQuantile, quantile=_doubles, value=_doubles),
        max_size=3,
    ),
    flags=st.integers(0, 3),
    **_times,
)
_temporality = st.integers(0, 2)
_metrics = st.one_of(
    st.builds(Metric, name=_text, unit=_text, description=_text,
              gauge=st.builds(Gauge, data_points=st.lists(_number_points, max_size=3))),
    st.builds(Metric, name=_text, unit=_text,
              sum=st.builds(Sum, data_points=st.lists(_number_points, max_size=3),
                            aggregation_temporality=_temporality,
                            is_monotonic=st.booleans())),
    st.builds(Metric, name=_text,
              histogram=st.builds(Histogram,
                                  data_points=st.lists(_histogram_points, max_size=2),
                                  aggregation_temporality=_temporality)),
    st.builds(Metric, name=_text,
              summary=st.builds(Summary,
                                data_points=st.lists(_summary_points, max_size=2))),
    st.builds(Metric, name=_text),
)  # fmt: skip
_payloads = st.lists(
    st.builds(
        ResourceMetrics,
        resource=st.builds(Resource, attributes=_attributes),
        scope_metrics=st.lists(
            st.builds(ScopeMetrics, metrics=st.lists(_metrics, max_size=3)), max_size=2
        ),
    ),
    max_size=2,
).map(lambda rms: MetricsData(resource_metrics=rms))


def _decoded_labels(attributes: Any) -> dict[str, str]:
    """The labels as the fold rendered them from decoded attributes (the reference)."""
    pairs: dict[str, str] = {}
    for attribute in attributes:
        name = label_name(attribute.key)
        if not name or name in ("le", "quantile") or name.startswith("__"):
            continue
        if name in IDENTITY_LABELS:
            name = "exported_" + name
        value = attribute.value
        kind = value.WhichOneof("value")
        if kind == "string_value":
            text = value.string_value
        elif kind == "bool_value":
            text = "true" if value.bool_value else "false"
        elif kind == "int_value":
            text = str(value.int_value)
        elif kind == "double_value":
            text = repr(value.double_value)
        elif kind is None:
            text = ""
        else:
            text = str(getattr(value, kind))
        pairs[name] = text
    return pairs


def _rendered(pairs: dict[str, str]) -> str:
    escape = {"\\": "\\\\", '"': '\\"', "\n": "\\n"}
    return ",".join(
        f'{name}="{"".join(escape.get(c, c) for c in value)}"'
        for name, value in sorted(pairs.items())
    )


@settings(max_examples=300, deadline=None)
@given(_payloads)
def test_the_walk_reads_what_protobuf_decodes(data: MetricsData) -> None:
    walked = resources(data.SerializeToString())
    assert len(walked) == len(data.resource_metrics)
    for wire, decoded in zip(walked, data.resource_metrics, strict=True):
        resource_labels = _decoded_labels(decoded.resource.attributes)
        assert attribute_labels(wire.attributes) == resource_labels
        metrics = [m for scope in decoded.scope_metrics for m in scope.metrics]
        assert len(wire.metrics) == len(metrics)
        for metric, expected in zip(wire.metrics, metrics, strict=True):
            assert (metric.name, metric.unit, metric.description) == (
                expected.name,
                expected.unit,
                expected.description,
            )
            assert metric.kind == expected.WhichOneof("data")
            if metric.kind in ("gauge", "sum"):
                data_points: Any = getattr(expected, metric.kind)
                got = metric.number_points()
                for point, want in zip(got, data_points.data_points, strict=True):
                    assert point.as_double == want.as_double
                    assert point.as_int == want.as_int
                    assert point.flags == want.flags
                    assert point.start_time_unix_nano == want.start_time_unix_nano
                    assert point.time_unix_nano == want.time_unix_nano
                    labels = {**resource_labels, **_decoded_labels(want.attributes)}
                    assert point_labels(wire.attributes, point.attributes) == (
                        _rendered(labels)
                    )
                if metric.kind == "sum":
                    assert metric.temporality == expected.sum.aggregation_temporality
                    assert metric.is_monotonic == expected.sum.is_monotonic
            elif metric.kind == "histogram":
                hist = metric.histogram_points()
                assert metric.temporality == expected.histogram.aggregation_temporality
                for h, want_h in zip(hist, expected.histogram.data_points, strict=True):
                    assert (h.count, h.sum, h.flags) == (
                        want_h.count,
                        want_h.sum,
                        want_h.flags,
                    )
                    assert h.bucket_counts == list(want_h.bucket_counts)
                    assert h.explicit_bounds == list(want_h.explicit_bounds)
                    assert (h.start_time_unix_nano, h.time_unix_nano) == (
                        want_h.start_time_unix_nano,
                        want_h.time_unix_nano,
                    )
                    assert attribute_labels(h.attributes) == _decoded_labels(
                        want_h.attributes
                    )
            elif metric.kind == "summary":
                summaries = metric.summary_points()
                for s, want_s in zip(
                    summaries, expected.summary.data_points, strict=True
                ):
                    assert (s.count, s.sum, s.flags, s.time_unix_nano) == (
                        want_s.count,
                        want_s.sum,
                        want_s.flags,
                        want_s.time_unix_nano,
                    )
                    assert s.quantile_values == [
                        (q.quantile, q.value) for q in want_s.quantile_values
                    ]


@settings(max_examples=200, deadline=None)
@given(_payloads, st.data())
def test_a_cut_payload_is_refused_or_read_as_protobuf_reads_it(
    data: MetricsData, draw: st.DataObject
) -> None:
    """A payload cut anywhere: protobuf refuses it, and so does the walk, or both read the
    same prefix (a cut between two fields is a valid, shorter message)."""
    payload = data.SerializeToString()
    if not payload:
        return
    cut = payload[: draw.draw(st.integers(0, len(payload) - 1))]
    try:
        decoded = MetricsData.FromString(cut)
    except Exception:
        decoded = None
    try:
        walked = resources(cut)
        for resource in walked:
            attribute_labels(resource.attributes)
            for metric in resource.metrics:
                metric.number_points() if metric.kind in ("gauge", "sum") else None
    except ValueError:
        walked = None
    if decoded is not None and walked is not None:
        assert len(walked) == len(decoded.resource_metrics)


@pytest.mark.parametrize(
    "payload",
    [
        b"\x0a\x05\x12\x03\x12",  # a length past its message's end
        b"\x0a\x04\x0a\x02\x0a\xff",  # an attribute runs past the resource
    ],
)
def test_a_corrupt_payload_is_refused(payload: bytes) -> None:
    with pytest.raises(ValueError):
        for resource in resources(payload):
            attribute_labels(resource.attributes)
