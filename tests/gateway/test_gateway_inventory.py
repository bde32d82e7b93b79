"""The inventory of every client connection through ``ktc gateway`` in front of the real
Kafka 4.4.0 cluster (docs/prometheus.md, "Inventory"): a confluent-kafka producer with
``enable.metrics.push=false`` is listed with telemetry off beside one with it on, and a
client that sends ListOffsets v0 raw over the wire (a version Kafka 4.0 removed, KIP-896)
is listed with it flagged, in ``ktc clients --inventory`` and on ``/metrics``."""

from __future__ import annotations

import json
import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from collector.app.cli import cli
from proto import ApiKeys
from tests.gateway.gateway_harness import RunningGateway, wait_for
from tests.gateway.harness.kafka_cluster import KafkaCluster

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(240)]

LEGACY = ("legacy-lister", "0.8.2")


@pytest.fixture(scope="module")
def gateway(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    data_dir = tmp_path_factory.mktemp("inventory") / "data"
    with RunningGateway(data_dir, kafka_cluster.bootstrap_servers()) as running:
        yield running


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _compact(text: str) -> bytes:
    data = text.encode()
    return _uvarint(len(data) + 1) + data


def _send(sock: socket.socket, api_key: int, version: int, header_tail: bytes,
          body: bytes, client_id: str, correlation_id: int) -> None:  # fmt: skip
    encoded = client_id.encode()
    header = struct.pack(">hhih", api_key, version, correlation_id, len(encoded))
    frame = header + encoded + header_tail + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)


def _read_frame(sock: socket.socket) -> bytes:
    """One response (b"" when the connection closed, as Kafka closes it for a version it
    does not accept)."""
    data = b""
    while len(data) < 4:
        chunk = sock.recv(4 - len(data))
        if not chunk:
            return b""
        data += chunk
    (size,) = struct.unpack(">i", data)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return b""
        body += chunk
    return body


def send_list_offsets_v0(port: int, client_id: str) -> None:
    """ApiVersions v3 naming the software, then ListOffsets v0, hand-encoded: what a client
    from before Kafka 0.10.1 sends."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        name, version = LEGACY
        # ApiVersions v3: request header v2 (tagged fields after the client id).
        _send(sock, ApiKeys.API_VERSIONS, 3, b"\x00",
              _compact(name) + _compact(version) + b"\x00", client_id, 1)  # fmt: skip
        assert _read_frame(sock), "no ApiVersions response"
        # ListOffsets v0: replica_id -1, one topic, partition 0, latest, one offset.
        topic = b"inventory-legacy"
        body = struct.pack(">ii", -1, 1) + struct.pack(">h", len(topic)) + topic
        body += struct.pack(">iiqi", 1, 0, -1, 1)
        _send(sock, ApiKeys.LIST_OFFSETS, 0, b"", body, client_id, 2)
        _read_frame(sock)  # Kafka 4.4 closes the connection: nothing to check here


def inventory(gateway: RunningGateway) -> dict[str, Any]:
    assert gateway.server is not None
    result = CliRunner().invoke(
        cli,
        ["clients", "--inventory", "--format", "json", "--server",
         f"http://127.0.0.1:{gateway.server.http_port}"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    answer: dict[str, Any] = json.loads(result.output)
    return answer


def entry(answer: dict[str, Any], client_id: str) -> dict[str, Any] | None:
    found = [c for c in answer["clients"] if c["client_id"] == client_id]
    return found[0] if found else None


def metric(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return float(sample.value)
    return None


def test_the_inventory_lists_telemetry_off_and_removed_versions(
    gateway: RunningGateway,
) -> None:
    topic = f"inventory-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producers = {
        client_id: Producer(
            {
                "bootstrap.servers": gateway.bootstrap,
                "client.id": client_id,
                "enable.metrics.push": push,
                "log_level": 3,
            }
        )
        for client_id, push in (("quiet-producer", False), ("pushing-producer", True))
    }
    try:
        for producer in producers.values():
            producer.produce(topic, value=b"x")
            assert producer.flush(30) == 0
        send_list_offsets_v0(gateway.port, "legacy-lister")

        def listed() -> bool:
            for producer in producers.values():
                producer.poll(0)
            answer = inventory(gateway)
            pushing = entry(answer, "pushing-producer")
            return (
                entry(answer, "legacy-lister") is not None
                and pushing is not None
                and pushing["telemetry"]
            )

        wait_for(listed, timeout_s=60, what="all three clients in the inventory")
        answer = inventory(gateway)
        assert gateway.server is not None
        table = CliRunner().invoke(
            cli,
            ["clients", "--inventory", "--server",
             f"http://127.0.0.1:{gateway.server.http_port}"],
        )  # fmt: skip
        metrics_text = gateway.metrics_text()
    finally:
        for producer in producers.values():
            producer.flush(10)

    quiet = entry(answer, "quiet-producer")
    assert quiet is not None
    assert quiet["telemetry"] is False
    assert quiet["connections"] >= 1
    assert quiet["client_software_name"] == "confluent-kafka-python"
    apis = {r["api"] for r in quiet["requests"]}
    assert {"ApiVersions", "Metadata", "Produce"} <= apis
    assert "GetTelemetrySubscriptions" not in apis
    assert not any(r["removed"] for r in quiet["requests"])

    pushing = entry(answer, "pushing-producer")
    assert pushing is not None and pushing["telemetry"] is True

    legacy = entry(answer, "legacy-lister")
    assert legacy is not None
    assert (legacy["client_software_name"], legacy["client_software_version"]) == LEGACY
    assert {"api": "ListOffsets", "version": 0, "count": 1, "removed": True} in legacy[
        "requests"
    ]

    assert table.exit_code == 0, table.output
    print(table.output)  # what an operator sees
    lines = table.output.splitlines()
    assert "ListOffsets v0=1" in next(r for r in lines if "legacy-lister" in r)
    assert " off " in next(r for r in lines if "quiet-producer" in r)

    removed = metric(
        metrics_text,
        "ktc_client_removed_api_versions_total",
        client_id="legacy-lister",
        api="ListOffsets",
        version="0",
    )
    assert removed == 1
    telemetry = "ktc_client_telemetry_enabled"
    assert metric(metrics_text, telemetry, client_id="quiet-producer") == 0
    assert metric(metrics_text, telemetry, client_id="pushing-producer") == 1
