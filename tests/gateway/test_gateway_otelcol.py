"""The gateway's enrichment at a real OpenTelemetry Collector (tests/exporters/test_otelcol.py
has the standalone collector's): a librdkafka producer in front of the real Kafka 4.4.0
cluster, its pushes forwarded by the gateway carry the two gateway-only attributes of
docs/otlp-forwarder.md, kafka.upstream.cluster.id and kafka.upstream.broker.id, as labels
on the Collector's Prometheus exporter."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from subscriptions.store import ConfigStore
from tests.exporters.otelcol_process import OtelCollector
from tests.gateway.gateway_harness import RunningGateway
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(180)]


def test_pushes_through_the_gateway_reach_otelcol_with_the_upstream_attributes(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )
    with OtelCollector(tmp_path / "otelcol") as otelcol:
        otlp = {"endpoint": otelcol.endpoint, "tls": {"insecure": True}}
        with RunningGateway(
            data_dir, kafka_cluster.bootstrap_servers(), **{"exporters.otlp": otlp}
        ) as gateway:
            topic = f"otelcol-{uuid.uuid4().hex[:8]}"
            admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
            admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
            producer = Producer(
                {
                    "bootstrap.servers": gateway.bootstrap,
                    "client.id": "gateway-orders",
                    "log_level": 3,
                }
            )
            try:
                for i in range(30):  # connections to the brokers behind the gateway
                    producer.produce(topic, value=b"x", key=str(i).encode())
                assert producer.flush(30) == 0

                def upstream_labelled() -> list[dict[str, str]]:
                    return [
                        sample.labels
                        for samples in otelcol.scrape().values()
                        for sample in samples
                        if sample.labels.get("client_id") == "gateway-orders"
                        and "kafka_upstream_broker_id" in sample.labels
                    ]

                eventually_sync(
                    upstream_labelled,
                    timeout_s=60,
                    what="a push from a broker listener at otelcol",
                )
                labels = upstream_labelled()
                landed_nodes = {
                    str(r.context.upstream_node_id)
                    for r in gateway.landed()
                    if r.context.client_id == "gateway-orders"
                    and r.context.upstream_node_id is not None
                }
                cluster_id = gateway.upstream_cluster_id()
            finally:
                producer.flush(10)
    assert cluster_id
    assert {label["kafka_upstream_cluster_id"] for label in labels} == {cluster_id}
    assert {label["kafka_upstream_broker_id"] for label in labels} <= landed_nodes
    assert {label["kafka_upstream_broker_id"] for label in labels} <= {"1", "2", "3"}
