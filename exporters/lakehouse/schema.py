"""The lakehouse tables, declared once.

Five point tables, one per OTLP point type, in the shape of the OpenTelemetry
Collector's ClickHouse exporter (``otel_metrics_{gauge,sum,histogram,
exponential_histogram,summary}``) in snake_case, plus the KIP-714 client context as
first-class columns (librdkafka pushes carry no resource attributes, so the broker-side
context is the only way to tell clients apart).

Everything else is derived from the Arrow schemas below: the Iceberg DDL
(:func:`create_table_sql`) and the column reference in docs/lakehouse.md.  Writes match
columns by name, so the order here is the order a new table shows, nothing more; a
column that existing tables lack is added by ``ALTER TABLE ... ADD COLUMNS`` (catalog.py)
and reads as null in rows written before it.

Type choices (Spark has no unsigned types and TIMESTAMP is microsecond precision):

* OTLP ``fixed64``/``uint64`` (times, counts) are stored as ``BIGINT`` holding the same
  64 bits (two's complement): every real value (< 2**63) reads as itself and the round
  trip is exact for the rest.  ``uint32`` (flags, dropped counts) fit in ``BIGINT``.
* every ``*_unix_nano BIGINT`` has a derived ``TIMESTAMP`` beside it for querying; the
  nanos are the truth.
* attributes are ``MAP<STRING,STRING>`` with a ``*_types`` companion map naming the
  AnyValue kind of every non-string value (see :mod:`exporters.lakehouse.anyvalue`).
* the tables are partitioned by ``days(received_time)`` (Iceberg hidden partitioning),
  the collector's receive time, not the point time, so a client with a wrong clock
  cannot scatter rows over thousands of partitions or escape retention.  Days, not
  hours: a telemetry fleet writes megabytes to a few GB a day, so an hour partition
  would hold 24 times smaller files after compaction and 24 times more manifests
  entries to plan, while a query over the last hour still skips the rest of the day
  by the files' received_time bounds (each batch's file covers seconds).  ``dt DATE``
  and ``hour INT`` stay as ordinary columns (the receive date and hour, UTC) for
  queries written against them.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa

__all__ = [
    "CONTEXT_COLUMN_NAMES",
    "DEFAULT_DATABASE",
    "LINEAGE_KEY",
    "PARTITION_COLUMNS",
    "PARTITION_SPEC",
    "TABLE_PROPERTIES",
    "POINT_TABLES",
    "PUSHES_TABLE",
    "TABLES",
    "TABLE_BY_POINT_TYPE",
    "TABLE_NAME_BY_KIND",
    "TableSpec",
    "create_table_sql",
    "spark_type",
]

DEFAULT_DATABASE = "ktc"

_STRING_MAP = pa.map_(pa.string(), pa.string())
_TIMESTAMP = pa.timestamp("us", tz="UTC")

_CONTEXT_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("client_instance_id", pa.string()),
    pa.field("client_id", pa.string()),
    pa.field("client_software_name", pa.string()),
    pa.field("client_software_version", pa.string()),
    pa.field("client_source_address", pa.string()),
    pa.field("client_source_port", pa.int32()),
    pa.field("principal", pa.string()),
    pa.field("listener", pa.string()),
    pa.field("security_protocol", pa.string()),
    pa.field("node_id", pa.int32()),
    pa.field("cluster_id", pa.string()),
    pa.field("subscription_id", pa.int32()),
    pa.field("push_interval_ms", pa.int32()),
    pa.field("compression_type", pa.int32()),
    pa.field("terminating", pa.bool_()),
    pa.field("received_time_unix_nano", pa.int64()),
    pa.field("received_time", _TIMESTAMP),
)

# Context columns that tables created before them gain by ADD COLUMNS (see the module
# docstring): the end of every table's data columns, in the order they were added.  Gateway mode's
# upstream cluster and broker (null when the collector runs standalone, and for rows
# landed before the context had them).
_APPENDED_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("upstream_cluster_id", pa.string()),
    pa.field("upstream_node_id", pa.int32()),
)

# Where a row came from: (landing_node, landing_offset) names the push, the four
# indexes name the point inside its MetricsData.  Together they are a unique key of a
# point, which is what the exactly-once tests count on, and what rebuilds the payload.
_LINEAGE_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("landing_node", pa.string()),
    pa.field("landing_offset", pa.int64()),
    pa.field("resource_index", pa.int32()),
    pa.field("scope_index", pa.int32()),
    pa.field("metric_index", pa.int32()),
    pa.field("point_index", pa.int32()),
)
LINEAGE_KEY: tuple[str, ...] = tuple(f.name for f in _LINEAGE_COLUMNS)

_RESOURCE_SCOPE_METRIC_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("resource_attributes", _STRING_MAP),
    pa.field("resource_attributes_types", _STRING_MAP),
    pa.field("resource_dropped_attributes_count", pa.int64()),
    pa.field("resource_schema_url", pa.string()),
    pa.field("resource_entity_refs", pa.string()),
    pa.field("scope_name", pa.string()),
    pa.field("scope_version", pa.string()),
    pa.field("scope_attributes", _STRING_MAP),
    pa.field("scope_attributes_types", _STRING_MAP),
    pa.field("scope_dropped_attributes_count", pa.int64()),
    pa.field("scope_schema_url", pa.string()),
    pa.field("metric_name", pa.string()),
    pa.field("metric_description", pa.string()),
    pa.field("metric_unit", pa.string()),
    pa.field("metric_metadata", _STRING_MAP),
    pa.field("metric_metadata_types", _STRING_MAP),
)

_POINT_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("attributes", _STRING_MAP),
    pa.field("attributes_types", _STRING_MAP),
    pa.field("start_time_unix_nano", pa.int64()),
    pa.field("start_time", _TIMESTAMP),
    pa.field("time_unix_nano", pa.int64()),
    pa.field("time", _TIMESTAMP),
    pa.field("flags", pa.int64()),
)

EXEMPLAR_TYPE = pa.struct(
    [
        pa.field("filtered_attributes", _STRING_MAP),
        pa.field("filtered_attributes_types", _STRING_MAP),
        pa.field("time_unix_nano", pa.int64()),
        pa.field("time", _TIMESTAMP),
        pa.field("as_double", pa.float64()),
        pa.field("as_int", pa.int64()),
        pa.field("span_id", pa.string()),  # lowercase hex, "" when absent
        pa.field("trace_id", pa.string()),
    ]
)
_EXEMPLARS = pa.field("exemplars", pa.list_(EXEMPLAR_TYPE))

# NumberDataPoint's value is a oneof: exactly one of as_double/as_int is non-null
# (both null when the client set neither), so ints and doubles stay distinguishable.
_NUMBER_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("as_double", pa.float64()),
    pa.field("as_int", pa.int64()),
    _EXEMPLARS,
)

_HISTOGRAM_COMMON: tuple[pa.Field, ...] = (
    pa.field("count", pa.int64()),
    pa.field("sum", pa.float64()),  # optional in OTLP: null when absent
)

_TYPE_COLUMNS: dict[str, tuple[pa.Field, ...]] = {
    "gauge": _NUMBER_COLUMNS,
    "sum": _NUMBER_COLUMNS
    + (
        pa.field("aggregation_temporality", pa.int32()),
        pa.field("is_monotonic", pa.bool_()),
    ),
    "histogram": _HISTOGRAM_COMMON
    + (
        pa.field("bucket_counts", pa.list_(pa.int64())),
        pa.field("explicit_bounds", pa.list_(pa.float64())),
        pa.field("min", pa.float64()),
        pa.field("max", pa.float64()),
        _EXEMPLARS,
        pa.field("aggregation_temporality", pa.int32()),
    ),
    "exponential_histogram": _HISTOGRAM_COMMON
    + (
        pa.field("scale", pa.int32()),
        pa.field("zero_count", pa.int64()),
        pa.field("zero_threshold", pa.float64()),
        pa.field("positive_offset", pa.int32()),
        pa.field("positive_bucket_counts", pa.list_(pa.int64())),
        pa.field("negative_offset", pa.int32()),
        pa.field("negative_bucket_counts", pa.list_(pa.int64())),
        pa.field("min", pa.float64()),
        pa.field("max", pa.float64()),
        _EXEMPLARS,
        pa.field("aggregation_temporality", pa.int32()),
    ),
    "summary": (
        pa.field("count", pa.int64()),
        pa.field("sum", pa.float64()),
        pa.field(
            "quantile_values",
            pa.list_(
                pa.struct(
                    [
                        pa.field("quantile", pa.float64()),
                        pa.field("value", pa.float64()),
                    ]
                )
            ),
        ),
    ),
}

# The Iceberg partition spec of every table (hidden: derived from a column, which
# queries filter on; Iceberg prunes partitions and files from that filter).
PARTITION_SPEC = "days(received_time)"
PARTITION_COLUMNS: tuple[str, ...] = ("dt", "hour")
_PARTITION_FIELDS: tuple[pa.Field, ...] = (
    pa.field("dt", pa.date32()),
    pa.field("hour", pa.int32()),
)
# Table properties: format v2 (what pyiceberg, Trino and DuckDB read), zstd Parquet,
# commits that retry on a concurrent writer's commit (several ingests, one per
# collector node, append to the same tables), and bounded metadata files.
TABLE_PROPERTIES: dict[str, str] = {
    "format-version": "2",
    "write.parquet.compression-codec": "zstd",
    "commit.retry.num-retries": "50",
    "commit.retry.min-wait-ms": "50",
    "commit.retry.max-wait-ms": "2000",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}


@dataclasses.dataclass(frozen=True, slots=True)
class TableSpec:
    """One table: what its rows are, its name and its full column list."""

    kind: str  # OTLP point type ("gauge", "sum", ...) or "pushes"
    name: str  # table name inside the database, e.g. "metrics_gauge"
    arrow_schema: pa.Schema  # every column

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(self.arrow_schema.names)

    @property
    def data_columns(self) -> tuple[pa.Field, ...]:
        """Every column but the partition columns, in table order."""
        return tuple(f for f in self.arrow_schema if f.name not in PARTITION_COLUMNS)

    @property
    def data_schema(self) -> pa.Schema:
        """The columns flatten produces (all of them)."""
        return self.arrow_schema


def _table(point_type: str) -> TableSpec:
    fields = (
        _CONTEXT_COLUMNS
        + _LINEAGE_COLUMNS
        + _RESOURCE_SCOPE_METRIC_COLUMNS
        + _POINT_COLUMNS
        + _TYPE_COLUMNS[point_type]
        + _APPENDED_COLUMNS
        + _PARTITION_FIELDS
    )
    return TableSpec(point_type, f"metrics_{point_type}", pa.schema(list(fields)))


POINT_TABLES: tuple[TableSpec, ...] = tuple(
    _table(t) for t in ("gauge", "sum", "histogram", "exponential_histogram", "summary")
)
TABLE_BY_POINT_TYPE: dict[str, TableSpec] = {t.kind: t for t in POINT_TABLES}

# One row per push (landing record), points or not: what the `clients` view counts.
PUSHES_TABLE = TableSpec(
    "pushes",
    "pushes",
    pa.schema(
        list(
            _CONTEXT_COLUMNS
            + (
                pa.field("landing_node", pa.string()),
                pa.field("landing_offset", pa.int64()),
                pa.field("appended_time_unix_nano", pa.int64()),
                pa.field("payload_bytes", pa.int32()),
                pa.field("metric_count", pa.int32()),
                pa.field("point_count", pa.int32()),
            )
            + _APPENDED_COLUMNS
            + _PARTITION_FIELDS
        )
    ),
)
TABLES: tuple[TableSpec, ...] = POINT_TABLES + (PUSHES_TABLE,)
# The columns a push's context gives every row of it (the partitions included): in
# every table.
CONTEXT_COLUMN_NAMES: tuple[str, ...] = tuple(
    f.name for f in _CONTEXT_COLUMNS + _APPENDED_COLUMNS + _PARTITION_FIELDS
)
# The flattening's kinds (point types and "pushes") -> the tables' names.
TABLE_NAME_BY_KIND: dict[str, str] = {t.kind: t.name for t in TABLES}

_SCALAR_SQL: dict[pa.DataType, str] = {
    pa.string(): "STRING",
    pa.int32(): "INT",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.date32(): "DATE",
    _TIMESTAMP: "TIMESTAMP",
}


def spark_type(arrow_type: pa.DataType) -> str:
    """Spark SQL type of an Arrow type used in these schemas."""
    if arrow_type in _SCALAR_SQL:
        return _SCALAR_SQL[arrow_type]
    if pa.types.is_map(arrow_type):
        return (
            f"MAP<{spark_type(arrow_type.key_type)},{spark_type(arrow_type.item_type)}>"
        )
    if pa.types.is_list(arrow_type):
        return f"ARRAY<{spark_type(arrow_type.value_type)}>"
    if pa.types.is_struct(arrow_type):
        inner = ", ".join(f"`{f.name}`: {spark_type(f.type)}" for f in arrow_type)
        return f"STRUCT<{inner}>"
    raise TypeError(f"no Spark SQL type for {arrow_type}")


def create_table_sql(database: str, table: TableSpec, catalog: str = "lake") -> str:
    """``CREATE TABLE IF NOT EXISTS`` for an Iceberg table partitioned by receive day."""
    columns = ",\n  ".join(
        f"`{f.name}` {spark_type(f.type)}" for f in table.arrow_schema
    )
    properties = ",\n  ".join(f"'{k}' = '{v}'" for k, v in TABLE_PROPERTIES.items())
    return (
        f"CREATE TABLE IF NOT EXISTS {catalog}.`{database}`.`{table.name}` (\n  {columns}\n)\n"
        f"USING iceberg\nPARTITIONED BY ({PARTITION_SPEC})\nTBLPROPERTIES (\n  {properties}\n)"
    )
