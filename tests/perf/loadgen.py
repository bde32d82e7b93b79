"""Load generator: many simulated KIP-714 client instances over many connections.

Each connection does what librdkafka does on its telemetry broker: ApiVersions v3, then
GetTelemetrySubscriptions for each of its instances, then PushTelemetry for each instance
every push interval, with a real zstd-compressed OTLP payload (a producer's ten metrics,
like librdkafka sends).  Requests on a connection are pipelined; responses come back in
order, so latency is measured per push from write to response.

An instance never has more than one push in flight: like the Java client, it schedules
its next push one interval after the response (and so never trips the server's
too-early gate).  The offered rate is therefore about ``instances / interval`` until
the server saturates, then whatever the server sustains (closed loop), which is how peak
throughput is measured without unbounded queues.  Times come from
``time.perf_counter`` (uvloop's ``loop.time()`` has millisecond resolution).

Usage: ``python tests/perf/loadgen.py --bootstrap 127.0.0.1:9092 --instances 6000
--connections 60 --interval-ms 100 --duration-s 10``.  The server must have a
subscription that gives these clients a ``--interval-ms`` push interval.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import struct
import sys
import time
import uuid
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from proto import compression
from proto.messages import (
    ApiVersionsRequest,
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
    api_versions_request,
    get_telemetry_subscriptions_request,
    get_telemetry_subscriptions_response,
    push_telemetry_request,
    request_header,
)
from proto.messages.request_header import RequestHeader

__all__ = ["LoadResult", "encode_frame", "producer_payload", "run_load"]

_SIZE = struct.Struct(">i")
# PushTelemetry/Get responses use header v1: correlation id (4 bytes) + empty tagged fields
# (1 byte); the body starts at offset 5 with ThrottleTimeMs int32, ErrorCode int16.
_BODY_OFFSET = 5
_PUSH_RESPONSE = struct.Struct(">ih")

PRODUCER_METRICS = (
    ("org.apache.kafka.producer.connection.creation.rate", "gauge"),
    ("org.apache.kafka.producer.connection.creation.total", "sum"),
    ("org.apache.kafka.producer.node.request.latency.avg", "gauge"),
    ("org.apache.kafka.producer.node.request.latency.max", "gauge"),
    ("org.apache.kafka.producer.produce.throttle.time.avg", "gauge"),
    ("org.apache.kafka.producer.produce.throttle.time.max", "gauge"),
    ("org.apache.kafka.producer.record.queue.time.avg", "gauge"),
    ("org.apache.kafka.producer.record.queue.time.max", "gauge"),
    ("org.apache.kafka.producer.request.latency.avg", "gauge"),
    ("org.apache.kafka.producer.request.latency.max", "gauge"),
)


def producer_payload(seed: int = 0) -> bytes:
    """An OTLP MetricsData shaped like librdkafka's producer push (empty resource)."""
    now_ns = 1_700_000_000_000_000_000 + seed
    metrics = []
    for name, kind in PRODUCER_METRICS:
        attrs = [KeyValue(key="node.id", value=AnyValue(int_value=1))] if ".node." in name else []
        point = NumberDataPoint(
            time_unix_nano=now_ns,
            start_time_unix_nano=now_ns - 10**9,
            as_double=float(seed % 97) + 0.5,
            attributes=attrs,
        )
        if kind == "sum":
            metrics.append(
                Metric(
                    name=name,
                    sum=Sum(data_points=[point], aggregation_temporality=1, is_monotonic=True),
                )
            )
        else:
            metrics.append(Metric(name=name, gauge=Gauge(data_points=[point])))
    return MetricsData(
        resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=metrics)])]
    ).SerializeToString()


def encode_frame(
    api_key: int,
    version: int,
    correlation_id: int,
    client_id: str,
    writer,
    message,
    header_version: int = 2,
) -> bytes:  # type: ignore[no-untyped-def]
    out = bytearray(4)
    request_header.WRITERS[header_version](
        RequestHeader(api_key, version, correlation_id, client_id), out
    )
    writer(message, out)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


@dataclasses.dataclass
class LoadResult:
    duration_s: float
    pushes_ok: int
    errors: dict[int, int]
    latencies_ms: list[float]
    instances: int
    connections: int

    @property
    def pushes_per_s(self) -> float:
        return self.pushes_ok / self.duration_s if self.duration_s else 0.0

    def percentile_ms(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        data = sorted(self.latencies_ms)
        return data[min(len(data) - 1, int(q * len(data)))]

    def summary(self) -> dict[str, object]:
        return {
            "instances": self.instances,
            "connections": self.connections,
            "duration_s": round(self.duration_s, 2),
            "pushes_ok": self.pushes_ok,
            "pushes_per_s": round(self.pushes_per_s),
            "errors": {str(k): v for k, v in sorted(self.errors.items())},
            "p50_ms": round(self.percentile_ms(0.50), 3),
            "p99_ms": round(self.percentile_ms(0.99), 3),
        }


class _LoadConnection(asyncio.Protocol):
    """One TCP connection carrying ``count`` client instances."""

    def __init__(
        self, count: int, interval_s: float, compressed: bytes, stats: _Stats, index: int
    ) -> None:
        self._count = count
        self._interval_s = interval_s
        self._compressed = compressed
        self._stats = stats
        self._client_id = f"loadgen-{index}"
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_event_loop()
        self._handshake: asyncio.Future[list[tuple[uuid.UUID, int]]] = self._loop.create_future()
        self._pending_gets = 0
        self._subscriptions: list[tuple[uuid.UUID, int]] = []
        self._api_versions_pending = True
        self._frames: list[bytes] = []
        # (send time, instance) for pushes in flight, in send order.
        self._inflight: collections.deque[tuple[float, int]] = collections.deque()
        # (due time, instance), in due order.
        self._ready: collections.deque[tuple[float, int]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self.measuring = False
        self.stopped = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        frames = [
            encode_frame(
                18,
                3,
                0,
                self._client_id,
                api_versions_request.WRITERS[3],
                ApiVersionsRequest("loadgen", "1.0"),
            )
        ]
        get = encode_frame(
            71,
            0,
            1,
            self._client_id,
            get_telemetry_subscriptions_request.WRITERS[0],
            GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)),
        )
        frames += [get] * self._count
        self._pending_gets = self._count
        transport.write(b"".join(frames))

    def connection_lost(self, exc: Exception | None) -> None:
        self.stopped = True
        if not self._handshake.done():
            self._handshake.set_exception(ConnectionError(f"connection lost: {exc}"))

    def data_received(self, data: bytes) -> None:
        buf = self._buffer
        buf += data
        pos = 0
        end = len(buf)
        now = time.perf_counter()
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            start = pos + 4
            pos = start + size
            if self._api_versions_pending:
                self._api_versions_pending = False
                continue
            if self._pending_gets:
                response, _ = get_telemetry_subscriptions_response.READERS[0](
                    buf, start + _BODY_OFFSET
                )
                if response.error_code != 0:
                    raise RuntimeError(f"GetTelemetrySubscriptions failed: {response.error_code}")
                self._subscriptions.append((response.client_instance_id, response.subscription_id))
                self._pending_gets -= 1
                if not self._pending_gets:
                    self._handshake.set_result(self._subscriptions)
                continue
            _, error = _PUSH_RESPONSE.unpack_from(buf, start + _BODY_OFFSET)
            sent, instance = self._inflight.popleft()
            if self.measuring:
                if error == 0:
                    self._stats.ok += 1
                    self._stats.latencies.append((now - sent) * 1000.0)
                else:
                    self._stats.errors[error] = self._stats.errors.get(error, 0) + 1
            self._ready.append((now + self._interval_s, instance))
        del buf[:pos]
        if self._ready and self._timer is None and not self.stopped:
            self._arm()

    async def handshake(self) -> None:
        subscriptions = await self._handshake
        self._frames = [
            encode_frame(
                72,
                0,
                i,
                self._client_id,
                push_telemetry_request.WRITERS[0],
                PushTelemetryRequest(instance_id, sub_id, False, 4, self._compressed),
            )
            for i, (instance_id, sub_id) in enumerate(subscriptions)
        ]

    def start_pushing(self, offset_s: float) -> None:
        first = time.perf_counter() + offset_s
        # Spread this connection's instances over one interval, as real clients are.
        step = self._interval_s / max(1, self._count)
        self._ready.extend((first + i * step, i) for i in range(self._count))
        self._arm()

    def _arm(self) -> None:
        delay = max(0.0, self._ready[0][0] - time.perf_counter())
        self._timer = self._loop.call_later(delay, self._send_due)

    def _send_due(self) -> None:
        self._timer = None
        if self.stopped or self._transport is None or self._transport.is_closing():
            return
        now = time.perf_counter()
        out = []
        ready = self._ready
        frames = self._frames
        inflight = self._inflight
        while ready and ready[0][0] <= now:
            _, instance = ready.popleft()
            out.append(frames[instance])
            inflight.append((now, instance))
        if out:
            self._transport.write(b"".join(out))
        if ready:
            self._arm()

    def close(self) -> None:
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
        if self._transport is not None:
            self._transport.close()


class _Stats:
    def __init__(self) -> None:
        self.ok = 0
        self.errors: dict[int, int] = {}
        self.latencies: list[float] = []


async def run_load(
    host: str,
    port: int,
    *,
    instances: int,
    connections: int,
    interval_ms: int,
    duration_s: float,
    warmup_s: float = 1.0,
) -> LoadResult:
    loop = asyncio.get_running_loop()
    stats = _Stats()
    compressed = compression.compress(compression.CompressionType.ZSTD, producer_payload())
    interval_s = interval_ms / 1000.0
    per_connection = [
        instances // connections + (1 if i < instances % connections else 0)
        for i in range(connections)
    ]
    protocols: list[_LoadConnection] = []
    for index, count in enumerate(per_connection):
        if count == 0:
            continue
        _, protocol = await loop.create_connection(
            lambda c=count, i=index: _LoadConnection(c, interval_s, compressed, stats, i),
            host,
            port,
        )
        protocols.append(protocol)
    await asyncio.gather(*(p.handshake() for p in protocols))
    # The first push of an instance is accepted at once after its Get; start one interval
    # later anyway so every push is a steady-state push.
    for index, protocol in enumerate(protocols):
        protocol.start_pushing(interval_s + interval_s * index / len(protocols))
    await asyncio.sleep(interval_s * 2 + warmup_s)
    for protocol in protocols:
        protocol.measuring = True
    started = time.perf_counter()
    await asyncio.sleep(duration_s)
    for protocol in protocols:
        protocol.measuring = False
    elapsed = time.perf_counter() - started
    for protocol in protocols:
        protocol.close()
    return LoadResult(elapsed, stats.ok, stats.errors, stats.latencies, instances, len(protocols))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--instances", type=int, default=6000)
    parser.add_argument("--connections", type=int, default=60)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    args = parser.parse_args()
    host, _, port = args.bootstrap.rpartition(":")
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    result = asyncio.run(
        run_load(
            host,
            int(port),
            instances=args.instances,
            connections=args.connections,
            interval_ms=args.interval_ms,
            duration_s=args.duration_s,
            warmup_s=args.warmup_s,
        )
    )
    print(json.dumps(result.summary()))


if __name__ == "__main__":
    main()
