"""Where a restarted ingest reads from: the landing positions in snapshot summaries, and how
far snapshots may expire without losing one.  Without Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters.lakehouse.commits import (
    SnapshotInfo,
    SourceRange,
    carried_properties,
    committed_positions,
    expire_horizon_ms,
    range_properties,
)
from exporters.lakehouse.fastpath import _dependencies, _view_definitions
from exporters.lakehouse.session import LakehouseConfig, OldLayout, check_layout


def _snapshot(ms: int, **summary: str) -> SnapshotInfo:
    return SnapshotInfo(ms, ms, {k.replace("__", "."): v for k, v in summary.items()})


def test_an_append_records_its_ranges_and_carries_positions() -> None:
    ranges = [
        SourceRange("node-1", "/d/node-1", 10, 20),
        SourceRange("node-2", "/d/n2", 5, 5),
    ]
    assert range_properties(ranges) == {"ktc.landing.node-1": "10-20"}  # empty left out
    assert carried_properties({"node-2": 5, "node-1": 20}) == {
        "ktc.position.node-1": "20",
        "ktc.position.node-2": "5",
    }


def test_positions_are_the_largest_end_over_ranges_and_carried_positions() -> None:
    snapshots = [
        _snapshot(1, ktc__landing__node__1="0-10"),
        _snapshot(2, ktc__landing__node__2="0-4", ktc__position__node__1="10"),
        _snapshot(3, ktc__position__node__1="7"),  # a stale carry (a concurrent writer)
        _snapshot(4, **{"spark.app.id": "x", "added-records": "3"}),
    ]
    assert committed_positions(snapshots) == {"node.1": 10, "node.2": 4}
    assert committed_positions([]) == {}


def test_expiry_stops_at_the_newest_snapshot_holding_each_position() -> None:
    snapshots = [
        _snapshot(100, ktc__landing__a="0-5"),  # a's only record of 5
        _snapshot(200, ktc__landing__b="0-3"),
        _snapshot(300, ktc__landing__b="3-9", ktc__position__a="4"),  # stale for a
    ]
    assert expire_horizon_ms(snapshots) == 100
    # A maintenance snapshot that carries a's position lets the rest expire.
    snapshots.append(_snapshot(400, ktc__position__a="5", ktc__position__b="9"))
    assert expire_horizon_ms(snapshots) == 400
    assert expire_horizon_ms([_snapshot(1)]) is None


def test_catalog_uris_for_spark_and_pyiceberg(tmp_path: Path) -> None:
    config = LakehouseConfig(tmp_path / "lake")
    assert config.catalog_kind == "sqlite" and "journal_mode=WAL" in config.catalog
    props = config.pyiceberg_properties()
    assert props["uri"] == f"sqlite:///{(tmp_path / 'lake' / 'catalog.db').resolve()}"
    assert props["init_catalog_tables"] == "false"
    pg = LakehouseConfig(
        tmp_path,
        catalog_uri="jdbc:postgresql://127.0.0.1:5433/lake?user=ktc&password=p%40ss",
    )
    assert pg.catalog_kind == "postgresql"
    assert (
        pg.pyiceberg_properties()["uri"]
        == "postgresql+psycopg2://ktc:p%40ss@127.0.0.1:5433/lake"
    )
    rest = LakehouseConfig(tmp_path, catalog_uri="https://iceberg.example:8181")
    assert rest.pyiceberg_properties()["type"] == "rest"
    with pytest.raises(ValueError, match="expected jdbc:sqlite"):
        _ = LakehouseConfig(tmp_path, catalog_uri="thrift://hms:9083").catalog_kind


def test_an_old_layout_lake_gets_one_line_saying_what_to_run(tmp_path: Path) -> None:
    lake = tmp_path / "lakehouse"
    (lake / "metastore_db").mkdir(parents=True)
    with pytest.raises(OldLayout) as raised:
        check_layout(LakehouseConfig(lake))
    message = str(raised.value)
    assert (
        "\n" not in message
        and "run `ktc ingest`" in message
        and f"mv {lake}" in message
    )


def test_the_fast_path_loads_only_what_a_view_reads() -> None:
    views = _view_definitions("ktc")
    assert _dependencies("clients", views) == ["pushes", "clients"]
    latest = _dependencies("latest", views)
    assert latest[-2:] == ["metrics", "latest"] and "metrics_summary" in latest
    assert "`" not in views["metrics"]
    assert "AS VARCHAR)" in views["metrics"] and "AS STRING)" not in views["metrics"]
