"""Freshness: a push appended to the landing log -> its row returned by each kind of
reader, with a streaming `ktc ingest` at the default trigger interval (10 s).  Target
<= 30 s for every reader.

Per probe push:
* committed: until a snapshot of the pushes table covers the push (from then on every
  reader sees it), watched every 100 ms through pyiceberg;
* visible, side by side, for three readers asking back to back:
  - `ktc sql`: a new process per query (default engine: the fast path, no JVM),
    which includes each query's own start;
  - Thrift server: beeline on one connection kept open to `ktc thriftserver`;
  - PySpark: one long-lived session built from docs/lakehouse.md's settings.

The ratio printed is the worst visible latency over all readers against the 30 s budget
(<= 1 passes).

    .venv/bin/python tests/perf/bench_freshness.py [--probes 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from pyiceberg.catalog import load_catalog

from exporters.lakehouse.commits import SnapshotInfo, committed_positions
from exporters.lakehouse.session import LakehouseConfig
from exporters.landing import LandingLog, LandingOptions
from tests.lakehouse.kept_readers import (
    LineReader,
    free_port,
    start_beeline,
    start_documented_pyspark,
    start_thriftserver,
    stop,
)
from tests.perf.bench_ingest import context, lake_cli, librdkafka_like_push

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
    kept: list[subprocess.Popen[bytes] | subprocess.Popen[str]] = [ingest]
    try:
        # Warm-up push: wait until the running ingest has committed a batch.
        warm = log.append(context(0), librdkafka_like_push(0))
        while not committed_through(journal, warm):
            assert ingest.poll() is None, "ingest exited"
            time.sleep(0.2)
        lake = journal.lake_dir
        logs = root / "logs"
        logs.mkdir()
        pyspark = start_documented_pyspark(
            lake, "ktc", env, (logs / "pyspark.log").open("w")
        )
        kept.append(pyspark.proc)
        port = free_port()
        server = start_thriftserver(
            ["--data-dir", str(data_dir)], port, env, (logs / "thrift.log").open("w")
        )
        kept.append(server)
        beeline = start_beeline(port, "ktc", env, (logs / "beeline.log").open("w"))
        kept.append(beeline.proc)

        def ktc_sql(where: str) -> int:
            out = subprocess.run(
                lake_cli(
                    "sql",
                    f"SELECT count(*) AS n FROM pushes WHERE {where}",
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
            return int(json.loads(out.stdout.splitlines()[0])["n"])

        def kept_reader(reader: LineReader, tag: str) -> Callable[[str], int]:
            return lambda where: reader.ask(
                f"SELECT {tag}count(*) FROM pushes WHERE {where}"
            )

        readers: dict[str, Callable[[str], int]] = {
            "ktc sql": ktc_sql,
            "thrift server": kept_reader(beeline, "'answer', "),
            "pyspark": kept_reader(pyspark, ""),
        }
        results: dict[str, list[float]] = {name: [] for name in readers}
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
            where = f"client_instance_id = '{ctx.client_instance_id}'"
            committed_at: list[float] = []
            visible: dict[str, float] = {}

            def watch_journal(
                offset: int = offset, committed_at: list[float] = committed_at
            ) -> None:
                while not committed_through(journal, offset):
                    time.sleep(0.1)
                committed_at.append(time.monotonic())

            def watch_reader(
                name: str,
                ask: Callable[[str], int],
                where: str = where,
                visible: dict[str, float] = visible,
                pushed: float = pushed,
            ) -> None:
                while ask(where) != 1:
                    pass
                visible[name] = time.monotonic() - pushed

            watchers = [threading.Thread(target=watch_journal, daemon=True)] + [
                threading.Thread(target=watch_reader, args=item, daemon=True)
                for item in readers.items()
            ]
            for watcher in watchers:
                watcher.start()
            for watcher in watchers:
                watcher.join()
            committed_s = committed_at[0] - pushed
            if missing := [n for n in readers if n not in visible]:
                raise SystemExit(
                    f"probe {probe}: {', '.join(missing)} failed; logs in {logs}"
                )
            for name in readers:
                results[name].append(visible[name])
            print(
                f"probe {probe}: committed after {committed_s:5.1f} s; visible after "
                + ", ".join(f"{n} {visible[n]:5.1f} s" for n in readers)
            )
        for name, seen in results.items():
            print(
                f"{name:>13}: push -> visible median {statistics.median(seen):5.1f} s, "
                f"worst {max(seen):5.1f} s"
            )
        worst = max(max(seen) for seen in results.values())
        print(
            f"worst push -> visible over every reader: {worst:.1f} s; ratio to the "
            f"{BUDGET_S:.0f} s budget: {worst / BUDGET_S:.2f} (<= 1 passes)"
        )
    except BaseException:
        keep = True  # the readers' logs, for the failure
        raise
    else:
        keep = False
    finally:
        for proc in reversed(kept):
            stop(proc)
        log.close()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
