"""The gateway tests' upstreams, checked directly (no gateway): the Kafka 4.4.0 KRaft cluster
serves replicated topics, SCRAM, the Java clients, and survives losing a node; Tansu serves
librdkafka. If one of these fails, the gateway tests built on it mean nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.harness.tansu import TANSU_VERSION, TansuBroker

pytestmark = pytest.mark.gateway


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(
    config: dict[str, Any], topic: str, partitions: int, replication: int
) -> None:
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(
        timeout=60
    )


def produce(config: dict[str, Any], topic: str, keys: list[str]) -> set[str]:
    """Produces one record per key (acks=all, idempotent); returns the acknowledged keys."""
    acked: set[str] = set()
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Any) -> None:
        if error is None:
            acked.add(message.key().decode())
        else:
            errors.append(error)

    producer = Producer(
        {**config, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    )
    for key in keys:
        producer.produce(topic, key=key, value=f"value-{key}", on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0, "records still undelivered after 60 s"
    assert not errors, errors[:3]
    return acked


def consume_all(
    config: dict[str, Any], topic: str, expected: int, group: str, timeout: float = 90.0
) -> tuple[set[str], dict[int, int]]:
    """Consumes in group `group` until `expected` distinct keys, commits synchronously and
    returns (keys, committed offset per partition)."""
    consumer = Consumer(
        {
            **config,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    keys: set[str] = set()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(keys) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            key = message.key()
            assert key is not None
            keys.add(key.decode())
        assert len(keys) == expected, f"consumed {len(keys)} of {expected} keys"
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=30)
        return keys, {tp.partition: tp.offset for tp in committed if tp.offset >= 0}
    finally:
        consumer.close()


def test_kafka_replicated_topic_produce_consume(kafka_cluster: KafkaCluster) -> None:
    config = kafka_cluster.client_config()
    topic = topic_name("rf3")
    create_topic(config, topic, partitions=6, replication=3)
    kafka_cluster.wait_in_sync([topic])

    metadata = AdminClient(config).list_topics(topic, timeout=30)
    assert sorted(metadata.brokers) == [1, 2, 3]
    partitions = metadata.topics[topic].partitions
    assert sorted(partitions) == list(range(6))
    assert all(sorted(p.replicas) == [1, 2, 3] for p in partitions.values())
    assert {p.leader for p in partitions.values()} == {1, 2, 3}
    advertised = {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    assert advertised == {
        n: f"127.0.0.1:{ports['PLAINTEXT']}"
        for n, ports in kafka_cluster.node_ports.items()
    }

    keys = [f"k-{i}" for i in range(3000)]
    assert produce(config, topic, keys) == set(keys)
    consumed, committed = consume_all(config, topic, len(keys), group=topic_name("g"))
    assert consumed == set(keys)
    assert sorted(committed) == list(range(6))
    assert sum(committed.values()) == len(keys)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_kafka_sasl_listener_authenticates(
    kafka_cluster: KafkaCluster, mechanism: str
) -> None:
    config = kafka_cluster.client_config(
        "SASL_PLAINTEXT", user="alice", mechanism=mechanism
    )
    topic = topic_name("sasl")
    create_topic(config, topic, partitions=3, replication=3)
    keys = [f"s-{i}" for i in range(200)]
    assert produce(config, topic, keys) == set(keys)
    consumed, _ = consume_all(config, topic, len(keys), group=topic_name("g"))
    assert consumed == set(keys)


def authentication_errors(
    config: dict[str, Any], timeout: float = 30.0
) -> list[KafkaError]:
    """Errors a client reports while trying to reach the cluster with `config`; returns as
    soon as one authentication error arrives."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not any(
        e.code() == KafkaError._AUTHENTICATION for e in errors
    ):
        producer.poll(0.2)
    return errors


def test_kafka_scram_wrong_password_is_refused(kafka_cluster: KafkaCluster) -> None:
    wrong = kafka_cluster.client_config(
        "SASL_PLAINTEXT", user="alice", password="not-it"
    )
    errors = authentication_errors(wrong)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("SCRAM-SHA-512" in e.str() or "uthentication" in e.str() for e in errors)
    with pytest.raises(KafkaException):
        AdminClient(wrong).list_topics(timeout=5)

    unknown = kafka_cluster.client_config(
        "SASL_PLAINTEXT", user="mallory", password="x"
    )
    assert any(
        e.code() == KafkaError._AUTHENTICATION for e in authentication_errors(unknown)
    )


def test_java_clients_against_kafka(
    kafka_cluster: KafkaCluster, java_clients: Callable[..., dict[str, Any]]
) -> None:
    topic = topic_name("java")
    result = java_clients(
        kafka_cluster.bootstrap_servers(), topic, instance_id_timeout_ms=1000
    )
    assert result["ok"], (result["errors"], result["stderr_tail"])
    assert result["returncode"] == 0
    plaintext = {
        str(n): f"127.0.0.1:{ports['PLAINTEXT']}"
        for n, ports in kafka_cluster.node_ports.items()
    }
    assert result["nodes"] == plaintext
    assert result["replication_factor"] == 3
    assert result["acked"] == 10_000 and result["produce_errors"] == 0
    assert result["txn_committed"] == 100
    assert result["consumed"] == result["consumed_distinct_keys"] == 10_100
    assert sorted(result["committed_offsets"]) == [str(p) for p in range(6)]
    # The commit markers of the transaction count in the offsets: committed = end of log.
    assert result["committed_offsets"] == result["end_offsets"]
    assert result["committed_total"] >= 10_100
    assert set(result["producer_partition_leaders"].values()) == set(plaintext.values())
    # Every connection the JVM made went to a broker of the cluster, and to all three.
    assert set(result["remote_endpoints"]) == set(plaintext.values())
    assert {"node-1", "node-2", "node-3"} <= set(result["producer_node_ids"])


def test_java_clients_scram(
    kafka_cluster: KafkaCluster, java_clients: Callable[..., dict[str, Any]]
) -> None:
    result = java_clients(
        kafka_cluster.bootstrap_servers("SASL_PLAINTEXT", nodes=[1]),
        topic_name("java-scram"),
        sasl_username="bob",
        sasl_password=kafka_cluster.sasl_users["bob"],
        records=500,
        txn_records=10,
        instance_id_timeout_ms=0,
        client_props={"client.id": "ktc-smoke", "compression.type": "zstd"},
    )
    assert result["ok"], (result["errors"], result["stderr_tail"])
    assert result["producer_client_id"] == result["consumer_client_id"] == "ktc-smoke"
    assert result["consumed"] == 510
    sasl = {
        f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
        for ports in kafka_cluster.node_ports.values()
    }
    assert set(result["remote_endpoints"]) == sasl


def test_kafka_survives_losing_a_node(kafka_cluster: KafkaCluster) -> None:
    """SIGKILL the active controller (also a broker leading partitions): the survivors elect
    a controller, fence it, move its leaderships; acks=all produce goes on (min ISR 2); the
    node comes back on its old ports, catches up, and nothing acknowledged is lost."""
    config = kafka_cluster.client_config()
    topic = topic_name("heal")
    create_topic(config, topic, partitions=6, replication=3)
    kafka_cluster.wait_in_sync([topic])
    before = [f"before-{i}" for i in range(1000)]
    assert produce(config, topic, before) == set(before)

    victim = kafka_cluster.active_controller()
    assert victim in kafka_cluster.node_ids
    survivors = set(kafka_cluster.node_ids) - {victim}
    try:
        kafka_cluster.kill_node(victim)
        assert victim not in kafka_cluster.running_node_ids
        assert kafka_cluster.active_controller() in survivors
        after_kill = kafka_cluster.wait_brokers(survivors, timeout=60)
        assert set(after_kill["nodes"]) == survivors

        survivor_config = kafka_cluster.client_config(nodes=sorted(survivors))
        during = [f"during-{i}" for i in range(1000)]
        assert produce(survivor_config, topic, during) == set(during)
        metadata = AdminClient(survivor_config).list_topics(topic, timeout=30)
        partitions = metadata.topics[topic].partitions.values()
        assert all(p.leader in survivors for p in partitions)
        assert all(victim not in p.isrs for p in partitions)

        kafka_cluster.start_node(victim)
        kafka_cluster.wait_in_sync([topic])
        healed = (
            AdminClient(config).list_topics(topic, timeout=30).topics[topic].partitions
        )
        assert all(sorted(p.isrs) == [1, 2, 3] for p in healed.values())
        assert set(kafka_cluster.describe_cluster()["nodes"]) == {1, 2, 3}
    finally:
        kafka_cluster.ensure_running()

    # The restarted node serves clients itself.
    only_victim = kafka_cluster.client_config(nodes=[victim])
    after = [f"after-{i}" for i in range(200)]
    assert produce(only_victim, topic, after) == set(after)
    everything = set(before) | set(during) | set(after)
    consumed, committed = consume_all(
        config, topic, len(everything), group=topic_name("g")
    )
    assert consumed == everything
    assert sum(committed.values()) == len(everything)


def test_tansu_produce_consume(tansu_broker: TansuBroker) -> None:
    assert tansu_broker.version() == f"tansu {TANSU_VERSION}"
    config: dict[str, str | int | float | bool] = {
        "bootstrap.servers": tansu_broker.bootstrap_servers()
    }
    metadata = AdminClient(config).list_topics(timeout=10)
    assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [
        tansu_broker.bootstrap_servers()
    ]
    topic = topic_name("tansu")
    create_topic(config, topic, partitions=6, replication=1)
    keys = [f"t-{i}" for i in range(1000)]
    assert produce(config, topic, keys) == set(keys)
    consumed, committed = consume_all(config, topic, len(keys), group=topic_name("g"))
    assert consumed == set(keys)
    assert sum(committed.values()) == len(keys)
