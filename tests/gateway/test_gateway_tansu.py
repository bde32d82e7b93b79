"""``ktc gateway`` in front of Tansu 0.6.0, a Kafka-compatible broker that is not Apache Kafka
(Rust, its own storage engines), with a real client (librdkafka through confluent-kafka).

Tansu answers GetTelemetrySubscriptions with no metrics and does not list PushTelemetry, so
a client talking to it directly sends no telemetry. Through the gateway the client gets the
gateway's subscription and its pushes land at the gateway: telemetry is terminated there,
whatever the upstream supports. Everything else (topic creation, produce, a consumer group
with committed offsets) goes to Tansu, and every broker connection the client makes is to a
gateway port.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.get_telemetry_subscriptions.v0.request import (
    GetTelemetrySubscriptionsRequest,
)
from kio.schema.get_telemetry_subscriptions.v0.response import (
    GetTelemetrySubscriptionsResponse,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway, wait_for
from tests.gateway.harness.tansu import TansuBroker
from tests.gateway.harness.wire import exchange

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(300)]

PRODUCER_METRICS = "org.apache.kafka.producer."
GET_TELEMETRY_SUBSCRIPTIONS = 71
PUSH_TELEMETRY = 72


@pytest.fixture(scope="module")
def gateway(
    tansu_broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    data_dir = tmp_path_factory.mktemp("gateway-tansu") / "data"
    ConfigStore(data_dir).alter_subscription(
        "producers", {"metrics": PRODUCER_METRICS, "interval.ms": "1000"}, []
    )
    with RunningGateway(data_dir, tansu_broker.bootstrap_servers()) as running:
        yield running


def api_keys(port: int) -> set[int]:
    request = ApiVersionsRequest(
        client_software_name="ktc-test", client_software_version="1"
    )
    response, _ = exchange(port, request, ApiVersionsResponse)
    assert response.error_code == 0
    return {int(api.api_key) for api in response.api_keys}


def requested_metrics(port: int) -> tuple[str, ...]:
    response, _ = exchange(
        port,
        GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)),
        GetTelemetrySubscriptionsResponse,
    )
    assert response.error_code == 0, response
    return tuple(response.requested_metrics)


def test_tansu_offers_no_telemetry_but_the_gateway_does(
    tansu_broker: TansuBroker, gateway: RunningGateway
) -> None:
    """What makes the gateway necessary in front of Tansu, on the wire."""
    tansu_port = int(tansu_broker.bootstrap_servers().rsplit(":", 1)[1])
    direct = api_keys(tansu_port)
    assert PUSH_TELEMETRY not in direct
    assert requested_metrics(tansu_port) == ()

    through = api_keys(gateway.port)
    assert {GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY} <= through
    assert requested_metrics(gateway.port) == (PRODUCER_METRICS,)


class BrokerStats:
    """Every broker address a librdkafka client connected to (its statistics)."""

    def __init__(self) -> None:
        self.addresses: set[str] = set()

    def __call__(self, raw: str) -> None:
        for broker in json.loads(raw).get("brokers", {}).values():
            if broker["nodename"] and (
                broker.get("state") == "UP" or broker.get("connects", 0) > 0
            ):
                self.addresses.add(broker["nodename"])


def test_librdkafka_through_the_gateway_to_tansu(
    gateway: RunningGateway, tansu_broker: TansuBroker
) -> None:
    stats = BrokerStats()
    common: dict[str, Any] = {
        "bootstrap.servers": gateway.bootstrap,
        "statistics.interval.ms": 200,
        "stats_cb": stats,
        "enable.metrics.push": True,
    }
    topic = f"gw-tansu-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({**common, "client.id": "gw-tansu-admin"})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(timeout=30)

    # Tansu's one node is learned from Metadata and served on a port of its own.
    node_ports = wait_for(gateway.node_ports, timeout_s=10, what="Tansu's node learned")
    assert len(node_ports) == 1
    assert gateway.upstream_cluster_id() == tansu_broker.cluster_id

    acked: set[str] = set()
    errors: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            acked.add(message.key().decode())
        else:
            errors.append(error)

    producer = Producer(
        {**common, "client.id": "gw-tansu-producer", "acks": "all", "linger.ms": 5}
    )
    keys = [f"k-{i}" for i in range(2000)]
    for key in keys:
        producer.produce(topic, key=key, value=b"v" * 100, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    assert acked == set(keys)

    # Telemetry: Tansu subscribes to nothing and cannot take a push, yet the producer's
    # pushes land at the gateway with the subscribed metrics only.
    def pushes() -> list[Any]:
        return [
            r
            for r in gateway.landed()
            if r.context.client_id == "gw-tansu-producer" and r.payload
        ]

    records = wait_for(pushes, timeout_s=30, what="a telemetry push from the producer")
    for record in records:
        assert record.context.upstream_cluster_id == tansu_broker.cluster_id
        assert record.context.upstream_node_id in node_ports
        data = MetricsData.FromString(record.payload)
        names = {
            metric.name
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }
        assert names and all(name.startswith(PRODUCER_METRICS) for name in names), names

    consumer = Consumer(
        {
            **common,
            "client.id": "gw-tansu-consumer",
            "group.id": f"gw-tansu-group-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # Tansu's classic group join waits half the session timeout.
            "session.timeout.ms": 6000,
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
            return len(consumed) == len(keys)

        wait_for(
            consume, timeout_s=90, what="every record consumed from Tansu", poll_s=0
        )
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=30)
        assert sum(tp.offset for tp in committed) == len(keys)
    finally:
        consumer.close()
        producer.flush(10)

    assert consumed == set(keys)
    gateway_addresses = {f"127.0.0.1:{port}" for port in gateway.gateway_ports()}
    assert stats.addresses, "no statistics arrived"
    assert stats.addresses <= gateway_addresses, (stats.addresses, gateway_addresses)
    assert tansu_broker.bootstrap_servers() not in stats.addresses
