"""The catalog: database, tables, the analyst views ``metrics``, ``clients``, ``latest``
and the insight views of insights.py.

The views are generated from the tables below (one row per view column, one SQL
expression per point type), so adding a column is one line and the five branches of
the ``metrics`` union can never disagree on column order.

``metrics.value`` is the one number per point:

==========================  ==================================================
point type                  ``value``
==========================  ==================================================
gauge, sum                  the point's value (``as_int`` converted to DOUBLE
                            when the client sent an integer; ``value_int``
                            keeps the exact integer)
histogram,                  the mean, ``sum / count`` (null when ``count`` is 0
exponential_histogram,      or the optional ``sum`` is absent); ``count``,
summary                     ``sum``, ``min``, ``max`` are columns of their own
==========================  ==================================================
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from exporters.lakehouse.insights import INSIGHT_VIEW_NAMES, insight_view_sqls
from exporters.lakehouse.schema import (
    POINT_TABLES,
    PUSHES_TABLE,
    TABLES,
    TableSpec,
    create_table_sql,
    spark_type,
)
from exporters.lakehouse.session import CATALOG_NAME

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "VIEW_NAMES",
    "CatalogSchemaError",
    "add_missing_columns",
    "clients_view_sql",
    "create_views",
    "ensure_catalog",
    "latest_view_sql",
    "metrics_view_sql",
]

# The analyst views, then the insight views built on them (insights.py).
VIEW_NAMES: tuple[str, ...] = ("metrics", "clients", "latest") + INSIGHT_VIEW_NAMES

_MEAN = "CASE WHEN count > 0 THEN sum / count END"
_NUMBER_VALUE = "COALESCE(as_double, CAST(as_int AS DOUBLE))"

# (view column, Spark type, {point type: expression}); a point type that is not
# listed gets NULL; a column with expression None is taken as is from every table.
_METRICS_COLUMNS: tuple[tuple[str, str, dict[str, str] | None], ...] = (
    ("time", "TIMESTAMP", None),
    ("time_unix_nano", "BIGINT", None),
    ("start_time", "TIMESTAMP", None),
    ("start_time_unix_nano", "BIGINT", None),
    ("metric_name", "STRING", None),
    ("metric_type", "STRING", {t.kind: f"'{t.kind}'" for t in POINT_TABLES}),
    ("metric_unit", "STRING", None),
    ("metric_description", "STRING", None),
    (
        "value",
        "DOUBLE",
        {
            "gauge": _NUMBER_VALUE,
            "sum": _NUMBER_VALUE,
            "histogram": _MEAN,
            "exponential_histogram": _MEAN,
            "summary": _MEAN,
        },
    ),
    ("value_int", "BIGINT", {"gauge": "as_int", "sum": "as_int"}),
    (
        "count",
        "BIGINT",
        {k: "count" for k in ("histogram", "exponential_histogram", "summary")},
    ),
    (
        "sum",
        "DOUBLE",
        {k: "sum" for k in ("histogram", "exponential_histogram", "summary")},
    ),
    ("min", "DOUBLE", {k: "min" for k in ("histogram", "exponential_histogram")}),
    ("max", "DOUBLE", {k: "max" for k in ("histogram", "exponential_histogram")}),
    (
        "aggregation_temporality",
        "INT",
        {
            k: "aggregation_temporality"
            for k in ("sum", "histogram", "exponential_histogram")
        },
    ),
    ("is_monotonic", "BOOLEAN", {"sum": "is_monotonic"}),
    ("attributes", "MAP<STRING,STRING>", None),
    ("attributes_types", "MAP<STRING,STRING>", None),
    ("resource_attributes", "MAP<STRING,STRING>", None),
    ("scope_name", "STRING", None),
    ("scope_version", "STRING", None),
    ("flags", "BIGINT", None),
    ("client_instance_id", "STRING", None),
    ("client_id", "STRING", None),
    ("client_software_name", "STRING", None),
    ("client_software_version", "STRING", None),
    ("client_source_address", "STRING", None),
    ("client_source_port", "INT", None),
    ("principal", "STRING", None),
    ("listener", "STRING", None),
    ("node_id", "INT", None),
    ("cluster_id", "STRING", None),
    ("upstream_cluster_id", "STRING", None),
    ("upstream_node_id", "INT", None),
    ("terminating", "BOOLEAN", None),
    ("received_time", "TIMESTAMP", None),
    ("received_time_unix_nano", "BIGINT", None),
    ("landing_node", "STRING", None),
    ("landing_offset", "BIGINT", None),
    ("dt", "DATE", None),
    ("hour", "INT", None),
)
METRICS_VIEW_COLUMNS: tuple[str, ...] = tuple(c[0] for c in _METRICS_COLUMNS)


def _q(database: str, name: str) -> str:
    return f"`{database}`.`{name}`"


# The fast path (fastpath.py) runs the same views in DuckDB; only these type names
# differ between the two dialects.
_DUCKDB_TYPES = {"STRING": "VARCHAR", "MAP<STRING,STRING>": "MAP(VARCHAR, VARCHAR)"}


def metrics_view_sql(database: str, dialect: str = "spark") -> str:
    def sql_type(name: str) -> str:
        return _DUCKDB_TYPES.get(name, name) if dialect == "duckdb" else name

    branches = []
    for table in POINT_TABLES:
        select = []
        for column, type_name, expressions in _METRICS_COLUMNS:
            if expressions is None:
                select.append(f"`{column}`")
            elif table.kind in expressions:
                select.append(
                    f"CAST({expressions[table.kind]} AS {sql_type(type_name)}) AS `{column}`"
                )
            else:
                select.append(f"CAST(NULL AS {sql_type(type_name)}) AS `{column}`")
        branches.append(f"SELECT {', '.join(select)}\nFROM {_q(database, table.name)}")
    return (
        f"CREATE OR REPLACE VIEW {_q(database, 'metrics')} AS\n"
        + "\nUNION ALL\n".join(branches)
    )


# Client facts that may change between pushes of one instance are reported as of its
# latest push.
_CLIENT_LATEST = (
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
    "principal",
    "listener",
    "security_protocol",
    "node_id",
    "cluster_id",
    "upstream_cluster_id",
    "upstream_node_id",
    "push_interval_ms",
)


def clients_view_sql(database: str) -> str:
    latest = ",\n  ".join(
        f"max_by(`{c}`, received_time_unix_nano) AS `{c}`" for c in _CLIENT_LATEST
    )
    return (
        f"CREATE OR REPLACE VIEW {_q(database, 'clients')} AS\n"
        f"SELECT client_instance_id,\n  {latest},\n"
        "  min(received_time) AS first_push,\n"
        "  max(received_time) AS last_push,\n"
        "  count(*) AS push_count,\n"
        "  sum(point_count) AS point_count,\n"
        "  bool_or(terminating) AS terminated\n"
        f"FROM {_q(database, PUSHES_TABLE.name)}\nGROUP BY client_instance_id"
    )


def latest_view_sql(database: str) -> str:
    # A series is metric name + client instance + point attributes.  Maps can't be
    # compared in Spark; their sorted entries (an array of structs) can.
    columns = ", ".join(f"`{c}`" for c in METRICS_VIEW_COLUMNS)
    return (
        f"CREATE OR REPLACE VIEW {_q(database, 'latest')} AS\n"
        f"SELECT {columns} FROM (\n"
        "  SELECT *, row_number() OVER (\n"
        "    PARTITION BY metric_name, client_instance_id, array_sort(map_entries(attributes))\n"
        "    ORDER BY time_unix_nano DESC, received_time_unix_nano DESC, landing_offset DESC\n"
        f"  ) AS series_rank FROM {_q(database, 'metrics')}\n"
        ") WHERE series_rank = 1"
    )


def _view_sqls(database: str) -> tuple[str, ...]:
    return (
        metrics_view_sql(database),
        clients_view_sql(database),
        latest_view_sql(database),
        *insight_view_sqls(database),
    )


def create_views(spark: SparkSession, database: str) -> None:
    for sql in _view_sqls(database):
        spark.sql(sql)


_CATALOG_PROPERTY = "ktc.catalog.sha256"


def _catalog_fingerprint(database: str) -> str:
    """Every table's DDL and every view's SQL: what a namespace that records it has."""
    sql = tuple(create_table_sql(database, table) for table in TABLES) + _view_sqls(
        database
    )
    return hashlib.sha256("\n".join(sql).encode()).hexdigest()


class CatalogSchemaError(RuntimeError):
    """An existing table lacks columns that cannot be added."""


def ensure_catalog(spark: SparkSession, database: str) -> None:
    """Create the namespace and missing tables, give existing tables the columns they
    lack, and (re)create the views, unless the namespace already records this exact
    catalog (idempotent, and cheap when nothing changed: this runs at the start of every
    ingest and query process).  Safe to run from several processes at once: a table or
    view another process created first is taken as created."""
    from pyspark.errors import AnalysisException

    namespace = f"{CATALOG_NAME}.`{database}`"
    try:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    except AnalysisException:
        pass  # created by a concurrent process between the check and the create
    existing = {
        row.tableName for row in spark.sql(f"SHOW TABLES IN {namespace}").collect()
    }
    existing |= {
        row.viewName for row in spark.sql(f"SHOW VIEWS IN {namespace}").collect()
    }
    for table in TABLES:
        if table.name not in existing:
            try:
                spark.sql(create_table_sql(database, table, CATALOG_NAME))
            except AnalysisException as exc:
                if "already exists" not in str(exc).lower():
                    raise
    fingerprint = _catalog_fingerprint(database)
    described = spark.sql(f"DESCRIBE NAMESPACE EXTENDED {namespace}").collect()
    properties = " ".join(str(r[1]) for r in described if r[0] == "Properties")
    if fingerprint not in properties or not set(VIEW_NAMES) <= existing:
        for table in TABLES:
            if table.name in existing:
                add_missing_columns(spark, database, table)
        create_views(spark, database)
        spark.sql(
            f"ALTER NAMESPACE {namespace} SET PROPERTIES ('{_CATALOG_PROPERTY}' = '{fingerprint}')"
        )


def add_missing_columns(
    spark: SparkSession, database: str, table: TableSpec
) -> list[str]:
    """``ALTER TABLE ADD COLUMNS`` for the declared columns an existing table lacks;
    returns their names.  Writes go by column name, so where they land does not matter;
    Iceberg reads them as null in files written before."""
    name = f"{CATALOG_NAME}.{_q(database, table.name)}"
    spark.catalog.refreshTable(name)
    present = {f.name for f in spark.table(name).schema}
    missing = [f for f in table.arrow_schema if f.name not in present]
    if missing:
        columns = ", ".join(f"`{f.name}` {spark_type(f.type)}" for f in missing)
        spark.sql(f"ALTER TABLE {name} ADD COLUMNS ({columns})")
        spark.catalog.refreshTable(name)
    return [f.name for f in missing]
