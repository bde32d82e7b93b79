"""A Kafka Streams 4.4.0 application as one thing: a word count with 2 stream threads and a
count store (tests/prometheus/java/TelemetryStreams.java, ``make streams-libs``) through
``ktc gateway`` in front of the real 3-node Kafka 4.4.0 cluster, subscribed to
the state and thread-count metrics; after ``ktc ingest``, the lakehouse view ``applications`` holds
its process (state by name, alive and failed threads) and its two threads (states by
name), each equal to the last value the landing log holds once it has closed, on both
engines.  While it runs, ``GET /v1/applications`` shows it as one application of kind
streams: its state by name, its process, both threads by name, and its admin client, thread
consumers and producers (and restore consumers) as its instances."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from collector.app.cli.clients import fetch_applications
from exporters.lakehouse.session import LakeLibsMissing, lake_jars
from exporters.landing import LandingRecord
from proto.streams_states import (
    CLIENT_STATE_METRIC,
    KAFKA_STREAMS_STATES,
    STREAM_THREAD_STATES,
    THREAD_STATE_METRIC,
    state_name,
)
from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway, wait_for
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.ktc_process import ktc

pytestmark = [pytest.mark.gateway, pytest.mark.spark, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
STREAMS_APP = REPO / "tests" / "prometheus" / "java" / "TelemetryStreams.java"
ALIVE = "org.apache.kafka.stream.alive.stream.threads"
FAILED = "org.apache.kafka.stream.failed.stream.threads"


def need(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def streams_libs() -> str:
    libs = Path(os.environ.get("KTC_STREAMS_LIBS", ""))
    if not (libs / "kafka-streams-4.4.0.jar").is_file():
        need("needs kafka-streams 4.4.0 (make streams-libs)")
    try:
        lake_jars()
    except LakeLibsMissing as exc:
        need(str(exc))
    return str(libs)


def state_points(records: list[LandingRecord]) -> dict[tuple[str, str], float]:
    """(series, thread id or "") -> the last value landed, for the state and alive metrics
    (landing order is push order)."""
    last: dict[tuple[str, str], float] = {}
    for record in records:
        data = MetricsData.FromString(record.payload)
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name not in (
                        CLIENT_STATE_METRIC,
                        THREAD_STATE_METRIC,
                        ALIVE,
                    ):
                        continue
                    for point in metric.gauge.data_points:
                        attributes = {
                            a.key: a.value.string_value for a in point.attributes
                        }
                        value = (
                            point.as_double
                            if point.WhichOneof("value") == "as_double"
                            else float(point.as_int)
                        )
                        last[(metric.name, attributes.get("thread_id", ""))] = value
    return last


@contextmanager
def streams_app(bootstrap: str, app: str, work: Path) -> Iterator[None]:
    """The word count of ``app`` (topics created first) until the block ends; then it
    closes, with its terminating pushes."""
    libs = streams_libs()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in (f"{app}-words", f"{app}-counts"):
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(60)
    process = subprocess.Popen(
        [
            "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work}", "-cp", f"{libs}/*", str(STREAMS_APP),
            "--bootstrap", bootstrap, "--application-id", app,
            "--input", f"{app}-words", "--output", f"{app}-counts",
            "--threads", "2", "--recording-level", "INFO",
        ],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("KTC running"), line
        yield
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(90)


def live_application(gateway: RunningGateway, app: str) -> dict[str, Any] | None:
    """``app`` on ``GET /v1/applications`` once its process and both threads say RUNNING
    and its admin, both thread consumers and producers are among its instances."""
    assert gateway.server is not None
    answer = fetch_applications(f"http://127.0.0.1:{gateway.server.http_port}", None)
    mine = [a for a in answer["applications"] if a["application_id"] == app]
    if len(mine) != 1:
        return None
    [found] = mine
    roles = sorted(i["role"] for i in found["instances"])
    steady = (
        found["state"] == "RUNNING"
        and [t["state"] for t in found["threads"]] == ["RUNNING", "RUNNING"]
        and roles.count("consumer") == 2
        and roles.count("producer") == 2
        and "admin" in roles
    )
    return found if steady else None


def assert_live_application(
    found: dict[str, Any], app: str, landed: list[LandingRecord]
) -> None:
    """One application of kind streams, state by name, one process, two threads by name,
    and its instances: the very instances whose pushes landed under those client ids."""
    assert (found["application_id"], found["kind"], found["state"]) == (
        app,
        "streams",
        "RUNNING",
    )
    [process] = found["processes"]
    assert process["state"] == "RUNNING" and process["state_value"] == 2
    assert process["alive_stream_threads"] == 2
    assert process["failed_stream_threads"] == 0
    prefix = f"{app}-{process['process_id']}"
    assert [
        (t["process_id"], t["thread_id"], t["state"]) for t in found["threads"]
    ] == [
        (process["process_id"], f"{prefix}-StreamThread-{n}", "RUNNING") for n in (1, 2)
    ]
    by_client_id = {i["client_id"]: i for i in found["instances"]}
    expected = {
        f"{prefix}-admin": "admin",
        **{f"{prefix}-StreamThread-{n}-consumer": "consumer" for n in (1, 2)},
        **{f"{prefix}-StreamThread-{n}-producer": "producer" for n in (1, 2)},
    }
    for client_id, role in expected.items():
        assert by_client_id[client_id]["role"] == role, client_id
        assert by_client_id[client_id]["process_id"] == process["process_id"]
    # Every instance of the process is in it (restore consumers too), none twice.
    assert len(by_client_id) == len(found["instances"])
    assert all(c.startswith(f"{prefix}-") for c in by_client_id)
    for record in landed:
        entry = by_client_id.get(record.context.client_id or "")
        if entry is not None and record.context.client_id in expected:
            assert entry["client_instance_id"] == record.context.client_instance_id


def test_a_streams_application_is_one_row_per_process_and_thread(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "streams",
        {
            # What the view reads (a Streams process pushes some 500 series a second
            # under the whole org.apache.kafka.stream. prefix; the ingest need not).
            "metrics": ",".join(
                (CLIENT_STATE_METRIC, THREAD_STATE_METRIC, ALIVE, FAILED)
            ),
            "interval.ms": "1000",
        },
        [],
    )
    app = f"wordcount-{uuid.uuid4().hex[:8]}"
    with RunningGateway(data_dir, kafka_cluster.bootstrap_servers()) as gateway:
        with streams_app(gateway.bootstrap, app, tmp_path):

            def running() -> dict[tuple[str, str], float] | None:
                last = state_points(gateway.landed())
                threads = [k for k in last if k[0] == THREAD_STATE_METRIC]
                process_running = last.get((CLIENT_STATE_METRIC, "")) == 2.0
                threads_running = len(threads) == 2 and all(
                    last[k] == 4.0 for k in threads
                )
                return last if process_running and threads_running else None

            wait_for(
                running, timeout_s=120, what="the process and both threads RUNNING"
            )
            live = wait_for(
                lambda: live_application(gateway, app),
                timeout_s=60,
                what="/v1/applications: the application, its process and threads RUNNING",
            )
            live_landed = gateway.landed()
        landed = gateway.landed()  # with the terminating pushes
        assert_live_application(live, app, live_landed)
    last = state_points(landed)

    ingest = ktc(
        "ingest", "--once", "--data-dir", str(data_dir), "--master", "local[1]"
    )
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    query = (
        "SELECT kind, application_id, process_id, thread_id, state, rebalancing,"
        " alive_stream_threads, failed_stream_threads, client_id"
        f" FROM applications WHERE application_id = '{app}'"
    )
    by_engine: dict[str, list[dict[str, Any]]] = {}
    for engine in ("duckdb", "spark"):
        sql = ktc(
            "sql", query, "--format", "json", "--engine", engine,
            "--data-dir", str(data_dir), "--master", "local[1]",
        )  # fmt: skip
        assert sql.returncode == 0, sql.stderr[-3000:]
        by_engine[engine] = sorted(
            (json.loads(line) for line in sql.stdout.splitlines()),
            key=lambda row: row["thread_id"] or "",
        )
    rows = by_engine["duckdb"]
    assert rows == by_engine["spark"]

    process, *threads = rows
    assert process["kind"] == "streams" and process["thread_id"] is None
    assert process["client_id"].endswith("-admin")
    assert process["state"] == state_name(
        KAFKA_STREAMS_STATES, last[(CLIENT_STATE_METRIC, "")]
    )
    assert process["alive_stream_threads"] == last[(ALIVE, "")]
    # 2 while it ran (the live view above saw it); an admin push that falls within the close
    # lands PENDING_SHUTDOWN, with the threads stopping or stopped (measured: 0).
    if process["state"] == "RUNNING":
        assert last[(ALIVE, "")] == 2
    else:
        assert process["state"] == "PENDING_SHUTDOWN" and last[(ALIVE, "")] in (0, 1, 2)
    assert process["failed_stream_threads"] == 0
    assert len(threads) == 2
    assert threads[0]["thread_id"].endswith("-StreamThread-1")
    assert threads[1]["thread_id"].endswith("-StreamThread-2")
    for thread in threads:
        assert thread["process_id"] == process["process_id"]
        assert thread["client_id"].endswith("-consumer")
        assert thread["state"] == state_name(
            STREAM_THREAD_STATES, last[(THREAD_STATE_METRIC, thread["thread_id"])]
        )
        assert thread["state"] in STREAM_THREAD_STATES
    assert any((record.context.client_id or "").endswith("-admin") for record in landed)
