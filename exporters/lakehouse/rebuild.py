"""The inverse of flatten: rows of the point tables -> the ``MetricsData`` of each push.

Used by the round-trip tests and by anyone who wants to re-export lakehouse rows as
OTLP.  Rows may come from Arrow (``table.to_pylist()``: maps are lists of pairs) or
from Spark (``row.asDict(recursive=True)``: maps are dicts).

The rebuilt message equals the pushed one except for what carries no data:

* metrics without data points, and resources/scopes without such metrics, are absent;
* an empty sub-message that was explicitly present (``resource``, ``scope``, an
  exponential histogram's ``positive``/``negative`` buckets with offset 0 and no
  counts) comes back absent: protobuf readers see no difference in their values;
* attribute order follows the map (OTLP attributes are a map; keys are unique).

Only the ``*_unix_nano`` columns are read; the derived TIMESTAMP columns are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Metric,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
)

from exporters.lakehouse.anyvalue import decode_attributes
from exporters.lakehouse.flatten import to_unsigned64
from exporters.lakehouse.schema import LINEAGE_KEY

__all__ = ["PushKey", "rebuild"]

PushKey = tuple[str, int]  # (landing_node, landing_offset)

Row = Mapping[str, Any]


def _set_point_common(point: Any, row: Row) -> None:
    decode_attributes(row["attributes"], row["attributes_types"], point.attributes)
    point.start_time_unix_nano = to_unsigned64(row["start_time_unix_nano"])
    point.time_unix_nano = to_unsigned64(row["time_unix_nano"])
    point.flags = row["flags"]


def _set_exemplars(point: Any, exemplars: Iterable[Row] | None) -> None:
    for ex_row in exemplars or ():
        ex = point.exemplars.add()
        decode_attributes(
            ex_row["filtered_attributes"],
            ex_row["filtered_attributes_types"],
            ex.filtered_attributes,
        )
        ex.time_unix_nano = to_unsigned64(ex_row["time_unix_nano"])
        if ex_row["as_double"] is not None:
            ex.as_double = ex_row["as_double"]
        elif ex_row["as_int"] is not None:
            ex.as_int = ex_row["as_int"]
        ex.span_id = bytes.fromhex(ex_row["span_id"] or "")
        ex.trace_id = bytes.fromhex(ex_row["trace_id"] or "")


def _set_optional(point: Any, field: str, value: float | None) -> None:
    if value is not None:
        setattr(point, field, value)


def _number_point(data: Any, row: Row) -> None:
    point = data.data_points.add()
    _set_point_common(point, row)
    if row["as_double"] is not None:
        point.as_double = row["as_double"]
    elif row["as_int"] is not None:
        point.as_int = row["as_int"]
    _set_exemplars(point, row["exemplars"])


def _sum_point(data: Any, row: Row) -> None:
    data.aggregation_temporality = row["aggregation_temporality"]
    data.is_monotonic = row["is_monotonic"]
    _number_point(data, row)


def _add_histogram_point(data: Any, row: Row) -> Any:
    """A new point of a histogram of either kind, with what both kinds have set: the
    fields of every point, count, sum, min and max (optional), exemplars; and the
    metric's aggregation temporality."""
    data.aggregation_temporality = row["aggregation_temporality"]
    point = data.data_points.add()
    _set_point_common(point, row)
    point.count = to_unsigned64(row["count"])
    _set_optional(point, "sum", row["sum"])
    _set_optional(point, "min", row["min"])
    _set_optional(point, "max", row["max"])
    _set_exemplars(point, row["exemplars"])
    return point


def _histogram_point(data: Any, row: Row) -> None:
    point = _add_histogram_point(data, row)
    point.bucket_counts.extend(to_unsigned64(c) for c in row["bucket_counts"] or ())
    point.explicit_bounds.extend(row["explicit_bounds"] or ())


def _set_buckets(buckets: Any, offset: int, counts: Iterable[int] | None) -> None:
    counts = list(counts or ())
    if offset or counts:
        buckets.offset = offset
        buckets.bucket_counts.extend(to_unsigned64(c) for c in counts)


def _exponential_histogram_point(data: Any, row: Row) -> None:
    point = _add_histogram_point(data, row)
    point.scale = row["scale"]
    point.zero_count = to_unsigned64(row["zero_count"])
    point.zero_threshold = row["zero_threshold"]
    _set_buckets(point.positive, row["positive_offset"], row["positive_bucket_counts"])
    _set_buckets(point.negative, row["negative_offset"], row["negative_bucket_counts"])


def _summary_point(data: Any, row: Row) -> None:
    point = data.data_points.add()
    _set_point_common(point, row)
    point.count = to_unsigned64(row["count"])
    point.sum = row["sum"]
    for q_row in row["quantile_values"] or ():
        q = point.quantile_values.add()
        q.quantile = q_row["quantile"]
        q.value = q_row["value"]


_POINT_SETTERS = {
    "gauge": _number_point,
    "sum": _sum_point,
    "histogram": _histogram_point,
    "exponential_histogram": _exponential_histogram_point,
    "summary": _summary_point,
}


def _new_resource_metrics(md: MetricsData, row: Row) -> ResourceMetrics:
    rm = md.resource_metrics.add()
    rm.schema_url = row["resource_schema_url"] or ""
    decode_attributes(
        row["resource_attributes"],
        row["resource_attributes_types"],
        rm.resource.attributes,
    )
    if row["resource_dropped_attributes_count"]:
        rm.resource.dropped_attributes_count = row["resource_dropped_attributes_count"]
    for ref in json.loads(row["resource_entity_refs"] or "[]"):
        json_format.ParseDict(ref, rm.resource.entity_refs.add())
    return rm


def _new_scope_metrics(rm: ResourceMetrics, row: Row) -> ScopeMetrics:
    sm = rm.scope_metrics.add()
    sm.schema_url = row["scope_schema_url"] or ""
    if row["scope_name"]:
        sm.scope.name = row["scope_name"]
    if row["scope_version"]:
        sm.scope.version = row["scope_version"]
    decode_attributes(
        row["scope_attributes"], row["scope_attributes_types"], sm.scope.attributes
    )
    if row["scope_dropped_attributes_count"]:
        sm.scope.dropped_attributes_count = row["scope_dropped_attributes_count"]
    return sm


def _new_metric(sm: ScopeMetrics, point_type: str, row: Row) -> Metric:
    metric = sm.metrics.add()
    metric.name = row["metric_name"] or ""
    metric.description = row["metric_description"] or ""
    metric.unit = row["metric_unit"] or ""
    decode_attributes(
        row["metric_metadata"], row["metric_metadata_types"], metric.metadata
    )
    getattr(metric, point_type).SetInParent()
    return metric


def rebuild(rows_by_type: Mapping[str, Iterable[Row]]) -> dict[PushKey, MetricsData]:
    """Group rows (keyed by point type, e.g. ``{"gauge": [...]}``) back into pushes.

    A ``"pushes"`` entry is ignored: it has no points.
    """
    keyed: list[tuple[tuple[Any, ...], str, Row]] = []
    for point_type, rows in rows_by_type.items():
        if point_type == "pushes":
            continue
        if point_type not in _POINT_SETTERS:
            raise ValueError(f"unknown point type {point_type!r}")
        keyed.extend(
            (tuple(row[k] for k in LINEAGE_KEY), point_type, row) for row in rows
        )
    keyed.sort(key=lambda item: item[0])

    pushes: dict[PushKey, MetricsData] = {}
    resources: dict[tuple[Any, ...], ResourceMetrics] = {}
    scopes: dict[tuple[Any, ...], ScopeMetrics] = {}
    metrics: dict[tuple[Any, ...], Metric] = {}
    for key, point_type, row in keyed:
        node, offset = key[0], key[1]
        md = pushes.get((node, offset))
        if md is None:
            md = pushes[(node, offset)] = MetricsData()
        rm = resources.get(key[:3])
        if rm is None:
            rm = resources[key[:3]] = _new_resource_metrics(md, row)
        sm = scopes.get(key[:4])
        if sm is None:
            sm = scopes[key[:4]] = _new_scope_metrics(rm, row)
        metric = metrics.get(key[:5])
        if metric is None:
            metric = metrics[key[:5]] = _new_metric(sm, point_type, row)
        elif metric.WhichOneof("data") != point_type:
            raise ValueError(
                f"point {key} of type {point_type} in a {metric.WhichOneof('data')}"
            )
        _POINT_SETTERS[point_type](getattr(metric, point_type), row)
    return pushes
