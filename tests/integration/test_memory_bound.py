"""``ktc serve`` as a real process under connections that announce the largest requests they
may and trickle them: its memory stays within ``queued.max.request.bytes`` of its idle size,
another client is answered throughout, and a request over its API's limit is refused
before its body is sent."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from proto import ApiKeys, ClientConnection, compress
from proto.errors import Errors
from proto.messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from proto.request_limits import push_telemetry_request_max_bytes
from subscriptions.store import ConfigStore
from tests.integration.collector_harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
TELEMETRY_MAX = 1048576
PUSH_LIMIT = push_telemetry_request_max_bytes(TELEMETRY_MAX)
BUDGET = 64 * MIB
# Trickling connections; together they announce 55 of the 64 MiB, so the budget has room
# for the client that keeps pushing, and then more that run it out.
TRICKLERS = 50
LATECOMERS = 30
CHUNK = 64 * 1024
# What the server may hold beyond its idle size and the budget: per connection, its
# transport, protocol and socket read buffer (about 300 KiB for 80 connections, generously),
# and the allocator's slack on tens of MiB of 64 KiB pieces.
MARGIN = 48 * MIB


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def scrape(http_port: int) -> dict[str, float]:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{http_port}/metrics", timeout=5
    ) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


class Pusher:
    """A well-behaved client: subscribes, then pushes, each answer awaited."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.codec = ClientConnection(client_id="steady")
        get = self.request(
            ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
            GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)),
        )
        self.instance_id = get.client_instance_id
        self.subscription_id = get.subscription_id

    def request(self, api_key: int, message: object) -> Any:
        self.sock.sendall(self.codec.send_request(api_key, 0, message))
        while True:
            frame = self.codec.next_response()
            if frame is not None:
                return frame.message
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.codec.receive_data(data)

    def push(self) -> int:
        payload = compress(4, b"\n\x00")  # an empty ResourceMetrics: valid OTLP
        push = PushTelemetryRequest(
            self.instance_id, self.subscription_id, False, 4, payload
        )
        return int(self.request(ApiKeys.PUSH_TELEMETRY, push).error_code)


class Trickler:
    """Announces a PushTelemetry at its limit, then sends its body a piece at a time and
    never its last byte."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(
            struct.pack(">ihhih", PUSH_LIMIT, ApiKeys.PUSH_TELEMETRY, 0, 1, 0)
        )
        self.sock.setblocking(False)
        self.sent = 4 + 10
        self.total = 4 + PUSH_LIMIT

    def trickle(self) -> None:
        left = self.total - 1 - self.sent
        if left <= 0:
            return
        try:
            self.sent += self.sock.send(b"\x00" * min(CHUNK, left))
        except BlockingIOError:  # the server is not reading from this one: its choice
            pass


def start_serve(tmp_path: Path) -> tuple[subprocess.Popen[str], int, int]:
    data = tmp_path / "data"
    ConfigStore(data).alter_subscription(
        "all", {"metrics": "org.apache.kafka.", "interval.ms": "100"}, []
    )
    config = tmp_path / "ktc.yaml"
    config.write_text(
        "listeners: PLAINTEXT://127.0.0.1:0\nhttp.listener: 127.0.0.1:0\n"
        f"data.dir: {data}\nlanding: {{fsync: never}}\n"
        f"queued.max.request.bytes: {BUDGET}\ntelemetry.max.bytes: {TELEMETRY_MAX}\n"
    )
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector.app.cli", "serve", "--config", str(config)]
        + ["--ready-file", str(ready)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(ready.exists, timeout_s=30, what="the ready file")
    info = json.loads(ready.read_text())
    return proc, info["listeners"]["PLAINTEXT"], info["http_port"]


def test_trickling_maximal_requests_keep_memory_within_the_budget(
    tmp_path: Path,
) -> None:
    proc, port, http_port = start_serve(tmp_path)
    sockets: list[socket.socket] = []
    try:
        pusher = Pusher(port)
        sockets.append(pusher.sock)
        for _ in range(20):  # warm: the push path's code and buffers are in memory
            assert pusher.push() in (Errors.NONE, Errors.THROTTLING_QUOTA_EXCEEDED)
        idle = rss_bytes(proc.pid)
        bound = idle + BUDGET + MARGIN
        peak = idle

        tricklers = [Trickler(port) for _ in range(TRICKLERS)]
        sockets.extend(t.sock for t in tricklers)
        answered = 0
        for _ in range(PUSH_LIMIT // CHUNK + 1):
            for trickler in tricklers:
                trickler.trickle()
            pusher.push()  # answered while every trickler holds its request open
            answered += 1
            peak = max(peak, rss_bytes(proc.pid))
        assert all(t.sent == t.total - 1 for t in tricklers)
        # Each counts at its announced size (once the server has read what was sent).
        wait_for(
            lambda: (
                scrape(http_port)["ktc_queued_request_bytes"]
                == TRICKLERS * (4 + PUSH_LIMIT)
            ),
            timeout_s=10,
            what="every trickler's request counted",
        )
        assert peak < bound, f"RSS {peak / MIB:.0f} MiB over {bound / MIB:.0f} MiB"

        # More of them than the budget holds: those not admitted are not read from.
        latecomers = [Trickler(port) for _ in range(LATECOMERS)]
        sockets.extend(t.sock for t in latecomers)
        for _ in range(PUSH_LIMIT // CHUNK + 1):
            for trickler in latecomers:
                trickler.trickle()
            peak = max(peak, rss_bytes(proc.pid))
        # The server reads the latecomers on its own schedule (a loaded machine lags).
        wait_for(
            lambda: scrape(http_port)["ktc_queued_request_bytes_exhausted_total"] >= 1,
            timeout_s=10,
            what="the budget used up",
        )
        metrics = scrape(http_port)
        # Used up, and over it by no more than the requests admitted as it ran out and the
        # first reads of connections being opened then (request_memory.py: the bound), though
        # the latecomers sent up to 30 MiB more (the kernel holds what the server does not read).
        assert (
            BUDGET
            <= metrics["ktc_queued_request_bytes"]
            < BUDGET + 4 * (4 + PUSH_LIMIT)
        )
        peak = max(peak, rss_bytes(proc.pid))
        assert peak < bound, f"RSS {peak / MIB:.0f} MiB over {bound / MIB:.0f} MiB"

        # They go away: their bytes go back, and the steady client is read again.
        for trickler in tricklers + latecomers:
            trickler.sock.close()
        wait_for(
            lambda: scrape(http_port)["ktc_queued_request_bytes"] == 0,
            timeout_s=10,
            what="the budget released",
        )
        assert pusher.push() in (Errors.NONE, Errors.THROTTLING_QUOTA_EXCEEDED)
        print(
            f"idle RSS {idle / MIB:.1f} MiB, peak {peak / MIB:.1f} MiB, bound "
            f"{bound / MIB:.1f} MiB; {answered} pushes answered while trickled"
        )
    finally:
        for sock in sockets:
            sock.close()
        proc.terminate()
        stderr = proc.communicate(timeout=30)[1]
    assert "Traceback" not in stderr, stderr


def test_an_over_limit_push_is_refused_before_its_body_is_sent(tmp_path: Path) -> None:
    proc, port, http_port = start_serve(tmp_path)
    try:
        for announced in (
            PUSH_LIMIT + 1,
            100 * MIB,
        ):  # just over; the old 100 MiB frame
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            # The size and the header, no body: the server closes at once.
            sock.sendall(
                struct.pack(">ihhih", announced, ApiKeys.PUSH_TELEMETRY, 0, 1, 0)
            )
            assert sock.recv(1) == b""
            sock.close()
        assert scrape(http_port)["ktc_connections_closed_on_error_total"] == 2
    finally:
        proc.terminate()
        stderr = proc.communicate(timeout=30)[1]
    assert stderr.count("over that API's limit") == 2, stderr
