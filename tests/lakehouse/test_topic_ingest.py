"""`ktc ingest --kafka-topic`: the landing topic into the Iceberg tables, exactly once
across SIGKILLs, on local Spark and on a Spark standalone cluster.

A one-node Apache Kafka 4.4.0 broker holds a three-partition landing topic; the records
are produced by the collector's own producer (exporters/kafka_topic/landing.py).  Rounds
land new pushes and run `ktc ingest --once` on the topic, SIGKILLed (with its JVM) at a
random point of a random batch: a named failpoint, or a timer a random number of
milliseconds into the batch's writes and commits (exporters/lakehouse/failpoints.py).
Once the kill budget is spent a last run completes, and every table must hold every
produced push's rows exactly once: per client instance id (one per push), the row count
its push flattens to, no more and no less.

The standalone run starts a master and a worker with PySpark's ``spark-class``; its
batches must say (``flattened_by``) that executor processes flattened the records, not
the driver.

The seed is printed (and in every assertion message); ``KTC_RANDOM_SEED=N`` replays it,
``KTC_TOPIC_KILLS`` sets the local run's budget (default 5),
``KTC_TOPIC_STANDALONE_KILLS`` the standalone run's (default 2).
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporters.lakehouse.failpoints import POINTS
from exporters.lakehouse.session import LakehouseConfig
from tests.lakehouse.conftest import SPARK_TEST_CONF, require_topic_ingest
from tests.lakehouse.topic_cluster import (
    REPO,
    KafkaCluster,
    StandaloneCluster,
    create_topic,
    expected_rows,
    held_rows,
    ingest_topic_argv,
    landing_push,
    produce,
)

KILLS = int(os.environ.get("KTC_TOPIC_KILLS", "5"))
# A standalone run costs about twice a local one (the application's executor starts for
# each): CI's budget there is smaller; KTC_TOPIC_STANDALONE_KILLS=5 for the full run.
STANDALONE_KILLS = int(os.environ.get("KTC_TOPIC_STANDALONE_KILLS", "2"))
PARTITIONS = 3
PUSHES_PER_ROUND = 9
TABLES_WITH_ROWS = 6  # sample_metrics_data fills every point table, and pushes
pytestmark = [
    pytest.mark.spark,
    pytest.mark.timeout(900 + 150 * (KILLS + STANDALONE_KILLS)),
]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    require_topic_ingest()
    cluster = KafkaCluster(
        nodes=1, work_dir=tmp_path_factory.mktemp("topic-kafka"), heap="384m"
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    # Two cores: a killed driver's executor may still hold one while the next starts.
    with StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), cores=2) as c:
        yield c


def _kill_spec(rng: random.Random) -> str:
    point = rng.choice(POINTS)
    batch = rng.randint(1, 2)
    if point == "mid_write":
        return f"mid_write:{rng.randint(1, TABLES_WITH_ROWS)}@{batch}"
    if point == "during_write":
        return f"during_write:{rng.randint(0, 3000)}@{batch}"
    return f"{point}@{batch}"


def _ingest(
    argv: list[str], kill_at: str | None
) -> tuple[subprocess.CompletedProcess[str], int]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("KTC_LAKEHOUSE_KILL_AT", None)
    if kill_at:
        env["KTC_LAKEHOUSE_KILL_AT"] = kill_at
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the failpoint kills the process group
    )
    stdout, stderr = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr), proc.pid


def _run_with_kills(
    spark,
    lake: Path,
    kafka: KafkaCluster,
    name: str,
    master: str,
    extra: list[str],
    budget: int,
) -> list[dict[str, Any]]:
    """The rounds of landing, killed ingests and a last complete one; asserts exactly
    once; returns the last run's batches."""
    seed = int(os.environ.get("KTC_RANDOM_SEED") or random.randrange(1 << 32))
    print(f"topic ingest on {master}: seed {seed}, budget {budget} kills", flush=True)
    rng = random.Random(seed)
    bootstrap = kafka.bootstrap_servers()
    settings = create_topic(bootstrap, name, PARTITIONS)
    config = LakehouseConfig(lake, database=name, extra_conf=SPARK_TEST_CONF)
    pushes: list[tuple[object, bytes]] = []
    kills: collections.Counter[str] = collections.Counter()
    rounds = 0
    while sum(kills.values()) < budget:
        rounds += 1
        assert rounds <= 4 * budget, f"seed {seed}: {kills} kills in {rounds} rounds"
        new = [landing_push(len(pushes) + i, name) for i in range(PUSHES_PER_ROUND)]
        produce(settings, new)
        pushes.extend(new)
        spec = _kill_spec(rng)
        per_batch = rng.randint(2, 5)
        started = time.monotonic()
        done, _ = _ingest(
            ingest_topic_argv(
                lake,
                name,
                bootstrap,
                name,
                master=master,
                extra=[*extra, "--max-records-per-batch", str(per_batch)],
            ),
            spec,
        )
        assert done.returncode in (-signal.SIGKILL, 0), (
            f"seed {seed}, round {rounds}, {spec}: {done.stderr[-3000:]}"
        )
        if done.returncode == -signal.SIGKILL:
            kills[spec.split("@")[0].split(":")[0]] += 1
        print(
            f"round {rounds}: {spec}, {per_batch} records per partition and batch -> "
            f"{done.returncode} in {time.monotonic() - started:.0f} s; "
            f"{sum(kills.values())} kills so far",
            flush=True,
        )

    last = [landing_push(len(pushes) + i, name) for i in range(PUSHES_PER_ROUND)]
    produce(settings, last)
    pushes.extend(last)
    done, pid = _ingest(
        ingest_topic_argv(lake, name, bootstrap, name, master=master, extra=extra),
        None,
    )
    assert done.returncode == 0, f"seed {seed}: {done.stderr[-3000:]}"
    batches = [json.loads(line) for line in done.stdout.splitlines()]
    assert batches, f"seed {seed}: the last run ingested nothing"
    for batch in batches:
        assert all(f":{pid} " not in by for by in batch["flattened_by"]), batch

    held = held_rows(spark, config)
    expected = expected_rows(pushes)
    for table in expected:
        doubled = {
            k: n
            for k, n in held.get(table, {}).items()
            if n > expected[table].get(k, 0)
        }
        missing = set(expected[table]) - set(held.get(table, {}))
        assert not doubled and not missing, (
            f"seed {seed}, {table}: {len(doubled)} pushes with extra rows "
            f"{sorted(doubled)[:3]}, {len(missing)} missing {sorted(missing)[:3]}"
        )
    assert held == expected, f"seed {seed}"
    print(
        f"{len(pushes)} pushes in {rounds} rounds, kills {dict(kills)}: every row "
        "exactly once",
        flush=True,
    )
    return batches


def test_topic_ingest_exactly_once_across_kills_on_local_spark(
    spark, spark_lake, kafka: KafkaCluster
) -> None:
    batches = _run_with_kills(
        spark, spark_lake[1], kafka, "topic_local", "local[2]", [], KILLS
    )
    # local mode: the tasks run in the driver's JVM, the Python workers under it
    assert all(
        by.endswith(" executor driver") for b in batches for by in b["flattened_by"]
    ), batches


def test_topic_ingest_exactly_once_across_kills_on_a_standalone_cluster(
    spark, spark_lake, kafka: KafkaCluster, standalone: StandaloneCluster
) -> None:
    batches = _run_with_kills(
        spark,
        spark_lake[1],
        kafka,
        "topic_standalone",
        standalone.master_url,
        standalone.driver_conf(executors=1),
        STANDALONE_KILLS,
    )
    # The records were flattened by Python workers of an executor the worker started.
    flattened_by = {by for b in batches for by in b["flattened_by"]}
    assert flattened_by and all(
        by.rsplit(" ", 1)[1].isdigit() for by in flattened_by
    ), flattened_by


def test_topic_ingest_command_errors_are_one_line(spark_lake, tmp_path: Path) -> None:
    """Half a topic source is a usage error: one line, exit 2."""
    half = subprocess.run(
        [
            *ingest_topic_argv(tmp_path, "x", "127.0.0.1:1", "t", master="local[1]")[
                :4
            ],
            "--kafka-topic",
            "t",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert half.returncode == 2, half.stderr
    assert "--kafka-topic and --kafka-bootstrap-servers go together" in half.stderr
    assert "Traceback" not in half.stderr
