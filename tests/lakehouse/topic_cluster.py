"""What the topic-ingest tests and benchmark share: a one-node Apache Kafka 4.4.0 broker
(the gateway tests' harness), landing records produced by the collector's own producer
(exporters/kafka_topic/landing.py), a Spark standalone master and worker started with
PySpark's ``spark-class``, and the ``ktc ingest`` command line for the topic."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from exporters.kafka_topic.landing import TopicLanding
from exporters.kafka_topic.settings import TopicSettings
from exporters.kafka_topic.topic import ensure_topic
from exporters.lakehouse.flatten import PointRowsBuilder
from exporters.lakehouse.schema import TABLES
from exporters.lakehouse.session import LakehouseConfig
from tests.lakehouse.lakehouse_otlp import make_context, sample_metrics_data

REPO = Path(__file__).resolve().parents[2]

from tests.gateway.harness.kafka_cluster import KafkaCluster, missing_prerequisites  # noqa: E402
from tests.waiting import eventually_sync  # noqa: E402

__all__ = [
    "KafkaCluster",
    "StandaloneCluster",
    "create_topic",
    "expected_rows",
    "held_rows",
    "ingest_topic_argv",
    "landing_push",
    "missing_prerequisites",
    "produce",
]


def create_topic(bootstrap: str, topic: str, partitions: int) -> TopicSettings:
    settings = TopicSettings(
        topic=topic,
        client={"bootstrap.servers": bootstrap},
        partitions=partitions,
        replication_factor=1,
    )
    ensure_topic(settings)
    return settings


def landing_push(index: int, tag: str = "t") -> tuple[object, bytes]:
    """The ``index``-th push: a unique client instance id, received now (the broker's
    time retention deletes records stamped more than seven days ago)."""
    context = make_context(
        client_instance_id=f"{tag}{index:021d}"[-22:],
        received_time_unix_nano=time.time_ns(),
    )
    return context, sample_metrics_data(index).SerializeToString()


def produce(settings: TopicSettings, pushes: Sequence[tuple[object, bytes]]) -> None:
    """Lands ``pushes`` on the topic as ``ktc serve`` does; returns once every record
    has its delivery report (fails if one did not land)."""

    async def run() -> None:
        landing = TopicLanding(
            settings, asyncio.get_running_loop(), refusal=lambda cause, _: cause
        )
        try:
            for context, payload in pushes:
                result = landing.export(context, payload)  # type: ignore[arg-type]
                assert result.ok, result
            waiter = landing.pending_delivery()
            if waiter is not None:
                await waiter
        finally:
            landing.close()
        assert landing.records_delivered == len(pushes)

    asyncio.run(run())


def ingest_topic_argv(
    lake_dir: Path,
    database: str,
    bootstrap: str,
    topic: str,
    *,
    master: str,
    once: bool = True,
    extra: Sequence[str] = (),
) -> list[str]:
    """``ktc ingest`` of a topic into a test lake on ``master``."""
    argv = [sys.executable, "-m", "exporters.lakehouse", "ingest"]
    if once:
        argv.append("--once")
    return [
        *argv,
        "--kafka-bootstrap-servers",
        bootstrap,
        "--kafka-topic",
        topic,
        "--lake-dir",
        str(lake_dir),
        "--database",
        database,
        "--master",
        master,
        "--conf",
        "spark.sql.shuffle.partitions=1",
        *extra,
    ]


def expected_rows(pushes: list[tuple[object, bytes]]) -> dict[str, dict[str, int]]:
    """Per table, per client instance id, the rows its push flattens to."""
    expected: dict[str, dict[str, int]] = collections.defaultdict(dict)
    for context, payload in pushes:
        builder = PointRowsBuilder()
        builder.add_payload(payload, context, "x", 0)  # type: ignore[arg-type]
        for kind, table in builder.finish().items():
            name = "pushes" if kind == "pushes" else f"metrics_{kind}"
            if table.num_rows:
                expected[name][context.client_instance_id] = table.num_rows  # type: ignore[attr-defined]
    return expected


def held_rows(spark, config: LakehouseConfig) -> dict[str, dict[str, int]]:
    held = {}
    for table in TABLES:
        rows = spark.sql(
            f"SELECT client_instance_id AS id, count(*) AS n "
            f"FROM {config.table(table.name)} GROUP BY client_instance_id"
        ).collect()
        held[table.name] = {r["id"]: r["n"] for r in rows if r["n"]}
    return {name: rows for name, rows in held.items() if rows}


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class StandaloneCluster:
    """A Spark standalone master and one worker (``cores`` cores) on 127.0.0.1, started
    with PySpark's own ``bin/spark-class``; ``stop`` kills both."""

    def __init__(self, work_dir: Path, cores: int = 2, memory: str = "2g") -> None:
        self.work_dir = work_dir
        self.cores = cores
        self.memory = memory
        self.master_url = ""
        self._procs: list[subprocess.Popen[bytes]] = []

    def _spawn(self, name: str, *args: str) -> Path:
        log = self.work_dir / f"{name}.log"
        env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1")
        with log.open("wb") as out:
            self._procs.append(
                subprocess.Popen(
                    [str(spark_home() / "bin" / "spark-class"), *args],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        return log

    def start(self) -> StandaloneCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        master_log = self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
        )

        def master_started() -> bool:
            found = re.search(
                r"Starting Spark master at (spark://\S+)", _text(master_log)
            )
            if found:
                self.master_url = found.group(1)
            return found is not None

        eventually_sync(master_started, timeout_s=60, what="the Spark master")
        worker_log = self._spawn(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
            *("--cores", str(self.cores), "--memory", self.memory),
            *("--work-dir", str(self.work_dir / "work")),
        )
        eventually_sync(
            lambda: "Successfully registered with master" in _text(worker_log),
            timeout_s=60,
            what="the Spark worker registered",
        )
        return self

    def stop(self) -> None:
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait()
        self._procs.clear()

    def driver_conf(self, executors: int = 1) -> list[str]:
        """``--conf`` arguments of a driver on this cluster with ``executors`` one-core
        executors."""
        conf = {
            "spark.driver.host": "127.0.0.1",
            "spark.executor.cores": "1",
            "spark.cores.max": str(executors),
            "spark.executor.memory": "768m",
        }
        return [arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}")]

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


@contextlib.contextmanager
def one_node_kafka(work_dir: Path) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(nodes=1, work_dir=work_dir, heap="384m")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
