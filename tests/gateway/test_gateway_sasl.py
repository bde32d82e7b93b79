"""SASL/SCRAM-SHA-512 through ``ktc gateway`` in front of a real Apache Kafka 4.4.0 cluster's
SASL_PLAINTEXT listener (users alice and bob).

The gateway's own listener is PLAINTEXT at the TCP level; the clients speak SASL_PLAINTEXT
to it, and SaslHandshake / SaslAuthenticate pass through to the cluster on the client's own
upstream connection.  Through the gateway:

* librdkafka (alice) and the Java client (bob) authenticate, produce and consume;
* the principal each authenticated as is in the telemetry context the gateway lands
  (``User:alice``, ``User:bob``), and it is the quota ``user`` entity: a ``users/alice``
  producer quota throttles alice's producer and not bob's, with the same client id;
* a wrong password fails authentication as it does directly against the cluster, and a
  client that stops half-way through a SCRAM exchange is not taken for the user it named;
* no password reaches a log line of the gateway (every record, at DEBUG).
"""

from __future__ import annotations

import functools
import json
import logging
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from exporters.landing import LandingRecord
from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway, wait_for
from tests.gateway.harness.kafka_cluster import KafkaCluster

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(600)]

WRONG_PASSWORD = "wr0ng-pa55word-7f3a"
CAP = 100 * 1024  # alice's producer_byte_rate in the quota test, bytes per second
VALUE = b"s" * 1000


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def gateway(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    data_dir = tmp_path_factory.mktemp("gateway-sasl") / "data"
    ConfigStore(data_dir).alter_subscription(
        "everything", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}, []
    )
    with RunningGateway(
        data_dir,
        kafka_cluster.bootstrap_servers("SASL_PLAINTEXT"),
        **{"quota.window.num": 2, "quota.window.size.seconds": 1},
    ) as running:
        yield running


@pytest.fixture(autouse=True)
def no_password_logged(
    caplog: pytest.LogCaptureFixture, kafka_cluster: KafkaCluster
) -> Iterator[None]:
    """Every log record of the test, at DEBUG, is free of every password used."""
    caplog.set_level(logging.DEBUG)
    yield
    secrets = [*kafka_cluster.sasl_users.values(), WRONG_PASSWORD]
    records = [*caplog.get_records("setup"), *caplog.get_records("call")]
    logged = []
    for record in records:
        logged.append(caplog.handler.format(record))
        logged.append(repr(record.args))
    text = "\n".join(logged)
    leaked = [secret for secret in secrets if secret in text]
    assert not leaked, f"passwords in the gateway's logs: {leaked}"


def sasl_config(
    bootstrap: str, user: str, password: str, mechanism: str = "SCRAM-SHA-512"
) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def through_gateway(
    gateway: RunningGateway, kafka_cluster: KafkaCluster, user: str
) -> dict[str, Any]:
    return sasl_config(gateway.bootstrap, user, kafka_cluster.sasl_users[user])


def from_client(client_id: str) -> Callable[[LandingRecord], bool]:
    return lambda record: record.context.client_id == client_id


def landed(
    gateway: RunningGateway, predicate: Callable[[LandingRecord], bool]
) -> list[LandingRecord]:
    return [
        record for record in gateway.landed() if record.payload and predicate(record)
    ]


def test_librdkafka_alice_through_the_gateway(
    gateway: RunningGateway, kafka_cluster: KafkaCluster
) -> None:
    alice = through_gateway(gateway, kafka_cluster, "alice")
    topic = topic_name("gw-sasl-rdkafka")
    admin = AdminClient({**alice, "client.id": "alice-admin"})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(timeout=60)
    kafka_cluster.wait_in_sync([topic])

    producer = Producer(
        {**alice, "client.id": "alice-producer", "acks": "all", "linger.ms": 5}
    )
    keys = {f"a-{i}" for i in range(1000)}
    for key in sorted(keys):
        producer.produce(topic, key=key, value=b"v")
    assert producer.flush(60) == 0

    consumer = Consumer(
        {
            **alice,
            "client.id": "alice-consumer",
            "group.id": topic_name("alice-group"),
            "auto.offset.reset": "earliest",
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
            return consumed == keys

        wait_for(
            consume,
            timeout_s=90,
            what="alice's records consumed through the gateway",
            poll_s=0,
        )
        # The principal the clients authenticated as is in the landed telemetry context.
        for client_id in ("alice-producer", "alice-consumer"):
            records = wait_for(
                functools.partial(landed, gateway, from_client(client_id)),
                timeout_s=30,
                what=f"a telemetry push from {client_id}",
            )
            assert {record.context.principal for record in records} == {"User:alice"}
            assert all(record.context.upstream_cluster_id for record in records)
    finally:
        consumer.close()
        producer.flush(10)


def test_java_client_bob_through_the_gateway(
    gateway: RunningGateway,
    kafka_cluster: KafkaCluster,
    java_clients: Callable[..., dict[str, Any]],
) -> None:
    result = java_clients(
        gateway.bootstrap,
        topic_name("gw-sasl-java"),
        sasl_username="bob",
        sasl_password=kafka_cluster.sasl_users["bob"],
        records=2000,
        txn_records=10,
        partitions=3,
        replication_factor=3,
        client_props={"client.id": "bob-java"},
    )
    assert result["ok"], (result["errors"], result["stderr_tail"])
    assert result["acked"] == 2000 and result["consumed_distinct_keys"] == 2010
    gateway_addresses = {f"127.0.0.1:{port}" for port in gateway.gateway_ports()}
    assert (
        result["remote_endpoints"]
        and set(result["remote_endpoints"]) <= gateway_addresses
    )
    records = wait_for(
        lambda: landed(
            gateway, lambda r: r.context.client_software_name == "apache-kafka-java"
        ),
        timeout_s=30,
        what="a telemetry push from the Java clients",
    )
    assert {record.context.principal for record in records} == {"User:bob"}


class Throttles:
    """librdkafka's statistics: the largest throttle time any broker reported."""

    def __init__(self) -> None:
        self.max_ms = 0

    def __call__(self, raw: str) -> None:
        for broker in json.loads(raw).get("brokers", {}).values():
            self.max_ms = max(
                self.max_ms, int((broker.get("throttle") or {}).get("max", 0))
            )


def produce_for(
    producer: Producer, topic: str, seconds: float, limit_bytes: int
) -> float:
    """Produce as fast as acknowledgements allow for ``seconds`` or ``limit_bytes``;
    acknowledged bytes per second."""
    acked = [0]
    start = time.monotonic()
    end = start + seconds

    def delivered(error: Any, message: Any) -> None:
        if error is None and time.monotonic() <= end:
            acked[0] += len(message.value())

    while time.monotonic() < end and acked[0] < limit_bytes:
        try:
            producer.produce(topic, value=VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.005)
            continue
        producer.poll(0)
    elapsed = min(time.monotonic(), end) - start
    producer.purge(in_queue=True, in_flight=False)
    producer.flush(60)
    return acked[0] / elapsed


def test_the_principal_is_the_quota_user_entity(
    gateway: RunningGateway, kafka_cluster: KafkaCluster
) -> None:
    topic = topic_name("gw-sasl-quota")
    admin = AdminClient(
        {**through_gateway(gateway, kafka_cluster, "bob"), "client.id": "bob-admin"}
    )
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(timeout=60)
    kafka_cluster.wait_in_sync([topic])
    ConfigStore(gateway.config.data_dir).alter_quotas(
        {"user": "alice"}, {"producer_byte_rate": CAP}
    )
    engine = gateway.gateway_server.quotas.engine  # type: ignore[union-attr]
    wait_for(
        lambda: (
            gateway.call(engine.entity_quotas).get("users/alice")
            == {"producer_byte_rate": CAP}
        ),
        timeout_s=30,
        what="the gateway to apply alice's quota",
    )
    # The same client id for both: only the user tells them apart.
    settings = {
        "client.id": "shared-app",
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 16384,
        "queue.buffering.max.messages": 2000,
        "statistics.interval.ms": 200,
    }
    alice_throttles, bob_throttles = Throttles(), Throttles()
    alice = Producer(
        {
            **through_gateway(gateway, kafka_cluster, "alice"),
            **settings,
            "stats_cb": alice_throttles,
        }
    )
    bob = Producer(
        {
            **through_gateway(gateway, kafka_cluster, "bob"),
            **settings,
            "stats_cb": bob_throttles,
        }
    )
    rates: dict[str, float] = {}
    threads = [
        threading.Thread(
            target=lambda: rates.__setitem__(
                "alice", produce_for(alice, topic, 8, 1 << 30)
            )
        ),
        threading.Thread(
            target=lambda: rates.__setitem__("bob", produce_for(bob, topic, 8, 8 << 20))
        ),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    report = (
        f"alice {rates['alice'] / 1024:.0f} KiB/s (quota {CAP // 1024} KiB/s), throttle up to "
        f"{alice_throttles.max_ms} ms; bob {rates['bob'] / 1024:.0f} KiB/s, throttle up to "
        f"{bob_throttles.max_ms} ms"
    )
    print(report)
    # Over 8 s a 2 x 1 s quota window lets alice run ahead by about one second's worth.
    assert alice_throttles.max_ms > 0 and rates["alice"] < 1.5 * CAP, report
    assert bob_throttles.max_ms == 0 and rates["bob"] > 10 * CAP, report
    metrics = gateway.metrics_text()
    assert (
        'ktc_quota_throttled_responses_total{client_id="shared-app",quota="produce",user="alice"}'
        in metrics
    )
    assert 'user="bob"' not in "\n".join(
        line
        for line in metrics.splitlines()
        if line.startswith("ktc_quota_throttled_responses")
    )


def authentication_error(config: dict[str, Any]) -> KafkaError:
    """The error librdkafka reports for a client that cannot authenticate."""
    errors: list[KafkaError] = []
    producer = Producer(
        {**config, "error_cb": errors.append, "client.id": "wrong-password"}
    )
    try:
        wait_for(
            lambda: (
                producer.poll(0.1) is not None
                and any(e.code() == KafkaError._AUTHENTICATION for e in errors)
            ),
            timeout_s=30,
            what="an authentication error",
        )
    finally:
        producer.purge()
    return next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)


# SCRAM never sends the password; PLAIN sends it in the clear, through the gateway.
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_fails_as_it_does_directly(
    gateway: RunningGateway,
    kafka_cluster: KafkaCluster,
    caplog: pytest.LogCaptureFixture,
    mechanism: str,
) -> None:
    direct = authentication_error(
        sasl_config(
            kafka_cluster.bootstrap_servers("SASL_PLAINTEXT"),
            "alice",
            WRONG_PASSWORD,
            mechanism,
        )
    )
    through = authentication_error(
        sasl_config(gateway.bootstrap, "alice", WRONG_PASSWORD, mechanism)
    )

    # librdkafka's message names the broker it talked to and how long it took; the rest is
    # the cluster's words.
    def words(error: KafkaError) -> str:
        return error.str().split(": ", 1)[-1].split(" (after ")[0]

    assert "invalid credentials" in words(
        direct
    ) or "Invalid username or password" in words(direct)
    assert words(through) == words(direct)
    assert not landed(gateway, lambda r: r.context.client_id == "wrong-password")
    # The gateway logs the refusal, as a broker does (and no_password_logged checks it
    # and every other record for the passwords).
    assert any(
        "authentication of User:alice refused upstream" in record.getMessage()
        for record in caplog.records
    )


def test_an_unfinished_scram_exchange_is_not_the_user(gateway: RunningGateway) -> None:
    """A client that sends SCRAM's first message naming alice and then anything but its
    proof (here a GetTelemetrySubscriptions, which the gateway would answer itself) has not
    authenticated: Kafka closes such a connection, and so does the gateway, before anything is
    answered or landed as alice."""
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        send(sock, 17, 1, 1, string("SCRAM-SHA-512"))  # SaslHandshake v1
        assert error_code_of(receive(sock), header_bytes=0) == 0
        first = b"n,,n=alice,r=" + uuid.uuid4().hex.encode()
        send(
            sock, 36, 2, 2, compact_bytes(first) + b"\x00", flexible=True
        )  # SaslAuthenticate v2
        assert (
            error_code_of(receive(sock), header_bytes=1) == 0
        )  # the server-first message
        # GetTelemetrySubscriptions v0, a zero client instance id.
        send(sock, 71, 0, 3, b"\x00" * 16 + b"\x00", flexible=True)
        with pytest.raises((ConnectionError, EOFError)):
            receive(sock)
    assert not landed(
        gateway,
        lambda r: (
            r.context.principal == "User:alice" and r.context.client_id == "half-way"
        ),
    )


# -- a few raw frames for the unfinished exchange ------------------------------------------


def string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def compact_bytes(data: bytes) -> bytes:
    length = len(data) + 1
    out = bytearray()
    while length >= 0x80:
        out.append(length & 0x7F | 0x80)
        length >>= 7
    out.append(length)
    return bytes(out) + data


def send(
    sock: socket.socket,
    api_key: int,
    version: int,
    correlation: int,
    body: bytes,
    *,
    flexible: bool = False,
) -> None:
    header = struct.pack(">hhi", api_key, version, correlation) + string("half-way")
    if flexible:
        header += b"\x00"
    frame = header + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)


def receive(sock: socket.socket) -> bytes:
    def exactly(size: int) -> bytes:
        chunks = b""
        while len(chunks) < size:
            chunk = sock.recv(size - len(chunks))
            if not chunk:
                raise EOFError("connection closed")
            chunks += chunk
        return chunks

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def error_code_of(response: bytes, *, header_bytes: int) -> int:
    """The first field of the body (SaslHandshake's and SaslAuthenticate's ErrorCode)."""
    return int(struct.unpack_from(">h", response, 4 + header_bytes)[0])
