"""The journal and the writer lock, without Spark."""

from __future__ import annotations

import json

import pytest

from exporters.lakehouse.journal import (
    BatchCommit,
    BatchPlan,
    IngestJournal,
    LakehouseBusy,
    SourceRange,
    WriterLock,
    atomic_write_json,
)


def _plan(batch_id: int) -> BatchPlan:
    return BatchPlan(
        batch_id,
        (SourceRange("node-1", "/d/node-1", 10 * batch_id, 10 * batch_id + 10),),
        0,
    )


def test_plans_and_commits_round_trip_and_latest_wins(tmp_path) -> None:
    journal = IngestJournal(tmp_path)
    assert journal.latest_plan() is None
    for batch_id in range(3):
        journal.write_plan(_plan(batch_id))
    journal.write_commit(
        BatchCommit(
            0,
            10,
            {"metrics_gauge": 20},
            5,
            ({"source": "node-1", "offset": 3, "error": "x"},),
        )
    )
    assert journal.latest_plan() == _plan(2)
    assert journal.is_committed(0) and not journal.is_committed(2)
    assert journal.read_commit(0).rejected[0]["offset"] == 3
    assert journal.latest_plan().next_offsets()["node-1"] == SourceRange(
        "node-1", "/d/node-1", 30, 30
    )


def test_prune_keeps_the_newest_committed_and_every_uncommitted_plan(tmp_path) -> None:
    journal = IngestJournal(tmp_path)
    for batch_id in range(5):
        journal.write_plan(_plan(batch_id))
        if batch_id < 4:
            journal.write_commit(BatchCommit(batch_id, 1, {}, 0))
    journal.prune(keep=2)
    assert journal.plan_ids() == [2, 3, 4]
    assert journal.latest_plan() == _plan(4) and not journal.is_committed(4)


def test_atomic_write_leaves_no_temp_files(tmp_path) -> None:
    atomic_write_json(tmp_path / "a" / "x.json", {"k": 1})
    atomic_write_json(tmp_path / "a" / "x.json", {"k": 2})
    assert json.loads((tmp_path / "a" / "x.json").read_text()) == {"k": 2}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["x.json"]


def test_writer_lock_is_exclusive_and_released(tmp_path) -> None:
    with WriterLock(tmp_path), pytest.raises(LakehouseBusy):
        WriterLock(tmp_path).acquire()
    with WriterLock(tmp_path):  # released on exit
        pass


def test_spark_conf_defaults_and_overrides(tmp_path) -> None:
    from exporters.lakehouse.session import LakehouseConfig, spark_conf

    lake = tmp_path / "lake"
    conf = spark_conf(
        LakehouseConfig(
            lake,
            extra_conf={
                "spark.hadoop.javax.jdo.option.ConnectionURL": "jdbc:postgresql://db/metastore",
                "spark.driver.extraJavaOptions": "-Xss4m",
                "spark.sql.shuffle.partitions": "2",
            },
        )
    )
    assert conf["spark.sql.warehouse.dir"] == str(lake.resolve() / "warehouse")
    assert (
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"]
        == "jdbc:postgresql://db/metastore"
    )
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert conf["spark.sql.sources.partitionOverwriteMode"] == "dynamic"
    # Ours stay: derby.log and quiet logging; the user's option is added.
    assert (
        f"-Dderby.system.home={lake.resolve()}" in conf["spark.driver.extraJavaOptions"]
    )
    assert conf["spark.driver.extraJavaOptions"].endswith(" -Xss4m")
    assert not LakehouseConfig(
        lake,
        extra_conf={
            "spark.hadoop.javax.jdo.option.ConnectionURL": "jdbc:postgresql://db/metastore"
        },
    ).uses_embedded_derby
    assert LakehouseConfig(lake).uses_embedded_derby
