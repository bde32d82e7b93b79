"""Freshness: a push appended to the landing log -> its row returned by `ktc sql`,
with a streaming `ktc ingest` at the default trigger interval (10 s).  Target <= 30 s.

Two numbers per probe push:
* committed: until a snapshot of the pushes table covers the push (from then on every
  reader sees it), watched every 100 ms through pyiceberg;
* visible: until a `ktc sql` (default engine: the fast path, no JVM) started after the
  push returns its row, which includes each query's own start.

The ratio printed is the worst visible latency against the 30 s budget (<= 1 passes).

    .venv/bin/python tests/perf/bench_freshness.py [--probes 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "perf"))

from bench_ingest import context, lake_cli, librdkafka_like_push
from pyiceberg.catalog import load_catalog

from exporters.lakehouse.commits import SnapshotInfo, committed_positions
from exporters.lakehouse.session import LakehouseConfig
from exporters.landing import LandingLog, LandingOptions

BUDGET_S = 30.0


def committed_through(config: LakehouseConfig, offset: int) -> bool:
    """Whether the pushes table's snapshots cover landing offset ``offset`` of node-1."""
    if not config.exists():
        return False
    try:
        table = load_catalog("lake", **config.pyiceberg_properties()).load_table(
            ("ktc", "pushes")
        )
    except Exception:  # the ingest has not created it yet
        return False
    snapshots = [
        SnapshotInfo(s.snapshot_id, s.timestamp_ms, s.summary.additional_properties)
        for s in table.snapshots()
        if s.summary is not None
    ]
    return committed_positions(snapshots).get("node-1", 0) > offset


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--probes", type=int, default=3)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOCAL_IP="127.0.0.1")
    root = Path(tempfile.mkdtemp(prefix="ktc-bench-fresh-"))
    data_dir = root / "data"
    log = LandingLog(
        data_dir / "landing" / "node-1",
        LandingOptions(fsync="never"),
        housekeeping=False,
    )
    journal = LakehouseConfig.for_data_dir(data_dir)
    ingest = subprocess.Popen(
        lake_cli("ingest", data_dir=data_dir),
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # Warm-up push: wait until the running ingest has committed a batch.
        warm = log.append(context(0), librdkafka_like_push(0))
        while not committed_through(journal, warm):
            assert ingest.poll() is None, "ingest exited"
            time.sleep(0.2)
        results = []
        for probe in range(1, args.probes + 1):
            ctx = dataclasses.replace(
                context(probe),
                client_instance_id=f"probe{probe:017d}",
                received_time_unix_nano=time.time_ns(),
            )
            time.sleep(
                probe * 3.3 % 10
            )  # land at different points of the trigger cycle
            pushed = time.monotonic()
            offset = log.append(ctx, librdkafka_like_push(probe))
            committed_at: list[float] = []

            def watch_journal(
                offset: int = offset, committed_at: list[float] = committed_at
            ) -> None:
                while not committed_through(journal, offset):
                    time.sleep(0.1)
                committed_at.append(time.monotonic())

            watcher = threading.Thread(target=watch_journal, daemon=True)
            watcher.start()
            visible_s = query_s = None
            while visible_s is None:
                query_started = time.monotonic()
                out = subprocess.run(
                    lake_cli(
                        "sql",
                        f"SELECT count(*) AS n FROM pushes WHERE client_instance_id = "
                        f"'{ctx.client_instance_id}'",
                        "--format",
                        "json",
                        data_dir=data_dir,
                    ),
                    cwd=REPO,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                if json.loads(out.stdout.splitlines()[0])["n"] == 1:
                    visible_s = time.monotonic() - pushed
                    query_s = time.monotonic() - query_started
            watcher.join()
            committed_s = committed_at[0] - pushed
            results.append((committed_s, visible_s))
            print(
                f"probe {probe}: committed after {committed_s:5.1f} s; `ktc sql` returned it "
                f"{visible_s:5.1f} s after the push (that query itself took {query_s:4.1f} s)"
            )
        worst = max(v for _, v in results)
        print(
            f"worst push -> visible in ktc sql: {worst:.1f} s; ratio to the {BUDGET_S:.0f} s budget: "
            f"{worst / BUDGET_S:.2f} (<= 1 passes)"
        )
    finally:
        os.killpg(ingest.pid, signal.SIGTERM)
        try:
            ingest.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(ingest.pid, signal.SIGKILL)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
