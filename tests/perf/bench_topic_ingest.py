"""Topic ingest against the landing-log ingest, in one run: records/s of ``ktc ingest
--kafka-topic`` (Spark's Kafka source, flattened on the executors by ``mapInArrow``)
beside ``ktc ingest --landing-dir`` (the landing log read and flattened by the driver's
process pool) on local[2], then the topic ingest on a Spark standalone cluster with one
and with two one-core executors.

The same pushes (librdkafka-like, as bench_ingest.py's) are landed twice: on a landing log
and, by the collector's own producer, on a six-partition topic of a one-node Apache Kafka
4.4.0 broker on the same machine.  Each measurement is one ``ktc ingest --once`` process
into a fresh namespace, in two batches of about half the pushes each; records/s is the
second batch's records over its time (what its progress line reports: read, flatten,
append and commit), so neither the JVM's start nor its first batch's warm-up counts.
The runs alternate between the two sources, and the best round of each counts.  Target:
topic >= 1.0 x landing log on local[2].

    .venv/bin/python tests/perf/bench_topic_ingest.py [--pushes 10000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from exporters.landing import LandingLog, LandingOptions
from tests.lakehouse.topic_cluster import (
    KafkaCluster,
    StandaloneCluster,
    create_topic,
    ingest_topic_argv,
    produce,
)
from tests.perf.bench_ingest import context as bench_context
from tests.perf.bench_ingest import librdkafka_like_push

TARGET_RATIO = 1.0
PARTITIONS = 6  # what `ktc serve` creates the landing topic with


def run(argv: list[str]) -> tuple[float, int, list[str]]:
    """(seconds, records, flattened_by) of one ``ktc ingest --once``'s batches after
    its first: the first batch of a new JVM pays for its warm-up (class loading, JIT,
    the Python workers' start and imports), which a long-running ingest pays once."""
    done = subprocess.run(
        argv,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"{argv[3:6]} failed: {done.stderr[-3000:]}")
    batches = [json.loads(line) for line in done.stdout.splitlines()]
    seconds = [
        float(line.rsplit(" in ", 1)[1].split(" s", 1)[0])
        for line in done.stderr.splitlines()
        if line.startswith("ktc ingest: batch ")
    ]
    assert len(batches) >= 2 and len(seconds) == len(batches), done.stderr[-2000:]
    by = sorted({b for batch in batches for b in batch.get("flattened_by", [])})
    return sum(seconds[1:]), sum(b["records"] for b in batches[1:]), by


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pushes", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when the target is missed"
    )
    args = parser.parse_args()

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = Path(tempfile.mkdtemp(prefix="ktc-bench-topic-ingest-"))
    kafka = KafkaCluster(nodes=1, work_dir=root / "kafka", heap="512m")
    kafka.start()
    standalone = StandaloneCluster(root / "spark", cores=2)
    try:
        now = time.time_ns()  # the broker deletes records stamped over 7 days ago
        pushes = []
        for seq in range(args.pushes):
            context = dataclasses.replace(
                bench_context(seq), received_time_unix_nano=now + seq * 10**6
            )
            pushes.append((context, librdkafka_like_push(seq)))
        landing = root / "landing" / "node-1"
        log = LandingLog(landing, LandingOptions(fsync="never"), housekeeping=False)
        for context, payload in pushes:
            log.append(context, payload)
        log.close()
        bootstrap = kafka.bootstrap_servers()
        settings = create_topic(bootstrap, "landing", PARTITIONS)
        produce(settings, pushes)
        lake = root / "lake"

        def landing_run(database: str) -> tuple[float, int, list[str]]:
            directory = root / database / "node-1"  # its consumer position is its own
            shutil.copytree(landing, directory)
            return run(
                [
                    sys.executable,
                    "-m",
                    "exporters.lakehouse",
                    "ingest",
                    "--once",
                    "--landing-dir",
                    str(directory),
                    "--lake-dir",
                    str(lake),
                    "--database",
                    database,
                    "--master",
                    "local[2]",
                    "--max-records-per-batch",
                    str(args.pushes // 2),
                ]
            )

        def topic_run(
            database: str, master: str, extra: Sequence[str] = ()
        ) -> tuple[float, int, list[str]]:
            # Half the pushes in the first batch, the rest in the second: the keys
            # spread the records over the partitions within about 15 %.
            per_partition = math.ceil(args.pushes / 2 / PARTITIONS * 1.15)
            return run(
                ingest_topic_argv(
                    lake,
                    database,
                    bootstrap,
                    "landing",
                    master=master,
                    extra=[*extra, "--max-records-per-batch", str(per_partition)],
                )
            )

        results: dict[str, list[tuple[float, int, list[str]]]] = {}
        for n in range(args.rounds):
            results.setdefault("landing log, local[2]", []).append(
                landing_run(f"landing_{n}")
            )
            results.setdefault("topic, local[2]", []).append(
                topic_run(f"topic_{n}", "local[2]")
            )
        standalone.start()
        for n in range(args.rounds):
            for executors in (1, 2):
                results.setdefault(
                    f"topic, standalone, {executors} executor(s)", []
                ).append(
                    topic_run(
                        f"standalone_{executors}_{n}",
                        standalone.master_url,
                        standalone.driver_conf(executors=executors),
                    )
                )

        rates = {}
        print(f"pushes: {args.pushes}, topic partitions: {PARTITIONS}")
        for name, runs in results.items():
            seconds, records, by = max(runs, key=lambda r: r[1] / r[0])
            rates[name] = records / seconds
            print(
                f"{name:<38} {rates[name]:9,.0f} records/s  best of "
                + ", ".join(f"{r:,} in {s:.1f} s" for s, r, _ in runs)
                + f"  flattened by {len(by)} process(es): {', '.join(by) or 'driver pool'}"
            )
        ratio = rates["topic, local[2]"] / rates["landing log, local[2]"]
        scale = (
            rates["topic, standalone, 2 executor(s)"]
            / rates["topic, standalone, 1 executor(s)"]
        )
        print(
            f"ratio topic/landing log on local[2]: {ratio:.2f}  (target >= {TARGET_RATIO})"
        )
        print(f"ratio two/one executors on the standalone cluster: {scale:.2f}")
        if args.check and ratio < TARGET_RATIO:
            raise SystemExit(1)
    finally:
        standalone.stop()
        kafka.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
