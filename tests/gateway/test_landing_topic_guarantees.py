"""The landing topic's edges against a real Apache Kafka 4.4.0 broker and real ``ktc
serve`` processes; pushes are sent on the wire (proto/), so the test says exactly which
pushes exist, and the topic is read back with a plain consumer (topic_reader.py).

- the size limit end to end: a push of exactly telemetry.max.bytes is answered 0 and lands
  (the topic is created with the max.message.bytes it needs, the producer's
  message.max.bytes takes the record); an existing topic that cannot take it stops the
  collector at start with one line naming the setting;
- the producer's guarantees: the broker is reached through a proxy (kafka_fault_proxy.py)
  that loses the answer to one Produce request after the broker wrote it.  librdkafka
  sends it again on a new connection: idempotent, the topic holds each push once; the same
  run with enable.idempotence off holds that push twice (so the first is a test that can
  fail).  Every Produce the collector sent asked for acks=all (-1), seen on the wire.
"""

from __future__ import annotations

import base64
import collections
import json
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData, ResourceMetrics

from proto import ApiKeys, ClientConnection
from proto.messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from subscriptions.store import ConfigStore
from tests.gateway.harness import _proc
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.kafka_fault_proxy import FaultProxy
from tests.gateway.topic_reader import read_topic

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
TELEMETRY_MAX_BYTES = 1_048_576  # the default
LANDING_CLIENT_ID = "ktc-landing"  # the producer's client.id (settings.py)
# ``ktc`` with its landing producer's enable.idempotence turned off, for the run that must
# show a duplicate; nothing else differs from the `ktc` entry point.
NOT_IDEMPOTENT_KTC = textwrap.dedent(
    """
    import sys
    from exporters.kafka_topic.settings import TopicSettings
    producer_config = TopicSettings.producer_config
    TopicSettings.producer_config = lambda self: {
        **producer_config(self), "enable.idempotence": False
    }
    from collector.app.cli import main
    sys.argv[0] = "ktc"
    main()
    """
)


class WireClient:
    """One client instance on the wire: GetTelemetrySubscriptions, then its pushes."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.codec = ClientConnection(client_id="orders")
        get = self.request(
            ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
            0,
            GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)),
        )
        self.instance_id = get.client_instance_id
        self.subscription_id = get.subscription_id
        # As the record's key and context carry it: Kafka's Uuid.toString().
        self.instance_id_text = (
            base64.urlsafe_b64encode(self.instance_id.bytes).rstrip(b"=").decode()
        )

    def request(self, api_key: int, version: int, message: object) -> Any:
        self.sock.sendall(self.codec.send_request(api_key, version, message))
        while True:
            frame = self.codec.next_response()
            if frame is not None:
                return frame.message
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.codec.receive_data(data)

    def push(self, payload: bytes) -> int:
        """The answer's error code to one uncompressed push of ``payload``."""
        push = PushTelemetryRequest(
            self.instance_id, self.subscription_id, False, 0, payload
        )
        return int(self.request(ApiKeys.PUSH_TELEMETRY, 0, push).error_code)

    def close(self) -> None:
        self.sock.close()


def otlp_of_exactly(size: int) -> bytes:
    """A valid MetricsData of exactly ``size`` bytes (a padded schema_url)."""
    pad = size
    for _ in range(8):
        data = MetricsData(
            resource_metrics=[ResourceMetrics(schema_url="x" * pad)]
        ).SerializeToString()
        if len(data) == size:
            return data
        pad -= len(data) - size
    raise AssertionError(f"no MetricsData of {size} bytes")


@contextmanager
def ktc_serve_process(
    work: Path,
    bootstrap: str,
    topic: str,
    *,
    settings: Mapping[str, Any] | None = None,
    entry: Sequence[str] = ("-m", "collector.app.cli"),
) -> Iterator[dict[str, Any]]:
    """A ``ktc serve`` process with its data directory in ``work``, landing on ``topic``
    (one partition) of ``bootstrap``, plus ``settings``: its ready file (``listeners``,
    ``http_port``).  Stopped with SIGTERM, it must exit 0 and log no traceback."""
    config = work / "ktc.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "http.listener": "127.0.0.1:0",
                "data.dir": str(work / "data"),
                "landing.kafka.topic": topic,
                "landing.kafka.bootstrap.servers": bootstrap,
                "landing.kafka.topic.partitions": 1,
                **(settings or {}),
            }
        )
    )
    ready = work / "ready.json"
    log_path = work / "ktc.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, *entry, "serve", "--config", str(config)]
            + ["--ready-file", str(ready)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    _proc.register(process)
    try:
        _proc.poll_until(
            ready.exists,
            timeout=60,
            what="ktc serve ready",
            alive=_proc.exited(process, log_path),
        )
        yield dict(json.loads(ready.read_text()))
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, _proc.tail(log_path)
        assert "Traceback" not in log_path.read_text()


@contextmanager
def ktc_serve(
    work: Path, bootstrap: str, topic: str, *, idempotent: bool = True
) -> Iterator[int]:
    """A ``ktc serve`` process landing on ``topic``, every client subscribed to every
    metric once a minute: its bootstrap port."""
    ConfigStore(work / "data").alter_subscription(
        "all", {"metrics": "org.apache.kafka.", "interval.ms": "60000"}, []
    )
    entry = ["-m", "collector.app.cli"] if idempotent else ["-c", NOT_IDEMPOTENT_KTC]
    with ktc_serve_process(work, bootstrap, topic, entry=entry) as ready:
        yield int(next(iter(ready["listeners"].values())))


def pushes_in(records: list[Any]) -> collections.Counter[str]:
    """The client instance id of every record (one push per instance here), counted."""
    seen: collections.Counter[str] = collections.Counter()
    for message in records:
        context = json.loads(dict(message.headers())["ktc.context"])
        assert message.key().decode() == context["client_instance_id"]
        seen[context["client_instance_id"]] += 1
    return seen


def topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {name: entry.value for name, entry in entries.items()}


def test_a_push_of_telemetry_max_bytes_lands_on_the_topic(
    proxied_cluster: tuple[KafkaCluster, FaultProxy], tmp_path: Path
) -> None:
    cluster, proxy = proxied_cluster
    bootstrap = f"127.0.0.1:{proxy.port}"
    topic = f"telemetry-max-{uuid.uuid4().hex[:8]}"
    payload = otlp_of_exactly(TELEMETRY_MAX_BYTES)
    with ktc_serve(tmp_path, bootstrap, topic) as port:
        client = WireClient(port)
        try:
            assert client.push(payload) == 0
        finally:
            client.close()
    # Created with what a push of telemetry.max.bytes needs, above the broker's default
    # (1,048,588).
    assert topic_config(bootstrap, topic)["max.message.bytes"] == "1114259"
    records = read_topic(bootstrap, topic)
    assert len(records) == 1
    assert records[0].value() == payload
    assert records[0].key().decode() == client.instance_id_text
    context_bytes = len(dict(records[0].headers())["ktc.context"])
    print(
        f"\na push of {len(payload)} bytes (telemetry.max.bytes) landed: value "
        f"{len(records[0].value())} bytes, context header {context_bytes} bytes"
    )


def test_an_existing_topic_too_small_stops_the_collector_in_one_line(
    proxied_cluster: tuple[KafkaCluster, FaultProxy], tmp_path: Path
) -> None:
    cluster, proxy = proxied_cluster
    bootstrap = f"127.0.0.1:{proxy.port}"
    small = f"telemetry-small-{uuid.uuid4().hex[:8]}"
    enough = f"telemetry-enough-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics(
        [
            NewTopic(small, 1, 1),  # the broker's message.max.bytes: 1,048,588
            NewTopic(enough, 1, 1, config={"max.message.bytes": "1114259"}),
        ]
    )
    for future in created.values():
        future.result(timeout=30)
    config = tmp_path / "ktc.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "http.listener": "127.0.0.1:0",
                "data.dir": str(tmp_path / "data"),
                "landing.kafka.topic": small,
                "landing.kafka.bootstrap.servers": bootstrap,
            }
        )
    )
    refused = subprocess.run(
        [sys.executable, "-m", "collector.app.cli", "serve", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr
    errors = [
        line
        for line in refused.stderr.splitlines()
        if line.startswith("ktc: cannot start:")
    ]
    assert errors == [
        f"ktc: cannot start: landing.kafka.topic: topic {small} has max.message.bytes "
        "1048588 (the broker's message.max.bytes, the topic sets none); a push of "
        "telemetry.max.bytes (1048576) needs at least 1114259: raise the topic's "
        "max.message.bytes or lower telemetry.max.bytes"
    ], refused.stderr
    print(f"\n{errors[0]}")
    # A topic that takes it is used as it is.
    with ktc_serve(tmp_path / "enough", bootstrap, enough) as port:
        client = WireClient(port)
        try:
            assert client.push(otlp_of_exactly(TELEMETRY_MAX_BYTES)) == 0
        finally:
            client.close()
    assert len(read_topic(bootstrap, enough)) == 1


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not"])
def test_a_produce_answer_lost_after_the_write_leaves_each_push_once(
    proxied_cluster: tuple[KafkaCluster, FaultProxy], tmp_path: Path, idempotent: bool
) -> None:
    cluster, proxy = proxied_cluster
    bootstrap = f"127.0.0.1:{proxy.port}"
    topic = f"telemetry-lost-answer-{uuid.uuid4().hex[:8]}"
    payload = otlp_of_exactly(1000)
    dropped_before = proxy.answers_dropped
    acks_before = len(proxy.produce_acks(LANDING_CLIENT_ID))
    pushed: list[str] = []
    with ktc_serve(tmp_path, bootstrap, topic, idempotent=idempotent) as port:
        for index in range(3):
            if index == 1:  # the second push's record: written, its answer lost
                proxy.drop_produce_answer(nth=1, client_id=LANDING_CLIENT_ID)
            client = WireClient(port)
            try:
                started = time.monotonic()
                assert client.push(payload) == 0
                answered_s = time.monotonic() - started
                pushed.append(client.instance_id_text)
            finally:
                client.close()
            if index == 1:
                assert proxy.answers_dropped == dropped_before + 1
                lost_answer_s = answered_s
    acks = proxy.produce_acks(LANDING_CLIENT_ID)[acks_before:]
    assert len(acks) >= 4  # three records, one of them sent twice
    assert set(acks) == {-1}  # acks=all on every Produce the collector sent
    seen = pushes_in(read_topic(bootstrap, topic))
    assert set(seen) == set(pushed)  # none lost
    sent = f"{len(acks)} Produce requests, all acks=-1"
    if idempotent:
        assert seen == {push: 1 for push in pushed}, seen
        print(
            f"\nan answer lost after the write: {len(pushed)} pushes, each once; {sent};"
            f" that push answered 0 after {lost_answer_s * 1000:.0f} ms"
        )
    else:
        # Without idempotence the retried produce is a second record: what the
        # idempotent run shows does not happen by itself.
        assert seen[pushed[1]] == 2 and seen[pushed[0]] == seen[pushed[2]] == 1, seen
        print(
            f"\nenable.idempotence off: the retried push is in the topic twice; {sent}"
        )
