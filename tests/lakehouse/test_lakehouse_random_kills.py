"""Exactly-once under random faults on real Spark and Iceberg.

Rounds of two `ingest` processes at once, one per landing directory, both appending to
the same tables; each process is SIGKILLed (with its JVM) at a randomly chosen point of a
random batch (a named failpoint, or a timer a random number of milliseconds into the
batch's writes and commits), and between rounds a random choice of maintenance runs
(compaction, snapshot expiry with a random ``retain_last`` down to 1, orphan removal) while
new pushes land.  Once the kill budget is spent, a last round completes, and the lake must
equal one uninterrupted ingest of the same landing logs row for row: every point and
every `pushes` row exactly once.

The seed is printed (and in every assertion message); replay a run with it.  CI runs a
small budget; the longer run is::

    KTC_RANDOM_KILLS=30 .venv/bin/python -m pytest -s \\
        tests/lakehouse/test_lakehouse_random_kills.py

(``KTC_RANDOM_SEED=N`` replays a seed.)
"""

from __future__ import annotations

import collections
import io
import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from exporters.lakehouse.cli.sql import run_sql
from exporters.lakehouse.failpoints import POINTS
from exporters.lakehouse.ingest import CONSUMER_NAME, IngestJob
from exporters.lakehouse.maintenance import (
    compact,
    expire_snapshots,
    remove_orphan_files,
)
from exporters.lakehouse.schema import LINEAGE_KEY, TABLES
from exporters.lakehouse.session import LakehouseConfig
from exporters.landing import ConsumerPositions
from tests.lakehouse.conftest import SPARK_TEST_CONF, ingest_once_argv, write_landing
from tests.lakehouse.lakehouse_otlp import make_context, sample_metrics_data

REPO = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("KTC_RANDOM_KILLS", "4"))  # CI's budget: about 3 minutes
# Each round adds pushes to each directory; a batch holds 2-5 of a directory's records.
PUSHES_PER_ROUND = 6
TABLES_WITH_ROWS = 6  # sample_metrics_data fills every point table, and pushes
pytestmark = [pytest.mark.spark, pytest.mark.timeout(600 + 120 * KILLS)]


def _kill_spec(rng: random.Random) -> str | None:
    """A random fault for one ingest process, or None (it runs to the end)."""
    point = rng.choice((*POINTS, None))
    if point is None:
        return None
    batch = rng.randint(1, 3)
    if point == "mid_write":
        return f"mid_write:{rng.randint(1, TABLES_WITH_ROWS)}@{batch}"
    if point == "during_write":
        return f"during_write:{rng.randint(0, 3000)}@{batch}"
    return f"{point}@{batch}"


def _start_ingest(
    directory: Path, config: LakehouseConfig, kill_at: str | None, batch: int
) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("KTC_LAKEHOUSE_KILL_AT", None)
    if kill_at:
        env["KTC_LAKEHOUSE_KILL_AT"] = kill_at
    return subprocess.Popen(
        ingest_once_argv(
            config.lake_dir,
            config.database,
            "--landing-dir",
            str(directory),
            "--max-records-per-batch",
            str(batch),
        ),
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the failpoint kills the process group
    )


def _land(directory: Path, index: int, first: int, count: int) -> None:
    write_landing(
        directory,
        [
            (
                make_context(
                    client_instance_id=f"{index}{i:021d}",
                    received_time_unix_nano=(1_795_000_000 + i * 60) * 10**9,
                ),
                sample_metrics_data(i).SerializeToString(),
            )
            for i in range(first, first + count)
        ],
    )


def _maintain(spark, config: LakehouseConfig, rng: random.Random) -> list[str]:
    """A random choice of maintenance, as `ktc ingest` and `ktc lake` run it."""
    done = []
    now_ns = time.time_ns()
    if rng.random() < 0.5:
        compact(spark, config, now_unix_ns=now_ns, closed_after_s=0)
        done.append("compact")
    if rng.random() < 0.5:
        retain_last = rng.randint(1, 3)
        expire_snapshots(
            spark,
            config,
            now_unix_ms=now_ns // 10**6 + 1000,
            expire_after_s=0,
            retain_last=retain_last,
        )
        done.append(f"expire(retain_last={retain_last})")
    if rng.random() < 0.3:
        # No writer runs between rounds: every unreferenced file is a killed one's.
        remove_orphan_files(
            spark, config, now_unix_ms=now_ns // 10**6 + 1000, orphan_after_s=0
        )
        done.append("remove_orphans")
    return done


def _dump(spark, config: LakehouseConfig) -> list[tuple[str, str]]:
    parts = []
    for table in TABLES:
        cols = ", ".join(f"`{c}`" for c in table.column_names)
        parts.append(
            f"SELECT '{table.name}' AS t, to_json(struct({cols})) AS j "
            f"FROM {config.table(table.name)}"
        )
    out = io.StringIO()
    run_sql(spark, " UNION ALL ".join(parts), "json", out)
    return sorted(
        (r["t"], r["j"]) for r in map(json.loads, out.getvalue().splitlines())
    )


def test_random_kills_and_maintenance_leave_every_record_exactly_once(
    spark, spark_lake, tmp_path: Path
) -> None:
    seed = int(os.environ.get("KTC_RANDOM_SEED") or random.randrange(1 << 32))
    print(f"random kills: seed {seed}, budget {KILLS} kills")
    rng = random.Random(seed)
    lake = spark_lake[1]
    faulted = LakehouseConfig(
        lake, database="random_faults", extra_conf=SPARK_TEST_CONF
    )
    clean = LakehouseConfig(lake, database="random_clean", extra_conf=SPARK_TEST_CONF)
    nodes = [tmp_path / "landing" / "node-1", tmp_path / "landing" / "node-2"]
    landed = 0
    kills: collections.Counter[str] = collections.Counter()
    maintenance: collections.Counter[str] = collections.Counter()
    rounds = 0
    started = time.monotonic()
    while sum(kills.values()) < KILLS:
        rounds += 1
        for index, node in enumerate(nodes):
            _land(node, index, landed, PUSHES_PER_ROUND)
        landed += PUSHES_PER_ROUND
        specs = [_kill_spec(rng) for _ in nodes]
        procs = [
            _start_ingest(node, faulted, spec, rng.randint(2, 5))
            for node, spec in zip(nodes, specs, strict=True)
        ]
        for proc, spec in zip(procs, specs, strict=True):
            _, stderr = proc.communicate(timeout=600)
            assert proc.returncode in (-signal.SIGKILL, 0), (
                f"seed {seed}, round {rounds}, {spec}: {stderr[-3000:]}"
            )
            if proc.returncode == -signal.SIGKILL:
                assert spec is not None
                kills[spec.split("@")[0].split(":")[0]] += 1
        actions = _maintain(spark, faulted, rng)
        for action in actions:
            maintenance[action.split("(")[0]] += 1
        print(
            f"round {rounds}: {specs} -> {[p.returncode for p in procs]}, then "
            f"{actions or 'no maintenance'}; {sum(kills.values())} kills so far",
            flush=True,
        )

    for node in nodes:  # the last round completes
        proc = _start_ingest(node, faulted, None, 5)
        _, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"seed {seed}: {stderr[-3000:]}"
    faulted_rows = _dump(spark, faulted)

    clean_nodes = [tmp_path / "clean" / node.name for node in nodes]
    for node, copy in zip(nodes, clean_nodes, strict=True):
        shutil.copytree(node, copy)
    with IngestJob(clean, lambda: clean_nodes, spark=spark) as job:
        job.run_once()
    clean_rows = _dump(spark, clean)

    print(
        f"random kills: seed {seed}: {sum(kills.values())} kills {dict(kills)} in "
        f"{rounds} rounds of two ingests, maintenance {dict(maintenance)}, "
        f"{2 * landed} records, {len(clean_rows)} rows, "
        f"{time.monotonic() - started:.0f} s"
    )
    assert len(clean_rows) == 2 * landed * (1 + 6), seed  # a push row and 6 points each
    assert faulted_rows == clean_rows, f"seed {seed}: the lake differs from a clean run"
    for table in TABLES:
        key = ", ".join(LINEAGE_KEY if table.name != "pushes" else LINEAGE_KEY[:2])
        doubled = spark.sql(
            f"SELECT {key} FROM {faulted.table(table.name)} "
            f"GROUP BY {key} HAVING count(*) > 1"
        ).collect()
        assert doubled == [], (seed, table.name)
    for node in nodes:
        assert ConsumerPositions(node, CONSUMER_NAME).load() == landed, seed
