"""Transform: OTLP ``MetricsData`` + the push's context -> rows of the five point tables.

Pure Python and pyarrow, no Spark.  Rows are accumulated column by column (one list
per column) and handed over as Arrow tables, which Spark takes without converting row
by row.  The ~36 columns that are the same for every point of a scope (context,
resource, scope) are recorded once per scope as one tuple, the ~8 of a metric once per
metric; each point only records which tuples it belongs to, and Arrow's ``take``
expands them in C at the end.  Appending those columns per point instead made
flattening slower than Spark's write; one tuple per metric holding all ~44 took a
third more time than two levels (5,000 librdkafka pushes: 0.69 s against 0.59 s).

Lossless: :mod:`exporters.lakehouse.rebuild` turns the rows back into the same
``MetricsData`` (see its docstring for the exact equivalence).  A metric without data
points, and a resource or scope without such metrics, carries no data and yields no
row.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.context import TelemetryContext
from exporters.lakehouse.anyvalue import encode_attributes
from exporters.lakehouse.schema import (
    CONTEXT_COLUMN_NAMES,
    PUSHES_TABLE,
    TABLE_BY_POINT_TYPE,
)

__all__ = [
    "PointParts",
    "PointRowsBuilder",
    "RecordToFlatten",
    "RowParts",
    "add_records",
    "assemble",
    "flatten",
    "to_signed64",
    "to_unsigned64",
]

_2_63 = 1 << 63
_2_64 = 1 << 64
_NANOS_PER_MICRO = 1_000
_NANOS_PER_HOUR = 3_600 * 1_000_000_000
_HOURS_PER_DAY = 24


def to_signed64(value: int) -> int:
    """The BIGINT holding the same 64 bits as an OTLP unsigned 64-bit value."""
    return value - _2_64 if value >= _2_63 else value


def to_unsigned64(value: int) -> int:
    """Inverse of :func:`to_signed64`."""
    return value + _2_64 if value < 0 else value


def _signed_list(values: Sequence[int]) -> list[int]:
    # Bucket counts are almost never >= 2**63; check once instead of per element.
    if not values or max(values) < _2_63:
        return list(values)
    return [to_signed64(v) for v in values]


def _micros_or_none(time_unix_nano: int) -> int | None:
    """TIMESTAMP value (microseconds) of an OTLP time; None for 0, OTLP's "unset"."""
    return time_unix_nano // _NANOS_PER_MICRO if time_unix_nano else None


def _context_columns(context: TelemetryContext) -> dict[str, Any]:
    received = context.received_time_unix_nano
    hours_since_epoch = received // _NANOS_PER_HOUR
    return {
        "client_instance_id": context.client_instance_id,
        "client_id": context.client_id,
        "client_software_name": context.client_software_name,
        "client_software_version": context.client_software_version,
        "client_source_address": context.client_source_address,
        "client_source_port": context.client_source_port,
        "principal": context.principal,
        "listener": context.listener_name,
        "security_protocol": context.security_protocol,
        "node_id": context.node_id,
        "cluster_id": context.cluster_id,
        "upstream_cluster_id": context.upstream_cluster_id,
        "upstream_node_id": context.upstream_node_id,
        "subscription_id": context.subscription_id,
        "push_interval_ms": context.push_interval_ms,
        "compression_type": context.compression_type,
        "terminating": context.terminating,
        "received_time_unix_nano": received,
        "received_time": received // _NANOS_PER_MICRO,
        # Partitions follow the collector's clock (UTC), see schema.py.
        "dt": hours_since_epoch // _HOURS_PER_DAY,  # date32 = days since the epoch
        "hour": hours_since_epoch % _HOURS_PER_DAY,
    }


def _exemplars(exemplars: Sequence[Any]) -> list[dict[str, Any]]:
    out = []
    for ex in exemplars:
        values, types = encode_attributes(ex.filtered_attributes)
        which = ex.WhichOneof("value")
        out.append(
            {
                "filtered_attributes": values,
                "filtered_attributes_types": types,
                "time_unix_nano": to_signed64(ex.time_unix_nano),
                "time": _micros_or_none(ex.time_unix_nano),
                "as_double": ex.as_double if which == "as_double" else None,
                "as_int": ex.as_int if which == "as_int" else None,
                "span_id": ex.span_id.hex(),
                "trace_id": ex.trace_id.hex(),
            }
        )
    return out


def _append_point_common(cols: dict[str, list[Any]], point: Any) -> None:
    values, types = encode_attributes(point.attributes)
    cols["attributes"].append(values)
    cols["attributes_types"].append(types)
    cols["start_time_unix_nano"].append(to_signed64(point.start_time_unix_nano))
    cols["start_time"].append(_micros_or_none(point.start_time_unix_nano))
    cols["time_unix_nano"].append(to_signed64(point.time_unix_nano))
    cols["time"].append(_micros_or_none(point.time_unix_nano))
    cols["flags"].append(point.flags)


def _append_gauge(cols: dict[str, list[Any]], points: Sequence[Any], data: Any) -> None:
    # Gauges and sums are nearly every point a Kafka client sends: this loop is
    # _append_point_common inlined, with the column appends bound once per metric.
    attributes, attributes_types = (
        cols["attributes"].append,
        cols["attributes_types"].append,
    )
    start_nanos, start_time = (
        cols["start_time_unix_nano"].append,
        cols["start_time"].append,
    )
    nanos, time_ = cols["time_unix_nano"].append, cols["time"].append
    flags, exemplars = cols["flags"].append, cols["exemplars"].append
    as_double, as_int = cols["as_double"].append, cols["as_int"].append
    for point in points:
        values, types = encode_attributes(point.attributes)
        attributes(values)
        attributes_types(types)
        start = point.start_time_unix_nano
        start_nanos(start - _2_64 if start >= _2_63 else start)
        start_time(start // _NANOS_PER_MICRO if start else None)
        t = point.time_unix_nano
        nanos(t - _2_64 if t >= _2_63 else t)
        time_(t // _NANOS_PER_MICRO if t else None)
        flags(point.flags)
        which = point.WhichOneof("value")
        as_double(point.as_double if which == "as_double" else None)
        as_int(point.as_int if which == "as_int" else None)
        exemplars(_exemplars(point.exemplars) if point.exemplars else [])


_append_sum = _append_gauge


def _append_histogram_common(cols: dict[str, list[Any]], point: Any) -> None:
    """The columns of every point, then those both histogram kinds have: count, sum,
    min and max (the last three optional in OTLP: null when absent), exemplars."""
    _append_point_common(cols, point)
    cols["count"].append(to_signed64(point.count))
    cols["sum"].append(point.sum if point.HasField("sum") else None)
    cols["min"].append(point.min if point.HasField("min") else None)
    cols["max"].append(point.max if point.HasField("max") else None)
    cols["exemplars"].append(_exemplars(point.exemplars))


def _append_histogram(
    cols: dict[str, list[Any]], points: Sequence[Any], data: Any
) -> None:
    for point in points:
        _append_histogram_common(cols, point)
        cols["bucket_counts"].append(_signed_list(point.bucket_counts))
        cols["explicit_bounds"].append(list(point.explicit_bounds))


def _append_exponential_histogram(
    cols: dict[str, list[Any]], points: Sequence[Any], data: Any
) -> None:
    for point in points:
        _append_histogram_common(cols, point)
        cols["scale"].append(point.scale)
        cols["zero_count"].append(to_signed64(point.zero_count))
        cols["zero_threshold"].append(point.zero_threshold)
        cols["positive_offset"].append(point.positive.offset)
        cols["positive_bucket_counts"].append(
            _signed_list(point.positive.bucket_counts)
        )
        cols["negative_offset"].append(point.negative.offset)
        cols["negative_bucket_counts"].append(
            _signed_list(point.negative.bucket_counts)
        )


def _append_summary(
    cols: dict[str, list[Any]], points: Sequence[Any], data: Any
) -> None:
    for point in points:
        _append_point_common(cols, point)
        cols["count"].append(to_signed64(point.count))
        cols["sum"].append(point.sum)
        cols["quantile_values"].append(
            [{"quantile": q.quantile, "value": q.value} for q in point.quantile_values]
        )


# Columns of the Metric.data message itself (shared by its points), per point type.
_DATA_COLUMNS: dict[str, tuple[str, ...]] = {
    "gauge": (),
    "sum": ("aggregation_temporality", "is_monotonic"),
    "histogram": ("aggregation_temporality",),
    "exponential_histogram": ("aggregation_temporality",),
    "summary": (),
}
# What a push gives each of its rows: its context's columns, and where it was landed.
_PUSH_COLUMNS: tuple[str, ...] = CONTEXT_COLUMN_NAMES + (
    "landing_node",
    "landing_offset",
)
_RESOURCE_COLUMNS: tuple[str, ...] = (
    "resource_index",
    "resource_attributes",
    "resource_attributes_types",
    "resource_dropped_attributes_count",
    "resource_schema_url",
    "resource_entity_refs",
)
_SCOPE_COLUMNS: tuple[str, ...] = (
    "scope_index",
    "scope_name",
    "scope_version",
    "scope_attributes",
    "scope_attributes_types",
    "scope_dropped_attributes_count",
    "scope_schema_url",
)
_METRIC_COLUMNS: tuple[str, ...] = (
    "metric_index",
    "metric_name",
    "metric_description",
    "metric_unit",
    "metric_metadata",
    "metric_metadata_types",
)
# The columns recorded once per scope (one tuple per scope and point type), and once per
# metric (per point type), in the order of their tuples; every other column once per point.
_PER_SCOPE_COLUMNS: tuple[str, ...] = _PUSH_COLUMNS + _RESOURCE_COLUMNS + _SCOPE_COLUMNS
_PER_METRIC_COLUMNS: dict[str, tuple[str, ...]] = {
    kind: _METRIC_COLUMNS + data_columns for kind, data_columns in _DATA_COLUMNS.items()
}
_SHARED_COLUMNS: dict[str, frozenset[str]] = {
    kind: frozenset(_PER_SCOPE_COLUMNS + per_metric)
    for kind, per_metric in _PER_METRIC_COLUMNS.items()
}

# Metric.data oneof field -> appender of that point type's columns.
_APPENDERS: dict[str, Callable[[dict[str, list[Any]], Sequence[Any], Any], None]] = {
    "gauge": _append_gauge,
    "sum": _append_sum,
    "histogram": _append_histogram,
    "exponential_histogram": _append_exponential_histogram,
    "summary": _append_summary,
}


class PointRowsBuilder:
    """Accumulates the rows of many pushes; :meth:`finish` returns one Arrow table per
    point type plus ``"pushes"`` (one row per push)."""

    def __init__(self) -> None:
        self._columns: dict[str, dict[str, list[Any]]] = {}
        # Per point type: one tuple per scope with such points, one per metric, and per
        # point the index of its scope's and its metric's tuple.
        self._scopes: dict[str, list[tuple[Any, ...]]] = {}
        self._metrics: dict[str, list[tuple[Any, ...]]] = {}
        self._scope_index: dict[str, list[int]] = {}
        self._metric_index: dict[str, list[int]] = {}
        self.points = 0  # points added since the last finish()
        self.pushes = 0
        self._reset()

    def _reset(self) -> None:
        self._columns = {
            kind: {
                name: []
                for name in spec.data_schema.names
                if name not in _SHARED_COLUMNS[kind]
            }
            for kind, spec in TABLE_BY_POINT_TYPE.items()
        }
        self._columns["pushes"] = {name: [] for name in PUSHES_TABLE.data_schema.names}
        self._scopes = {kind: [] for kind in TABLE_BY_POINT_TYPE}
        self._metrics = {kind: [] for kind in TABLE_BY_POINT_TYPE}
        self._scope_index = {kind: [] for kind in TABLE_BY_POINT_TYPE}
        self._metric_index = {kind: [] for kind in TABLE_BY_POINT_TYPE}
        self.points = 0
        self.pushes = 0

    def add_payload(
        self,
        payload: bytes,
        context: TelemetryContext,
        landing_node: str,
        landing_offset: int,
        appended_time_unix_nano: int = 0,
    ) -> int:
        """Parse a ``MetricsData`` protobuf and add its points; returns how many."""
        metrics_data = MetricsData()
        metrics_data.ParseFromString(payload)
        return self.add(
            metrics_data,
            context,
            landing_node,
            landing_offset,
            appended_time_unix_nano=appended_time_unix_nano,
            payload_bytes=len(payload),
        )

    def add(
        self,
        metrics_data: MetricsData,
        context: TelemetryContext,
        landing_node: str,
        landing_offset: int,
        *,
        appended_time_unix_nano: int = 0,
        payload_bytes: int | None = None,
    ) -> int:
        """Add every data point of one push, and the push; returns how many points."""
        push_values = _context_columns(context)
        push_values["landing_node"] = landing_node
        push_values["landing_offset"] = landing_offset
        push_tuple = tuple(push_values[name] for name in _PUSH_COLUMNS)
        added = 0
        metric_count = 0
        for resource_index, rm in enumerate(metrics_data.resource_metrics):
            resource_attributes, resource_types = encode_attributes(
                rm.resource.attributes
            )
            resource_tuple = push_tuple + (
                resource_index,
                resource_attributes,
                resource_types,
                rm.resource.dropped_attributes_count,
                rm.schema_url,
                _entity_refs_json(rm.resource.entity_refs),
            )
            for scope_index, sm in enumerate(rm.scope_metrics):
                scope_attributes, scope_types = encode_attributes(sm.scope.attributes)
                scope_tuple = resource_tuple + (
                    scope_index,
                    sm.scope.name,
                    sm.scope.version,
                    scope_attributes,
                    scope_types,
                    sm.scope.dropped_attributes_count,
                    sm.schema_url,
                )
                scope_slots: dict[str, int] = {}  # point type -> this scope's tuple
                for metric_index, metric in enumerate(sm.metrics):
                    point_type = metric.WhichOneof("data")
                    if point_type is None:
                        continue
                    data = getattr(metric, point_type)
                    points = data.data_points
                    n = len(points)
                    if n == 0:
                        continue
                    metadata, metadata_types = encode_attributes(metric.metadata)
                    slot = scope_slots.get(point_type)
                    if slot is None:
                        scopes = self._scopes[point_type]
                        slot = scope_slots[point_type] = len(scopes)
                        scopes.append(scope_tuple)
                    self._scope_index[point_type].extend([slot] * n)
                    metrics = self._metrics[point_type]
                    self._metric_index[point_type].extend([len(metrics)] * n)
                    metrics.append(
                        (
                            metric_index,
                            metric.name,
                            metric.description,
                            metric.unit,
                            metadata,
                            metadata_types,
                        )
                        + tuple(getattr(data, c) for c in _DATA_COLUMNS[point_type])
                    )
                    cols = self._columns[point_type]
                    cols["point_index"].extend(range(n))
                    _APPENDERS[point_type](cols, points, data)
                    added += n
                    metric_count += 1
        push_cols = self._columns["pushes"]
        for name, value in push_values.items():
            push_cols[name].append(value)
        push_cols["appended_time_unix_nano"].append(appended_time_unix_nano)
        push_cols["payload_bytes"].append(
            metrics_data.ByteSize() if payload_bytes is None else payload_bytes
        )
        push_cols["metric_count"].append(metric_count)
        push_cols["point_count"].append(added)
        self.points += added
        self.pushes += 1
        return added

    def finish(self) -> dict[str, pa.Table]:
        """Arrow tables by kind (five point types and "pushes", possibly empty); resets."""
        return assemble([self.finish_parts()])

    def finish_parts(self) -> RowParts:
        """What :meth:`finish` builds, before each point gets its own copy of the columns
        it shares with its scope and metric (less than half the bytes, for handing rows
        from one process to another: see flatten_pool.py); :func:`assemble` completes
        it. Resets."""
        parts = RowParts(
            {kind: self._point_parts(kind) for kind in TABLE_BY_POINT_TYPE},
            pa.Table.from_pydict(
                self._columns["pushes"], schema=PUSHES_TABLE.data_schema
            ),
        )
        self._reset()
        return parts

    def _point_parts(self, kind: str) -> PointParts:
        schema = TABLE_BY_POINT_TYPE[kind].data_schema
        point_columns = self._columns[kind]
        return PointParts(
            _table_of(self._scopes[kind], _PER_SCOPE_COLUMNS, schema),
            _table_of(self._metrics[kind], _PER_METRIC_COLUMNS[kind], schema),
            pa.array(self._scope_index[kind], pa.int32()),
            pa.array(self._metric_index[kind], pa.int32()),
            pa.Table.from_arrays(
                [
                    pa.array(point_columns[field.name], type=field.type)
                    for field in schema
                    if field.name in point_columns
                ],
                schema=pa.schema(
                    [field for field in schema if field.name in point_columns]
                ),
            ),
        )


class PointParts(NamedTuple):
    """One point type's rows before the shared columns are expanded to every point."""

    scopes: pa.Table  # the per-scope columns, one row per scope with such points
    metrics: pa.Table  # the per-metric columns, one row per metric
    scope_index: pa.Array  # per point: its scope's row in ``scopes``
    metric_index: pa.Array  # per point: its metric's row in ``metrics``
    points: pa.Table  # every other column, one row per point


class RowParts(NamedTuple):
    points: dict[str, PointParts]  # by point type
    pushes: pa.Table


def assemble(parts: Sequence[RowParts]) -> dict[str, pa.Table]:
    """The tables by kind of ``parts`` one after another, each shared column expanded to
    its points by Arrow's ``take`` (in C, not once per point in Python)."""
    tables = {
        kind: _point_table(kind, [part.points[kind] for part in parts])
        for kind in TABLE_BY_POINT_TYPE
    }
    tables["pushes"] = pa.concat_tables([part.pushes for part in parts])
    return tables


def _point_table(kind: str, parts: Sequence[PointParts]) -> pa.Table:
    schema = TABLE_BY_POINT_TYPE[kind].data_schema
    shared: dict[str, pa.ChunkedArray] = {}
    for rows, index in (("scopes", "scope_index"), ("metrics", "metric_index")):
        tables = [getattr(part, rows) for part in parts]
        # Each part's indices point into its own rows: past the parts before it in the
        # concatenation.
        starts = itertools.accumulate((t.num_rows for t in tables[:-1]), initial=0)
        indices = pa.concat_arrays(
            [
                pc.add(getattr(part, index), pa.scalar(start, pa.int32()))
                for part, start in zip(parts, starts, strict=True)
            ]
        )
        expanded = pa.concat_tables(tables).take(indices)
        shared |= {name: expanded.column(name) for name in expanded.column_names}
    points = pa.concat_tables([part.points for part in parts])
    return pa.Table.from_arrays(
        [
            shared[field.name] if field.name in shared else points.column(field.name)
            for field in schema
        ],
        schema=schema,
    )


def _table_of(
    tuples: list[tuple[Any, ...]], names: tuple[str, ...], schema: pa.Schema
) -> pa.Table:
    """Columns ``names`` of ``tuples``, one row per tuple, typed as in ``schema``."""
    columns = list(zip(*tuples, strict=True)) or [() for _ in names]
    return pa.Table.from_arrays(
        [
            pa.array(values, type=schema.field(name).type)
            for name, values in zip(names, columns, strict=True)
        ],
        names=list(names),
    )


def _entity_refs_json(entity_refs: Sequence[Any]) -> str | None:
    """Resource entity refs (development status in OTLP) as a JSON array, kept verbatim."""
    if not entity_refs:
        return None
    parts = [json_format.MessageToJson(ref, indent=None) for ref in entity_refs]
    return "[" + ",".join(parts) + "]"


def flatten(
    metrics_data: MetricsData,
    context: TelemetryContext,
    landing_node: str,
    landing_offset: int,
) -> dict[str, pa.Table]:
    """Rows of one push, one Arrow table per point type."""
    builder = PointRowsBuilder()
    builder.add(metrics_data, context, landing_node, landing_offset)
    return builder.finish()


# A landed record as the flattening takes it: its source (a landing directory's name, or
# ``kafka:<topic>:<partition>``), offset, context, payload and when it was appended.
RecordToFlatten = tuple[str, int, TelemetryContext, bytes, int]


def add_records(
    builder: PointRowsBuilder,
    records: Iterable[RecordToFlatten],
    rejected: list[dict[str, object]],
) -> None:
    """Each record's rows added to ``builder`` (the flatten pool's workers and the topic
    ingest's executors both flatten this way); a payload that does not parse is listed in
    ``rejected`` instead of failing every retry of the batch (the collector lands only
    payloads it decompressed and parsed, so one that does not parse is damage)."""
    # Flattening allocates millions of small objects and no reference cycles; with the
    # cyclic collector running, its repeated scans of the growing column lists took more
    # time than the flattening itself (10,000 pushes: 2.4-3.5 s instead of 1.5 s).
    # Reference counting still frees everything.  ``records`` is iterated here, so
    # decoding it is covered too.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for source, offset, context, payload, appended_time_unix_nano in records:
            try:
                builder.add_payload(
                    payload,
                    context,
                    source,
                    offset,
                    appended_time_unix_nano=appended_time_unix_nano,
                )
            except DecodeError as exc:
                rejected.append({"source": source, "offset": offset, "error": str(exc)})
    finally:
        if was_enabled:
            gc.enable()
