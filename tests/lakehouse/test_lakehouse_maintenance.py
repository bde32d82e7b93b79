"""Maintenance against real Spark + Iceberg tables: compaction, retention, snapshot expiry
and orphan files lose no row, duplicate none, and keep what a restarted ingest reads its
landing positions from."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from exporters.lakehouse.iceberg_java import table_snapshots
from exporters.lakehouse.ingest import IngestJob, IngestSettings
from exporters.lakehouse.maintenance import (
    MaintenanceSettings,
    apply_retention,
    compact,
    expire_snapshots,
    remove_orphan_files,
    run_maintenance,
)
from exporters.lakehouse.schema import LINEAGE_KEY, TABLES
from tests.lakehouse.conftest import write_landing
from tests.lakehouse.lakehouse_otlp import make_context
from tests.lakehouse.test_lakehouse_ingest import _gauge_push

pytestmark = pytest.mark.spark

DAY_NS = 86_400 * 10**9
# 2026-11-20 10:00 UTC
T0 = int(datetime.datetime(2026, 11, 20, 10, tzinfo=datetime.UTC).timestamp()) * 10**9


def _ingest(
    spark, config, directory: Path, received_ns: list[int], per_batch: int = 1
) -> None:
    """One batch per ``per_batch`` pushes: a file and a snapshot each."""
    write_landing(
        directory,
        [
            (make_context(received_time_unix_nano=t), _gauge_push(i))
            for i, t in enumerate(received_ns)
        ],
    )
    with IngestJob(
        config,
        lambda: [directory],
        IngestSettings(max_records_per_source=per_batch),
        spark=spark,
    ) as job:
        job.run_once()


def _rows(spark, config) -> dict[str, list[tuple]]:
    """Every row of every table, sorted: what maintenance must keep."""
    out = {}
    for table in TABLES:
        df = spark.table(config.table(table.name))
        out[table.name] = sorted(
            tuple(r)
            for r in df.select(*LINEAGE_KEY[:2], "received_time_unix_nano").collect()
        )
    return out


def _files(spark, config, table: str) -> int:
    return spark.sql(f"SELECT count(*) FROM {config.table(table)}.files").collect()[0][
        0
    ]


def _after_the_last_commit_ms(spark, config) -> int:
    """A moment after every snapshot of every table: Iceberg stamps a commit with the
    wall clock, so an expiry's "now" comes from the commits, never from the pushes'
    received times."""
    return 1 + max(
        snapshot.committed_at_ms
        for table in TABLES
        for snapshot in table_snapshots(spark, config.table(table.name))
    )


def _job(spark, config, directory: Path) -> IngestJob:
    return IngestJob(config, lambda: [directory], spark=spark)


def test_compaction_and_expiry_keep_every_row_and_the_landing_positions(
    spark, lake_config, tmp_path
) -> None:
    node = tmp_path / "node-1"
    _ingest(spark, lake_config, node, [T0 + i * 10**9 for i in range(4)])
    before = _rows(spark, lake_config)
    assert _files(spark, lake_config, "metrics_gauge") == 4
    now = T0 + 2 * 3600 * 10**9
    report = compact(spark, lake_config, now_unix_ns=now, closed_after_s=3600)
    assert report["rewritten_files"] == 4 * 2  # gauge and pushes
    assert _files(spark, lake_config, "metrics_gauge") == 1
    assert _rows(spark, lake_config) == before
    # The compaction's snapshot carries the position: expire everything before it.
    expire_snapshots(
        spark,
        lake_config,
        now_unix_ms=_after_the_last_commit_ms(spark, lake_config),
        expire_after_s=0,
        retain_last=1,
    )
    snapshots = table_snapshots(spark, lake_config.table("pushes"))
    assert len(snapshots) == 1
    assert snapshots[0].summary["ktc.position.node-1"] == "4"
    assert "ktc.landing.node-1" not in snapshots[0].summary  # the appends are gone
    with _job(spark, lake_config, node) as job:
        assert job.run_once() == []  # nothing ingested twice
        assert job.positions["pushes"] == {"node-1": 4}
    write_landing(node, [(make_context(received_time_unix_nano=now), _gauge_push(9))])
    with _job(spark, lake_config, node) as job:
        [result] = job.run_once()
    assert result.ranges == {"node-1": (4, 5)}
    assert len(_rows(spark, lake_config)["metrics_gauge"]) == 5


def test_expiry_keeps_the_newest_snapshot_holding_each_directory_position(
    spark, lake_config, tmp_path
) -> None:
    """node-1's ingest stopped long ago, node-2's goes on: node-1's position survives the
    expiry of node-1's appends (node-2's appends carry it, commits.py)."""
    node1, node2 = tmp_path / "node-1", tmp_path / "node-2"
    _ingest(spark, lake_config, node1, [T0])
    _ingest(spark, lake_config, node2, [T0, T0, T0])
    expire_snapshots(
        spark,
        lake_config,
        now_unix_ms=(T0 // 10**6) + 10**12,
        expire_after_s=0,
        retain_last=1,
    )
    kept = [s.summary for s in table_snapshots(spark, lake_config.table("pushes"))]
    assert all("ktc.landing.node-1" not in s for s in kept)
    assert kept[-1]["ktc.position.node-1"] == "1"
    with IngestJob(lake_config, lambda: [node1, node2], spark=spark) as job:
        assert job.run_once() == []
        assert job.positions["pushes"] == {"node-1": 1, "node-2": 3}


def test_retention_deletes_old_days_and_keeps_the_rest_and_the_positions(
    spark, lake_config, tmp_path
) -> None:
    node = tmp_path / "node-1"
    _ingest(
        spark, lake_config, node, [T0 - 3 * DAY_NS, T0 - 2 * DAY_NS, T0], per_batch=3
    )
    today = datetime.datetime.fromtimestamp(T0 / 1e9, datetime.UTC).date()
    report = apply_retention(spark, lake_config, days=2, today=today)
    assert report["cutoff"] == "2026-11-18" and report["deleted_files"] > 0
    rows = _rows(spark, lake_config)
    assert [r[2] for r in rows["pushes"]] == [T0 - 2 * DAY_NS, T0]
    assert [r[1] for r in rows["metrics_gauge"]] == [1, 2]
    with _job(spark, lake_config, node) as job:
        assert job.run_once() == []  # the deleted day is not ingested again
    assert (
        apply_retention(spark, lake_config, days=2, today=today)["deleted_files"] == 0
    )


def test_orphan_files_are_removed_and_referenced_files_kept(
    spark, lake_config, tmp_path
) -> None:
    node = tmp_path / "node-1"
    _ingest(spark, lake_config, node, [T0])
    location = spark.sql(
        f"SELECT file_path FROM {lake_config.table('metrics_gauge')}.files"
    ).collect()[0][0]
    data_dir = Path(location.removeprefix("file:")).parent
    orphan = data_dir / "left-by-a-killed-writer.parquet"
    orphan.write_bytes(b"PAR1")
    far_future_ms = (T0 // 10**6) + 10**12
    report = remove_orphan_files(
        spark, lake_config, now_unix_ms=far_future_ms, orphan_after_s=0
    )
    assert report["removed_orphan_files"] == 1 and not orphan.exists()
    assert len(_rows(spark, lake_config)["metrics_gauge"]) == 1


def test_run_maintenance_reports_every_action(spark, lake_config, tmp_path) -> None:
    node = tmp_path / "node-1"
    _ingest(spark, lake_config, node, [T0, T0])
    report = run_maintenance(
        spark,
        lake_config,
        MaintenanceSettings(closed_after_s=0, retention_days=3650),
        now_unix_ns=T0 + 10**9,
    )
    assert set(report) == {"compaction", "retention", "expiry", "orphans"}
    assert report["compaction"]["rewritten_files"] == 4
