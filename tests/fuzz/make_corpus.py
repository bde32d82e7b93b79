"""Write the seed corpus, tests/fuzz/corpus/<target>/ (committed; docs/fuzzing.md).

    .venv/bin/python tests/fuzz/make_corpus.py            # everything but the capture
    .venv/bin/python tests/fuzz/make_corpus.py --capture  # also real librdkafka traffic

Seeds come from:

* the golden bytes: Kafka 4.4.0's own serializations under tests/gateway/golden/ (requests,
  responses, throttle, live answers of a real cluster) and the annotated
  GetTelemetrySubscriptions/PushTelemetry frames of tests/proto/test_connection.py;
* every (api key, version) ``ktc serve`` decodes, with messages Hypothesis draws from the
  same JSON specs as the generated codecs (derandomized: the same files on every run);
* real pushes: ``--capture`` runs confluent-kafka (librdkafka) against a minimal server on
  127.0.0.1 for each codec and keeps every request frame it sends (captured/*.bin, reused
  by later runs without ``--capture``);
* decompression bombs: a few KiB that inflate past every bound, for each codec.
"""

from __future__ import annotations

import argparse
import hashlib
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GOLDEN = ROOT / "tests" / "gateway" / "golden"
CAPTURED = HERE / "captured"
# Run as a script: the repository root, for the sources and `tests.` imports.
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue  # noqa: E402
from opentelemetry.proto.metrics.v1.metrics_pb2 import (  # noqa: E402
    AGGREGATION_TEMPORALITY_DELTA,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource  # noqa: E402

from proto import (  # noqa: E402
    SUPPORTED_VERSIONS,
    ServerConnection,
    decode_request,
    encode_request,
)
from proto.api_table import request_header_version, response_header_version  # noqa: E402
from proto.compression import CompressionType, compress  # noqa: E402
from proto.messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest  # noqa: E402
from tests.proto.message_strategies import message_strategy, specs  # noqa: E402

EXAMPLES_PER_VERSION = 2
# GetTelemetrySubscriptions v0 (tests/proto/test_connection.py pins its bytes).
GET_REQUEST = encode_request(71, 0, 7, "app-1", GetTelemetrySubscriptionsRequest())[4:]
INSTANCE_ID = uuid.UUID("0b4b5c3a-7d1e-4f2a-9c3b-2e5d6f708192")


def write(target: str, name: str, data: bytes) -> None:
    directory = HERE / "corpus" / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(data)


def digest(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()[:12]


def header(
    api_key: int, version: int, correlation_id: int = 1, client_id: str = "fuzz"
) -> bytes:
    """A request header of any Kafka 4.4.0 API (v2 with an empty tag section when flexible)."""
    raw = api_key.to_bytes(2, "big", signed=True) + version.to_bytes(
        2, "big", signed=True
    )
    raw += correlation_id.to_bytes(4, "big")
    raw += len(client_id).to_bytes(2, "big") + client_id.encode()
    return raw + (b"\x00" if request_header_version(api_key, version) == 2 else b"")


def response_seed(
    api_key: int, version: int, body: bytes, correlation_id: int = 7
) -> bytes:
    """gateway_response's input: api key, version, then the payload the framer cuts."""
    tags = b"\x00" if response_header_version(api_key, version) == 1 else b""
    return (
        api_key.to_bytes(2, "big")
        + version.to_bytes(2, "big")
        + correlation_id.to_bytes(4, "big")
        + tags
        + body
    )


# ---- OTLP payloads and bombs --------------------------------------------------------------


def otlp_payload(metrics: int = 12) -> bytes:
    """MetricsData shaped like librdkafka's producer push (resource attributes, sums, gauges)."""
    resource = Resource(
        attributes=[
            KeyValue(key="client_rack", value=AnyValue(string_value="rack-a")),
            KeyValue(key="transactional_id", value=AnyValue(string_value="txn-1")),
        ]
    )
    items = []
    for index in range(metrics):
        point = NumberDataPoint(
            time_unix_nano=1_700_000_000_000_000_000 + index,
            start_time_unix_nano=1_699_999_990_000_000_000,
            attributes=[KeyValue(key="node_id", value=AnyValue(int_value=index))],
        )
        if index % 2:
            point.as_double = index * 0.5
            items.append(
                Metric(
                    name=f"org.apache.kafka.producer.node.request.latency.avg.{index}",
                    gauge=Gauge(data_points=[point]),
                )
            )
        else:
            point.as_int = index * 1000
            items.append(
                Metric(
                    name=f"org.apache.kafka.producer.connection.creation.total.{index}",
                    sum=Sum(
                        data_points=[point],
                        aggregation_temporality=AGGREGATION_TEMPORALITY_DELTA,
                        is_monotonic=True,
                    ),
                )
            )
    data = MetricsData(
        resource_metrics=[
            ResourceMetrics(
                resource=resource, scope_metrics=[ScopeMetrics(metrics=items)]
            )
        ]
    )
    return data.SerializeToString()


def bombs() -> Iterator[tuple[str, CompressionType, bytes]]:
    """(name, codec, payload): small inputs that inflate past every bound."""
    zeros = bytes(64 << 20)
    yield "gzip-64MiB", CompressionType.GZIP, compress(CompressionType.GZIP, zeros)
    yield "zstd-64MiB", CompressionType.ZSTD, compress(CompressionType.ZSTD, zeros)
    yield "lz4-64MiB", CompressionType.LZ4, compress(CompressionType.LZ4, zeros)
    yield (
        "snappy-xerial-8MiB",
        CompressionType.SNAPPY,
        compress(CompressionType.SNAPPY, zeros[: 8 << 20], snappy_xerial=True),
    )
    # A raw snappy block that declares 4 GiB - 1 and holds nothing.
    yield "snappy-declares-4GiB", CompressionType.SNAPPY, b"\xff\xff\xff\xff\x0f\x00"
    # zstd without a declared content size (streamed), 64 MiB of zeros.
    import zstandard

    compressor = zstandard.ZstdCompressor(write_content_size=False)
    yield "zstd-nosize-64MiB", CompressionType.ZSTD, compressor.compress(zeros)
    # Two gzip members, the second a bomb.
    yield (
        "gzip-two-members",
        CompressionType.GZIP,
        compress(CompressionType.GZIP, b"x")
        + compress(CompressionType.GZIP, zeros[: 16 << 20]),
    )


# ---- captured librdkafka traffic ------------------------------------------------------------


def capture() -> None:
    """Every request frame librdkafka sends to a minimal telemetry server, for each codec."""
    import confluent_kafka

    from proto import ApiKeys, decompress, encode_response
    from proto.messages.api_versions_response import ApiVersion, ApiVersionsResponse
    from proto.messages.get_telemetry_subscriptions_response import (
        GetTelemetrySubscriptionsResponse,
    )
    from proto.messages.metadata_response import (
        MetadataResponse,
        MetadataResponseBroker,
    )
    from proto.messages.push_telemetry_response import PushTelemetryResponse

    CAPTURED.mkdir(exist_ok=True)
    for codec in CompressionType:
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        frames: list[bytes] = []
        done = threading.Event()

        def serve(
            codec: int = codec,
            listener: socket.socket = listener,
            port: int = port,
            frames: list[bytes] = frames,
            done: threading.Event = done,
        ) -> None:
            listener.settimeout(30)
            while not done.is_set():
                try:
                    sock, _ = listener.accept()
                except OSError:
                    return
                threading.Thread(
                    target=handle, args=(sock, codec, port, frames, done), daemon=True
                ).start()

        def handle(
            sock: socket.socket,
            codec: int,
            port: int,
            frames: list[bytes],
            done: threading.Event,
        ) -> None:
            conn = ServerConnection()
            with sock:
                while data := sock.recv(65536):
                    conn.receive_data(data)
                    while (frame := conn.next_request()) is not None:
                        frames.append(bytes(frame.raw))
                        request = decode_request(frame)
                        key = frame.api_key
                        if key == ApiKeys.API_VERSIONS:
                            reply: object = ApiVersionsResponse(
                                api_keys=tuple(
                                    ApiVersion(
                                        api_key=k, min_version=lo, max_version=hi
                                    )
                                    for k, (lo, hi) in sorted(
                                        SUPPORTED_VERSIONS.items()
                                    )
                                )
                            )
                        elif key == ApiKeys.METADATA:
                            reply = MetadataResponse(
                                brokers=(
                                    MetadataResponseBroker(
                                        node_id=1, host="127.0.0.1", port=port
                                    ),
                                ),
                                cluster_id="fuzz-capture",
                                controller_id=1,
                            )
                        elif key == ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS:
                            reply = GetTelemetrySubscriptionsResponse(
                                client_instance_id=INSTANCE_ID,
                                subscription_id=1234,
                                accepted_compression_types=(codec,),
                                push_interval_ms=200,
                                telemetry_max_bytes=1 << 20,
                                delta_temporality=True,
                                requested_metrics=("*",),
                            )
                        else:
                            decompress(
                                request.compression_type, request.metrics, 1 << 20
                            )
                            reply = PushTelemetryResponse()
                            if request.terminating:
                                done.set()
                        sock.sendall(
                            encode_response(
                                key, frame.api_version, frame.correlation_id, reply
                            )
                        )

        threading.Thread(target=serve, daemon=True).start()
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "fuzz-capture"}
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sum(f[1] == 72 for f in frames) < 2:
            producer.poll(0.05)
        producer.flush(1)
        del producer  # the terminating push
        done.wait(5)
        listener.close()
        for index, raw in enumerate(frames):
            name = (
                f"librdkafka-{codec.name.lower()}-{index:02d}-key{raw[1]}-v{raw[3]}.bin"
            )
            (CAPTURED / name).write_bytes(raw)
        print(f"captured {len(frames)} frames with {codec.name}", file=sys.stderr)


# ---- the corpus -------------------------------------------------------------------------------


def served_seeds() -> Iterator[tuple[str, bytes]]:
    """(name, frame without size prefix) for every served (api key, version)."""
    by_key = {s.api_key: s for s in specs().values() if s.kind == "request"}
    for api_key, (low, high) in sorted(SUPPORTED_VERSIONS.items()):
        spec = by_key[api_key]
        for version in range(low, high + 1):
            drawn: list[object] = []
            strategy = message_strategy(spec, version)

            @settings(
                derandomize=True,
                max_examples=EXAMPLES_PER_VERSION,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(st.data())
            def draw(data: st.DataObject) -> None:
                drawn.append(data.draw(strategy))  # noqa: B023 - called right here

            draw()
            for index, message in enumerate(drawn):
                wire = encode_request(api_key, version, 1 + index, "fuzz", message)
                yield f"{spec.name}-v{version}-{index}.bin", wire[4:]


def golden_requests() -> Iterator[tuple[str, bytes]]:
    for line in (GOLDEN / "requests.txt").read_text().splitlines():
        if not line.strip():
            continue
        name, key, version, body = line.split()[:4]
        raw = header(int(key), int(version)) + bytes.fromhex(body)
        yield f"golden-{name}-v{version}-{digest(raw)}.bin", raw


def golden_responses() -> Iterator[tuple[str, bytes]]:
    for file in ("responses.txt", "live.txt"):
        for line in (GOLDEN / file).read_text().splitlines():
            if line.strip():
                key, version, label, body = line.split()[:4]
                seed = response_seed(int(key), int(version), bytes.fromhex(body))
                yield f"golden-{key}-v{version}-{label}-{digest(seed)}.bin", seed
    for line in (GOLDEN / "throttle.txt").read_text().splitlines():
        if line.strip():
            key, version, _, body = line.split()[:4]
            seed = response_seed(int(key), int(version), bytes.fromhex(body))
            yield f"golden-throttle-{key}-v{version}-{digest(seed)}.bin", seed
    for path in sorted((GOLDEN / "live").glob("*.bin")):
        key, version = path.stem.split("-")[:2]
        seed = response_seed(int(key), int(version[1:]), path.read_bytes())
        yield f"live-{path.stem}.bin", seed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--capture", action="store_true", help="capture librdkafka traffic"
    )
    args = parser.parse_args()
    if args.capture:
        capture()
    captured = sorted(CAPTURED.glob("*.bin"))

    payload = otlp_payload()
    push = encode_request(
        72,
        0,
        8,
        "app-1",
        PushTelemetryRequest(
            client_instance_id=INSTANCE_ID,
            subscription_id=-1262090295,
            terminating=True,
            compression_type=CompressionType.ZSTD,
            metrics=compress(CompressionType.ZSTD, payload),
        ),
    )[4:]

    requests = [
        *served_seeds(),
        ("kip714-get-telemetry-subscriptions.bin", GET_REQUEST),
        ("push-zstd.bin", push),
    ]
    requests += [(path.name, path.read_bytes()) for path in captured]
    for name, raw in requests:
        write("serve_request", name, raw)
        write("gateway_request", name, raw)
    for name, raw in golden_requests():
        write("gateway_request", name, raw)
    # SASL: PLAIN and SCRAM first tokens (the correlation id picks the mechanism).
    for index, token in enumerate(
        (
            b"\x00alice\x00secret",
            b"n,,n=alice,r=nonce123",
            b"n,a=bob,n=bob,r=abc,tokenauth=true",
            b"",
        )
    ):
        for version in (0, 1, 2):
            raw = header(36, version, correlation_id=index) + (
                (len(token) + 1).to_bytes(1, "big") + token + b"\x00"
                if version == 2
                else len(token).to_bytes(4, "big") + token
            )
            write("gateway_request", f"sasl-authenticate-v{version}-{index}.bin", raw)

    # serve_stream: a read size, then several frames back to back (librdkafka's own session
    # when captured), and an oversized prefix.
    frames = [raw for _, raw in requests if len(raw) < 1024]
    picked = frames[:: max(1, len(frames) // 8)]
    stream = b"".join(len(raw).to_bytes(4, "big") + raw for raw in picked)
    for step in (0, 6, 63):
        write("serve_stream", f"frames-read-{step + 1}.bin", bytes([step]) + stream)
    write(
        "serve_stream",
        "oversized-prefix.bin",
        b"\x03" + (1 << 20).to_bytes(4, "big") + b"x",
    )
    if captured:
        session = b"".join(
            len(p.read_bytes()).to_bytes(4, "big") + p.read_bytes()
            for p in captured
            if "-zstd-" in p.name
        )
        write("serve_stream", "librdkafka-zstd-session.bin", b"\x1f" + session)

    for name, seed in golden_responses():
        write("gateway_response", name, seed)

    # decompress: selector byte = codec | bound index << 3.
    payloads = [("otlp", payload), ("empty", b""), ("text", b"telemetry " * 40)]
    for name, data in payloads:
        for codec in CompressionType:
            for bound in (0, 1):
                seed = bytes([int(codec) | bound << 3]) + compress(codec, data)
                write(
                    "decompress", f"{codec.name.lower()}-{name}-bound{bound}.bin", seed
                )
        write(
            "decompress",
            f"snappy-xerial-{name}.bin",
            bytes([CompressionType.SNAPPY])
            + compress(CompressionType.SNAPPY, data, snappy_xerial=True),
        )
    for name, codec, data in bombs():
        write("decompress", f"bomb-{name}.bin", bytes([int(codec)]) + data)
    write("otlp_metrics", "librdkafka-like.bin", payload)
    write("otlp_metrics", "one-metric.bin", otlp_payload(1))
    write("otlp_metrics", "empty.bin", b"")
    for path in captured:
        raw = path.read_bytes()
        if raw[1] != 72:
            continue
        conn = ServerConnection()
        conn.receive_data(len(raw).to_bytes(4, "big") + raw)
        frame = conn.next_request()
        assert frame is not None
        push_request = decode_request(frame)
        metrics = bytes(push_request.metrics)
        write(
            "decompress",
            f"{path.stem}.bin",
            bytes([push_request.compression_type]) + metrics,
        )
        from proto import decompress as decompress_payload

        plain = decompress_payload(push_request.compression_type, metrics, 1 << 20)
        write("otlp_metrics", f"{path.stem}.bin", plain)
    counts = {
        d.name: len(list(d.iterdir())) for d in sorted((HERE / "corpus").iterdir())
    }
    print("corpus:", counts, file=sys.stderr)


if __name__ == "__main__":
    main()
