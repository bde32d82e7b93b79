"""Faults in gateway mode, with real parts: the 3-node Apache Kafka 4.4.0 cluster (a broker
SIGKILLed under load and restarted), real librdkafka clients, ``ktc gateway`` as a real
subprocess for SIGTERM, and real TCP servers for the two faults Kafka never shows on
demand (a closed port; a server that answers garbage).

What must hold (issue 11, "Faults"; must-show 6):

* a broker killed under produce load: the gateway closes the client connections paired with
  it, logs one line for the outage and counts every failed connection; the clients carry on
  through the gateway on the new leaders; the broker restarts and the clients reconnect to
  it through the gateway; consumed straight from the cluster, no acknowledged record is
  missing or doubled (count by key);
* an unreachable upstream: each client connection is closed promptly, one log line for the
  outage however often clients retry, the failures counted; the gateway keeps serving (it
  accepts and closes the next connections, /metrics answers) and once something listens
  on that address, clients work through the same gateway;
* a malformed client frame closes only that client's connection (and its upstream one);
* a malformed upstream response closes only that pair;
* SIGTERM: requests in flight are answered, then the connections close, exit code 0;
* the learned topology survives a restart (data_dir/gateway-topology.json): a client that
  connects straight to a node's port is served before any Metadata passed;
* a client on the port of a node id the cluster does not have is closed (one line, each
  attempt counted).
"""

from __future__ import annotations

import collections
import datetime
import io
import itertools
import json
import logging
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ElectionType,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i32Timedelta, i64
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.gateway_harness import RunningGateway, wait_for
from tests.gateway.harness import _proc
from tests.gateway.harness import tansu as tansu_module
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.harness.tansu import TansuBroker

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(600)]

OUTAGES = "collector.gateway.outages"
REPO = Path(__file__).resolve().parents[2]


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------- helpers


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus exposition text (0 when absent)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(
                sample.labels.get(k) == v for k, v in labels.items()
            ):
                return sample.value
    return 0.0


def failures(gateway: RunningGateway, node: str, reason: str) -> float:
    return metric(
        gateway.metrics_text(),
        "ktc_gateway_upstream_failures_total",
        node=node,
        reason=reason,
    )


def log_lines(
    caplog: pytest.LogCaptureFixture, since: int, level: int, text: str
) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records[since:]
        if r.name == OUTAGES and r.levelno == level and text in r.getMessage()
    ]


def closing_lines(caplog: pytest.LogCaptureFixture, since: int) -> list[str]:
    """The network layer's per-connection "closing connection" lines at INFO or above."""
    return [
        r.getMessage()
        for r in caplog.records[since:]
        if r.levelno >= logging.INFO and "closing connection" in r.getMessage()
    ]


_correlation = itertools.count(1)


class KafkaSocket:
    """One raw Kafka connection kept open: requests written with kio, or any bytes."""

    def __init__(
        self, port: int, *, client_id: str = "ktc-faults", timeout: float = 10.0
    ) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_id = client_id

    def send(self, request: Any) -> int:
        header_type = request.__header_schema__
        correlation_id = next(_correlation)
        fields: dict[str, Any] = {
            "request_api_key": i16(request.__api_key__),
            "request_api_version": i16(request.__version__),
            "correlation_id": i32(correlation_id),
        }
        if "client_id" in header_type.__dataclass_fields__:
            fields["client_id"] = self.client_id
        buffer = io.BytesIO()
        entity_writer(header_type)(buffer, header_type(**fields))
        entity_writer(type(request))(buffer, request)
        self.send_raw(struct.pack(">i", len(buffer.getvalue())) + buffer.getvalue())
        return correlation_id

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive(self, response_type: Any, correlation_id: int) -> Any:
        (size,) = struct.unpack(">i", self._exactly(4))
        raw = self._exactly(size)
        header, offset = entity_reader(response_type.__header_schema__)(raw, 0)
        assert header.correlation_id == correlation_id
        response, _ = entity_reader(response_type)(raw, offset)
        return response

    def closed_by_peer(self) -> bool:
        """True when the other end closed with nothing more to read (EOF or reset)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()

    def _exactly(self, size: int) -> bytes:
        chunks = []
        while size:
            chunk = self.sock.recv(size)
            if not chunk:
                raise ConnectionError("closed mid-response")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)


def api_versions_request() -> Any:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    return ApiVersionsRequest(
        client_software_name="ktc-faults", client_software_version="1"
    )


def api_versions_response() -> Any:
    from kio.schema.api_versions.v3.response import ApiVersionsResponse

    return ApiVersionsResponse


class BrokerStats:
    """The latest librdkafka statistics per broker address (state, connects, disconnects),
    and whether a watched address was seen down and then up again."""

    def __init__(self) -> None:
        self.brokers: dict[str, dict[str, Any]] = {}
        self._watched: str | None = None
        self._seen_down = False
        self.reconnected = False

    def watch(self, address: str) -> None:
        self._watched, self._seen_down, self.reconnected = address, False, False

    def __call__(self, raw: str) -> None:
        current = {}
        for broker in json.loads(raw).get("brokers", {}).values():
            if broker["nodename"]:
                self.brokers[broker["nodename"]] = current[broker["nodename"]] = broker
        if self._watched is not None:
            # librdkafka drops a broker that left the metadata and makes a new one when it
            # comes back: absent counts as down.
            up = current.get(self._watched, {}).get("state") == "UP"
            if not up:
                self._seen_down = True
            elif self._seen_down:
                self.reconnected = True


class KeyedProducer:
    """A librdkafka producer (acks=all, idempotent) on its own thread, producing keyed
    records until stopped, at most ``window`` unacknowledged; keeps every acknowledged key."""

    def __init__(
        self, name: str, bootstrap: str, topic: str, window: int = 2000
    ) -> None:
        self.name = name
        self.topic = topic
        self.window = window
        self.stats = BrokerStats()
        self.acked: set[str] = set()
        self.errors: list[str] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": name,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "reconnect.backoff.ms": 100,
                "reconnect.backoff.max.ms": 1000,
                "statistics.interval.ms": 200,
                "stats_cb": self.stats,
                "log_level": 3,
            }
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"producer-{name}", daemon=True
        )

    def start(self) -> KeyedProducer:
        self._thread.start()
        return self

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.acked.add(message.key().decode())
        else:
            self.errors.append(str(error))

    def _run(self) -> None:
        producer = self.producer
        sequence = itertools.count()
        while not self._stop.is_set():
            if len(producer) >= self.window:
                producer.poll(0.05)  # waits for delivery reports, not for time
                continue
            for _ in range(50):
                key = f"{self.name}-{next(sequence)}"
                producer.produce(
                    self.topic, key=key, value=b"v" * 100, on_delivery=self._delivered
                )
            producer.poll(0.01)
        producer.flush(120)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)


def count_by_key(
    cluster: KafkaCluster, topic: str, partitions: int
) -> collections.Counter[str]:
    """Every record of ``topic``, read straight from the cluster (not through the gateway)."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers(),
            "group.id": topic_name("count"),
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
        consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        )
        counts: collections.Counter[str] = collections.Counter()
        positions = dict.fromkeys(range(partitions), 0)

        def read() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                key, partition, offset = (
                    message.key(),
                    message.partition(),
                    message.offset(),
                )
                assert key is not None and partition is not None and offset is not None
                counts[key.decode()] += 1
                positions[partition] = offset + 1
            return all(positions[p] >= ends[p] for p in range(partitions))

        wait_for(read, timeout_s=120, what=f"{topic} read to its end", poll_s=0)
        return counts
    finally:
        consumer.close()


def leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    metadata = admin.list_topics(topic, timeout=10)
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


# ---------------------------------------------------------------------------- (a) a broker dies


def test_a_broker_killed_under_produce_load(
    kafka_cluster: KafkaCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger=OUTAGES)
    topic = topic_name("gw-kill")
    producers: list[KeyedProducer] = []
    with RunningGateway(
        tmp_path / "data", kafka_cluster.bootstrap_servers()
    ) as gateway:
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap, "log_level": 3})
        admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(timeout=60)
        kafka_cluster.wait_in_sync([topic])
        victim = leaders(admin, topic)[0]
        victim_address = f"127.0.0.1:{gateway.node_ports()[victim]}"
        service = gateway.gateway_server.gateway
        assert service is not None

        def pairs_of_victim() -> int:
            return gateway.call(
                lambda: sum(1 for pair in service.pairs if pair.node_id == victim)
            )

        try:
            producers = [
                KeyedProducer(f"kill-{n}", gateway.bootstrap, topic).start()
                for n in range(2)
            ]
            wait_for(
                lambda: (
                    all(len(p.acked) >= 500 for p in producers)
                    and pairs_of_victim() >= 2
                ),
                timeout_s=60,
                what="both producers acknowledged and connected to the victim through the gateway",
            )
            paired = pairs_of_victim()
            for producer in producers:
                producer.stats.watch(victim_address)
            mark = len(caplog.records)

            kafka_cluster.kill_node(victim)

            # The gateway closes every client connection of the dead broker.
            wait_for(
                lambda: (
                    failures(gateway, str(victim), "lost")
                    + failures(gateway, str(victim), "closed")
                    >= paired
                ),
                timeout_s=30,
                what=f"the {paired} client connections of node {victim} closed by the gateway",
            )
            # The clients carry on through the gateway on the new leaders.
            wait_for(
                lambda: victim not in leaders(admin, topic).values(),
                timeout_s=60,
                what="leaderships moved off the killed node",
            )
            acked = [len(p.acked) for p in producers]
            wait_for(
                lambda: all(
                    len(p.acked) >= n + 3000
                    for p, n in zip(producers, acked, strict=True)
                ),
                timeout_s=90,
                what="3000 more records acknowledged per producer after the kill",
            )
            # One log line for the outage, however many connections failed meanwhile.
            down = log_lines(
                caplog, mark, logging.WARNING, f"upstream node {victim} is down"
            )
            assert len(down) == 1, down
            assert not closing_lines(caplog, mark)  # per connection: DEBUG only
            assert not [r for r in caplog.records[mark:] if r.levelno >= logging.ERROR]
            text = gateway.metrics_text()
            assert metric(text, "ktc_gateway_upstream_down", node=str(victim)) == 1
            for node in set(kafka_cluster.node_ids) - {victim}:
                assert metric(text, "ktc_gateway_upstream_down", node=str(node)) == 0

            # The broker comes back; once it leads again the clients reconnect to it
            # through its gateway port.
            mark = len(caplog.records)
            kafka_cluster.start_node(victim)
            kafka_cluster.wait_in_sync([topic])
            admin.elect_leaders(
                ElectionType.PREFERRED, [TopicPartition(topic, p) for p in range(6)]
            ).result()
            wait_for(
                lambda: victim in leaders(admin, topic).values(),
                timeout_s=60,
                what="the restarted node leading again",
            )
            wait_for(
                lambda: all(p.stats.reconnected for p in producers),
                timeout_s=60,
                what=f"both producers connected again to node {victim} at {victim_address}",
            )
            acked = [len(p.acked) for p in producers]
            wait_for(
                lambda: all(
                    len(p.acked) >= n + 1000
                    for p, n in zip(producers, acked, strict=True)
                ),
                timeout_s=60,
                what="1000 more records acknowledged per producer after the restart",
            )
            back = log_lines(
                caplog, mark, logging.INFO, f"upstream node {victim} is back"
            )
            assert len(back) == 1, back
            assert pairs_of_victim() >= 2
            assert (
                metric(
                    gateway.metrics_text(),
                    "ktc_gateway_upstream_down",
                    node=str(victim),
                )
                == 0
            )
            # Every broker connection the producers made went to a gateway port.
            gateway_addresses = {
                f"127.0.0.1:{port}" for port in gateway.gateway_ports()
            }
            for producer in producers:
                assert set(producer.stats.brokers) <= gateway_addresses
        finally:
            for producer in producers:
                producer.stop()
            kafka_cluster.ensure_running()

    # No acknowledged record is lost, none is written twice (idempotence), counted by key
    # straight from the cluster.
    for producer in producers:
        assert not producer.errors, producer.errors[:5]
    counts = count_by_key(kafka_cluster, topic, 6)
    acked_keys: set[str] = set().union(*(p.acked for p in producers))
    missing = acked_keys - set(counts)
    assert not missing, (
        f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    )
    doubled = [key for key in acked_keys if counts[key] > 1]
    assert not doubled, f"{len(doubled)} records written twice, e.g. {doubled[:5]}"


# ---------------------------------------------------------------------------- (b) unreachable


def test_an_unreachable_upstream_closes_clients_and_the_gateway_keeps_serving(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if (reason := tansu_module.missing_prerequisites()) is not None:
        pytest.skip(reason)
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger=OUTAGES)
    (port,) = _proc.free_ports(1)  # nothing listens there
    with RunningGateway(tmp_path / "data", f"127.0.0.1:{port}") as gateway:
        # A client connection is closed, promptly and without an answer.
        client = KafkaSocket(gateway.port)
        client.send(api_versions_request())
        assert client.closed_by_peer()
        client.close()

        # A real client retries again and again: each attempt is counted, one line logged.
        admin = AdminClient(
            {
                "bootstrap.servers": gateway.bootstrap,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "log_level": 0,
            }
        )
        wait_for(
            lambda: failures(gateway, "bootstrap", "unreachable") >= 5,
            timeout_s=30,
            what="five failed upstream connections counted",
        )
        down = log_lines(
            caplog, 0, logging.WARNING, "upstream bootstrap servers are down"
        )
        assert len(down) == 1, down
        assert not closing_lines(caplog, 0)  # per connection: DEBUG only
        assert f"127.0.0.1:{port}" in down[0]
        assert (
            metric(
                gateway.metrics_text(), "ktc_gateway_upstream_down", node="bootstrap"
            )
            == 1
        )

        # The gateway keeps serving: /metrics over HTTP, and every new connection is
        # accepted and closed (not left hanging).
        assert gateway.server is not None
        with urllib.request.urlopen(
            f"http://127.0.0.1:{gateway.server.http_port}/metrics", timeout=10
        ) as r:
            assert b"ktc_gateway_upstream_failures_total" in r.read()
        for _ in range(3):
            other = KafkaSocket(gateway.port)
            other.send(api_versions_request())
            assert other.closed_by_peer()
            other.close()

        # Something starts listening there (a real broker, Tansu): the same gateway serves
        # the waiting client, and the outage ends with one line.
        (tmp_path / "tansu").mkdir()
        with TansuBroker(port=port, work_dir=tmp_path / "tansu"):
            metadata = admin.list_topics(timeout=30)
            node_ports = gateway.node_ports()
            assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [
                f"127.0.0.1:{node_ports[b.id]}" for b in metadata.brokers.values()
            ]
            back = log_lines(
                caplog, 0, logging.INFO, "upstream bootstrap servers are back"
            )
            assert len(back) == 1, back
            assert (
                metric(
                    gateway.metrics_text(),
                    "ktc_gateway_upstream_down",
                    node="bootstrap",
                )
                == 0
            )
            assert len(log_lines(caplog, 0, logging.WARNING, "")) == 1


# ---------------------------------------------------------------------------- (c) bad client


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def request_header(
    api_key: int, version: int, correlation_id: int, client_id: bytes = b"bad"
) -> bytes:
    return (
        struct.pack(">hhih", api_key, version, correlation_id, len(client_id))
        + client_id
    )


@pytest.mark.parametrize(
    "frame",
    [
        # A size prefix over socket.request.max.bytes (100 MiB).
        struct.pack(">i", 0x7FFF_FFFF) + b"\x00" * 16,
        # A negative size prefix.
        struct.pack(">i", -5),
        # An API key Kafka does not have.
        _frame(request_header(9999, 0, 7)),
        # A Produce whose acks the gateway must read and cannot (v9: flexible header).
        _frame(request_header(0, 9, 7) + b"\x00" + b"\x05ab"),
    ],
    ids=["oversized", "negative-size", "unknown-api-key", "truncated-produce"],
)
def test_a_malformed_client_frame_closes_only_that_connection(
    kafka_cluster: KafkaCluster,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    frame: bytes,
) -> None:
    caplog.set_level(logging.INFO)
    topic = topic_name("gw-bad-client")
    with RunningGateway(
        tmp_path / "data", kafka_cluster.bootstrap_servers()
    ) as gateway:
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(timeout=60)
        producer = KeyedProducer("bystander", gateway.bootstrap, topic).start()
        try:
            wait_for(
                lambda: len(producer.acked) >= 500,
                timeout_s=60,
                what="the bystander producing",
            )
            server = gateway.gateway_server
            pairs = gateway.call(lambda: len(server.gateway.pairs))  # type: ignore[union-attr]

            bad = KafkaSocket(gateway.port)
            wait_for(
                lambda: gateway.call(lambda: len(server.gateway.pairs)) == pairs + 1,  # type: ignore[union-attr]
                timeout_s=10,
                what="the bad client paired",
            )
            bad.send_raw(frame)
            assert bad.closed_by_peer()
            bad.close()
            # Its upstream connection went with it.
            wait_for(
                lambda: gateway.call(lambda: len(server.gateway.pairs)) == pairs,  # type: ignore[union-attr]
                timeout_s=10,
                what="the bad client's pair gone",
            )
            assert (
                metric(gateway.metrics_text(), "ktc_connections_closed_on_error_total")
                == 1
            )
            closing = [
                r for r in caplog.records if "closing connection" in r.getMessage()
            ]
            assert len(closing) == 1 and not closing[0].exc_info, [
                r.getMessage() for r in closing
            ]

            # Everyone else carries on: the bystander never lost a connection, and a new
            # client on the same listener is answered.
            acked = len(producer.acked)
            wait_for(
                lambda: len(producer.acked) >= acked + 1000,
                timeout_s=60,
                what="the bystander going on",
            )
            assert all(
                b["disconnects"] == 0 for b in producer.stats.brokers.values()
            ), producer.stats.brokers
            good = KafkaSocket(gateway.port)
            correlation_id = good.send(api_versions_request())
            assert good.receive(api_versions_response(), correlation_id).error_code == 0
            good.close()
        finally:
            producer.stop()
        assert not producer.errors, producer.errors[:5]


# ---------------------------------------------------------------------------- (d) bad upstream


class BreakingRelay:
    """A real TCP server in front of one real broker: it relays every connection byte for
    byte, except that a connection whose request names client id ``break-me`` gets
    ``garbage(correlation_id)`` instead of the broker's answer. It stands for no Kafka
    behaviour: it is the broken upstream of this one fault."""

    def __init__(self, broker_port: int, garbage: Callable[[int], bytes]) -> None:
        self.broker_port = broker_port
        self.garbage = garbage
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.broken = 0
        threading.Thread(target=self._accept, daemon=True, name="relay-accept").start()

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        broker = socket.create_connection(("127.0.0.1", self.broker_port))
        threading.Thread(target=self._pump, args=(broker, client), daemon=True).start()
        try:
            while True:
                head = self._exactly(client, 4)
                (size,) = struct.unpack(">i", head)
                payload = self._exactly(client, size)
                _, _, correlation_id, length = struct.unpack_from(">hhih", payload, 0)
                client_id = payload[10 : 10 + max(length, 0)]
                if client_id == b"break-me":
                    self.broken += 1
                    client.sendall(self.garbage(correlation_id))
                else:
                    broker.sendall(head + payload)
        except (OSError, struct.error):
            pass
        finally:
            broker.close()
            client.close()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    @staticmethod
    def _exactly(sock: socket.socket, size: int) -> bytes:
        chunks = []
        while size:
            chunk = sock.recv(size)
            if not chunk:
                raise OSError("closed")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)


GARBAGE: dict[str, Callable[[int], bytes]] = {
    # A response for a request never sent.
    "wrong-correlation-id": lambda correlation_id: _frame(
        struct.pack(">i", correlation_id + 1) + b"junk"
    ),
    # Not a frame at all.
    "negative-size": lambda correlation_id: struct.pack(">i", -42) + b"junk",
    # The right correlation id, then an ApiVersions body the gateway cannot read.
    "unreadable-body": lambda correlation_id: _frame(
        struct.pack(">i", correlation_id) + b"\x00\x00\xff"
    ),
}


@pytest.mark.parametrize("garbage", sorted(GARBAGE))
def test_a_malformed_upstream_response_closes_only_that_pair(
    kafka_cluster: KafkaCluster,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    garbage: str,
) -> None:
    caplog.set_level(logging.DEBUG, logger=OUTAGES)
    relay = BreakingRelay(
        kafka_cluster.node_ports[kafka_cluster.node_ids[0]]["PLAINTEXT"],
        GARBAGE[garbage],
    )
    topic = topic_name("gw-bad-upstream")
    try:
        with RunningGateway(tmp_path / "data", f"127.0.0.1:{relay.port}") as gateway:
            admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
            admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(timeout=60)
            producer = KeyedProducer("bystander", gateway.bootstrap, topic).start()
            try:
                wait_for(
                    lambda: len(producer.acked) >= 500,
                    timeout_s=60,
                    what="the bystander producing",
                )

                broken = KafkaSocket(gateway.port, client_id="break-me")
                broken.send(api_versions_request())
                assert broken.closed_by_peer()  # no answer, the pair closed
                broken.close()
                assert relay.broken == 1
                wait_for(
                    lambda: failures(gateway, "bootstrap", "protocol") == 1,
                    timeout_s=10,
                    what="the broken pair counted",
                )
                lines = log_lines(caplog, 0, logging.WARNING, "broke the protocol")
                assert len(lines) == 1, lines

                # The other pairs, through the same relay and to the brokers, carry on.
                fine = KafkaSocket(gateway.port, client_id="fine")
                correlation_id = fine.send(api_versions_request())
                assert (
                    fine.receive(api_versions_response(), correlation_id).error_code
                    == 0
                )
                fine.close()
                acked = len(producer.acked)
                wait_for(
                    lambda: len(producer.acked) >= acked + 1000,
                    timeout_s=60,
                    what="the bystander going on",
                )
                assert all(
                    b["disconnects"] == 0 for b in producer.stats.brokers.values()
                ), producer.stats.brokers
                assert (
                    metric(
                        gateway.metrics_text(),
                        "ktc_gateway_upstream_down",
                        node="bootstrap",
                    )
                    == 0
                )
            finally:
                producer.stop()
            assert not producer.errors, producer.errors[:5]
    finally:
        relay.close()


# ---------------------------------------------------------------------------- (e) SIGTERM


@pytest.fixture
def gateway_process(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> Iterator[Callable[[], dict[str, Any]]]:
    """``ktc gateway`` as a real subprocess; returns its ready file's contents."""
    ready = tmp_path / "ready.json"
    log_path = tmp_path / "gateway.log"
    processes: list[subprocess.Popen[bytes]] = []

    def start() -> dict[str, Any]:
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [
                    *_proc.die_with_parent(),
                    str(REPO / ".venv" / "bin" / "ktc"),
                    "gateway",
                    "--upstream",
                    kafka_cluster.bootstrap_servers(),
                    "--listeners",
                    "PLAINTEXT://127.0.0.1:0",
                    "--broker-port-start",
                    "0",
                    "--data-dir",
                    str(tmp_path / "data"),
                    "--http-listener",
                    "127.0.0.1:0",
                    "--ready-file",
                    str(ready),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_proc.clean_env(drop_prefixes=("KTC_",)),
            )
        _proc.register(process)
        processes.append(process)
        _proc.poll_until(
            lambda: ready.exists(),
            timeout=60,
            what="ktc gateway ready",
            alive=_proc.exited(process, log_path),
        )
        info: dict[str, Any] = json.loads(ready.read_text())
        info["process"] = process
        info["log"] = log_path
        return info

    yield start
    for process in processes:
        _proc.kill(process)


def test_sigterm_answers_requests_in_flight_then_closes(
    kafka_cluster: KafkaCluster, gateway_process: Callable[[], dict[str, Any]]
) -> None:
    from kio.schema.fetch.v12 import request as fetch
    from kio.schema.fetch.v12.response import FetchResponse

    topic = topic_name("gw-drain")
    direct = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers()})
    direct.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=60)
    kafka_cluster.wait_in_sync([topic])

    info = gateway_process()
    process: subprocess.Popen[bytes] = info["process"]
    bootstrap_port = next(iter(info["listeners"].values()))
    metrics_url = f"http://127.0.0.1:{info['http_port']}/metrics"

    def scrape() -> str:
        with urllib.request.urlopen(metrics_url, timeout=5) as response:
            return response.read().decode()

    # Metadata through the gateway: the leader of partition 0 at its gateway port.
    metadata = AdminClient(
        {"bootstrap.servers": f"127.0.0.1:{bootstrap_port}"}
    ).list_topics(topic, timeout=30)
    leader = metadata.topics[topic].partitions[0].leader
    leader_port = metadata.brokers[leader].port

    # A Fetch that the broker holds for 2 s (nothing to read, min_bytes 1 MiB).
    fetching = KafkaSocket(leader_port)
    idle = KafkaSocket(bootstrap_port)
    correlation_id = idle.send(api_versions_request())
    assert idle.receive(api_versions_response(), correlation_id).error_code == 0
    request = fetch.FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=2000)),
        min_bytes=i32(1 << 20),
        topics=(
            fetch.FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    fetch.FetchPartition(
                        partition=i32(0),
                        fetch_offset=i64(0),
                        partition_max_bytes=i32(1 << 20),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    sent = time.monotonic()
    correlation_id = fetching.send(request)
    wait_for(
        lambda: metric(scrape(), "ktc_gateway_requests_in_flight") == 1,
        timeout_s=10,
        what="the Fetch in flight at the gateway",
        poll_s=0.01,
    )

    process.send_signal(signal.SIGTERM)

    # The idle connection closes at once, the bootstrap listener stops accepting ...
    assert idle.closed_by_peer()
    assert time.monotonic() - sent < 1.5, "the idle connection waited for the Fetch"
    wait_for(
        lambda: not _proc.port_open(bootstrap_port),
        timeout_s=5,
        what="the listener closed",
    )
    # ... the Fetch in flight is answered (the broker's full wait), then its connection closes.
    response = fetching.receive(FetchResponse, correlation_id)
    assert time.monotonic() - sent >= 1.5
    assert response.error_code == 0
    assert [p.error_code for t in response.responses for p in t.partitions] == [0]
    assert fetching.closed_by_peer()
    assert process.wait(30) == 0
    output = info["log"].read_text()
    assert "received SIGTERM" in output
    assert "Traceback" not in output


# ---------------------------------------------------------------------------- the topology


def test_the_learned_topology_survives_a_restart(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    with RunningGateway(data_dir, kafka_cluster.bootstrap_servers()) as gateway:
        AdminClient({"bootstrap.servers": gateway.bootstrap}).list_topics(timeout=30)
        learned = gateway.node_ports()
    assert sorted(learned) == kafka_cluster.node_ids
    saved = json.loads((data_dir / "gateway-topology.json").read_text())
    assert saved["upstream"] == {
        str(n): ["127.0.0.1", ports["PLAINTEXT"]]
        for n, ports in kafka_cluster.node_ports.items()
    }

    with RunningGateway(data_dir, kafka_cluster.bootstrap_servers()) as gateway:
        # Every node's port is bound at start, before any response passed ...
        node_ports = gateway.node_ports()
        assert sorted(node_ports) == kafka_cluster.node_ids
        # ... so a client whose cached metadata names a node's port is served there.
        node = kafka_cluster.node_ids[1]
        metadata = AdminClient(
            {"bootstrap.servers": f"127.0.0.1:{node_ports[node]}"}
        ).list_topics(timeout=30)
        assert {f"{b.host}:{b.port}" for b in metadata.brokers.values()} == {
            f"127.0.0.1:{port}" for port in node_ports.values()
        }


def consecutive_free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports free a moment ago."""
    import random

    for _ in range(200):
        base = random.randrange(20000, 30000)
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


def test_a_node_port_whose_node_the_cluster_does_not_have_closes_the_client(
    kafka_cluster: KafkaCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Fixed ports bind the whole node range at start; a client on the port of a node id
    the cluster does not have is closed once the cluster, asked, does not name it."""
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger=OUTAGES)
    base = consecutive_free_ports(10)
    missing = 9  # the cluster's nodes are 1-3
    with RunningGateway(
        tmp_path / "data",
        kafka_cluster.bootstrap_servers(),
        **{"gateway.broker.port.start": base, "gateway.max.nodes": 10},
    ) as gateway:
        for _ in range(3):
            client = KafkaSocket(base + missing)
            client.send(api_versions_request())
            assert client.closed_by_peer()
            client.close()
        assert failures(gateway, str(missing), "unreachable") == 3
        down = log_lines(caplog, 0, logging.WARNING, f"upstream node {missing} is down")
        assert len(down) == 1 and "not known" in down[0], down
        assert not closing_lines(caplog, 0)
        # The nodes the cluster has are served on their ports.
        node = kafka_cluster.node_ids[0]
        good = KafkaSocket(base + node)
        correlation_id = good.send(api_versions_request())
        assert good.receive(api_versions_response(), correlation_id).error_code == 0
        good.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-x", "-q"]))
