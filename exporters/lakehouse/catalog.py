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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from exporters.lakehouse.insights import INSIGHT_VIEW_NAMES, insight_view_sqls
from exporters.lakehouse.schema import (
    PARTITION_COLUMNS,
    POINT_TABLES,
    PUSHES_TABLE,
    TABLES,
    TableSpec,
    create_table_sql,
    spark_type,
)

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
    "register_file_tables",
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
    ("batch_id", "BIGINT", None),
)
METRICS_VIEW_COLUMNS: tuple[str, ...] = tuple(c[0] for c in _METRICS_COLUMNS)


def _q(database: str, name: str) -> str:
    return f"`{database}`.`{name}`"


def metrics_view_sql(database: str) -> str:
    branches = []
    for table in POINT_TABLES:
        select = []
        for column, sql_type, expressions in _METRICS_COLUMNS:
            if expressions is None:
                select.append(f"`{column}`")
            elif table.kind in expressions:
                select.append(
                    f"CAST({expressions[table.kind]} AS {sql_type}) AS `{column}`"
                )
            else:
                select.append(f"CAST(NULL AS {sql_type}) AS `{column}`")
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
    """Every table's DDL and every view's SQL: what a database that records it has."""
    sql = tuple(create_table_sql(database, table) for table in TABLES) + _view_sqls(
        database
    )
    return hashlib.sha256("\n".join(sql).encode()).hexdigest()


class CatalogSchemaError(RuntimeError):
    """An existing table's columns are not a prefix of the declared ones: it cannot be
    brought up to date by adding columns."""


def ensure_catalog(spark: SparkSession, database: str) -> None:
    """Create the database and missing tables, give existing tables the columns they
    lack, and create the views, unless the database already records this exact catalog
    (idempotent; every metastore call costs, and this runs at the start of every ingest
    and query process)."""
    # Asked first: Hive's metastore logs an AlreadyExistsException with its stack trace
    # at ERROR for CREATE DATABASE IF NOT EXISTS on an existing database (Spark ignores
    # the exception, the log line stays), which every run after the first would print.
    if not spark.catalog.databaseExists(database):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    existing = {
        row.tableName for row in spark.sql(f"SHOW TABLES IN `{database}`").collect()
    }
    for table in TABLES:
        if table.name not in existing:
            spark.sql(create_table_sql(database, table))
    fingerprint = _catalog_fingerprint(database)
    described = spark.sql(f"DESCRIBE DATABASE EXTENDED `{database}`").collect()
    properties = next((r[1] for r in described if r[0] == "Properties"), "") or ""
    if fingerprint not in properties or not set(VIEW_NAMES) <= existing:
        for table in TABLES:
            if table.name in existing:
                add_missing_columns(spark, database, table)
        create_views(spark, database)
        spark.sql(
            f"ALTER DATABASE `{database}` SET DBPROPERTIES ('{_CATALOG_PROPERTY}' = '{fingerprint}')"
        )


def add_missing_columns(
    spark: SparkSession, database: str, table: TableSpec
) -> list[str]:
    """``ALTER TABLE ADD COLUMNS`` for the declared data columns an existing table lacks;
    returns their names.  Spark appends them after the table's last data column, and
    schema.py declares every such column at the end, so the table ends up in the declared
    order, which positional ``insertInto`` depends on.  Files written before read the new
    columns as null."""
    name = _q(database, table.name)
    spark.catalog.refreshTable(name)
    present = [
        f.name for f in spark.table(name).schema if f.name not in PARTITION_COLUMNS
    ]
    declared = table.data_columns
    if present != [f.name for f in declared[: len(present)]]:
        raise CatalogSchemaError(
            f"table {name} has columns {present}, which do not begin the declared "
            f"{[f.name for f in declared]}"
        )
    missing = declared[len(present) :]
    if missing:
        columns = ", ".join(f"`{f.name}` {spark_type(f.type)}" for f in missing)
        spark.sql(f"ALTER TABLE {name} ADD COLUMNS ({columns})")
        spark.catalog.refreshTable(name)
    return [f.name for f in missing]


def _external_table_sql(database: str, table: TableSpec, location: str) -> str:
    columns = ", ".join(f"`{f.name}` {spark_type(f.type)}" for f in table.arrow_schema)
    return (
        f"CREATE TABLE IF NOT EXISTS {_q(database, table.name)} ({columns}) USING parquet "
        f"PARTITIONED BY (dt, hour, batch_id) LOCATION '{location}'"
    )


def register_file_tables(
    spark: SparkSession, database: str, table_location: Callable[[str], Path]
) -> None:
    """In a session without the metastore: the same tables over the warehouse files.

    Partitions are discovered from the ``dt=/hour=/batch_id=`` directories (the session
    has ``spark.sql.hive.manageFilesourcePartitions=false``), so this sees exactly what
    the writer has moved into place.
    """
    spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    for table in TABLES:
        location = table_location(table.name)
        spark.sql(_external_table_sql(database, table, str(location)))
    create_views(spark, database)
