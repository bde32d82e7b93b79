"""`ktc sql` latency of a point query: the fast path (pyiceberg + DuckDB, no JVM) against
the Spark path, each a fresh `ktc sql` process as an analyst runs it.  Target: under 2 s on
the fast path.

The lake: ``--pushes`` librdkafka-shaped pushes (14 points each) ingested by `ktc ingest`.
The query: one client's latest request latency, through the ``metrics`` view.

    .venv/bin/python tests/perf/bench_sql.py [--pushes 5000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from exporters.landing import LandingLog, LandingOptions
from tests.perf.bench_ingest import context, lake_cli, librdkafka_like_push

TARGET_S = 2.0
QUERY = (
    "SELECT time, value FROM metrics WHERE client_instance_id = '{cid}' "
    "AND metric_name = 'org.apache.kafka.producer.request.latency.avg' "
    "ORDER BY time DESC LIMIT 1"
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pushes", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOCAL_IP="127.0.0.1")
    root = Path(tempfile.mkdtemp(prefix="ktc-bench-sql-"))
    data_dir = root / "data"
    try:
        log = LandingLog(
            data_dir / "landing" / "node-1",
            LandingOptions(fsync="never"),
            housekeeping=False,
        )
        for seq in range(args.pushes):
            log.append(context(seq), librdkafka_like_push(seq))
        log.close()
        subprocess.run(
            lake_cli("ingest", "--once", "--master", "local[2]", data_dir=data_dir),
            cwd=REPO,
            env=env,
            check=True,
            capture_output=True,
        )
        query = QUERY.format(cid=context(7).client_instance_id)
        timings: dict[str, list[float]] = {}
        outputs: dict[str, str] = {}
        for engine in ("duckdb", "spark"):
            for _ in range(args.runs if engine == "duckdb" else max(1, args.runs // 2)):
                started = time.perf_counter()
                out = subprocess.run(
                    lake_cli(
                        "sql",
                        query,
                        "--engine",
                        engine,
                        "--format",
                        "csv",
                        data_dir=data_dir,
                    ),
                    cwd=REPO,
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                timings.setdefault(engine, []).append(time.perf_counter() - started)
                outputs[engine] = out.stdout.splitlines()[1]
        assert outputs["duckdb"] == outputs["spark"], outputs
        fast, spark = (statistics.median(timings[e]) for e in ("duckdb", "spark"))
        print(f"pushes: {args.pushes}  rows in the metrics view: {args.pushes * 14}")
        print(
            "runs (s): fast path "
            + ", ".join(f"{t:.2f}" for t in timings["duckdb"])
            + "; spark "
            + ", ".join(f"{t:.2f}" for t in timings["spark"])
        )
        print(
            f"point query, fast path (pyiceberg + DuckDB): {fast:6.2f} s (target < {TARGET_S:.0f} s)"
        )
        print(f"point query, Spark:                          {spark:6.2f} s")
        print(
            f"ratio spark/fast path: {spark / fast:.1f}x; fast path/target: {fast / TARGET_S:.2f}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
