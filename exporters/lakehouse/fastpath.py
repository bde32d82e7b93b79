"""``ktc sql``'s fast path: the Iceberg tables read by pyiceberg, the SQL run by DuckDB.

No JVM: a point query answers in about a second where Spark takes its 7-10 s start.
It reads the same catalog as Spark (session.py's :meth:`LakehouseConfig.pyiceberg_properties`)
and the same snapshot a Spark reader would at that moment, one atomic snapshot per table.

What it runs: one ``SELECT`` (or ``WITH``) statement over the tables and the views whose
SQL DuckDB accepts (``metrics``, ``clients``, ``latest`` and whichever insight views it
can bind, their Spark SQL generated for DuckDB where the dialects differ).  It loads
only the tables the statement needs, through the views it names.  Anything else
(DDL, Spark-only functions, time travel) raises :class:`FastPathUnsupported`, and
``--engine auto`` then runs the statement on Spark.
"""

from __future__ import annotations

import datetime
import functools
import re
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from exporters.lakehouse.catalog import (
    clients_view_sql,
    latest_view_sql,
    metrics_view_sql,
)
from exporters.lakehouse.insights import INSIGHT_VIEW_NAMES, insight_view_sqls
from exporters.lakehouse.schema import TABLES
from exporters.lakehouse.session import CATALOG_NAME, LakehouseConfig

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["FastPathUnsupported", "run_fast"]

_READ_ONLY = re.compile(
    r"^\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*(select|with)\b", re.I | re.S
)
_IDENTIFIER = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")


# Spark SQL functions the views use that DuckDB names otherwise, as DuckDB macros.
_SPARK_FUNCTIONS = (
    "CREATE MACRO double(x) AS CAST(x AS DOUBLE)",
    "CREATE MACRO unix_micros(t) AS epoch_us(t)",
    "CREATE MACRO timestamp_micros(us) AS make_timestamp(us)",
)


class FastPathUnsupported(Exception):
    """The statement needs Spark (or the fast path's libraries are missing)."""


# The view SQL's Spark-only syntax and its DuckDB form (the views are generated, so these
# few textual forms are all there is).
_SPARK_SYNTAX = (
    # Backquotes are Spark's identifier quotes; DuckDB's are double quotes.
    (re.compile(r"`"), '"'),
    # count(DISTINCT a, b) counts distinct pairs; DuckDB takes the pair as a row.
    (re.compile(r"count\(DISTINCT ([^()]+,[^()]+)\)"), r"count(DISTINCT (\1))"),
    (re.compile(r"current_timestamp\(\)"), "current_timestamp"),
)


def _duckdb_sql(spark_sql: str) -> str:
    for pattern, replacement in _SPARK_SYNTAX:
        spark_sql = pattern.sub(replacement, spark_sql)
    return spark_sql


def _view_definitions(database: str) -> dict[str, str]:
    """Every view as DuckDB SQL (``CREATE OR REPLACE VIEW``)."""
    views = {
        "metrics": metrics_view_sql(database, dialect="duckdb"),
        "clients": clients_view_sql(database),
        "latest": latest_view_sql(database),
    }
    views |= dict(zip(INSIGHT_VIEW_NAMES, insight_view_sqls(database), strict=True))
    return {name: _duckdb_sql(sql) for name, sql in views.items()}


_TABLE_NAMES = frozenset(t.name for t in TABLES)


def _dependencies(name: str, views: dict[str, str]) -> list[str]:
    """The tables and views ``name`` reads, dependencies first, itself last."""
    if name in _TABLE_NAMES:
        return [name]
    if name not in views:
        return []
    body = views[name].split(" AS\n", 1)[1]
    order: list[str] = []
    for used in re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"', body):
        if used != name and (used in _TABLE_NAMES or used in views):
            for dependency in _dependencies(used, views):
                if dependency not in order:
                    order.append(dependency)
    order.append(name)
    return order


def _plain(value: Any) -> Any:
    """DuckDB's values as Spark's: timestamps as naive UTC (the session time zone)."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# The row Iceberg's JdbcCatalog keeps per table (its schema V1; rows of a V0 catalog have no
# type, views are 'VIEW'): the same lookup as pyiceberg's SqlCatalog.load_table.
_JDBC_TABLE_LOCATION = (
    "SELECT metadata_location FROM iceberg_tables"
    " WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?"
    " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)"
)


def _table_loader(config: LakehouseConfig) -> Callable[[str], Table]:
    """Loads a table of ``config.database`` by name, at its current snapshot.

    On the default SQLite catalog, the table's metadata location is one row read with the
    standard library and the table is pyiceberg's ``StaticTable`` of that file: what
    ``SqlCatalog.load_table`` does, without importing SQLAlchemy and building its engine
    (a third of a second, more than a point query's scan).  Other catalogs go through
    pyiceberg's own.
    """
    properties = config.pyiceberg_properties()

    @functools.cache
    def catalog() -> Catalog:
        from pyiceberg.catalog import load_catalog

        return load_catalog(CATALOG_NAME, **properties)

    def through_catalog(name: str) -> Table:
        return catalog().load_table((config.database, name))

    if config.catalog_kind != "sqlite":
        return through_catalog

    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.table import StaticTable

    path = config.sqlite_path().resolve()

    def load(name: str) -> Table:
        try:
            # mode=rw: a reader never creates the catalog file.
            with sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True) as connection:
                found = connection.execute(
                    _JDBC_TABLE_LOCATION, (CATALOG_NAME, config.database, name)
                ).fetchone()
            connection.close()
        except sqlite3.Error:  # e.g. a V0 catalog (no iceberg_type): pyiceberg says why
            return through_catalog(name)
        if not found or not found[0]:
            raise NoSuchTableError(f"Table does not exist: {config.database}.{name}")
        return StaticTable.from_metadata(found[0], properties)

    return load


def run_fast(
    config: LakehouseConfig, query: str
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one read-only statement; returns the column names and the rows."""
    if not _READ_ONLY.match(query):
        raise FastPathUnsupported("only SELECT and WITH statements run without Spark")
    try:
        import duckdb
        import pyiceberg.table  # noqa: F401 - _table_loader's; missing, it is one line here
    except ImportError as exc:  # pragma: no cover - both are lakehouse dependencies
        raise FastPathUnsupported(str(exc)) from None

    views = _view_definitions(config.database)
    try:
        referenced = duckdb.get_table_names(query)
    except duckdb.Error as exc:
        raise FastPathUnsupported(str(exc)) from None
    needed: list[str] = []
    for reference in sorted(referenced):
        for name in _dependencies(reference.split(".")[-1].strip('"`'), views):
            if name not in needed:
                needed.append(name)

    load_table = _table_loader(config)
    connection = duckdb.connect()
    try:
        connection.execute("SET TimeZone = 'UTC'")
        for macro in _SPARK_FUNCTIONS:
            connection.execute(macro)
        schema = f'"{config.database}"'
        connection.execute(f"CREATE SCHEMA {schema}")
        connection.execute(f"SET schema = '{config.database}'")
        for name in needed:
            if name in _TABLE_NAMES:
                rows = load_table(name).scan().to_arrow()
                connection.register(f"_arrow_{name}", rows)
                connection.execute(
                    f'CREATE VIEW {schema}."{name}" AS SELECT * FROM "_arrow_{name}"'
                )
            else:
                try:
                    connection.execute(views[name])
                except duckdb.Error as exc:
                    raise FastPathUnsupported(f"view {name}: {exc}") from None
        try:
            result = connection.execute(query)
        except duckdb.Error as exc:
            raise FastPathUnsupported(str(exc)) from None
        columns = [d[0] for d in result.description or ()]
        rows_out = [tuple(_plain(v) for v in row) for row in result.fetchall()]
    finally:
        connection.close()
    return columns, rows_out
