"""Exactly-once under faults: a real `ingest` process SIGKILLed (with its JVM) before,
during and after the commits of a batch, with a compaction and a snapshot expiry between
a kill and the restart, then completed, equals a clean run row for row.

Every kill is a named failpoint (exporters/lakehouse/failpoints.py), never a timer, so
the sequence of commits is the same on every machine.  The result is read twice: by a
fresh reader (a new `ktc sql` process) and by this test session's long-lived Spark
session, which an analyst's loop polls every 5 s while the ingests run.  The test fails
when the data is wrong and when a reader is: with Iceberg's table cache turned back on
(``KTC_TEST_SPARK_CONF=spark.sql.catalog.lake.cache-enabled=true``, conftest.py) the
long-lived session keeps serving the tables as it loaded them at the maintenance, and
the comparison fails.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from exporters.lakehouse.cli.sql import run_sql
from exporters.lakehouse.ingest import CONSUMER_NAME, IngestJob
from exporters.lakehouse.maintenance import compact, expire_snapshots
from exporters.lakehouse.schema import LINEAGE_KEY, TABLES
from exporters.lakehouse.session import LakehouseConfig
from exporters.landing import ConsumerPositions
from tests.lakehouse.conftest import SPARK_TEST_CONF, ingest_once_argv, write_landing
from tests.lakehouse.lakehouse_otlp import make_context, sample_metrics_data

# Five ingest processes (four killed, one completing) of ~20-40 s each.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]
POLL_S = 5.0  # the long-lived session's reader asks this often

REPO = Path(__file__).resolve().parents[2]
PUSHES_PER_NODE = 10
BATCH = 3  # records per landing directory per batch: 4 batches

# Each killed run, in order (the failpoint's batch counts from 1 in each process); the
# last run completes.  Maintenance runs after the run marked True, before the next one.
KILLS = [
    ("after_read@2", False),  # batch 1 committed; batch 2 read, nothing written: before
    ("mid_write:1@1", True),  # one table of a batch committed, the others not: during
    ("before_pushes@1", False),  # every point table committed, `pushes` not: during
    ("after_write@1", False),  # every table committed, consumer positions not: after
]


def _lake_dump_sql(config: LakehouseConfig) -> str:
    """Every row of every table as JSON."""
    parts = []
    for table in TABLES:
        cols = ", ".join(f"`{c}`" for c in table.column_names)
        parts.append(
            f"SELECT '{table.name}' AS t, to_json(struct({cols})) AS j FROM {config.table(table.name)}"
        )
    return " UNION ALL ".join(parts)


def _rows(json_lines: str) -> list[tuple[str, str]]:
    return sorted((r["t"], r["j"]) for r in map(json.loads, json_lines.splitlines()))


def _ingest(
    data_dir: Path, config: LakehouseConfig, kill_at: str | None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("KTC_LAKEHOUSE_KILL_AT", None)
    if kill_at:
        env["KTC_LAKEHOUSE_KILL_AT"] = kill_at
    return subprocess.run(
        ingest_once_argv(
            config.lake_dir,
            config.database,
            "--max-records-per-batch",
            str(BATCH),
            "--data-dir",
            str(data_dir),
        ),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
        start_new_session=True,  # its own process group: the failpoint kills the group
    )


def test_killed_ingest_runs_and_maintenance_then_completion_equal_a_clean_run(
    spark, spark_lake, tmp_path
) -> None:
    lake = spark_lake[1]
    faulted = LakehouseConfig(lake, database="faults", extra_conf=SPARK_TEST_CONF)
    clean = LakehouseConfig(lake, database="clean", extra_conf=SPARK_TEST_CONF)
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

    # An analyst's loop on the long-lived session while the ingests run: with Iceberg's
    # table cache on, being read every 5 s keeps a cached table from ever expiring.
    stop = threading.Event()
    poll_errors: list[BaseException] = []
    poller = threading.Thread(
        target=_poll_counts, args=(spark, faulted, stop, poll_errors)
    )
    poller.start()
    outcomes: list[tuple[str | None, int]] = []
    try:
        _kill_maintain_and_complete(spark, faulted, data_dir, outcomes)
    finally:
        stop.set()
        poller.join()
    assert not poll_errors, poll_errors
    assert outcomes == [(kill, -signal.SIGKILL) for kill, _ in KILLS] + [(None, 0)]

    # The long-lived session, then a fresh process, read the faulted lake.
    out = io.StringIO()
    run_sql(spark, _lake_dump_sql(faulted), "json", out)
    faulted_rows = _rows(out.getvalue())
    fresh_rows = _rows(_fresh_sql(faulted, _lake_dump_sql(faulted)))

    # The clean run: the same landing logs, one uninterrupted job, in-process.
    with IngestJob(clean, lambda: clean_nodes, spark=spark) as job:
        job.run_once()
    out = io.StringIO()
    run_sql(spark, _lake_dump_sql(clean), "json", out)
    clean_rows = _rows(out.getvalue())

    assert len(clean_rows) == 2 * PUSHES_PER_NODE * (
        1 + 6
    )  # a push row and 6 points each
    assert fresh_rows == clean_rows, "the lake itself differs from the clean run"
    assert faulted_rows == clean_rows, "the long-lived session serves another state"
    for table in TABLES:
        key = ", ".join(LINEAGE_KEY if table.name != "pushes" else LINEAGE_KEY[:2])
        doubled = spark.sql(
            f"SELECT {key} FROM {faulted.table(table.name)} GROUP BY {key} HAVING count(*) > 1"
        ).collect()
        assert doubled == [], table.name
    for node in nodes:
        assert ConsumerPositions(node, CONSUMER_NAME).load() == PUSHES_PER_NODE


def _poll_counts(
    spark, config: LakehouseConfig, stop: threading.Event, errors: list[BaseException]
) -> None:
    """Count the pushes every POLL_S until stopped (before the first ingest created
    the table, the count fails and is asked again)."""
    while not stop.wait(POLL_S):
        try:
            spark.sql(f"SELECT count(*) FROM {config.table('pushes')}").collect()
        except Exception as exc:
            if "TABLE_OR_VIEW_NOT_FOUND" not in str(exc):
                errors.append(exc)
                return


def _fresh_sql(config: LakehouseConfig, statement: str) -> str:
    """The statement's JSON lines from a new `ktc sql` process on Spark."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporters.lakehouse",
            "sql",
            statement,
            "--engine",
            "spark",
            "--format",
            "json",
            "--lake-dir",
            str(config.lake_dir),
            "--database",
            config.database,
            "--master",
            "local[1]",
        ],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def _kill_maintain_and_complete(
    spark,
    faulted: LakehouseConfig,
    data_dir: Path,
    outcomes: list[tuple[str | None, int]],
) -> None:
    for kill, then_maintain in KILLS:
        run = _ingest(data_dir, faulted, kill)
        outcomes.append((kill, run.returncode))
        assert run.returncode in (-signal.SIGKILL, 0), run.stderr[-3000:]
        if then_maintain:
            # Between the kill and the restart: compaction rewrites every file, and every
            # snapshot but the last expires; the positions must survive both.
            report = compact(
                spark, faulted, now_unix_ns=time.time_ns(), closed_after_s=0
            )
            assert report["rewritten_files"] > 0
            expire_snapshots(
                spark,
                faulted,
                now_unix_ms=time.time_ns() // 10**6 + 1000,
                expire_after_s=0,
                retain_last=1,
            )
    final = _ingest(data_dir, faulted, None)
    outcomes.append((None, final.returncode))
    assert final.returncode == 0, final.stderr[-3000:]


def test_failpoint_names_are_checked() -> None:
    from exporters.lakehouse import failpoints

    os.environ["KTC_LAKEHOUSE_KILL_AT"] = "nowhere"
    try:
        with pytest.raises(ValueError, match="unknown point"):
            failpoints.reached("after_read", 1)
    finally:
        del os.environ["KTC_LAKEHOUSE_KILL_AT"]
