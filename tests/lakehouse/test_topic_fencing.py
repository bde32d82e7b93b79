"""Several `ktc ingest --kafka-topic` on one topic land every record once, and the
topic's offsets at their edges, against a real Apache Kafka 4.4.0 broker and real
`ktc ingest` processes on local Spark.

The race is forced, not hoped for: each ingest pauses at named failpoints
(``KTC_LAKEHOUSE_PAUSE_AT``, exporters/lakehouse/failpoints.py) on a FIFO the test
opens when it wants the process to go on.  Both ingests read the topic and plan the same
range from the same (empty) tables; the first commits every point table and stops
before ``pushes``; the second goes on, finds its first table moved (fenced), plans
again and completes the first's batch with the ``pushes`` append alone; the first goes
on, finds ``pushes`` moved, plans again and finds nothing new.  Every table must hold
every push's rows exactly once.

Then the edges, on the same topic: records deleted by ``DeleteRecords`` before they
were ingested (a counted, logged gap), and the topic deleted and created again with
fewer records than were ingested (a one-line refusal).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from exporters.lakehouse.session import LakehouseConfig
from tests.lakehouse.conftest import SPARK_TEST_CONF, require_topic_ingest
from tests.lakehouse.topic_cluster import (
    REPO,
    KafkaCluster,
    create_topic,
    expected_rows,
    held_rows,
    ingest_topic_argv,
    landing_push,
    produce,
)
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]
TOPIC = "fenced"
PARTITIONS = 3
PUSHES = 87  # the measurement: two unfenced ingests left 174 pushes rows


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    require_topic_ingest()
    cluster = KafkaCluster(
        nodes=1, work_dir=tmp_path_factory.mktemp("fence-kafka"), heap="384m"
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


class _Paused:
    """A `ktc ingest --once` that pauses at ``points`` (each in its first batch)."""

    def __init__(self, argv: list[str], work: Path, points: tuple[str, ...]) -> None:
        self.work = work
        work.mkdir()
        for point in points:
            os.mkfifo(work / f"{point}.go")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        env.pop("KTC_LAKEHOUSE_KILL_AT", None)
        env["KTC_LAKEHOUSE_PAUSE_AT"] = ",".join(f"{p}@1" for p in points)
        env["KTC_LAKEHOUSE_PAUSE_DIR"] = str(work)
        self.proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def wait_paused(self, point: str) -> None:
        eventually_sync(
            lambda: (
                (self.work / f"{point}.reached").exists()
                or self.proc.poll() is not None
            ),
            timeout_s=300,
            what=f"{self.work.name} at {point}",
        )
        assert self.proc.poll() is None, self.finish()

    def go(self, point: str) -> None:
        with open(self.work / f"{point}.go", "wb") as fifo:
            fifo.write(b"go")

    def finish(self) -> subprocess.CompletedProcess[str]:
        stdout, stderr = self.proc.communicate(timeout=300)
        return subprocess.CompletedProcess(
            self.proc.args, self.proc.returncode, stdout, stderr
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()


def _watermarks(bootstrap: str) -> dict[int, tuple[int, int]]:
    """Each partition's (earliest, latest) offsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ktc-watermarks"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def _ingest(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("KTC_LAKEHOUSE_KILL_AT", None)
    env.pop("KTC_LAKEHOUSE_PAUSE_AT", None)
    return subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=400
    )


def _assert_once(spark, config: LakehouseConfig, pushes) -> None:
    held = held_rows(spark, config)
    expected = expected_rows(pushes)
    doubled = {
        t: sum(n > expected[t].get(k, 0) for k, n in held.get(t, {}).items())
        for t in expected
    }
    assert held == expected, f"pushes with extra rows per table: {doubled}"


def test_two_ingests_racing_on_one_topic_land_each_record_once_and_the_edges(
    spark, spark_lake, kafka: KafkaCluster, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers()
    settings = create_topic(bootstrap, TOPIC, PARTITIONS)
    pushes = [landing_push(i, "f") for i in range(PUSHES)]
    produce(settings, pushes)
    lake = spark_lake[1]
    config = LakehouseConfig(lake, database="fenced", extra_conf=SPARK_TEST_CONF)
    argv = ingest_topic_argv(lake, config.database, bootstrap, TOPIC, master="local[1]")

    first = _Paused(argv, tmp_path / "first", ("after_read", "before_pushes"))
    second = _Paused(argv, tmp_path / "second", ("after_read",))
    try:
        # Both read the topic and the (empty) tables: the same plan.
        first.wait_paused("after_read")
        second.wait_paused("after_read")
        # The first commits every point table, then stops before pushes.
        first.go("after_read")
        first.wait_paused("before_pushes")
        # The second's first append is fenced: planned again, it appends pushes only.
        second.go("after_read")
        done_second = second.finish()
        # The first's pushes append is fenced: planned again, nothing is new.
        first.go("before_pushes")
        done_first = first.finish()
    finally:
        first.kill()
        second.kill()
    assert done_second.returncode == 0, done_second.stderr[-3000:]
    assert done_first.returncode == 0, done_first.stderr[-3000:]
    _assert_once(spark, config, pushes)
    for done in (done_first, done_second):
        fenced = [
            line
            for line in done.stderr.splitlines()
            if "another ingest committed" in line
        ]
        assert len(fenced) == 1, done.stderr[-3000:]
        assert fenced[0].endswith(": planning the batch again"), fenced
        assert "Traceback" not in done.stderr
    (completing,) = [line for line in done_second.stdout.splitlines() if line]
    assert '"replayed": true' in completing and '"pushes": 87' in completing
    assert done_first.stdout == ""

    # A retention gap: six records land, and of each partition that got two or more,
    # all but the last are deleted before an ingest reads them.
    ingested = {p: high for p, (_, high) in _watermarks(bootstrap).items()}
    gap = [landing_push(PUSHES + i, "f") for i in range(6)]
    produce(settings, gap)
    landed = {p: high for p, (_, high) in _watermarks(bootstrap).items()}
    deleted = {p: landed[p] - 1 for p in landed if landed[p] - ingested[p] >= 2}
    assert deleted, (ingested, landed)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deleting = admin.delete_records(
        [TopicPartition(TOPIC, p, offset) for p, offset in deleted.items()]
    )
    for future in deleting.values():
        future.result(timeout=60)
    after_gap = _ingest(argv)
    assert after_gap.returncode == 0, after_gap.stderr[-3000:]
    lost = 0
    for p, offset in deleted.items():
        lost += offset - ingested[p]
        line = (
            f"kafka:{TOPIC}:{p}: offsets {ingested[p]}-{offset} "
            f"({offset - ingested[p]} records) were deleted by the topic's retention "
            f"before they were ingested; ingesting from {offset}"
        )
        assert line in after_gap.stderr, after_gap.stderr[-3000:]
    held = held_rows(spark, config)
    expected = expected_rows(pushes + gap)
    assert len(held["pushes"]) == PUSHES + len(gap) - lost
    for table, rows in held.items():
        assert all(expected[table][k] == n for k, n in rows.items()), table

    # The topic deleted and created again, with fewer records than were ingested.
    admin.delete_topics([TOPIC])[TOPIC].result(timeout=60)
    eventually_sync(
        lambda: TOPIC not in admin.list_topics(timeout=10).topics,
        timeout_s=60,
        what="the topic deleted",
    )
    settings = create_topic(bootstrap, TOPIC, PARTITIONS)
    produce(settings, [landing_push(1000, "f")])
    recreated = _ingest(argv)
    assert recreated.returncode == 1, recreated.stderr[-3000:]
    (error,) = [line for line in recreated.stderr.splitlines() if "Error" in line]
    assert "the topic was created again (or its log truncated)" in error, error
    assert "Traceback" not in recreated.stderr
