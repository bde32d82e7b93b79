"""The Java client (kafka-clients 4.4.0, through `ktc gateway` in front of a real Kafka 4.4
broker) in the live client view: ``GET /v1/clients`` and ``ktc clients`` list its instances
with the right fields while it runs; when the runner closes them they push terminating
and leave the view with their connections.  librdkafka's side:
tests/integration/test_live_clients.py."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from collector.app.cli import cli
from collector.app.cli.clients import fetch_clients
from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway, wait_for
from tests.gateway.harness.kafka_cluster import KafkaCluster

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(400)]

CLIENT_ID = "live-java"
INTERVAL_MS = 300
METRICS = "org.apache.kafka.producer.,org.apache.kafka.consumer."


@pytest.fixture(scope="module")
def gateway(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    data_dir = tmp_path_factory.mktemp("live-clients") / "data"
    ConfigStore(data_dir).alter_subscription(
        "java",
        {
            "metrics": METRICS,
            "interval.ms": str(INTERVAL_MS),
            "match": f"client_id={CLIENT_ID}",
        },
    )
    with RunningGateway(data_dir, kafka_cluster.bootstrap_servers()) as running:
        yield running


def test_java_clients_in_the_live_view_while_they_run_then_gone(
    gateway: RunningGateway, java_clients: Callable[..., dict[str, Any]]
) -> None:
    assert gateway.server is not None
    server = f"http://127.0.0.1:{gateway.server.http_port}"
    outcome: dict[str, Any] = {}

    def run() -> None:
        outcome["result"] = java_clients(
            gateway.bootstrap,
            f"live-{uuid.uuid4().hex[:6]}",
            records=20_000,
            txn_records=50,
            partitions=3,
            replication_factor=1,
            client_props={"client.id": CLIENT_ID},
            timeout=240,
        )

    runner = threading.Thread(target=run, name="java-clients", daemon=True)
    runner.start()
    seen: dict[str, dict[str, Any]] = {}  # instance id -> its latest entry with a push
    # ``ktc clients``' first listing of the client: asked in the same look as the view,
    # so that both are asked while the clients run (they may finish any moment).
    from_cli: list[dict[str, Any]] = []

    def pushed() -> bool:
        for entry in fetch_clients(server, [("client_id", CLIENT_ID)], None):
            if entry["pushes_accepted"] > 0:
                seen[entry["client_instance_id"]] = entry
        if seen and not from_cli:
            listed = CliRunner().invoke(
                cli,
                [
                    "clients",
                    "--server",
                    server,
                    "--format",
                    "json",
                    "--filter",
                    f"client_id={CLIENT_ID}",
                ],
            )
            assert listed.exit_code == 0, listed.output
            from_cli.extend(json.loads(listed.output))
        return bool(seen and from_cli) or not runner.is_alive()

    wait_for(
        pushed,
        timeout_s=240,
        what="a Java client instance with an accepted push, listed by ktc clients",
    )
    runner.join(300)
    result = outcome["result"]
    assert result["ok"], (result["errors"], result["stderr_tail"])
    assert seen, (
        "no Java instance was listed with an accepted push while the clients ran"
    )

    landed = gateway.landed()
    for instance, entry in seen.items():
        mine = [r for r in landed if r.context.client_instance_id == instance]
        assert mine, f"no landed push of {instance}"
        context = mine[0].context
        assert entry["client_id"] == CLIENT_ID
        assert (
            entry["client_software_name"]
            == "apache-kafka-java"
            == context.client_software_name
        )
        assert (
            entry["client_software_version"]
            == "4.4.0"
            == context.client_software_version
        )
        assert entry["client_source_address"] == "127.0.0.1"
        # The port of the connection whose request created the instance (Kafka keeps the
        # metadata of that moment); the Java client may push on another of its connections.
        assert 0 < entry["client_source_port"] < 65536
        assert entry["listener"] == context.listener_name
        assert entry["principal"] == "User:ANONYMOUS" == context.principal
        assert entry["subscriptions"] == ["java"]
        assert sorted(entry["metrics"]) == sorted(METRICS.split(","))
        assert entry["push_interval_ms"] == INTERVAL_MS
        assert entry["subscription_id"] in {r.context.subscription_id for r in mine}
        assert 1 <= entry["pushes_accepted"] <= len(mine)
        assert entry["first_seen"] <= entry["last_push"]
    # ktc clients, run while the clients were running, listed them too.
    assert from_cli and {
        (e["client_id"], e["client_software_name"]) for e in from_cli
    } == {(CLIENT_ID, "apache-kafka-java")}

    # Closed by the runner: a terminating push lands, and every instance leaves the view with
    # its connection.  Any of the runner's clients (the first listed may be the producer, whose
    # sender thread can stop before its terminating push goes out; the consumer's lands).
    wait_for(
        lambda: any(
            r.context.terminating
            for r in gateway.landed()
            if r.context.client_id == CLIENT_ID
        ),
        timeout_s=30,
        what="a terminating push of the Java clients",
    )
    wait_for(
        lambda: not fetch_clients(server, [("client_id", CLIENT_ID)], None),
        timeout_s=30,
        what="the Java instances to leave the live view",
    )
