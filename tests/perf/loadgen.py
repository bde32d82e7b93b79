"""Load generator: many simulated KIP-714 client instances over many connections, spread
over several worker processes.

Each connection does what librdkafka does on its telemetry broker: ApiVersions v3, then
GetTelemetrySubscriptions for each of its instances, then PushTelemetry for each instance,
with a real zstd-compressed OTLP payload (a producer's ten metrics, like librdkafka sends).
Requests on a connection are pipelined; responses come back in order, so latency is
measured per push, from the write that carried it to the read that carried its response.

Two pacing modes:

* **closed** (peak throughput): an instance never has more than one push in flight; like
  the Java client, it schedules its next push one interval after the response (and so
  never trips the server's too-early gate).  The offered rate is about
  ``instances / interval`` until the server saturates, then whatever the server sustains,
  which is how peak throughput is measured without unbounded queues.
* **open** (latency at a given rate): every instance pushes on a fixed schedule, one
  push every ``period`` whether or not earlier answers came back, so a slow server meets
  the same arrivals instead of fewer (no coordinated omission).  The rate is
  ``instances / period``.  The period is 1.25 x the push interval so that scheduling
  jitter (up to a quarter interval) never makes a push arrive "too early" for the server's
  gate; a push that does is counted as an error, not a latency.  When the load generator
  itself falls behind (its send lag) by more than that, it never sends an instance's push
  sooner than one interval after that instance's previous push, as a real client never
  does: the push waits until one period after it (the same quarter interval of slack for
  the server's own jitter), and its wait counts in the send lag.  Otherwise a stall of the
  load generator would show up as the server's "too early" errors.

The connections are divided among ``workers`` processes, each with its own uvloop event
loop, so the measurement is not limited by one Python loop.  Everything stays on loopback
and is bounded: ``duration_s`` of measurement after ``warmup_s``, and at most one push per
instance per period.  Every worker starts pushing at the same ``time.perf_counter`` instant
(CLOCK_MONOTONIC, shared by the processes) and measures the same window.  Each worker also
records how late its sends were against their schedule (``send_lag``): when that is large,
the load generator, not the server, was short of CPU.

Usage: ``python tests/perf/loadgen.py --bootstrap 127.0.0.1:9092 --instances 6000
--connections 60 --interval-ms 100 --duration-s 10 [--mode open]``.  The server must have
a subscription that gives these clients a ``--interval-ms`` push interval.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import collections
import dataclasses
import functools
import heapq
import json
import multiprocessing
import multiprocessing.connection
import os
import struct
import sys
import time
import uuid
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_DELTA,
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

__all__ = [
    "CLOSED",
    "OPEN",
    "OPEN_PERIOD_FACTOR",
    "LoadResult",
    "encode_frame",
    "producer_payload",
    "run_load",
    "run_load_blocking",
]

CLOSED = "closed"
OPEN = "open"
# Open mode pushes every 1.25 push intervals: a quarter interval of jitter stays legal.
OPEN_PERIOD_FACTOR = 1.25

_SIZE = struct.Struct(">i")
# PushTelemetry/Get responses use header v1: correlation id (4 bytes) + empty tagged fields
# (1 byte); the body starts at offset 5 with ThrottleTimeMs int32, ErrorCode int16.
_BODY_OFFSET = 5
_PUSH_RESPONSE = struct.Struct(">ih")
# How long the parent waits for workers to connect and finish their handshakes.
_HANDSHAKE_TIMEOUT_S = 60.0

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
        attrs = (
            [KeyValue(key="node.id", value=AnyValue(int_value=1))]
            if ".node." in name
            else []
        )
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
                    sum=Sum(
                        data_points=[point],
                        aggregation_temporality=AGGREGATION_TEMPORALITY_DELTA,
                        is_monotonic=True,
                    ),
                )
            )
        else:
            metrics.append(Metric(name=name, gauge=Gauge(data_points=[point])))
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=metrics)])
        ]
    ).SerializeToString()


def encode_frame(
    api_key: int,
    version: int,
    correlation_id: int,
    client_id: str,
    writer: Any,
    message: Any,
    header_version: int = 2,
) -> bytes:
    out = bytearray(4)
    request_header.WRITERS[header_version](
        RequestHeader(api_key, version, correlation_id, client_id), out
    )
    writer(message, out)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


@dataclasses.dataclass
class LoadResult:
    mode: str
    duration_s: float
    pushes_ok: int
    errors: dict[int, int]
    latencies_ms: list[float]
    instances: int
    connections: int
    workers: int
    offered_per_s: float
    send_lag_ms: list[float]  # how late sends left against their schedule (open mode)
    server_cpu_s: float | None = None  # the server process's CPU time in the window
    acked_total: int = (
        0  # pushes answered without error over the whole run, window or not
    )

    @property
    def server_cpu_us_per_push(self) -> float:
        """CPU the server spent per answered push: its capacity on one idle core is
        1e6 / this, whatever else ran on the machine meanwhile."""
        if self.server_cpu_s is None or not self.pushes_ok:
            return float("nan")
        return self.server_cpu_s / self.pushes_ok * 1e6

    @property
    def server_busy_percent(self) -> float:
        """The share of one core the server used over the measured window."""
        if self.server_cpu_s is None or not self.duration_s:
            return float("nan")
        return 100.0 * self.server_cpu_s / self.duration_s

    @property
    def pushes_per_s(self) -> float:
        return self.pushes_ok / self.duration_s if self.duration_s else 0.0

    def percentile_ms(self, q: float) -> float:
        return _percentile(self.latencies_ms, q)

    def summary(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "instances": self.instances,
            "connections": self.connections,
            "workers": self.workers,
            "offered_per_s": round(self.offered_per_s),
            "duration_s": round(self.duration_s, 2),
            "pushes_ok": self.pushes_ok,
            "pushes_per_s": round(self.pushes_per_s),
            "errors": {str(k): v for k, v in sorted(self.errors.items())},
            "p50_ms": round(self.percentile_ms(0.50), 3),
            "p99_ms": round(self.percentile_ms(0.99), 3),
            "p999_ms": round(self.percentile_ms(0.999), 3),
            "send_lag_p99_ms": round(_percentile(self.send_lag_ms, 0.99), 3),
            "server_cpu_us_per_push": round(self.server_cpu_us_per_push, 2),
        }


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    data = sorted(values)
    return data[min(len(data) - 1, int(q * len(data)))]


class _Stats:
    """One worker's counts for the measurement window [start, end) (perf_counter)."""

    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.end = end
        self.ok = 0
        self.errors: dict[int, int] = {}
        self.latencies = array.array("d")
        self.send_lag = array.array("d")
        # Every push answered without error, in the window or not: what a caller that
        # reads the landing log back compares with (tests/perf/soak.py).
        self.acked = 0


class _LoadConnection(asyncio.Protocol):
    """One TCP connection carrying ``count`` client instances."""

    def __init__(
        self,
        count: int,
        interval_s: float,
        mode: str,
        compressed: bytes,
        stats: _Stats,
        index: int,
    ) -> None:
        self._count = count
        self._mode = mode
        self._interval_s = interval_s
        # Closed: the delay after a response.  Open: the fixed period between pushes.
        self._period_s = interval_s * (OPEN_PERIOD_FACTOR if mode == OPEN else 1.0)
        self._compressed = compressed
        self._stats = stats
        self._client_id = f"loadgen-{index}"
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_event_loop()
        self._handshake: asyncio.Future[list[tuple[uuid.UUID, int]]] = (
            self._loop.create_future()
        )
        self._pending_gets = 0
        self._subscriptions: list[tuple[uuid.UUID, int]] = []
        self._api_versions_pending = True
        self._frames: list[bytes] = []
        # Send times of the pushes in flight, in send order (responses come back in order).
        self._inflight: collections.deque[float] = collections.deque()
        self._inflight_instances: collections.deque[int] = collections.deque()
        # (due time, instance), in due order.
        self._ready: collections.deque[tuple[float, int]] = collections.deque()
        # Open mode: when each instance last sent, and (send time, due time, instance) of
        # the pushes held back until one interval after their instance's previous push.
        self._last_sent = [-1e9] * count
        self._held: list[tuple[float, float, int]] = []
        self._timer: asyncio.TimerHandle | None = None
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
        self._transport.write(b"".join(frames))

    def connection_lost(self, exc: Exception | None) -> None:
        self.stopped = True
        if not self._handshake.done():
            self._handshake.set_exception(ConnectionError(f"connection lost: {exc}"))

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buf = self._buffer
        buf += data
        pos = 0
        end = len(buf)
        stats = self._stats
        measuring = stats.start <= now < stats.end
        closed = self._mode == CLOSED
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
                    error = RuntimeError(
                        f"GetTelemetrySubscriptions failed: {response.error_code}"
                    )
                    if not self._handshake.done():
                        self._handshake.set_exception(error)
                    return
                self._subscriptions.append(
                    (response.client_instance_id, response.subscription_id)
                )
                self._pending_gets -= 1
                if not self._pending_gets:
                    self._handshake.set_result(self._subscriptions)
                continue
            _, error = _PUSH_RESPONSE.unpack_from(buf, start + _BODY_OFFSET)
            sent = self._inflight.popleft()
            if error == 0:
                stats.acked += 1
            if measuring:
                if error == 0:
                    stats.ok += 1
                    stats.latencies.append((now - sent) * 1000.0)
                else:
                    stats.errors[error] = stats.errors.get(error, 0) + 1
            if closed:
                self._ready.append(
                    (now + self._period_s, self._inflight_instances.popleft())
                )
        del buf[:pos]
        if closed and self._ready and self._timer is None and not self.stopped:
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

    def start_pushing(self, first: float) -> None:
        # Spread this connection's instances over one period, as real clients are.
        step = self._period_s / max(1, self._count)
        self._ready.extend((first + i * step, i) for i in range(self._count))
        self._arm()

    def _arm(self) -> None:
        next_due = self._ready[0][0] if self._ready else self._held[0][0]
        if self._held:
            next_due = min(next_due, self._held[0][0])
        delay = max(0.0, next_due - time.perf_counter())
        self._timer = self._loop.call_later(delay, self._send_due)

    def _send_due(self) -> None:
        self._timer = None
        transport = self._transport
        if self.stopped or transport is None or transport.is_closing():
            return
        now = time.perf_counter()
        out = []
        ready = self._ready
        frames = self._frames
        inflight = self._inflight
        stats = self._stats
        measuring = stats.start <= now < stats.end
        open_loop = self._mode == OPEN
        period = self._period_s
        due_now: list[tuple[float, int]] = []
        held = self._held
        while held and held[0][0] <= now:
            _, due, instance = heapq.heappop(held)
            due_now.append((due, instance))
        while ready and ready[0][0] <= now:
            due, instance = ready.popleft()
            if open_loop:
                ready.append((due + period, instance))  # the schedule ignores answers
            due_now.append((due, instance))
        last_sent = self._last_sent
        interval = self._interval_s
        for due, instance in due_now:
            if open_loop:
                previous = last_sent[instance]
                if now < previous + interval:
                    heapq.heappush(held, (previous + period, due, instance))
                    continue
                last_sent[instance] = now
                if measuring:
                    stats.send_lag.append((now - due) * 1000.0)
            else:
                self._inflight_instances.append(instance)
            out.append(frames[instance])
            inflight.append(now)
        if out:
            transport.write(b"".join(out))
        if ready or held:
            self._arm()

    def close(self) -> None:
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
        if self._transport is not None:
            self._transport.close()


@dataclasses.dataclass(frozen=True)
class _WorkerPlan:
    host: str
    port: int
    per_connection: tuple[int, ...]
    first_index: int
    interval_s: float
    mode: str


async def _worker_main(
    plan: _WorkerPlan, pipe: multiprocessing.connection.Connection
) -> None:
    loop = asyncio.get_running_loop()
    compressed = compression.compress(
        compression.CompressionType.ZSTD, producer_payload()
    )
    stats = _Stats(float("inf"), float("inf"))
    protocols: list[_LoadConnection] = []
    for offset, count in enumerate(plan.per_connection):
        index = plan.first_index + offset
        _, protocol = await loop.create_connection(
            functools.partial(
                _LoadConnection,
                count,
                plan.interval_s,
                plan.mode,
                compressed,
                stats,
                index,
            ),
            plan.host,
            plan.port,
        )
        protocols.append(protocol)
    await asyncio.gather(*(p.handshake() for p in protocols))
    pipe.send("ready")
    start_at, measure_from, measure_to = await loop.run_in_executor(None, pipe.recv)
    stats.start, stats.end = measure_from, measure_to
    period = plan.interval_s * (OPEN_PERIOD_FACTOR if plan.mode == OPEN else 1.0)
    total = len(protocols)
    for index, protocol in enumerate(protocols):
        # Connections start staggered over one period (this worker's share of it).
        protocol.start_pushing(start_at + period * index / max(1, total))
    await asyncio.sleep(max(0.0, measure_to - time.perf_counter()) + 0.05)
    for protocol in protocols:
        protocol.close()
    pipe.send(
        (
            stats.ok,
            stats.errors,
            stats.latencies.tobytes(),
            stats.send_lag.tobytes(),
            stats.acked,
        )
    )


def _worker_entry(
    plan: _WorkerPlan, pipe: multiprocessing.connection.Connection
) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    try:
        asyncio.run(_worker_main(plan, pipe))
    except BaseException as exc:  # report, so the parent fails with the reason
        pipe.send(("error", f"{type(exc).__name__}: {exc}"))
        raise


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    # After the command: state is field 3, utime and stime are fields 14 and 15 (man 5 proc).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sleep_until(deadline: float) -> None:
    remaining = deadline - time.perf_counter()
    if remaining > 0:
        time.sleep(remaining)


def _unpack(raw: bytes) -> list[float]:
    values = array.array("d")
    values.frombytes(raw)
    return values.tolist()


def run_load_blocking(
    host: str,
    port: int,
    *,
    instances: int,
    connections: int,
    interval_ms: int,
    duration_s: float,
    warmup_s: float = 1.0,
    mode: str = CLOSED,
    workers: int = 2,
    server_pid: int | None = None,
) -> LoadResult:
    """Runs one load in ``workers`` processes and returns the merged result."""
    if mode not in (CLOSED, OPEN):
        raise ValueError(f"mode must be {CLOSED!r} or {OPEN!r}")
    connections = max(1, min(connections, instances))
    workers = max(1, min(workers, connections))
    interval_s = interval_ms / 1000.0
    per_connection = [
        instances // connections + (1 if i < instances % connections else 0)
        for i in range(connections)
    ]
    context = multiprocessing.get_context("spawn")  # no inherited event loop or threads
    pipes: list[multiprocessing.connection.Connection] = []
    processes = []
    share = (connections + workers - 1) // workers
    for w in range(workers):
        chunk = tuple(per_connection[w * share : (w + 1) * share])
        if not chunk:
            continue
        parent_end, child_end = context.Pipe()
        plan = _WorkerPlan(host, port, chunk, w * share, interval_s, mode)
        process = context.Process(
            target=_worker_entry, args=(plan, child_end), daemon=True
        )
        process.start()
        pipes.append(parent_end)
        processes.append(process)
    try:
        for pipe in pipes:
            if not pipe.poll(_HANDSHAKE_TIMEOUT_S):
                raise TimeoutError("a load worker did not finish its handshakes")
            message = pipe.recv()
            if message != "ready":
                raise RuntimeError(f"load worker failed: {message[1]}")
        # The first push of an instance is accepted at once after its Get; start one
        # period later anyway so every measured push is a steady-state push.
        period = interval_s * (OPEN_PERIOD_FACTOR if mode == OPEN else 1.0)
        start_at = time.perf_counter() + 0.2
        measure_from = start_at + 2 * period + warmup_s
        measure_to = measure_from + duration_s
        for pipe in pipes:
            pipe.send((start_at, measure_from, measure_to))
        server_cpu_s = None
        if server_pid is not None:
            _sleep_until(measure_from)
            cpu_before = process_cpu_s(server_pid)
            _sleep_until(measure_to)
            server_cpu_s = process_cpu_s(server_pid) - cpu_before
        ok = 0
        acked = 0
        errors: dict[int, int] = {}
        latencies: list[float] = []
        send_lag: list[float] = []
        deadline = measure_to + 30.0
        for pipe in pipes:
            if not pipe.poll(max(0.1, deadline - time.perf_counter())):
                raise TimeoutError("a load worker did not report")
            message = pipe.recv()
            if message[0] == "error":
                raise RuntimeError(f"load worker failed: {message[1]}")
            w_ok, w_errors, w_latencies, w_lag, w_acked = message
            ok += w_ok
            acked += w_acked
            for code, count in w_errors.items():
                errors[code] = errors.get(code, 0) + count
            latencies += _unpack(w_latencies)
            send_lag += _unpack(w_lag)
    finally:
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join()
        for pipe in pipes:
            pipe.close()
    return LoadResult(
        mode=mode,
        duration_s=duration_s,
        pushes_ok=ok,
        errors=errors,
        latencies_ms=latencies,
        instances=instances,
        connections=connections,
        workers=len(processes),
        offered_per_s=instances / period,
        send_lag_ms=send_lag,
        server_cpu_s=server_cpu_s,
        acked_total=acked,
    )


async def run_load(host: str, port: int, **options: Any) -> LoadResult:
    """``run_load_blocking`` for callers inside an event loop (the workers do the work)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(
        None, functools.partial(run_load_blocking, host, port, **options)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--instances", type=int, default=6000)
    parser.add_argument("--connections", type=int, default=60)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--mode", choices=(CLOSED, OPEN), default=CLOSED)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    host, _, port = args.bootstrap.rpartition(":")
    result = run_load_blocking(
        host,
        int(port),
        instances=args.instances,
        connections=args.connections,
        interval_ms=args.interval_ms,
        duration_s=args.duration_s,
        warmup_s=args.warmup_s,
        mode=args.mode,
        workers=args.workers,
    )
    print(json.dumps(result.summary()))


if __name__ == "__main__":
    main()
