"""Iceberg's Java API in the Spark driver, reached through py4j.

The ingest and maintenance use the same Iceberg library Spark writes with, so they see
exactly the catalog (JDBC on SQLite or PostgreSQL, or REST) and file IO the session is
configured with.  A table's snapshots are read from its current metadata, refreshed from
the catalog, in a few py4j calls instead of a Spark job over its ``.snapshots`` metadata
table: a job per table costs 60-250 ms on a warm JVM (six tables, read at every ingest
start and after every failed commit); the metadata already holds every snapshot's
summary.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from exporters.lakehouse.commits import SnapshotInfo

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["actions", "iceberg_table", "jvm", "table_snapshots", "table_state"]


def jvm(spark: SparkSession) -> Any:
    """The driver JVM's package root (``jvm(spark).org.apache.iceberg...``)."""
    return spark.sparkContext._jvm  # type: ignore[attr-defined]


def iceberg_table(spark: SparkSession, table_name: str) -> Any:
    """``org.apache.iceberg.Table`` for a table of the session's catalog, refreshed: it
    holds every commit made so far, by this process or any other."""
    table = jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession,  # type: ignore[attr-defined]
        table_name,
    )
    # The project's sessions load tables uncached (session.py), but a session given
    # `--conf spark.sql.catalog.lake.cache-enabled=true` hands out a cached table, as old
    # as its last refresh: the decisions made from it must not be.
    table.refresh()
    return table


def actions(spark: SparkSession) -> Any:
    """``org.apache.iceberg.spark.actions.SparkActions`` on the session."""
    return jvm(spark).org.apache.iceberg.spark.actions.SparkActions.get(
        spark._jsparkSession  # type: ignore[attr-defined]
    )


def table_snapshots(spark: SparkSession, table_name: str) -> list[SnapshotInfo]:
    """Every snapshot of a table that its current metadata holds (what its ``.snapshots``
    metadata table lists), oldest first."""
    return table_state(spark, table_name)[2]


def table_state(
    spark: SparkSession, table_name: str
) -> tuple[Any, int | None, list[SnapshotInfo]]:
    """A table, refreshed: the Java ``Table``, its current snapshot's id (None before
    the first commit) and every snapshot its metadata holds, oldest first."""
    table = iceberg_table(spark, table_name)
    iceberg = jvm(spark).org.apache.iceberg
    metadata = json.loads(
        iceberg.TableMetadataParser.toJson(table.operations().current())
    )
    current = metadata.get("current-snapshot-id")
    snapshots = [
        SnapshotInfo(
            int(snapshot["snapshot-id"]),
            int(snapshot["timestamp-ms"]),
            {k: str(v) for k, v in snapshot.get("summary", {}).items()},
        )
        for snapshot in metadata.get("snapshots", [])
    ]
    return table, None if current in (None, -1) else int(current), snapshots
