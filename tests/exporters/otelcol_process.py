"""A real OpenTelemetry Collector process for the forwarder's end-to-end tests.

The binary is built by `make otelcol` from tests/exporters/otelcol/builder-config.yaml (the
OTLP receiver, the debug and the Prometheus exporters) into a cache outside the tree; its
path is ``KTC_OTELCOL``.  Every port it opens is a free port on 127.0.0.1, picked when the
process is first started and kept across restarts, so the forwarder's endpoint stays valid
while the receiver is down.  Without the binary the test skips, or fails when CI=true.

What arrived is read two ways: the Prometheus exporter's page (``scrape()``, one family per
metric, resource attributes as labels), and the debug exporter's log, one JSON line per
Export request with its number of data points (``data_points_logged()``), which adds up
across restarts where the Prometheus page starts over.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Self

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.waiting import eventually_sync

__all__ = ["OtelCollector", "otelcol_binary"]

DEFAULT_BINARY = Path.home() / ".cache" / "ktc" / "otelcol-0.165.0" / "otelcol-ktc"

# Long enough for a cold start of the Go binary on a busy 2-core machine.
_START_TIMEOUT_S = 30.0


def otelcol_binary() -> Path:
    binary = Path(os.environ.get("KTC_OTELCOL", DEFAULT_BINARY))
    if not binary.is_file():
        reason = f"no OpenTelemetry Collector at {binary}: run `make otelcol`"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return binary


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _config(grpc_port: int, prometheus_port: int) -> str:
    return f"""
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc_port}
exporters:
  debug:
    verbosity: basic
  prometheus:
    endpoint: 127.0.0.1:{prometheus_port}
    # Resource attributes (the forwarder's enrichment) become labels of every series.
    resource_to_telemetry_conversion:
      enabled: true
service:
  telemetry:
    logs:
      encoding: json
      # The debug exporter's line per request is what data_points_logged() adds up: every
      # one, not zap's default sample (the first 10 a second, then every 100th).
      sampling:
        enabled: false
    # Its own telemetry would listen on 8888; nothing here reads it.
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [debug, prometheus]
"""


class OtelCollector:
    """``with OtelCollector(work_dir) as otelcol:``; ``stop()`` and ``start()`` in between
    take the receiver away and bring it back on the same ports."""

    def __init__(self, work_dir: Path) -> None:
        self.binary = otelcol_binary()
        self.work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        self.grpc_port = _free_port()
        self.prometheus_port = _free_port()
        self.config_path = work_dir / "otelcol.yaml"
        self.config_path.write_text(_config(self.grpc_port, self.prometheus_port))
        self._process: subprocess.Popen[bytes] | None = None
        self._runs = 0

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        assert self._process is None
        self._runs += 1
        log = (self.work_dir / f"otelcol-{self._runs}.log").open("wb")
        self._process = subprocess.Popen(
            [str(self.binary), f"--config={self.config_path}"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        eventually_sync(
            self._serving, timeout_s=_START_TIMEOUT_S, what="otelcol to listen"
        )

    def stop(self) -> None:
        """Graceful stop (SIGTERM): what the receiver accepted, its exporters have seen."""
        process, self._process = self._process, None
        if process is None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _serving(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            raise AssertionError(f"otelcol exited: {self.log_tail()}")
        for port in (self.grpc_port, self.prometheus_port):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                return False
        return True

    def scrape(self) -> dict[str, list[Sample]]:
        """The Prometheus exporter's page, parsed: family name -> samples."""
        url = f"http://127.0.0.1:{self.prometheus_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode()
        except (urllib.error.URLError, ConnectionError):
            return {}
        return {
            family.name: family.samples
            for family in text_string_to_metric_families(text)
        }

    def data_points_logged(self) -> int:
        """Data points the debug exporter logged, over every run of the process."""
        total = 0
        for log in sorted(self.work_dir.glob("otelcol-*.log")):
            for line in log.read_text().splitlines():
                if not line.startswith("{"):
                    continue
                entry = json.loads(line)
                if entry.get("otelcol.component.id") == "debug":
                    total += int(entry.get("data points", 0))
        return total

    def log_tail(self, lines: int = 20) -> str:
        logs = sorted(self.work_dir.glob("otelcol-*.log"))
        if not logs:
            return ""
        return "\n".join(logs[-1].read_text().splitlines()[-lines:])
