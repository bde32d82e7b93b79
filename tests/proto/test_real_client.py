"""Ground truth from a real client: librdkafka (confluent-kafka) against a tiny server built
on proto/ only. Every request librdkafka sends must decode, every answer we encode must be
accepted, and its compressed OTLP pushes must decompress with our codecs, for each codec.

The server here is deliberately minimal (a thread per connection, fixed answers): it tests
the protocol layer, not the collector.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from proto import (
    SUPPORTED_VERSIONS,
    ApiKeys,
    ServerConnection,
    decode_request,
    encode_response,
)
from proto.compression import CompressionType, decompress
from proto.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from proto.messages.get_telemetry_subscriptions_response import (
    GetTelemetrySubscriptionsResponse,
)
from proto.messages.metadata_response import MetadataResponse, MetadataResponseBroker
from proto.messages.push_telemetry_response import PushTelemetryResponse

confluent_kafka = pytest.importorskip("confluent_kafka")

PUSH_INTERVAL_MS = 250
MAX_BYTES = 1 << 20


@dataclass
class Seen:
    """What the server saw, shared with the test thread."""

    requests: list[tuple[int, int]] = field(default_factory=list)  # (api key, version)
    pushes: list[Any] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    software: list[tuple[str, str]] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class TelemetryServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, accepted: tuple[int, ...]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.accepted = accepted
        self.seen = Seen()
        self.instance_id = uuid.uuid4()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def answer(self, api_key: int, version: int, request: Any) -> Any:
        if api_key == ApiKeys.API_VERSIONS:
            self.seen.software.append(
                (request.client_software_name, request.client_software_version)
            )
            return ApiVersionsResponse(
                api_keys=tuple(
                    ApiVersion(api_key=key, min_version=low, max_version=high)
                    for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
                )
            )
        if api_key == ApiKeys.METADATA:
            return MetadataResponse(
                brokers=(
                    MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port),
                ),
                cluster_id="proto-test",
                controller_id=1,
            )
        if api_key == ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS:
            return GetTelemetrySubscriptionsResponse(
                client_instance_id=self.instance_id,
                subscription_id=1234,
                accepted_compression_types=self.accepted,
                push_interval_ms=PUSH_INTERVAL_MS,
                telemetry_max_bytes=MAX_BYTES,
                delta_temporality=True,
                requested_metrics=("*",),
            )
        if api_key == ApiKeys.PUSH_TELEMETRY:
            payload = decompress(request.compression_type, request.metrics, MAX_BYTES)
            with self.seen.lock:
                self.seen.pushes.append(request)
                self.seen.payloads.append(payload)
            return PushTelemetryResponse()
        raise AssertionError(f"unexpected api {api_key}")


class Handler(socketserver.BaseRequestHandler):
    server: TelemetryServer

    def handle(self) -> None:
        conn = ServerConnection()
        sock: socket.socket = self.request
        try:
            while data := sock.recv(65536):
                conn.receive_data(data)
                while (frame := conn.next_request()) is not None:
                    request = decode_request(frame)
                    with self.server.seen.lock:
                        self.server.seen.requests.append(
                            (frame.api_key, frame.api_version)
                        )
                    reply = self.server.answer(
                        frame.api_key, frame.api_version, request
                    )
                    sock.sendall(
                        encode_response(
                            frame.api_key,
                            frame.api_version,
                            frame.correlation_id,
                            reply,
                        )
                    )
        except OSError:
            pass
        except Exception as exc:  # surfaced to the test through seen.errors
            self.server.seen.errors.append(exc)


@pytest.fixture
def server_factory() -> Iterator[Any]:
    servers: list[TelemetryServer] = []

    def start(accepted: tuple[int, ...]) -> TelemetryServer:
        server = TelemetryServer(accepted)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def wait_for(condition: Any, timeout_s: float, poll: Any) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        poll()
    return condition()


@pytest.mark.parametrize(
    "codec",
    [
        CompressionType.ZSTD,
        CompressionType.LZ4,
        CompressionType.SNAPPY,
        CompressionType.GZIP,
        CompressionType.NONE,
    ],
    ids=lambda c: c.name,
)
def test_librdkafka_pushes_decode_with_every_codec(
    server_factory: Any, codec: CompressionType
) -> None:
    server = server_factory((int(codec),))
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{server.port}",
            "client.id": "proto-real-client",
        }
    )
    try:
        assert wait_for(
            lambda: len(server.seen.pushes) >= 1, 20, partial(producer.poll, 0.05)
        )
    finally:
        producer.flush(1)
        del producer  # rd_kafka_destroy: librdkafka sends its terminating push
    assert wait_for(
        lambda: server.seen.pushes[-1].terminating, 5, lambda: time.sleep(0.02)
    )

    assert not server.seen.errors, server.seen.errors
    seen = set(server.seen.requests)
    assert (ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0) in seen and (
        ApiKeys.PUSH_TELEMETRY,
        0,
    ) in seen
    assert any(key == ApiKeys.API_VERSIONS and version >= 3 for key, version in seen)
    name, version = server.seen.software[-1]
    assert name == "confluent-kafka-python" and "rdkafka" in version

    for push, payload in zip(server.seen.pushes, server.seen.payloads, strict=True):
        assert push.client_instance_id == server.instance_id
        assert push.subscription_id == 1234
        assert push.compression_type in (int(codec), CompressionType.NONE)
        metrics = MetricsData.FromString(payload)
        names = {
            m.name
            for rm in metrics.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
        }
        assert names and all(n.startswith("org.apache.kafka.") for n in names), names
    assert any(p.compression_type == codec for p in server.seen.pushes)
