"""A real librdkafka producer -> the collector -> landing log -> OTLP/gRPC forwarder ->
a real gRPC MetricsService receiver, all started by the server (``exporters.otlp``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from subscriptions.store import ConfigStore
from tests.exporters.otlp_receiver import OtlpReceiver, resource_attributes
from tests.integration.collector_harness import RunningCollector, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_pushes_reach_an_otlp_receiver_with_client_identity(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )
    with OtlpReceiver() as receiver:
        otlp = {
            "endpoint": receiver.target,
            "tls": {"insecure": True},
            "compression": "none",
        }
        with RunningCollector(data_dir, **{"exporters.otlp": otlp}) as collector:
            client = Producer(
                {
                    "bootstrap.servers": collector.bootstrap,
                    "client.id": "e2e-producer",
                    "log_level": 3,
                }
            )
            try:

                def from_producer() -> list[dict[str, str]]:
                    return [
                        attrs
                        for rm in receiver.resource_metrics()
                        if (attrs := resource_attributes(rm)).get("client_id")
                        == "e2e-producer"
                    ]

                attributes = wait_for(
                    from_producer, timeout_s=20, what="forwarded metrics"
                )
            finally:
                client.close()
        names = {
            m.name
            for rm in receiver.resource_metrics()
            for sm in rm.scope_metrics
            for m in sm.metrics
        }
    assert names and all(n.startswith("org.apache.kafka.producer.") for n in names)
    first = attributes[0]
    assert first["client_software_name"] == "confluent-kafka-python"
    assert first["client_source_address"] == "127.0.0.1"
    assert len(first["client_instance_id"]) == 22
