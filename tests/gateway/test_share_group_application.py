"""A KIP-932 share consumer (kafka-clients 4.4.0 ``KafkaShareConsumer``,
tests/prometheus/java/TelemetryShareConsumer.java) through ``ktc gateway`` in front of the
real 3-node Kafka 4.4.0 cluster: its pushes carry ``org.apache.kafka.consumer.share.*``
metrics, and ``GET /v1/applications`` shows its share group as an application of kind
``share_group`` with the consumer as its instance (and the producer feeding the topic in no
application)."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from collector.app.cli.clients import fetch_applications
from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway, wait_for
from tests.gateway.harness.kafka_cluster import KafkaCluster, kafka_libs_dir

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
SHARE_CONSUMER = REPO / "tests" / "prometheus" / "java" / "TelemetryShareConsumer.java"


def test_a_share_consumer_is_a_share_group_application(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "consumers",
        {"metrics": "org.apache.kafka.consumer.", "interval.ms": "1000"},
        [],
    )
    group = f"jobs-{uuid.uuid4().hex[:8]}"
    topic = f"{group}-in"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers()})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    log = tmp_path / "share-consumer.log"
    with (
        RunningGateway(data_dir, kafka_cluster.bootstrap_servers()) as gateway,
        log.open("w") as err,
    ):
        assert gateway.server is not None
        server = f"http://127.0.0.1:{gateway.server.http_port}"
        process = subprocess.Popen(
            [
                "java", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-cp", f"{kafka_libs_dir()}/*", str(SHARE_CONSUMER),
                "--bootstrap", gateway.bootstrap, "--group", group, "--topic", topic,
            ],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
            text=True,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("KTC consumed"), (line, log.read_text()[-3000:])

            def share_group() -> dict[str, Any] | None:
                for app in fetch_applications(server, None)["applications"]:
                    if app["kind"] == "share_group" and app["instances"]:
                        return app
                return None

            app = wait_for(share_group, timeout_s=60, what="a share_group application")
        finally:
            assert process.stdin is not None
            process.stdin.close()
            process.wait(60)
    assert app["application_id"] == group
    assert app["state"] is None
    [instance] = app["instances"]
    assert (instance["client_id"], instance["role"]) == (
        f"{group}-share-1",
        "share-consumer",
    )
    assert instance["client_software_name"] == "apache-kafka-java"
    landed = [r for r in gateway.landed() if r.context.client_id == f"{group}-share-1"]
    assert landed, "no push of the share consumer landed"
