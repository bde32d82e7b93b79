"""Exactly-once under faults: a real `ingest` process SIGKILLed (with its JVM) at
different points, several times, then completed, equals a clean run row for row."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_landing
from lakehouse_otlp import make_context, sample_metrics_data

from exporters.lakehouse.cli import run_sql
from exporters.lakehouse.ingest import CONSUMER_NAME, IngestJob
from exporters.lakehouse.schema import TABLES
from exporters.lakehouse.session import LakehouseConfig, derby_in_use
from exporters.landing import ConsumerPositions

# Seven Spark processes (four killed, one completing, two queries) of ~20-40 s each.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
PUSHES_PER_NODE = 10
BATCH = 3  # records per landing directory per batch: 4 batches (0..3)

# (failpoint, batch) of each killed run, in order; the last run completes.  (The
# commit-then-crash case, positions behind the journal, is tested in-process.)
KILLS = [
    "after_plan@1",  # batch 0 committed, batch 1 planned
    "mid_write@1",  # the replay of batch 1 dies with one table written
    "after_write@2",  # batch 2's data in, no commit
    "during_write:700@3",  # a timer kills while Spark writes batch 3 (if it is slower)
]


def _lake_dump_sql(database: str) -> str:
    """Every row of every table as JSON, without batch_id (batch boundaries differ)."""
    parts = []
    for table in TABLES:
        cols = ", ".join(f"`{c}`" for c in table.column_names if c != "batch_id")
        parts.append(
            f"SELECT '{table.name}' AS t, to_json(struct({cols})) AS j FROM `{database}`.`{table.name}`"
        )
    return " UNION ALL ".join(parts)


def _rows(json_lines: str) -> list[tuple[str, str]]:
    return sorted((r["t"], r["j"]) for r in map(json.loads, json_lines.splitlines()))


def _cli(
    args: list[str],
    data_dir: Path,
    env_extra: dict[str, str] | None = None,
    timeout: float = 240,
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, **(env_extra or {}))
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "exporters.lakehouse",
            *args,
            "--data-dir",
            str(data_dir),
            "--master",
            "local[1]",
            "--conf",
            "spark.sql.shuffle.partitions=1",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        start_new_session=True,  # its own process group: the failpoint kills the group
    )


def _wait_for_metastore_release(config: LakehouseConfig) -> None:
    deadline = time.monotonic() + 30
    while derby_in_use(config):
        assert time.monotonic() < deadline, (
            "a killed ingest's JVM still holds the metastore"
        )
        time.sleep(0.2)


def test_killed_ingest_runs_then_completion_equal_a_clean_run(
    spark, lake_config, tmp_path
) -> None:
    data_dir = tmp_path / "data"
    nodes = [data_dir / "landing" / "node-1", data_dir / "landing" / "node-2"]
    for n, node in enumerate(nodes):
        pushes = [
            (
                make_context(
                    client_instance_id=f"{n}{i:021d}",
                    received_time_unix_nano=(1_795_000_000 + i * 600) * 10**9,
                ),
                sample_metrics_data(i).SerializeToString(),
            )
            for i in range(PUSHES_PER_NODE)
        ]
        write_landing(node, pushes)
    # The clean run gets its own copy: consumer positions live in the landing directory.
    clean_nodes = [tmp_path / "clean" / node.name for node in nodes]
    for node, copy in zip(nodes, clean_nodes, strict=True):
        shutil.copytree(node, copy)
    config = LakehouseConfig.for_data_dir(data_dir)

    outcomes = []
    for kill in KILLS:
        run = _cli(
            ["ingest", "--once", "--max-records-per-batch", str(BATCH)],
            data_dir,
            {"KTC_LAKEHOUSE_KILL_AT": kill},
        )
        outcomes.append((kill, run.returncode))
        assert run.returncode in (-signal.SIGKILL, 0), run.stderr[-3000:]
        _wait_for_metastore_release(config)
    assert sum(code == -signal.SIGKILL for _, code in outcomes) >= 3, outcomes
    final = _cli(["ingest", "--once", "--max-records-per-batch", str(BATCH)], data_dir)
    assert final.returncode == 0, final.stderr[-3000:]
    _wait_for_metastore_release(config)

    dumped = _cli(["sql", _lake_dump_sql("ktc"), "--format", "json"], data_dir)
    assert dumped.returncode == 0, dumped.stderr[-3000:]
    faulted = _rows(dumped.stdout)
    # What `ktc sql` reads while an ingest holds the metastore: the warehouse files alone.
    from_files = _cli(
        ["sql", _lake_dump_sql("ktc"), "--format", "json", "--catalog", "files"],
        data_dir,
    )
    assert from_files.returncode == 0, from_files.stderr[-3000:]
    assert _rows(from_files.stdout) == faulted

    # The clean run: the same landing logs, one uninterrupted job, in-process.
    with IngestJob(lake_config, lambda: clean_nodes, spark=spark) as job:
        job.run_once()
    out = io.StringIO()
    run_sql(spark, _lake_dump_sql(lake_config.database), "json", out)
    clean = _rows(out.getvalue())

    assert len(clean) == 2 * PUSHES_PER_NODE * (
        1 + 6
    )  # a push row and 6 points per push
    assert faulted == clean
    for node in nodes:
        assert ConsumerPositions(node, CONSUMER_NAME).load() == PUSHES_PER_NODE
    journal_ids = sorted(
        int(p.stem) for p in (config.state_dir / "commits").glob("*.json")
    )
    assert journal_ids == list(range(len(journal_ids))) and len(journal_ids) >= 4


def test_failpoint_names_are_checked() -> None:
    from exporters.lakehouse import failpoints

    os.environ["KTC_LAKEHOUSE_KILL_AT"] = "nowhere"
    try:
        with pytest.raises(ValueError, match="unknown point"):
            failpoints.reached("after_plan", 0)
    finally:
        del os.environ["KTC_LAKEHOUSE_KILL_AT"]
    assert dataclasses.is_dataclass(make_context())
