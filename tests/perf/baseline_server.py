"""The baseline for bench_push.py: the least a KIP-714 receiver must do per push.

Same process model as the collector (one process, an asyncio Protocol on uvloop,
responses written once per read), but nothing else: it cuts frames, answers
ApiVersions and GetTelemetrySubscriptions with fixed responses, and for each
PushTelemetry decompresses the payload (the same bounded codec), parses it as OTLP
``MetricsData`` and acks.  No subscriptions, no gating, no instance cache, no landing
log, no metrics.

Run: ``python tests/perf/baseline_server.py --port 0 --ready-file /tmp/port``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import uuid
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from proto import SUPPORTED_VERSIONS, ApiKeys, compression, encode_response
from proto.messages import (
    ApiVersionsResponse,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
)
from proto.messages.api_versions_response import ApiVersion

MAX_BYTES = 1_048_576
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api key, version, correlation id
_PUSH_FIXED = struct.Struct(">16si?b")  # instance id, subscription id, terminating, compression
_OK = encode_response(ApiKeys.PUSH_TELEMETRY, 0, 0, PushTelemetryResponse())[4:]


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


class BaselineProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing it.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        out = []
        pos, end = 0, len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            out.append(self._handle(frame))
        del buf[:pos]
        if out and self._transport is not None:
            self._transport.write(b"".join(out))

    def _handle(self, frame: bytes) -> bytes:
        api_key, version, correlation_id = _HEADER.unpack_from(frame, 0)
        (client_id_len,) = struct.unpack_from(">h", frame, 8)
        pos = 10 + max(client_id_len, 0)
        if api_key == ApiKeys.PUSH_TELEMETRY:
            pos += 1  # header tagged fields
            _, _, _, compression_type = _PUSH_FIXED.unpack_from(frame, pos)
            pos += _PUSH_FIXED.size
            length, pos = _uvarint(frame, pos)
            payload = frame[pos : pos + length - 1]
            MetricsData.FromString(compression.decompress(compression_type, payload, MAX_BYTES))
            response = bytearray(_OK)
            struct.pack_into(">i", response, 0, correlation_id)
            return _SIZE.pack(len(response)) + bytes(response)
        if api_key == ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS:
            message = GetTelemetrySubscriptionsResponse(
                client_instance_id=uuid.uuid4(),
                subscription_id=0,
                accepted_compression_types=(4,),
                push_interval_ms=100,
                telemetry_max_bytes=MAX_BYTES,
                delta_temporality=True,
                requested_metrics=("org.apache.kafka.producer.",),
            )
            return encode_response(api_key, 0, correlation_id, message)
        entries = tuple(ApiVersion(k, lo, hi) for k, (lo, hi) in SUPPORTED_VERSIONS.items())
        return encode_response(
            ApiKeys.API_VERSIONS,
            min(version, 3),
            correlation_id,
            ApiVersionsResponse(api_keys=entries),
        )


async def main(port: int, ready_file: str | None) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(BaselineProtocol, "127.0.0.1", port, backlog=1024)
    bound = server.sockets[0].getsockname()[1]
    if ready_file:
        tmp = ready_file + ".tmp"
        Path(tmp).write_text(str(bound))
        os.replace(tmp, ready_file)
    await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file")
    args = parser.parse_args()
    import uvloop

    uvloop.install()
    asyncio.run(main(args.port, args.ready_file))
