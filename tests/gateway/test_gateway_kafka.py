"""``ktc gateway`` in front of a real Apache Kafka 4.4.0 cluster (3 KRaft nodes), with real
clients: librdkafka (confluent-kafka) and the Java client (kafka-clients 4.4.0).

Through the gateway each client creates a 6-partition topic, produces 10,000 records with
acks=all and idempotence, commits a transaction, consumes everything in a group with
committed offsets and describes the cluster; every broker connection it made must have gone
to a gateway port, and its telemetry must land at the gateway with the upstream cluster id
and only the metrics its subscription names.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.landing import LandingRecord
from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway, wait_for
from tests.gateway.harness.kafka_cluster import KafkaCluster

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(600)]

PRODUCER_METRICS = "org.apache.kafka.producer."
CONSUMER_METRICS = "org.apache.kafka.consumer."


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def metric_names(record: LandingRecord) -> set[str]:
    data = MetricsData.FromString(record.payload)
    return {
        metric.name
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


@pytest.fixture(scope="module")
def gateway(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    data_dir = tmp_path_factory.mktemp("gateway") / "data"
    store = ConfigStore(data_dir)
    # Producers and consumers each get their own prefix; nothing else is subscribed.
    store.alter_subscription(
        "producers", {"metrics": PRODUCER_METRICS, "interval.ms": "1000"}, []
    )
    store.alter_subscription(
        "consumers", {"metrics": CONSUMER_METRICS, "interval.ms": "1000"}, []
    )
    with RunningGateway(data_dir, kafka_cluster.bootstrap_servers()) as running:
        yield running


def gateway_addresses(gateway: RunningGateway) -> set[str]:
    return {f"127.0.0.1:{port}" for port in gateway.gateway_ports()}


class BrokerStats:
    """Every broker address a librdkafka client had a connection to (its statistics)."""

    def __init__(self) -> None:
        self.addresses: set[str] = set()

    def __call__(self, raw: str) -> None:
        for broker in json.loads(raw).get("brokers", {}).values():
            # Logical brokers (a coordinator not chosen yet) have no address: "".
            if broker["nodename"] and (
                broker.get("state") == "UP" or broker.get("connects", 0) > 0
            ):
                self.addresses.add(broker["nodename"])


def test_librdkafka_through_the_gateway(
    gateway: RunningGateway, kafka_cluster: KafkaCluster
) -> None:
    stats = BrokerStats()
    common: dict[str, Any] = {
        "bootstrap.servers": gateway.bootstrap,
        "statistics.interval.ms": 200,
        "stats_cb": stats,
        "enable.metrics.push": True,
    }
    topic = topic_name("gw-rdkafka")
    admin = AdminClient({**common, "client.id": "gw-admin"})
    admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(timeout=60)
    kafka_cluster.wait_in_sync([topic])

    cluster = admin.describe_cluster(request_timeout=30).result()
    described = {f"{node.host}:{node.port}" for node in cluster.nodes}
    assert len(described) == 3
    assert described <= gateway_addresses(gateway)
    assert cluster.cluster_id == gateway.upstream_cluster_id()

    acked: set[str] = set()
    errors: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            acked.add(message.key().decode())
        else:
            errors.append(error)

    producer = Producer(
        {
            **common,
            "client.id": "gw-producer",
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    keys = [f"k-{i}" for i in range(10_000)]
    for key in keys:
        producer.produce(topic, key=key, value=b"v" * 100, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert not errors, errors[:3]
    assert acked == set(keys)

    txn = Producer(
        {**common, "client.id": "gw-txn", "transactional.id": topic_name("txn")}
    )
    txn.init_transactions(60)
    txn.begin_transaction()
    txn_keys = [f"t-{i}" for i in range(100)]
    for key in txn_keys:
        txn.produce(topic, key=key, value=b"t")
    txn.commit_transaction(60)

    consumer = Consumer(
        {
            **common,
            "client.id": "gw-consumer",
            "group.id": topic_name("gw-group"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumed: set[str] = set()
    try:
        consumer.subscribe([topic])

        def consume() -> bool:
            message = consumer.poll(0.5)
            if message is not None:
                if message.error():
                    raise KafkaException(message.error())
                key = message.key()
                assert key is not None
                consumed.add(key.decode())
            return len(consumed) == len(keys) + len(txn_keys)

        wait_for(
            consume,
            timeout_s=120,
            what="every record consumed through the gateway",
            poll_s=0,
        )
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=30)
        assert sorted(tp.partition for tp in committed) == list(range(6))
        assert all(tp.offset > 0 for tp in committed)

        # Telemetry: the producer's and the consumer's pushes land at the gateway, with the
        # upstream cluster id, and only the subscribed metrics.
        def landed(client_id: str) -> list[LandingRecord]:
            return [
                r
                for r in gateway.landed()
                if r.context.client_id == client_id and r.payload
            ]

        for client_id, prefix in (
            ("gw-producer", PRODUCER_METRICS),
            ("gw-consumer", CONSUMER_METRICS),
        ):
            records = wait_for(
                functools.partial(landed, client_id),
                timeout_s=30,
                what=f"a telemetry push from {client_id}",
            )
            for record in records:
                assert record.context.upstream_cluster_id == cluster.cluster_id
                assert record.context.upstream_node_id in {1, 2, 3}
                names = metric_names(record)
                assert names and all(name.startswith(prefix) for name in names), names
    finally:
        consumer.close()
        producer.flush(10)
        txn.flush(10)

    # Every broker connection the clients made went through the gateway.
    assert stats.addresses, "no statistics arrived"
    assert stats.addresses <= gateway_addresses(gateway) | {gateway.bootstrap}, (
        stats.addresses
    )


def test_java_client_through_the_gateway(
    gateway: RunningGateway,
    kafka_cluster: KafkaCluster,
    java_clients: Callable[..., dict[str, Any]],
) -> None:
    topic = topic_name("gw-java")
    result = java_clients(
        gateway.bootstrap,
        topic,
        replication_factor=3,
        client_props={"client.id": "gw-java"},
        instance_id_timeout_ms=10_000,
    )
    assert result["ok"], (result["errors"], result["stderr_tail"])
    assert result["acked"] == 10_000 and result["produce_errors"] == 0
    assert result["txn_committed"] == 100
    assert result["consumed"] == result["consumed_distinct_keys"] == 10_100
    assert result["committed_offsets"] == result["end_offsets"]
    gateway_addrs = gateway_addresses(gateway)
    assert set(result["nodes"].values()) <= gateway_addrs
    # psutil saw every TCP connection of the JVM: all of them to gateway ports.
    assert (
        result["remote_endpoints"] and set(result["remote_endpoints"]) <= gateway_addrs
    )

    java_records = wait_for(
        lambda: [
            r
            for r in gateway.landed()
            if r.context.client_software_name == "apache-kafka-java" and r.payload
        ],
        timeout_s=30,
        what="a telemetry push from the Java clients",
    )
    for record in java_records:
        assert record.context.upstream_cluster_id == gateway.upstream_cluster_id()
        names = metric_names(record)
        assert names and all(
            name.startswith((PRODUCER_METRICS, CONSUMER_METRICS)) for name in names
        ), names


def free_port_block(count: int) -> int:
    """The first of ``count`` consecutive ports that are free on 127.0.0.1 right now."""
    import random
    import socket

    for _ in range(200):
        base = random.randrange(20000, 60000 - count)
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports")


def test_a_node_port_serves_before_any_metadata_passed(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """A client that connects straight to a node's port of a fresh gateway (its metadata came
    from another replica, or from before a restart) is served: the fixed port range is bound
    at start and the node's upstream address is asked of the cluster."""
    base = free_port_block(4)
    with RunningGateway(
        tmp_path / "data",
        kafka_cluster.bootstrap_servers(),
        **{"gateway.broker.port.start": base, "gateway.max.nodes": 4},
    ) as fresh:
        assert fresh.node_ports() == {
            n: base + n for n in range(4)
        }  # bound, none learned
        node_2 = f"127.0.0.1:{base + 2}"
        metadata = AdminClient({"bootstrap.servers": node_2}).list_topics(timeout=30)
        assert sorted(metadata.brokers) == [1, 2, 3]
        assert {f"{b.host}:{b.port}" for b in metadata.brokers.values()} == {
            f"127.0.0.1:{base + n}" for n in (1, 2, 3)
        }
        assert metadata.cluster_id == fresh.upstream_cluster_id()
