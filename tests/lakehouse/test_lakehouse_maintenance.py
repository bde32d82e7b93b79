"""Compaction and retention against real Spark tables: no row lost, none duplicated."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from conftest import write_landing
from lakehouse_otlp import make_context
from test_lakehouse_ingest import _gauge_push

from exporters.lakehouse import maintenance
from exporters.lakehouse.ingest import IngestJob, IngestSettings
from exporters.lakehouse.maintenance import (
    Partition,
    apply_retention,
    compact,
    list_partitions,
)
from exporters.lakehouse.schema import LINEAGE_KEY, TABLE_BY_POINT_TYPE, TABLES

pytestmark = pytest.mark.spark

HOUR_NS = 3600 * 10**9
# 2026-11-20 10:00 UTC and 11:00 UTC
H10 = int(datetime.datetime(2026, 11, 20, 10, tzinfo=datetime.UTC).timestamp()) * 10**9
H11 = H10 + HOUR_NS


def _ingest_batches(spark, config, directory: Path, received_ns: list[int]) -> None:
    """One batch per push, so each hour gets one partition per push."""
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
        IngestSettings(max_records_per_source=1),
        spark=spark,
    ) as job:
        job.run_once()


def _snapshot(spark, config) -> dict[str, list[tuple]]:
    """Every row of every table without batch_id, sorted: what compaction must keep."""
    out = {}
    for table in TABLES:
        name = f"{config.database}.{table.name}"
        spark.catalog.refreshTable(name)
        df = spark.table(name).drop("batch_id")
        keep = [
            c
            for c in df.columns
            if not c.endswith("attributes")
            and "types" not in c
            and c not in ("exemplars", "metric_metadata")
        ]
        out[table.name] = sorted(tuple(r) for r in df.select(*keep).collect())
    return out


def _hours(spark, config, kind: str = "gauge") -> dict[tuple, list[int]]:
    by_hour: dict[tuple, list[int]] = {}
    for p in list_partitions(spark, config, TABLE_BY_POINT_TYPE[kind]):
        by_hour.setdefault((p.dt, p.hour), []).append(p.batch_id)
    return by_hour


def test_compaction_rewrites_closed_hours_only_and_keeps_every_row(
    spark, lake_config, tmp_path
) -> None:
    _ingest_batches(
        spark,
        lake_config,
        tmp_path / "node-1",
        [H10 + 1, H10 + 2, H10 + 3, H11 + 1, H11 + 2],
    )
    before = _snapshot(spark, lake_config)
    assert sum(map(len, _hours(spark, lake_config).values())) == 5

    # At 12:30 only the 10:00 hour has been closed for an hour.
    report = compact(spark, lake_config, now_unix_ns=H11 + HOUR_NS + HOUR_NS // 2)
    assert _snapshot(spark, lake_config) == before
    hours = _hours(spark, lake_config)
    d = datetime.date(2026, 11, 20)
    assert hours[(d, 10)] == [-3] and sorted(hours[(d, 11)]) == [3, 4]
    assert report.hours_compacted == 2  # the gauge table and the pushes table
    # Nothing left to do: idempotent.
    assert (
        compact(
            spark, lake_config, now_unix_ns=H11 + HOUR_NS + HOUR_NS // 2
        ).hours_compacted
        == 0
    )


def test_compaction_sees_rows_another_session_wrote(
    spark, lake_config, tmp_path
) -> None:
    """The stale-listing trap: compacting through a listing cached before another
    session's write would overwrite that write away."""
    _ingest_batches(spark, lake_config, tmp_path / "node-1", [H10 + 1, H10 + 2])
    assert (
        spark.table(f"{lake_config.database}.metrics_gauge").count() == 2
    )  # cache the listing
    other = spark.newSession()
    _ingest_batches(other, lake_config, tmp_path / "node-2", [H10 + 3])
    compact(spark, lake_config, now_unix_ns=H11 + 2 * HOUR_NS)
    spark.catalog.refreshTable(f"{lake_config.database}.metrics_gauge")
    assert spark.table(f"{lake_config.database}.metrics_gauge").count() == 3


class _Crash(Exception):
    pass


@pytest.mark.parametrize("crash_at", ["before_drop", "after_first_drop"])
def test_compaction_killed_then_rerun_loses_and_duplicates_nothing(
    spark, lake_config, tmp_path, monkeypatch, crash_at
) -> None:
    _ingest_batches(
        spark, lake_config, tmp_path / "node-1", [H10 + 1, H10 + 2, H10 + 3]
    )
    before = _snapshot(spark, lake_config)
    real_drop = maintenance._drop

    def crashing_drop(spark_, name, partitions):
        if crash_at == "after_first_drop":
            real_drop(spark_, name, partitions[:1])
        raise _Crash()

    monkeypatch.setattr(maintenance, "_drop", crashing_drop)
    with pytest.raises(_Crash):
        compact(spark, lake_config, now_unix_ns=H11 + 2 * HOUR_NS)
    assert list(
        (lake_config.state_dir / "compactions").rglob("*.json")
    )  # the journal remains
    monkeypatch.setattr(maintenance, "_drop", real_drop)

    compact(spark, lake_config, now_unix_ns=H11 + 2 * HOUR_NS)
    assert _snapshot(spark, lake_config) == before
    assert list(_hours(spark, lake_config).values()) == [[-3]]
    assert not list((lake_config.state_dir / "compactions").rglob("*.json"))


def test_retention_drops_old_days_and_keeps_the_rest(
    spark, lake_config, tmp_path
) -> None:
    day = 24 * HOUR_NS
    _ingest_batches(
        spark,
        lake_config,
        tmp_path / "node-1",
        [H10 - 3 * day, H10 - 2 * day, H10 - day, H10],
    )
    gauge = f"{lake_config.database}.metrics_gauge"
    kept_before = spark.sql(
        f"SELECT landing_offset FROM {gauge} WHERE dt >= DATE'2026-11-18'"
    ).collect()
    report = apply_retention(
        spark, lake_config, days=2, today=datetime.date(2026, 11, 20)
    )
    assert report.cutoff == datetime.date(2026, 11, 18)
    assert report.partitions_dropped == 2  # 2026-11-17 in gauge and pushes
    spark.catalog.refreshTable(gauge)
    after = spark.sql(f"SELECT landing_offset FROM {gauge}").collect()
    assert sorted(after) == sorted(kept_before) and len(after) == 3
    assert min(
        p.dt for p in list_partitions(spark, lake_config, TABLES[0])
    ) == datetime.date(2026, 11, 18)


def test_partition_spec_parsing() -> None:
    p = Partition.parse("dt=2026-11-21/hour=5/batch_id=-7")
    assert p == Partition(datetime.date(2026, 11, 21), 5, -7)
    assert p.sql_spec() == "PARTITION (dt = DATE'2026-11-21', hour = 5, batch_id = -7)"
    assert LINEAGE_KEY[0] == "landing_node"


def test_compaction_refuses_while_an_ingest_batch_awaits_its_replay(tmp_path) -> None:
    from exporters.lakehouse.journal import BatchPlan, IngestJournal, SourceRange
    from exporters.lakehouse.maintenance import CompactionError
    from exporters.lakehouse.session import LakehouseConfig

    config = LakehouseConfig(tmp_path / "lake")
    IngestJournal(config.state_dir).write_plan(
        BatchPlan(4, (SourceRange("node-1", str(tmp_path), 0, 5),), 0)
    )
    with pytest.raises(CompactionError, match="batch 4 is planned but not committed"):
        compact(None, config, now_unix_ns=H11 + 2 * HOUR_NS)  # type: ignore[arg-type]
