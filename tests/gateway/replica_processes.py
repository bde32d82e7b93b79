"""``ktc gateway`` replicas as real processes (so a test can SIGKILL one), each with its own
empty data directory, in front of one cluster; their subscriptions are the cluster's
(``gateway.subscriptions.store: cluster``, the default) and what they accept goes to one
topic on that cluster (``landing.kafka.topic``): nothing a replica holds outlives it.

    with ReplicaFleet(tmp_path, kafka_cluster.bootstrap_servers(), topic, count=3) as fleet:
        fleet[0].bootstrap               # "127.0.0.1:<its bootstrap listener>"
        fleet[0].clients(client_id="x")  # its GET /v1/clients entries
        fleet[0].kill()                  # SIGKILL
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

import yaml

from tests.gateway.harness import _proc

KTC = Path(sys.executable).with_name("ktc")


class KtcProcess:
    """One ``ktc`` command as a process of its own, with its config file, log and ready
    file in ``work``: started by :meth:`start`, ready once its ready file is written."""

    # The ``ktc`` command, its log's file name in ``work``, and how long it may take to
    # be ready.
    command = ""
    log_name = "ktc.log"
    ready_timeout_s = 90.0

    def __init__(self, name: str, work: Path, config: Mapping[str, Any]) -> None:
        self.name = name
        self.work = work
        self.config = dict(config)
        self.process: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}

    def options(self) -> list[str]:
        """The command's options beside ``--config``, ``--http-listener`` and
        ``--ready-file``."""
        return []

    def arguments(self, config: Path, ready: Path) -> list[str]:
        """The ``ktc`` command line after ``ktc``."""
        return [
            self.command,
            "--config",
            str(config),
            *self.options(),
            "--http-listener",
            "127.0.0.1:0",
            "--ready-file",
            str(ready),
        ]

    @property
    def log_path(self) -> Path:
        return self.work / self.log_name

    def start(self) -> Self:
        self.work.mkdir(parents=True, exist_ok=True)
        config = self.work / "config.yaml"
        config.write_text(yaml.safe_dump(self.config))
        ready = self.work / "ready.json"
        ready.unlink(missing_ok=True)
        with open(self.log_path, "ab") as log:
            process = subprocess.Popen(
                [*_proc.die_with_parent(), str(KTC), *self.arguments(config, ready)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_proc.clean_env(drop_prefixes=("KTC_",)),
            )
        _proc.register(process)
        self.process = process
        _proc.poll_until(
            ready.exists,
            timeout=self.ready_timeout_s,
            what=f"{self.name} ready",
            alive=_proc.exited(process, self.log_path),
        )
        self.info = json.loads(ready.read_text())
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None:
            _proc.kill(self.process, graceful_s=15)

    def http(self, path: str, accept: str | None = None) -> str:
        """GET ``path`` from its HTTP listener: the body."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.info['http_port']}{path}",
            headers={"Accept": accept} if accept else {},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return str(response.read().decode())


class ReplicaProcess(KtcProcess):
    """One ``ktc gateway`` process, ready once its ready file names its ports."""

    command = "gateway"
    log_name = "gateway.log"

    def __init__(
        self, name: str, work: Path, upstream: str, settings: Mapping[str, Any]
    ) -> None:
        super().__init__(
            name,
            work,
            {
                "gateway.upstream.bootstrap.servers": upstream,
                "gateway.broker.port.start": 0,
                **settings,
            },
        )

    def options(self) -> list[str]:
        return [
            "--listeners",
            "PLAINTEXT://127.0.0.1:0",
            "--data-dir",
            str(self.work / "data"),
        ]

    @property
    def port(self) -> int:
        return int(next(iter(self.info["listeners"].values())))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL: no drain, no flush, nothing written on the way out."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        assert self.process.returncode == -signal.SIGKILL

    def clients(self, **filters: str) -> list[dict[str, Any]]:
        """Its live client instances (``GET /v1/clients``), every page."""
        found: list[dict[str, Any]] = []
        cursor = ""
        while True:
            query = urllib.parse.urlencode({**filters, "cursor": cursor})
            page = json.loads(self.http(f"/v1/clients?{query}"))
            found.extend(page["clients"])
            cursor = page["next_cursor"] or ""
            if not cursor:
                return found


class ReplicaFleet:
    """``count`` replicas of one gateway, started in turn; every one still running is
    stopped (SIGTERM) on exit."""

    def __init__(
        self,
        work: Path,
        upstream: str,
        topic: str,
        *,
        count: int = 3,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        common = {
            "landing.kafka.topic": topic,
            "landing.kafka.topic.partitions": 3,
            "landing.kafka.topic.replication.factor": 3,
            **(settings or {}),
        }
        self.replicas = [
            ReplicaProcess(f"replica {n}", work / f"replica-{n}", upstream, common)
            for n in range(1, count + 1)
        ]

    def __enter__(self) -> ReplicaFleet:
        try:
            for replica in self.replicas:
                replica.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for replica in self.replicas:
            replica.stop()

    def __getitem__(self, index: int) -> ReplicaProcess:
        return self.replicas[index]

    def __iter__(self) -> Any:
        return iter(self.replicas)

    @property
    def bootstrap(self) -> str:
        """Every replica's bootstrap listener: a client's bootstrap list."""
        return ",".join(replica.bootstrap for replica in self.replicas)


class ClientMetricsProcess(KtcProcess):
    """``ktc client-metrics`` reading a fleet's landing topic, ready once its ready file
    names its HTTP port (the topic's partitions assigned at their end offsets by then)."""

    command = "client-metrics"
    log_name = "client-metrics.log"
    ready_timeout_s = 60.0

    def __init__(self, work: Path, upstream: str, settings: Mapping[str, Any]) -> None:
        super().__init__(
            "ktc client-metrics",
            work,
            {"gateway.upstream.bootstrap.servers": upstream, **settings},
        )
