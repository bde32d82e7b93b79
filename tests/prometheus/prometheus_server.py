"""A real Prometheus server (Debian's ``prometheus`` package, 2.42; `make prometheus`
installs it) for the ``/metrics/clients`` tests: it scrapes the targets it is given every
second on 127.0.0.1 and answers PromQL over its HTTP API.  Without the binary the tests
skip, or fail when CI=true.  Its port is a free port picked from a bound socket."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import pytest

from tests.waiting import eventually_sync

__all__ = ["PrometheusServer", "prometheus_binary", "promtool_binary"]

_START_TIMEOUT_S = 60.0


def _binary(name: str) -> Path:
    found = shutil.which(name) or f"/usr/bin/{name}"
    if not os.access(found, os.X_OK):
        reason = f"no {name} here: run `make prometheus` (Debian's prometheus package)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return Path(found)


def prometheus_binary() -> Path:
    return _binary("prometheus")


def promtool_binary() -> Path:
    return _binary("promtool")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrometheusServer:
    """``with PrometheusServer(work_dir, {"job": ("127.0.0.1:port", "/path")}) as prom:``"""

    def __init__(
        self,
        work_dir: Path,
        targets: Mapping[str, tuple[str, str]],
        rule_files: Sequence[Path] = (),
    ) -> None:
        self.binary = prometheus_binary()
        self.work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        jobs = "".join(
            f"""
  - job_name: {job}
    metrics_path: {path}
    static_configs:
      - targets: ["{address}"]
"""
            for job, (address, path) in targets.items()
        )
        rules = "".join(f"\n  - {path}" for path in rule_files)
        self.config_path = work_dir / "prometheus.yml"
        self.config_path.write_text(
            f"""
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:{rules or " []"}
scrape_configs:{jobs}
"""
        )
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        log = (self.work_dir / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                str(self.binary),
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.work_dir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                # Samples up to 5 m old are what a query sees: the tests query right away.
                "--query.lookback-delta=5m",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        eventually_sync(
            self._ready, timeout_s=_START_TIMEOUT_S, what="prometheus to be ready"
        )
        return self

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _ready(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            raise AssertionError(f"prometheus exited: {self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, ConnectionError):
            return False

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(
            f"{self.url}{path}?{query}", timeout=10
        ) as response:
            answer = json.loads(response.read())
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (each with ``metric`` and ``value``)."""
        data = self.api("/api/v1/query", query=expr)
        return list(data["result"])

    def targets_healthy(self) -> dict[str, str]:
        """job -> the health of its (one) target ("up", "down", "unknown") and last error."""
        data = self.api("/api/v1/targets")
        return {
            t["labels"]["job"]: t["health"]
            + (f": {t['lastError']}" if t["lastError"] else "")
            for t in data["activeTargets"]
        }

    def log_tail(self, lines: int = 30) -> str:
        log = self.work_dir / "prometheus.log"
        if not log.exists():
            return ""
        return "\n".join(log.read_text().splitlines()[-lines:])
