"""``ktc serve`` as a real process: readiness, SIGHUP reload, SIGTERM drain and exit 0."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from exporters.landing import LandingReader, landing_directory
from proto import ApiKeys, ClientConnection, compress
from proto.messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from subscriptions.store import ConfigStore
from tests.integration.collector_harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

ROOT = Path(__file__).resolve().parents[2]


def http_status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}{path}", timeout=5
        ) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


class BlockingClient:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.codec = ClientConnection(client_id="lifecycle")

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


def test_serve_reload_and_graceful_stop(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = ConfigStore(data)
    store.alter_subscription("first", {"metrics": "org.a.", "interval.ms": "100"}, [])
    config = tmp_path / "ktc.yaml"
    config.write_text(
        "listeners: PLAINTEXT://127.0.0.1:0\nhttp.listener: 127.0.0.1:0\n"
        f"data.dir: {data}\nlanding: {{fsync: interval}}\n"
    )
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "collector.app.cli",
            "serve",
            "--config",
            str(config),
            "--ready-file",
            str(ready),
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(ready.exists, timeout_s=20, what="the ready file")
        info = json.loads(ready.read_text())
        port, http_port = info["listeners"]["PLAINTEXT"], info["http_port"]
        assert http_status(http_port, "/readyz") == 200
        assert http_status(http_port, "/healthz") == 200

        client = BlockingClient(port)
        get = client.request(
            ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
            0,
            GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)),
        )
        assert list(get.requested_metrics) == ["org.a."]
        payload = b"\n\x00"  # an empty ResourceMetrics: valid OTLP
        push = PushTelemetryRequest(
            get.client_instance_id, get.subscription_id, False, 4, compress(4, payload)
        )
        assert client.request(ApiKeys.PUSH_TELEMETRY, 0, push).error_code == 0

        # SIGHUP re-reads the store (as does the file watcher); the process keeps serving.
        store.alter_subscription("first", {"metrics": "org.b."}, [])
        proc.send_signal(signal.SIGHUP)

        def new_metrics() -> bool:
            other = BlockingClient(port)
            response = other.request(
                ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
                0,
                GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)),
            )
            return list(response.requested_metrics) == ["org.b."]

        wait_for(new_metrics, timeout_s=10, what="the reloaded subscription")

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        # The connection was closed by the server, the push is in the log, fsynced at close.
        client.sock.settimeout(5)
        assert client.sock.recv(1) == b""
        records = list(LandingReader(landing_directory(data, 1)).read(0))
        assert [r.payload for r in records] == [payload]
    finally:
        if proc.poll() is None:
            proc.kill()
        stderr = proc.communicate()[1]
    assert "received SIGTERM" in stderr
    assert "Traceback" not in stderr, stderr


def test_serve_refuses_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "collector.app.cli",
                "serve",
                "--listeners",
                f"PLAINTEXT://127.0.0.1:{port}",
                "--data-dir",
                str(tmp_path / "data"),
                "--http-listener",
                "127.0.0.1:0",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert result.returncode == 2
    assert "cannot bind" in result.stderr
