"""A real librdkafka producer -> the collector -> landing log -> forwarder -> a real gRPC
receiver.  Checks that what a real client pushes arrives enriched and complete."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData, ResourceMetrics

from exporters.otlp import count_data_points
from subscriptions.store import ConfigStore
from tests.exporters.otlp_receiver import OtlpReceiver, resource_attributes

# The collector harness lives with the integration tests.
from tests.integration.collector_harness import RunningCollector, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def _metric_names(resource_metrics: ResourceMetrics) -> set[str]:
    return {m.name for sm in resource_metrics.scope_metrics for m in sm.metrics}


def test_a_real_clients_pushes_reach_the_receiver_enriched_and_complete(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )
    with OtlpReceiver() as receiver:
        otlp = {
            "endpoint": receiver.target,
            "tls": {"insecure": True},
            "retry_on_failure": {"initial_interval": "50ms", "max_interval": "200ms"},
        }
        with RunningCollector(data_dir, **{"exporters.otlp": otlp}) as collector:
            client = Producer(
                {
                    "bootstrap.servers": collector.bootstrap,
                    "client.id": "orders-1",
                    "enable.metrics.push": True,
                    "log_level": 3,
                }
            )
            try:
                wait_for(
                    lambda: len(receiver.received) >= 3,
                    timeout_s=20,
                    what="three forwarded pushes",
                )
            finally:
                client.close()  # sends the terminating push
            wait_for(
                lambda: [r for r in collector.landed() if r.context.terminating],
                timeout_s=10,
                what="the terminating push to land",
            )
            # A push without data points has nothing to forward (the forwarder skips it).
            landed = [
                r
                for r in collector.landed()
                if count_data_points(MetricsData.FromString(r.payload).resource_metrics)
            ]
            wait_for(
                lambda: len(list(receiver.resource_metrics())) >= len(landed),
                timeout_s=10,
                what="every landed push to be forwarded",
            )
            server = collector.server
            assert server is not None
            cluster_id, node_id = server.cluster_id, collector.config.node_id

    forwarded = list(receiver.resource_metrics())
    assert len(forwarded) == len(landed)  # each push exactly once
    context = landed[0].context
    for rm, record in zip(forwarded, landed, strict=True):  # in landing order
        attributes = resource_attributes(rm)
        assert attributes["client_instance_id"] == record.context.client_instance_id
        assert attributes["client_id"] == "orders-1"
        assert attributes["client_software_name"] == "confluent-kafka-python"
        assert attributes["client_software_version"] == context.client_software_version
        assert attributes["client_source_address"] == "127.0.0.1"
        assert attributes["client_source_port"] == str(
            record.context.client_source_port
        )
        assert attributes["principal"] == "User:ANONYMOUS"
        assert attributes["kafka.broker.id"] == str(node_id)
        assert attributes["kafka.cluster.id"] == cluster_id
        # The client's metrics themselves are untouched.
        (original,) = MetricsData.FromString(record.payload).resource_metrics
        assert list(rm.scope_metrics) == list(original.scope_metrics)
        assert _metric_names(rm) and all(
            name.startswith("org.apache.kafka.producer.") for name in _metric_names(rm)
        )
