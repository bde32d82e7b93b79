"""The collector's memory under load: ``ktc serve`` as its own process, its RSS (VmRSS) at
each step of filling everything the configuration bounds:

1. idle, after start;
2. the client-instance cache at ``telemetry.instance.cache.max.size``: that many clients
   (each its own GetTelemetrySubscriptions with a zero instance id, then a push of a
   realistic payload, so the landing log's buffers and segment are in use too);
3. plus ``queued.max.request.bytes`` held: connections that announce PushTelemetry requests
   at their limit and send all but their last byte, until the budget is used up (and as
   many again, which the server must not read).

    .venv/bin/python tests/perf/bench_memory.py [--cache-size 16384] [--budget-mib 100]

Prints the RSS of each step, the machine, and the figure docs/operations.md and the Helm
chart's memory limit come from.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import select
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)

from proto import ApiKeys, ClientConnection, compress
from proto.messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from proto.request_limits import push_telemetry_request_max_bytes
from subscriptions.store import ConfigStore

MIB = 1024 * 1024
ZERO = uuid.UUID(int=0)
# Requests in flight per connection while filling the cache.
BATCH = 64


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def machine() -> str:
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    total = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            total = int(line.split()[1]) * 1024
    return (
        f"{model}, {os.cpu_count()} CPUs, {total / 2**30:.1f} GiB, "
        f"Linux {platform.release()}, Python {platform.python_version()}"
    )


def payload() -> bytes:
    """A producer's typical push: 40 gauges with a few attributes, zstd-compressed."""
    metrics = [
        Metric(
            name=f"org.apache.kafka.producer.metric.{i}",
            gauge=Gauge(
                data_points=[
                    NumberDataPoint(
                        as_double=1.5,
                        time_unix_nano=1_700_000_000_000_000_000,
                        attributes=[KeyValue(key=f"k{a}") for a in range(3)],
                    )
                ]
            ),
        )
        for i in range(40)
    ]
    data = MetricsData(
        resource_metrics=[
            ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=metrics)])
        ]
    ).SerializeToString()
    return compress(4, data)


class Client:
    def __init__(self, port: int, client_id: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.codec = ClientConnection(client_id=client_id)

    def send(self, api_key: int, message: object) -> None:
        self.sock.sendall(self.codec.send_request(api_key, 0, message))

    def receive(self) -> object:
        while True:
            frame = self.codec.next_response()
            if frame is not None:
                return frame.message
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("closed by the server")
            self.codec.receive_data(data)


def fill_cache(port: int, instances: int, metrics: bytes) -> int:
    """``instances`` new clients, each subscribed and pushed once; returns pushes accepted."""
    client = Client(port, "bench-memory")
    accepted = 0
    for start in range(0, instances, BATCH):
        count = min(BATCH, instances - start)
        for _ in range(count):
            client.send(
                ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
                GetTelemetrySubscriptionsRequest(ZERO),
            )
        gets = [client.receive() for _ in range(count)]
        for get in gets:
            push = PushTelemetryRequest(
                get.client_instance_id,  # type: ignore[attr-defined]
                get.subscription_id,  # type: ignore[attr-defined]
                False,
                4,
                metrics,
            )
            client.send(ApiKeys.PUSH_TELEMETRY, push)
        accepted += sum(client.receive().error_code == 0 for _ in range(count))  # type: ignore[attr-defined]
    client.sock.close()
    return accepted


def hold_requests(port: int, connections: int, limit: int) -> list[socket.socket]:
    """Connections that each announce a push at ``limit`` and send all but its last byte."""
    socks = []
    body = b"\x00" * (limit - 10 - 1)
    for _ in range(connections):
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        sock.sendall(struct.pack(">ihhih", limit, ApiKeys.PUSH_TELEMETRY, 0, 1, 0))
        sock.setblocking(False)
        socks.append(sock)
    pending = {sock: memoryview(body) for sock in socks}
    deadline = time.monotonic() + 20
    while pending and time.monotonic() < deadline:
        # Those the server reads become writable; those it holds for memory never do.
        _, writable, _ = select.select([], list(pending), [], 0.5)
        if not writable:
            break
        for sock in writable:
            left = pending[sock]
            try:
                sent = sock.send(left[: 1 << 20])
            except BlockingIOError:
                continue
            if sent == len(left):
                del pending[sock]
            else:
                pending[sock] = left[sent:]
    return socks


def scrape(http_port: int, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(
        f"http://127.0.0.1:{http_port}/metrics", timeout=10
    ) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-size", type=int, default=16384)
    parser.add_argument("--budget-mib", type=int, default=100)
    parser.add_argument("--telemetry-max-bytes", type=int, default=1048576)
    args = parser.parse_args()
    budget = args.budget_mib * MIB
    limit = push_telemetry_request_max_bytes(args.telemetry_max_bytes)

    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        data = Path(tmp) / "data"
        ConfigStore(data).alter_subscription(
            "producers",
            {"metrics": "org.apache.kafka.producer.", "interval.ms": "60000"},
            [],
        )
        config = Path(tmp) / "ktc.yaml"
        config.write_text(
            "listeners: PLAINTEXT://127.0.0.1:0\nhttp.listener: 127.0.0.1:0\n"
            f"data.dir: {data}\n"
            f"telemetry.instance.cache.max.size: {args.cache_size}\n"
            # Instances must not expire while the cache fills.
            "telemetry.instance.cache.expiry.ms: 3600000\n"
            f"queued.max.request.bytes: {budget}\n"
            f"telemetry.max.bytes: {args.telemetry_max_bytes}\n"
        )
        ready = Path(tmp) / "ready.json"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "collector.app.cli",
                "serve",
                "--config",
                str(config),
            ]
            + ["--ready-file", str(ready)],
            cwd=ROOT,
            stderr=subprocess.DEVNULL,
        )
        socks: list[socket.socket] = []
        try:
            deadline = time.monotonic() + 60
            while not ready.exists():
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("ktc serve did not start")
                time.sleep(0.05)
            info = json.loads(ready.read_text())
            port, http_port = info["listeners"]["PLAINTEXT"], info["http_port"]
            idle = rss_bytes(proc.pid)
            print(f"machine: {machine()}")
            print(f"idle:                          RSS {idle / MIB:7.1f} MiB")

            accepted = fill_cache(port, args.cache_size, payload())
            instances = scrape(http_port, "kafka_server_client_metrics_instance_count")
            cache = rss_bytes(proc.pid)
            print(
                f"instance cache full:           RSS {cache / MIB:7.1f} MiB "
                f"({instances:.0f} instances, {accepted} pushes landed; "
                f"{(cache - idle) / args.cache_size:.0f} bytes per instance)"
            )

            connections = budget // (4 + limit) + 1
            socks = hold_requests(port, 2 * connections, limit)
            held = -1.0
            while held != (held := scrape(http_port, "ktc_queued_request_bytes")):
                time.sleep(0.05)  # until the server has read all it will
            loaded = rss_bytes(proc.pid)
            print(
                f"+ request budget used up:      RSS {loaded / MIB:7.1f} MiB "
                f"({held / MIB:.1f} MiB of requests held of {args.budget_mib} MiB; "
                f"{2 * connections} connections each sending {limit} bytes)"
            )
            print(
                f"process under load: {loaded / MIB:.0f} MiB = idle {idle / MIB:.0f} + cache "
                f"{(cache - idle) / MIB:.0f} + requests {(loaded - cache) / MIB:.0f}"
            )
        finally:
            for sock in socks:
                sock.close()
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
