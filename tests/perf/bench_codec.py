"""Benchmark: decode PushTelemetry v0 + encode its response, our generated codec vs kio.

Run: .venv/bin/python tests/perf/bench_codec.py [--iterations N]

Both sides do the same work per push: parse the request body (453 bytes of metrics, the size
of a real librdkafka zstd push) into a message object, and serialize a PushTelemetryResponse v0
with its response header v1 and size prefix. A third line times our whole server path: bytes
in through ServerConnection (framing + header), decode, encode. Prints pushes/s and the ratio
ours / kio, both measured in this run (best of 5 interleaved repeats, process CPU time).
"""

from __future__ import annotations

import argparse
import io
import os
import struct
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kio.schema.push_telemetry.v0.request import PushTelemetryRequest as KioPushRequest
from kio.schema.push_telemetry.v0.response import (
    PushTelemetryResponse as KioPushResponse,
)
from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeader
from kio.serial import entity_reader, entity_writer

from proto.connection import (
    ServerConnection,
    decode_request,
    encode_request,
    encode_response,
)
from proto.messages.push_telemetry_request import READERS, PushTelemetryRequest
from proto.messages.push_telemetry_response import PushTelemetryResponse

METRICS_BYTES = 453
REPEATS = 5


def build_push() -> bytes:
    message = PushTelemetryRequest(
        client_instance_id=uuid.uuid4(),
        subscription_id=123456,
        terminating=False,
        compression_type=4,
        metrics=os.urandom(METRICS_BYTES),
    )
    return encode_request(72, 0, 7, "rdkafka-producer-1", message)


def ours(body: memoryview) -> Callable[[], bytes]:
    read = READERS[0]
    response = PushTelemetryResponse()

    def step() -> bytes:
        request, _ = read(body, 0)
        assert request.subscription_id == 123456
        return encode_response(72, 0, 7, response)

    return step


def kio(body: bytes) -> Callable[[], bytes]:
    read = entity_reader(KioPushRequest)
    write_header = entity_writer(KioResponseHeader)
    write_response = entity_writer(KioPushResponse)
    import datetime

    from kio.schema.errors import ErrorCode
    from kio.static.primitive import i32, i32Timedelta

    response = KioPushResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
    )
    header = KioResponseHeader(correlation_id=i32(7))

    def step() -> bytes:
        request, _ = read(body, 0)
        assert request.subscription_id == 123456
        buffer = io.BytesIO()
        buffer.write(b"\x00\x00\x00\x00")
        write_header(buffer, header)
        write_response(buffer, response)
        out = buffer.getbuffer()
        struct.pack_into(">i", out, 0, len(out) - 4)
        return bytes(out)

    return step


def server_path(wire: bytes) -> Callable[[], bytes]:
    conn = ServerConnection()
    response = PushTelemetryResponse()

    def step() -> bytes:
        conn.receive_data(wire)
        frame = conn.next_request()
        assert frame is not None
        assert decode_request(frame).subscription_id == 123456
        return encode_response(72, 0, frame.correlation_id, response)

    return step


def pushes_per_second(
    steps: dict[str, Callable[[], bytes]], iterations: int
) -> dict[str, float]:
    """Best of REPEATS per contender, the contenders interleaved so that load from other
    processes hits them alike; CPU time of this process, not wall time, for the same reason."""
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(REPEATS):
        for name, step in steps.items():
            start = time.process_time()
            for _ in range(iterations):
                step()
            best[name] = min(best[name], time.process_time() - start)
    return {name: iterations / seconds for name, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=50_000)
    args = parser.parse_args()
    wire = build_push()
    frame_parser = ServerConnection()
    frame_parser.receive_data(wire)
    frame = frame_parser.next_request()
    assert frame is not None
    body = bytes(frame.body)

    ours_step, kio_step = ours(memoryview(body)), kio(body)
    assert ours_step() == kio_step(), (
        "the two codecs must produce the same response bytes"
    )

    rates = pushes_per_second(
        {"kio": kio_step, "ours": ours_step, "server": server_path(wire)},
        args.iterations,
    )
    kio_rate, ours_rate, server_rate = rates["kio"], rates["ours"], rates["server"]
    print(
        f"kio 0.6.5   decode PushTelemetry v0 + encode response: {kio_rate:>10,.0f} pushes/s"
    )
    print(
        f"proto (ours) decode PushTelemetry v0 + encode response: {ours_rate:>10,.0f} pushes/s"
    )
    print(
        f"proto (ours) framing + header + decode + encode:        {server_rate:>10,.0f} pushes/s"
    )
    print(f"ratio ours/kio (codec): {ours_rate / kio_rate:.2f}x")
    print(
        f"ratio ours/kio (our full server path vs kio codec only): {server_rate / kio_rate:.2f}x"
    )


if __name__ == "__main__":
    main()
