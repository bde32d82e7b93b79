"""/metrics/clients in gateway mode (docs/prometheus.md): a librdkafka producer writes
through ``ktc gateway`` to the real Kafka 4.4.0 cluster, and the series of its pushes carry
which cluster and broker it was talking to, ``upstream_cluster_id`` and
``upstream_node_id``, as the landing log recorded them."""

from __future__ import annotations

import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(180)]


def client_series(gateway: RunningGateway, client_id: str) -> list[dict[str, str]]:
    assert gateway.server is not None
    url = f"http://127.0.0.1:{gateway.server.http_port}/metrics/clients"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return [
        sample.labels
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels.get("client_id") == client_id
    ]


def test_series_through_the_gateway_name_the_upstream_cluster_and_broker(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )
    with RunningGateway(
        data_dir,
        kafka_cluster.bootstrap_servers(),
        **{"prometheus.clients.enable": True},
    ) as gateway:
        topic = f"client-metrics-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
        producer = Producer(
            {
                "bootstrap.servers": gateway.bootstrap,
                "client.id": "gateway-metrics",
                "log_level": 3,
            }
        )
        try:
            for i in range(30):
                producer.produce(topic, value=b"x", key=str(i).encode())
            assert producer.flush(30) == 0

            def from_a_broker_listener() -> bool:
                producer.poll(0)
                return any(
                    "upstream_node_id" in labels
                    for labels in client_series(gateway, "gateway-metrics")
                )

            eventually_sync(
                from_a_broker_listener,
                timeout_s=60,
                what="a series of a push on a broker's listener",
            )
            series = client_series(gateway, "gateway-metrics")
            landed = [
                r.context
                for r in gateway.landed()
                if r.context.client_id == "gateway-metrics"
            ]
            cluster_id = gateway.upstream_cluster_id()
        finally:
            producer.flush(10)
    assert cluster_id
    assert {labels["upstream_cluster_id"] for labels in series} == {cluster_id}
    nodes = {
        labels["upstream_node_id"] for labels in series if "upstream_node_id" in labels
    }
    landed_nodes = {
        str(c.upstream_node_id) for c in landed if c.upstream_node_id is not None
    }
    assert nodes and nodes <= landed_nodes
    assert {labels["client_instance_id"] for labels in series} == {
        c.client_instance_id for c in landed
    }
