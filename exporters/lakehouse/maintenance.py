"""Table maintenance: compaction, retention, snapshot expiry, orphan files.

All four are Iceberg's own actions (``SparkActions``), run through Spark's JVM, and
each commit carries the tables' committed landing positions forward in its snapshot
summary (plan.py decides what each carries and how far snapshots expire); without that, compaction and retention would make a restarted
ingest forget what it had committed once the appends' snapshots expire.

=====================  ========================================================
action                 what it does
=====================  ========================================================
compaction             ``rewriteDataFiles`` (bin-pack) of the files holding rows
                       received before ``now - closed_after``: the ingest's small
                       per-batch files of each day become few large ones; then
                       ``rewriteManifests`` when a table has many manifests
retention              deletes the days received before ``today - N`` days: a
                       metadata-only delete (the tables are partitioned by receive
                       day, so whole files go)
expire snapshots       drops snapshots older than ``expire_after`` (keeping the
                       last ``retain_last``, and every snapshot newer than the one
                       that holds a landing directory's position), and the files
                       only they referenced: what bounds metadata growth (a 10 s
                       trigger makes ~8,640 snapshots a day per table)
remove orphan files    deletes files under a table's location that no snapshot
                       references and that are older than ``orphan_after`` (a
                       killed writer's files; the delay protects files a running
                       writer has written but not committed yet)
=====================  ========================================================

Readers keep reading during all of it: each action is one atomic commit, and a
compaction commits only if the files it replaces are all still there.  It runs inside
``ktc ingest`` between batches and by hand (``ktc lake ...``), both safe beside running
ingests.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from typing import TYPE_CHECKING, Any

from exporters.lakehouse.iceberg_java import (
    actions,
    iceberg_table,
    jvm,
    table_snapshots,
)
from exporters.lakehouse.plan import maintenance_properties, plan_expiry
from exporters.lakehouse.schema import TABLES, TableSpec
from exporters.lakehouse.session import LakehouseConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "MaintenanceSettings",
    "apply_retention",
    "compact",
    "expire_snapshots",
    "remove_orphan_files",
    "run_maintenance",
]

log = logging.getLogger(__name__)

_MANIFESTS_TO_REWRITE = 50  # a table with more manifests than this gets them rewritten


@dataclasses.dataclass(frozen=True, slots=True)
class MaintenanceSettings:
    closed_after_s: float = 3600.0  # compaction: rows received at least this long ago
    retention_days: int | None = None  # None: keep everything
    expire_after_s: float = (
        3600.0  # snapshots older than this expire (time travel window)
    )
    retain_last: int = 10  # ... but at least this many stay
    orphan_after_s: float = 86_400.0  # unreferenced files older than this are deleted


def _carried(
    spark: SparkSession, config: LakehouseConfig, table: TableSpec
) -> dict[str, str]:
    return maintenance_properties(table_snapshots(spark, config.table(table.name)))


def compact(
    spark: SparkSession,
    config: LakehouseConfig,
    *,
    now_unix_ns: int,
    closed_after_s: float,
) -> dict[str, Any]:
    """Bin-pack the files of rows received before ``now - closed_after``, per table."""
    expressions = jvm(spark).org.apache.iceberg.expressions.Expressions
    cutoff_us = (now_unix_ns - int(closed_after_s * 1e9)) // 1000
    report: dict[str, Any] = {"rewritten_files": 0, "added_files": 0, "tables": 0}
    for table in TABLES:
        carried = _carried(spark, config, table)
        action = (
            actions(spark)
            .rewriteDataFiles(iceberg_table(spark, config.table(table.name)))
            .filter(expressions.lessThan("received_time", cutoff_us))
            .option("min-input-files", "2")
        )
        for key, value in carried.items():
            action = action.snapshotProperty(key, value)
        result = action.execute()
        rewritten = result.rewrittenDataFilesCount()
        if rewritten:
            report["rewritten_files"] += rewritten
            report["added_files"] += result.addedDataFilesCount()
            report["tables"] += 1
        manifests = spark.sql(
            f"SELECT count(*) FROM {config.table(table.name)}.manifests"
        ).collect()[0][0]
        if manifests > _MANIFESTS_TO_REWRITE:
            rewrite = actions(spark).rewriteManifests(
                iceberg_table(spark, config.table(table.name))
            )
            for key, value in _carried(spark, config, table).items():
                rewrite = rewrite.snapshotProperty(key, value)
            rewrite.execute()
    return report


def apply_retention(
    spark: SparkSession, config: LakehouseConfig, *, days: int, today: datetime.date
) -> dict[str, Any]:
    """Delete the rows received before ``today - days`` (whole days, UTC)."""
    if days < 1:
        raise ValueError("days must be at least 1")
    cutoff = today - datetime.timedelta(days=days)
    cutoff_us = int(
        datetime.datetime.combine(cutoff, datetime.time(), datetime.UTC).timestamp()
        * 1_000_000
    )
    expressions = jvm(spark).org.apache.iceberg.expressions.Expressions
    deleted_files = 0
    for table in TABLES:
        name = config.table(table.name)
        old = spark.sql(
            f"SELECT count(*) FROM {name}.files WHERE readable_metrics.received_time.lower_bound"
            f" < TIMESTAMP '{cutoff.isoformat()} 00:00:00'"
        ).collect()[0][0]
        if not old:
            continue
        delete = (
            iceberg_table(spark, name)
            .newDelete()
            .deleteFromRowFilter(expressions.lessThan("received_time", cutoff_us))
        )
        for key, value in _carried(spark, config, table).items():
            delete = delete.set(key, value)
        delete.commit()
        deleted_files += old
    return {"cutoff": cutoff.isoformat(), "deleted_files": deleted_files}


def expire_snapshots(
    spark: SparkSession,
    config: LakehouseConfig,
    *,
    now_unix_ms: int,
    expire_after_s: float,
    retain_last: int,
) -> dict[str, Any]:
    """Expire old snapshots, never one a landing position survives in only (commits.py)."""
    expired = 0
    for table in TABLES:
        expiry = plan_expiry(
            table_snapshots(spark, config.table(table.name)),
            now_unix_ms=now_unix_ms,
            expire_after_s=expire_after_s,
            retain_last=retain_last,
        )
        result = (
            actions(spark)
            .expireSnapshots(iceberg_table(spark, config.table(table.name)))
            .expireOlderThan(expiry.older_than_ms)
            .retainLast(expiry.retain_last)
            .execute()
        )
        expired += result.deletedManifestListsCount()
    return {"expired_snapshots": expired}


def remove_orphan_files(
    spark: SparkSession,
    config: LakehouseConfig,
    *,
    now_unix_ms: int,
    orphan_after_s: float,
) -> dict[str, Any]:
    removed = 0
    for table in TABLES:
        result = (
            actions(spark)
            .deleteOrphanFiles(iceberg_table(spark, config.table(table.name)))
            .olderThan(now_unix_ms - int(orphan_after_s * 1000))
            .execute()
        )
        removed += sum(1 for _ in result.orphanFileLocations())
    return {"removed_orphan_files": removed}


def run_maintenance(
    spark: SparkSession,
    config: LakehouseConfig,
    settings: MaintenanceSettings = MaintenanceSettings(),
    *,
    now_unix_ns: int | None = None,
) -> dict[str, Any]:
    """What ``ktc ingest`` runs between batches (and ``ktc lake maintain`` by hand)."""
    now = time.time_ns() if now_unix_ns is None else now_unix_ns
    report: dict[str, Any] = {
        "compaction": compact(
            spark, config, now_unix_ns=now, closed_after_s=settings.closed_after_s
        )
    }
    if settings.retention_days is not None:
        today = datetime.datetime.fromtimestamp(now / 1e9, datetime.UTC).date()
        report["retention"] = apply_retention(
            spark, config, days=settings.retention_days, today=today
        )
    report["expiry"] = expire_snapshots(
        spark,
        config,
        now_unix_ms=now // 1_000_000,
        expire_after_s=settings.expire_after_s,
        retain_last=settings.retain_last,
    )
    report["orphans"] = remove_orphan_files(
        spark,
        config,
        now_unix_ms=now // 1_000_000,
        orphan_after_s=settings.orphan_after_s,
    )
    log.info("maintenance: %s", report)
    return report
