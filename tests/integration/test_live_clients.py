"""Real librdkafka clients (confluent-kafka) pushing to a real collector: ``GET /v1/clients``
and ``ktc clients`` list them with the right fields; a client that closes sends its
terminating push and leaves the cache with its connection (Kafka 4.0+, KAFKA-17778);
``ktc subscriptions alter --dry-run`` predicts exactly what the real alter does, checked
against the subscription id and interval the clients' next pushes carry.

The Java client's side is tests/gateway/test_gateway_live_clients.py; the fake-clock
cases (terminating then expiry, paging, protection) tests/collector/test_live_clients_endpoint.py.
"""

from __future__ import annotations

import csv
import io
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer

from collector.app.cli import cli
from exporters.landing import LandingRecord
from subscriptions.store import ConfigStore
from tests.integration.collector_harness import RunningCollector, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

INTERVAL_MS = 500


def clients_url(collector: RunningCollector) -> str:
    assert collector.server is not None
    return f"http://127.0.0.1:{collector.server.http_port}"


def live(collector: RunningCollector, query: str = "") -> list[dict[str, Any]]:
    with urllib.request.urlopen(
        clients_url(collector) + "/v1/clients" + query, timeout=10
    ) as r:
        return json.load(r)["clients"]


def by_client_id(collector: RunningCollector) -> dict[str, dict[str, Any]]:
    return {c["client_id"]: c for c in live(collector)}


def pushes(collector: RunningCollector, instance_id: str) -> list[LandingRecord]:
    return [
        r for r in collector.landed() if r.context.client_instance_id == instance_id
    ]


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[RunningCollector]:
    store = ConfigStore(tmp_path / "data")
    store.alter_subscription(
        "producers",
        {
            "metrics": "org.apache.kafka.producer.",
            "interval.ms": str(INTERVAL_MS),
            "match": "client_id=orders-.*",
        },
    )
    store.alter_subscription(
        "consumers",
        {
            "metrics": "org.apache.kafka.consumer.",
            "interval.ms": str(INTERVAL_MS),
            "match": "client_id=billing-.*",
        },
    )
    with RunningCollector(tmp_path / "data") as running:
        yield running


def start_clients(collector: RunningCollector) -> tuple[Producer, Consumer]:
    producer = Producer(
        {"bootstrap.servers": collector.bootstrap, "client.id": "orders-1"}
    )
    consumer = Consumer(
        {
            "bootstrap.servers": collector.bootstrap,
            "client.id": "billing-1",
            "group.id": "g",
        }
    )
    producer.produce("t", b"x")
    producer.poll(0)
    return producer, consumer


def pushing(
    collector: RunningCollector, consumer: Consumer, count: int
) -> dict[str, dict[str, Any]]:
    def ready() -> dict[str, dict[str, Any]] | None:
        consumer.poll(0)
        found = by_client_id(collector)
        wanted = ("orders-1", "billing-1")
        if all(found.get(c, {}).get("pushes_accepted", 0) >= count for c in wanted):
            return found
        return None

    return wait_for(ready, timeout_s=60, what=f"{count} accepted pushes of each client")


def test_live_clients_lists_real_librdkafka_clients_with_their_fields(
    collector: RunningCollector,
) -> None:
    import confluent_kafka

    producer, consumer = start_clients(collector)
    try:
        pushing(collector, consumer, 2)
        landed_before = collector.landed()
        found = by_client_id(collector)
        landed_after = collector.landed()
        version = (
            f"{confluent_kafka.__version__}-rdkafka-{confluent_kafka.libversion()[0]}"
        )
        for client_id, subscription, prefix in (
            ("orders-1", "producers", "org.apache.kafka.producer."),
            ("billing-1", "consumers", "org.apache.kafka.consumer."),
        ):
            entry = found[client_id]
            instance = entry["client_instance_id"]
            mine = [r for r in landed_after if r.context.client_instance_id == instance]
            assert mine, f"no landed push of {client_id}"
            context = mine[-1].context
            assert entry["client_software_name"] == "confluent-kafka-python"
            assert (
                entry["client_software_version"]
                == version
                == context.client_software_version
            )
            assert entry["client_source_address"] == "127.0.0.1"
            assert entry["client_source_port"] in {
                r.context.client_source_port for r in mine
            }
            assert (entry["listener"], entry["principal"]) == (
                "PLAINTEXT",
                "User:ANONYMOUS",
            )
            assert entry["subscriptions"] == [subscription]
            assert entry["metrics"] == [prefix]
            assert entry["push_interval_ms"] == INTERVAL_MS
            assert entry["subscription_id"] == context.subscription_id
            assert entry["terminating"] is False and entry["errors"] == {}
            # Counted between two reads of the landing log (every accepted push lands).
            before = sum(
                r.context.client_instance_id == instance for r in landed_before
            )
            assert before <= entry["pushes_accepted"] <= len(mine)
            assert entry["first_seen"] <= entry["last_get"] <= entry["last_push"]

        # ktc clients: every page (limit 1 per page), each format, filters.
        runner = CliRunner()
        server = clients_url(collector)
        result = runner.invoke(cli, ["clients", "--server", server, "--format", "json"])
        assert result.exit_code == 0, result.output
        listed = {c["client_id"]: c for c in json.loads(result.output)}
        assert set(listed) == {"orders-1", "billing-1"}
        assert (
            listed["orders-1"]["client_instance_id"]
            == found["orders-1"]["client_instance_id"]
        )
        from collector.app.cli.clients import fetch_clients

        assert sorted(
            c["client_id"] for c in fetch_clients(server, [], None, limit=1)
        ) == ["billing-1", "orders-1"]
        result = runner.invoke(
            cli,
            [
                "clients",
                "--server",
                server,
                "--format",
                "csv",
                "--filter",
                "subscription=consumers",
            ],
        )
        rows = list(csv.DictReader(io.StringIO(result.output)))
        assert [r["client_id"] for r in rows] == ["billing-1"]
        assert rows[0]["metrics"] == "org.apache.kafka.consumer."
        result = runner.invoke(
            cli, ["clients", "--server", server, "--filter", "client_id=orders-1"]
        )
        assert result.exit_code == 0
        header, row = result.stdout.splitlines()
        assert header.split()[:3] == ["INSTANCE", "CLIENT", "ID"]
        assert found["orders-1"]["client_instance_id"] in row and "producers" in row
    finally:
        consumer.close()
        producer.flush(5)


def test_a_closing_client_pushes_terminating_and_leaves_with_its_connection(
    collector: RunningCollector,
) -> None:
    # The only reference to the producer: clear() destroys it (rd_kafka_destroy).
    held = [
        Producer({"bootstrap.servers": collector.bootstrap, "client.id": "orders-9"})
    ]
    held[0].produce("t", b"x")

    def listed() -> str | None:
        held[0].poll(0)
        found = by_client_id(collector).get("orders-9")
        return (
            found["client_instance_id"] if found and found["pushes_accepted"] else None
        )

    instance = wait_for(listed, timeout_s=60, what="an accepted push of orders-9")
    held[0].flush(5)
    held.clear()  # rd_kafka_destroy: a terminating push, then the connections close
    wait_for(
        lambda: any(r.context.terminating for r in pushes(collector, instance)),
        timeout_s=30,
        what="the terminating push of orders-9",
    )
    wait_for(
        lambda: "orders-9" not in by_client_id(collector),
        timeout_s=30,
        what="orders-9 to leave the live view",
    )


def test_the_dry_run_predicts_what_the_real_alter_does(
    collector: RunningCollector, tmp_path: Path
) -> None:
    producer, consumer = start_clients(collector)
    try:
        before = pushing(collector, consumer, 2)
        data_dir = str(tmp_path / "data")
        store_file = tmp_path / "data" / "config" / "client-metrics.yaml"
        stored = store_file.read_bytes()
        change = [
            "subscriptions",
            "alter",
            "--name",
            "orders-latency",
            "--metrics",
            "org.apache.kafka.producer.request.latency",
            "--interval",
            "700",
            "--match",
            "client_id=orders-.*",
        ]
        runner = CliRunner()
        result = runner.invoke(
            cli,
            [
                *change,
                "--dry-run",
                "--server",
                clients_url(collector),
                "--format",
                "json",
            ],
        )
        assert result.exit_code == 0, result.output
        preview = json.loads(result.output)
        assert store_file.read_bytes() == stored  # nothing stored
        assert preview["unaffected"] == 1
        [affected] = preview["affected"]
        orders = before["orders-1"]["client_instance_id"]
        billing = before["billing-1"]["client_instance_id"]
        assert affected["client_instance_id"] == orders
        assert (
            affected["old"]["subscription_id"] == before["orders-1"]["subscription_id"]
        )
        assert affected["new"]["push_interval_ms"] == 500  # the lower of 500 and 700
        text = runner.invoke(
            cli, [*change, "--dry-run", "--server", clients_url(collector)]
        )
        assert (
            f"{affected['old']['subscription_id']} -> {affected['new']['subscription_id']}"
            in text.output
        )
        assert "1 instance(s) affected, 1 unaffected." in text.output

        # The real alter (the store file; the running collector reloads it).
        result = runner.invoke(cli, [*change, "--data-dir", data_dir])
        assert result.exit_code == 0, result.output
        new_id = affected["new"]["subscription_id"]

        def carried() -> bool:
            consumer.poll(0)
            producer.poll(0)
            return any(
                r.context.subscription_id == new_id for r in pushes(collector, orders)
            )

        wait_for(
            carried,
            timeout_s=60,
            what="orders-1 pushing under the predicted subscription id",
        )
        now = by_client_id(collector)
        assert now["orders-1"]["subscription_id"] == new_id
        assert now["orders-1"]["metrics"] == affected["new"]["metrics"]
        assert now["orders-1"]["subscriptions"] == affected["new"]["subscriptions"]
        # The unaffected instance keeps its id (re-created on its next request, same answer).
        wait_for(
            lambda: (
                consumer.poll(0) is None
                and pushes(collector, billing)[-1].context.received_time_unix_nano
                > pushes(collector, orders)[-1].context.received_time_unix_nano
            ),
            timeout_s=30,
            what="a later push of billing-1",
        )
        assert {r.context.subscription_id for r in pushes(collector, billing)} == {
            before["billing-1"]["subscription_id"]
        }
        new_pushes = [
            r for r in pushes(collector, orders) if r.context.subscription_id == new_id
        ]
        assert {r.context.push_interval_ms for r in new_pushes} == {
            affected["new"]["push_interval_ms"]
        }
    finally:
        consumer.close()
        producer.flush(5)
