"""Many replicas, one cluster: ``ktc gateway`` replicas as real processes
(replica_processes.py) in front of the three-node Apache Kafka 4.4.0 cluster, their
subscriptions in the cluster, what they accept on one topic; replicas and brokers SIGKILLed.

* a librdkafka client whose replica is SIGKILLed moves to another through its bootstrap
  list (rebootstrap) and keeps pushing under the same client instance id, subscription id
  and interval, and no push of it is rejected on either replica (a Kafka broker computes
  the same subscription id for the instance, so Kafka rejects none either);
* under a load of pushes (the project's wire client, each push's answer recorded), one
  replica and one broker SIGKILLed after a set number of answered pushes: every push
  answered 0 is in the topic exactly once, as it was pushed; then ``ktc ingest --once``
  reads the topic (Spark's Kafka source) and every one of them is in the Iceberg tables
  exactly once (read with pyiceberg).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from proto import ApiKeys
from proto.errors import Errors
from proto.messages import (
    ApiVersionsRequest,
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
)

# The project's wire client (tests/collector), after everything of this directory.
from tests.collector.wire_client import WireClient
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.replica_processes import KTC, ReplicaFleet, ReplicaProcess
from tests.gateway.topic_reader import read_topic
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(600)]

PRODUCER_METRICS = "org.apache.kafka.producer."
T = TypeVar("T")


def ktc_subscriptions(*args: str) -> None:
    done = subprocess.run(
        [str(KTC), "subscriptions", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def subscribe(cluster: str, name: str, match: str, interval_ms: int) -> None:
    """A subscription altered at the cluster (every replica reads it from there)."""
    ktc_subscriptions(
        "alter",
        "--bootstrap-server",
        cluster,
        "--name",
        name,
        "--metrics",
        PRODUCER_METRICS,
        "--interval",
        str(interval_ms),
        "--match",
        match,
    )


def serves_interval(replica: ReplicaProcess, client_id: str, interval_ms: int) -> bool:
    return interval_served(replica, client_id) == interval_ms


def interval_served(replica: ReplicaProcess, client_id: str) -> int | None:
    """The push interval a new instance with ``client_id`` is given by ``replica``."""

    async def ask() -> int | None:
        client = await WireClient.connect(replica.port, client_id=client_id)
        try:
            answer = await client.request(
                ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
                0,
                GetTelemetrySubscriptionsRequest(),
            )
        finally:
            await client.close()
        if answer.error_code != Errors.NONE or not answer.requested_metrics:
            return None
        return int(answer.push_interval_ms)

    return asyncio.run(ask())


def context_of(message: Any) -> dict[str, Any]:
    """The record's context header (docs/landing-log.md, "Telemetry on a Kafka topic")."""
    headers = dict(message.headers())
    assert headers["ktc.format"] == b"1"
    context: dict[str, Any] = json.loads(headers["ktc.context"])
    return context


def value_of(probe: Callable[[], T | None], *, timeout_s: float, what: str) -> T:
    """``eventually_sync`` that returns the probe's first truthy value."""
    found: list[T] = []

    def probed() -> bool:
        value = probe()
        if value:
            found.append(value)
        return bool(value)

    eventually_sync(probed, timeout_s=timeout_s, what=what)
    return found[0]


def topic_durability(bootstrap: str, topic: str) -> tuple[int, str]:
    """(replication factor, min.insync.replicas) of ``topic``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(topic, timeout=30)
    replicas = {len(p.replicas) for p in metadata.topics[topic].partitions.values()}
    assert len(replicas) == 1, replicas
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    return replicas.pop(), configs["min.insync.replicas"].value


@pytest.fixture
def cluster(kafka_cluster: KafkaCluster) -> Iterator[KafkaCluster]:
    """The session's cluster, every node running again after the test."""
    try:
        yield kafka_cluster
    finally:
        kafka_cluster.ensure_running()


# ------------------------------------------------------------------ a client moved


class TelemetryLog(logging.Handler):
    """librdkafka's telemetry debug lines (``debug: telemetry``), as the client logged."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_client_moved_to_another_replica_keeps_its_subscription(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    client_id = f"moved-{uuid.uuid4().hex[:6]}"
    subscribe(
        cluster.bootstrap_servers(), f"sub-{client_id}", f"client_id={client_id}", 1000
    )
    topic = f"telemetry-moved-{uuid.uuid4().hex[:8]}"
    with ReplicaFleet(tmp_path, cluster.bootstrap_servers(), topic) as fleet:
        for replica in fleet:
            eventually_sync(
                functools.partial(serves_interval, replica, client_id, 1000),
                timeout_s=15,
                what=f"{replica.name} serving the cluster's subscription",
            )
        log = TelemetryLog()
        logger = logging.getLogger(f"librdkafka.{client_id}")
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(log)
        producer = Producer(
            {
                "bootstrap.servers": fleet.bootstrap,
                "client.id": client_id,
                # Without metadata from any broker for 1 s, back to the bootstrap list
                # (librdkafka's default waits 5 minutes).
                "metadata.recovery.rebootstrap.trigger.ms": 1000,
                "debug": "telemetry",
                "logger": logger,
            }
        )

        def instance_on(replica: ReplicaProcess) -> dict[str, Any] | None:
            producer.poll(0.05)
            if not replica.running:
                return None
            entries = replica.clients(client_id=client_id)
            assert len(entries) <= 1, entries
            return entries[0] if entries and entries[0]["pushes_accepted"] else None

        try:
            first, old = value_of(
                lambda: next(
                    (
                        (replica, entry)
                        for replica in fleet
                        if (entry := instance_on(replica))
                        and entry["pushes_accepted"] >= 3
                    ),
                    None,
                ),
                timeout_s=60,
                what="three pushes accepted by the client's replica",
            )
            old = instance_on(first) or old  # its counters at the kill
            first.kill()
            killed_ns = time.time_ns()
            killed_at = time.monotonic()
            others = [replica for replica in fleet if replica is not first]
            second, new = value_of(
                lambda: next(
                    (
                        (replica, entry)
                        for replica in others
                        if (entry := instance_on(replica))
                        and entry["pushes_accepted"] >= 4
                    ),
                    None,
                ),
                timeout_s=90,
                what="four pushes of the moved client accepted by another replica",
            )
            moved_s = time.monotonic() - killed_at
        finally:
            producer.flush(5)
    assert new["client_instance_id"] == old["client_instance_id"]
    assert new["subscription_id"] == old["subscription_id"]
    assert new["push_interval_ms"] == old["push_interval_ms"] == 1000
    # No push of this client was rejected, before or after the move.
    assert old["errors"] == {} and new["errors"] == {}, (old["errors"], new["errors"])
    assert old["throttles"] == new["throttles"] == 0

    # The topic: one instance, one subscription, one interval; pushes after the move at
    # the interval.
    records = [
        context_of(m)
        for m in read_topic(cluster.bootstrap_servers(), topic)
        if context_of(m)["client_id"] == client_id
    ]
    assert {r["client_instance_id"] for r in records} == {old["client_instance_id"]}
    assert {r["subscription_id"] for r in records} == {old["subscription_id"]}
    assert {r["push_interval_ms"] for r in records} == {1000}
    moved = sorted(
        r["received_time_unix_nano"] / 1e6
        for r in records
        if r["received_time_unix_nano"] > killed_ns
    )
    assert len(moved) >= 4
    gap = statistics.median(b - a for a, b in itertools.pairwise(moved))
    assert 700 <= gap <= 1600, moved
    # The client's own account (librdkafka's telemetry debug lines): it asked once on each
    # replica and got the same instance and subscription back; every push it sent
    # succeeded (but the last, perhaps still in flight, and the one in flight at the kill).
    said = list(log.lines)
    (tmp_path / "librdkafka-telemetry.log").write_text("\n".join(said))
    asked = re.findall(r"Parsing: subscription id (-?\d+)", "\n".join(said))
    assert [int(s) for s in asked] == [old["subscription_id"]] * 2, asked
    # librdkafka prints the id in standard base64; Kafka's Uuid.toString (and so the
    # collector) in the URL-safe alphabet.
    instances = [
        printed.replace("+", "-").replace("/", "_")
        for printed in re.findall(r"Parsing: client instance id (\S+)", "\n".join(said))
    ]
    assert instances == [old["client_instance_id"]] * 2, instances
    assert any("Starting re-bootstrap sequence" in line for line in said)
    sent = sum("Sending PushTelemetryRequest" in line for line in said)
    succeeded = sum("PushTelemetryRequest succeeded" in line for line in said)
    # The push in flight when its replica was SIGKILLed may be lost with the connection
    # (librdkafka: "Local: Broker transport failure"): a lost answer, not a refusal. No
    # replica answered a push with an error.
    failed = [
        line for line in said if "PushTelemetry" in line and "fail" in line.lower()
    ]
    lost = [line for line in failed if "Local: Broker transport failure" in line]
    assert failed == lost and len(lost) <= 1, failed
    assert sent - succeeded - len(lost) in {0, 1}, (sent, succeeded, lost)
    print(
        f"\nclient {old['client_instance_id']} on {first.name} "
        f"({old['pushes_accepted']} pushes accepted), {first.name} SIGKILLed; "
        f"{second.name} had accepted {new['pushes_accepted']} pushes from it "
        f"{moved_s:.1f} s later, with subscription id {new['subscription_id']} and "
        f"interval {new['push_interval_ms']} ms, every {gap:.0f} ms (median); rejected "
        f"pushes: 0 on either replica; the client rebootstrapped, asked once on each "
        f"replica (the same subscription id), and {succeeded} of its {sent} pushes "
        "succeeded"
    )


# ------------------------------------------------------------------ kills under load

PushKey = tuple[str, int]  # (pusher, sequence number)
SEQUENCE_METRIC = PRODUCER_METRICS + "ktc.test.sequence"


def payload(pusher: str, sequence: int) -> bytes:
    """An OTLP MetricsData that names its pusher and sequence number: the push's identity
    wherever it ends up."""
    point = NumberDataPoint(as_int=sequence, time_unix_nano=time.time_ns())
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(
                resource=Resource(
                    attributes=[
                        KeyValue(
                            key="ktc.test.pusher", value=AnyValue(string_value=pusher)
                        )
                    ]
                ),
                scope_metrics=[
                    ScopeMetrics(
                        metrics=[
                            Metric(
                                name=SEQUENCE_METRIC, gauge=Gauge(data_points=[point])
                            )
                        ]
                    )
                ],
            )
        ]
    ).SerializeToString()


def identity(value: bytes) -> PushKey:
    data = MetricsData.FromString(value)
    (resource,) = data.resource_metrics
    (attribute,) = resource.resource.attributes
    (point,) = resource.scope_metrics[0].metrics[0].gauge.data_points
    return attribute.value.string_value, point.as_int


@dataclass
class Load:
    """Pushers, each a client instance of its own on the project's wire client, pushing
    at the subscription's interval through its replica; when the replica goes away, it
    pushes through the next one (the same instance and subscription id, as a client that
    reconnected). Every answer is recorded."""

    ports: list[int]
    pushers: int
    acked: dict[PushKey, bytes] = field(default_factory=dict)
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    unanswered: int = 0
    moves: int = 0
    on_port: dict[str, int] = field(default_factory=dict)
    acked_after: dict[str, int] = field(default_factory=dict)
    dead: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()))

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive()
        if self.failure is not None:
            raise self.failure

    async def _run(self) -> None:
        try:
            await asyncio.gather(*(self._pusher(n) for n in range(self.pushers)))
        except BaseException as failure:
            self.failure = failure
            self._stop.set()

    async def _pusher(self, number: int) -> None:
        name = f"load-{number}"
        order = (
            self.ports[number % len(self.ports) :]
            + self.ports[: number % len(self.ports)]
        )
        instance_id = uuid.UUID(int=0)
        subscription_id = 0
        interval_s = 0.0
        sequence = 0
        for port in itertools.cycle(order):
            if self._stop.is_set():
                return
            if port in self.dead:
                continue
            try:
                client = await WireClient.connect(port, client_id=name)
            except OSError:  # refused: the replica is gone
                self.dead.add(port)
                continue
            if name in self.on_port:
                self.moves += 1
            self.on_port[name] = port
            try:
                await client.request(
                    ApiKeys.API_VERSIONS, 3, ApiVersionsRequest("ktc-load", "1")
                )
                get_needed = instance_id.int == 0
                while not self._stop.is_set():
                    if get_needed:
                        answer = await client.request(
                            ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
                            0,
                            GetTelemetrySubscriptionsRequest(instance_id),
                        )
                        assert answer.error_code == Errors.NONE, answer
                        instance_id = answer.client_instance_id
                        subscription_id = answer.subscription_id
                        interval_s = answer.push_interval_ms / 1000
                        get_needed = False
                    # The subscription's interval on the gateway's own clock: a push
                    # sooner is answered 89.
                    await asyncio.sleep(interval_s)
                    body = payload(name, sequence)
                    key = (name, sequence)
                    sequence += 1
                    client.send(
                        ApiKeys.PUSH_TELEMETRY,
                        0,
                        PushTelemetryRequest(
                            client_instance_id=instance_id,
                            subscription_id=subscription_id,
                            compression_type=0,
                            metrics=body,
                        ),
                    )
                    try:
                        await client.writer.drain()
                        # Longer than landing.kafka.delivery.timeout.ms (10 s): the
                        # answer waits for the cluster's acknowledgement.
                        push = await client.receive(timeout_s=30)
                    except (OSError, TimeoutError):
                        self.unanswered += 1
                        raise
                    if push.error_code == Errors.NONE:
                        self.acked[key] = body
                        self.acked_after[name] = len(self.acked)
                    else:
                        self.errors[Errors(push.error_code).name] += 1
                        get_needed = push.error_code == Errors.UNKNOWN_SUBSCRIPTION_ID
            except (OSError, TimeoutError):
                pass  # through the next replica
            finally:
                await client.close()


@pytest.mark.spark  # the ingest half
@pytest.mark.timeout(900)
def test_a_replica_and_a_broker_killed_under_load_lose_no_answered_push(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    """Three replicas, the topic replicated three times with min.insync.replicas 2; 24
    pushers (8 a replica, 5 pushes a second each); after 600 answered pushes replica 1
    and broker 2 are SIGKILLed together; the load goes on until 600 more are answered 0
    and every pusher of replica 1 was answered 0 by another."""
    run = uuid.uuid4().hex[:6]
    subscribe(cluster.bootstrap_servers(), f"sub-load-{run}", "client_id=load-.*", 200)
    topic = f"telemetry-load-{run}"
    pushers, before_kill, after_kill = 24, 600, 600
    with ReplicaFleet(tmp_path, cluster.bootstrap_servers(), topic) as fleet:
        for replica in fleet:
            eventually_sync(
                functools.partial(serves_interval, replica, "load-0", 200),
                timeout_s=15,
                what=f"{replica.name} serving the cluster's subscription",
            )
        assert topic_durability(cluster.bootstrap_servers(), topic) == (3, "2")
        victim = fleet[0]
        load = Load([replica.port for replica in fleet], pushers).start()
        try:
            started = time.monotonic()
            eventually_sync(
                lambda: len(load.acked) >= before_kill,
                timeout_s=120,
                what=f"{before_kill} pushes answered 0",
            )
            moving = sorted(n for n, p in load.on_port.items() if p == victim.port)
            victim.kill()
            cluster.kill_node(2)
            acked_at_kill = len(load.acked)
            killed_at = time.monotonic()
            eventually_sync(
                lambda: (
                    len(load.acked) >= acked_at_kill + after_kill
                    and all(
                        load.on_port[n] != victim.port
                        and load.acked_after.get(n, 0) > acked_at_kill
                        for n in moving
                    )
                ),
                timeout_s=180,
                what=f"{after_kill} more pushes answered 0, the moved pushers' among them",
            )
            recovered_s = time.monotonic() - killed_at
        finally:
            load.stop()
            cluster.ensure_running()
        loaded_s = time.monotonic() - started
    acked = dict(load.acked)
    records = read_topic(cluster.bootstrap_servers(), topic)
    seen: collections.Counter[PushKey] = collections.Counter()
    for message in records:
        key = identity(message.value())
        seen[key] += 1
        if key in acked:
            assert message.value() == acked[key]  # as pushed
            assert message.key().decode() == context_of(message)["client_instance_id"]
    missing = set(acked) - set(seen)
    assert not missing, f"{len(missing)} pushes answered 0 are not in the topic"
    twice = {key: n for key, n in seen.items() if n > 1}
    assert not twice, f"pushes in the topic more than once: {twice}"
    topic_line = (
        f"\n{pushers} pushers through 3 replicas, {loaded_s:.0f} s: {len(acked)} pushes "
        f"answered 0 ({len(acked) - acked_at_kill} after replica 1 and broker 2 were "
        f"SIGKILLed at {acked_at_kill}); {len(moving)} pushers moved, {load.moves} "
        f"reconnections, {recovered_s:.1f} s to {after_kill} more; answered with an "
        f"error: {dict(load.errors)}; unanswered (in flight at the kill): "
        f"{load.unanswered}; in the topic: {len(records)} records, every push answered "
        f"0 exactly once, {len(set(seen) - set(acked))} not answered 0"
    )
    print(topic_line)

    # Then the ingest, once, reads the topic into Iceberg; pyiceberg reads the tables.
    lake_jars_or_skip()
    ingest_started = time.monotonic()
    ingested = subprocess.run(
        [
            sys.executable, "-m", "exporters.lakehouse", "ingest", "--once",
            "--kafka-bootstrap-servers", cluster.bootstrap_servers(),
            "--kafka-topic", topic,
            "--lake-dir", str(tmp_path / "lakehouse"), "--database", "scaleout",
            "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=1",
        ],
        capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )  # fmt: skip
    ingest_s = time.monotonic() - ingest_started
    assert ingested.returncode == 0, ingested.stderr[-4000:]
    in_lake = lake_sequence_points(tmp_path / "lakehouse", "scaleout")
    missing = set(acked) - set(in_lake)
    assert not missing, f"{len(missing)} pushes answered 0 are not in Iceberg"
    twice = {key: n for key, n in in_lake.items() if n > 1}
    assert not twice, f"pushes in Iceberg more than once: {twice}"
    assert set(in_lake) == set(seen)  # the lake holds what the topic holds
    print(
        f"ktc ingest --once on the topic ({ingest_s:.0f} s, local[1]): "
        f"{sum(in_lake.values())} points in metrics_gauge, every push answered 0 "
        "exactly once (pyiceberg)"
    )


def lake_jars_or_skip() -> None:
    """Iceberg's and Spark's Kafka source jars (`make lake-libs`); skips without them,
    fails in CI."""
    from exporters.lakehouse.session import LakeLibsMissing, lake_jars
    from exporters.lakehouse.topic_source import (
        KafkaSourceJarsMissing,
        kafka_source_jars,
    )

    try:
        lake_jars()
        kafka_source_jars()
    except (LakeLibsMissing, KafkaSourceJarsMissing) as exc:
        if os.environ.get("CI", "").lower() == "true":
            raise
        pytest.skip(str(exc))


def lake_sequence_points(lake_dir: Path, database: str) -> collections.Counter[PushKey]:
    """(pusher, sequence) of every sequence point in the lake's metrics_gauge table, read
    with pyiceberg as any Python reader would open the catalog, and how often each is
    there."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.expressions import EqualTo

    from exporters.lakehouse.session import LakehouseConfig

    config = LakehouseConfig(lake_dir, database=database)
    table = load_catalog("lake", **config.pyiceberg_properties()).load_table(
        (database, "metrics_gauge")
    )
    rows = (
        table.scan(
            # EqualTo(term, literal) is its own __init__; pydantic's synthesized one
            # (its fields, by keyword) is what mypy sees.
            row_filter=EqualTo("metric_name", SEQUENCE_METRIC),  # type: ignore[call-arg, arg-type]
            selected_fields=("resource_attributes", "as_int"),
        )
        .to_arrow()
        .to_pylist()
    )
    return collections.Counter(
        (dict(row["resource_attributes"])["ktc.test.pusher"], row["as_int"])
        for row in rows
    )
