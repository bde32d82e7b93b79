"""The baseline for bench_push.py: the least a KIP-714 receiver must do per push.

Same process model as the collector (one process, an asyncio Protocol on uvloop,
responses written once per read) and the same protocol codec (``proto.ServerConnection``
cuts frames, ``proto.decode_request`` parses them), but nothing else: it answers
ApiVersions and GetTelemetrySubscriptions with fixed responses, and for each
PushTelemetry decompresses the payload (the same bounded codec), parses it as OTLP
``MetricsData`` and acks from a pre-encoded response.  No dispatch table, subscriptions,
gating, instance cache, landing log, quotas or metrics: what the benchmark's ratio
measures is exactly the cost of those.

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

from proto import (
    SUPPORTED_VERSIONS,
    ApiKeys,
    RequestFrame,
    ServerConnection,
    compression,
    decode_request,
    encode_response,
)
from proto.messages import (
    ApiVersionsResponse,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
)
from proto.messages.api_versions_response import ApiVersion

MAX_BYTES = 1_048_576
_INT32 = struct.Struct(">i")
_OK = encode_response(ApiKeys.PUSH_TELEMETRY, 0, 0, PushTelemetryResponse())


class BaselineProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self._codec = ServerConnection()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._codec.receive_data(data)
        out = []
        while (frame := self._codec.next_request()) is not None:
            out.append(self._handle(frame))
        if out and self._transport is not None:
            self._transport.write(b"".join(out))

    def _handle(self, frame: RequestFrame) -> bytes:
        if frame.api_key == ApiKeys.PUSH_TELEMETRY:
            request = decode_request(frame)
            payload = compression.decompress(
                request.compression_type, request.metrics, MAX_BYTES
            )
            MetricsData.FromString(payload)
            return _OK[:4] + _INT32.pack(frame.correlation_id) + _OK[8:]
        if frame.api_key == ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS:
            message = GetTelemetrySubscriptionsResponse(
                client_instance_id=uuid.uuid4(),
                subscription_id=0,
                accepted_compression_types=(4,),
                push_interval_ms=100,
                telemetry_max_bytes=MAX_BYTES,
                delta_temporality=True,
                requested_metrics=("org.apache.kafka.producer.",),
            )
            return encode_response(frame.api_key, 0, frame.correlation_id, message)
        entries = tuple(
            ApiVersion(k, lo, hi) for k, (lo, hi) in SUPPORTED_VERSIONS.items()
        )
        return encode_response(
            ApiKeys.API_VERSIONS,
            min(frame.api_version, 3),
            frame.correlation_id,
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
