"""The README's Python client, run as a script as written (only its bootstrap address
changed), against a `ktc serve` process: a push lands."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from exporters.landing import LandingReader, landing_directory
from subscriptions.store import ConfigStore
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

ROOT = Path(__file__).resolve().parents[2]


def readme_client() -> str:
    """The ```python block of the Quick start."""
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1]
    match = re.search(r"```python\n(.*?)```", quick_start, re.DOTALL)
    assert match is not None
    return match.group(1)


def test_the_readme_client_pushes_when_run_as_a_script(tmp_path: Path) -> None:
    snippet = readme_client()
    assert '"bootstrap.servers": "localhost:9092"' in snippet
    data = tmp_path / "data"
    # The README's subscription with a 1 s interval instead of 10 s, to keep the test short.
    ConfigStore(data).alter_subscription(
        "producers",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"},
        [],
    )
    config = tmp_path / "ktc.yaml"
    config.write_text(
        "listeners: PLAINTEXT://127.0.0.1:0\nhttp.listener: 127.0.0.1:0\n"
        f"data.dir: {data}\n"
    )
    ready = tmp_path / "ready.json"
    server = subprocess.Popen(
        [sys.executable, "-m", "collector.app.cli", "serve", "--config", str(config)]
        + ["--ready-file", str(ready)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    client = None
    try:
        eventually_sync(ready.exists, timeout_s=20, what="the ready file")
        port = json.loads(ready.read_text())["listeners"]["PLAINTEXT"]
        script = tmp_path / "client.py"
        script.write_text(snippet.replace("localhost:9092", f"127.0.0.1:{port}"))
        client = subprocess.Popen(
            [sys.executable, str(script)], cwd=tmp_path, stderr=subprocess.PIPE
        )
        landing = landing_directory(data, 1)

        def pushes() -> list[object]:
            if not landing.exists():
                return []
            return [
                record
                for record in LandingReader(landing).read(0)
                if record.context.client_id == "orders" and record.payload
            ]

        eventually_sync(pushes, timeout_s=30, what="a push from the README's client")
        assert client.poll() is None  # still running, as the README says it does
    finally:
        if client is not None:
            client.kill()
            client.wait()
        server.terminate()
        server.wait(20)
