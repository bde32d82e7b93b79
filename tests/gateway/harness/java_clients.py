"""Runs java/GatewayClientsCheck.java (kafka-clients 4.4.0 from the `make kafka-libs` cache)
against a bootstrap address and returns its JSON result, plus every remote endpoint the JVM had
an established TCP connection to (psutil, sampled while it runs).

    result = run_java_clients("127.0.0.1:9092", "topic-a")
    result["ok"], result["acked"], result["consumed"], result["nodes"]   # from the Java side
    result["remote_endpoints"]     # ["127.0.0.1:41657", ...] seen by psutil
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import psutil

from . import _proc
from .kafka_cluster import classpath, java_bin, kafka_libs_dir, missing_prerequisites

SOURCE = Path(__file__).parent / "java" / "GatewayClientsCheck.java"
MAIN_CLASS = "GatewayClientsCheck"
RESULT_PREFIX = "KTC-RESULT "

_LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p [%t] %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.err.ref = ERR
"""

_compile_lock = threading.Lock()


def compiled_classes(libs: Path | None = None) -> Path:
    """Compiles the runner once (javac against the cached jars) into a directory keyed by the
    source and the jar set, reused across runs and sessions."""
    libs = libs or kafka_libs_dir()
    reason = missing_prerequisites()
    if reason is not None:
        raise RuntimeError(reason)
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update("\0".join(sorted(p.name for p in libs.glob("*.jar"))).encode())
    target = Path(tempfile.gettempdir()) / f"ktc-java-clients-{digest.hexdigest()[:16]}"
    with _compile_lock:
        if (target / f"{MAIN_CLASS}.class").is_file():
            return target
        java = java_bin()
        assert java is not None
        javac = str(Path(os.path.realpath(java)).with_name("javac"))
        if not os.access(javac, os.X_OK):
            javac = shutil.which("javac") or javac
        staging = Path(tempfile.mkdtemp(prefix="ktc-java-clients-build-"))
        result = subprocess.run(
            [
                javac,
                "-J-XX:+UseSerialGC",
                "-cp",
                classpath(libs),
                "-d",
                str(staging),
                str(SOURCE),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise RuntimeError(
                f"javac failed ({result.returncode}):\n{result.stdout}{result.stderr}"
            )
        try:
            os.replace(staging, target)
        except OSError:  # another process got there first
            shutil.rmtree(staging, ignore_errors=True)
        return target


def _log_config(classes: Path, level: str) -> Path:
    path = classes / f"log4j2-{level.upper()}.properties"
    if not path.is_file():
        staging = path.with_suffix(f".{os.getpid()}.tmp")
        staging.write_text(_LOG4J2.format(level=level.upper()))
        os.replace(staging, path)
    return path


class EndpointSampler:
    """Samples a process's established TCP connections every `interval` seconds on a thread;
    `endpoints` is the union of the remote "host:port"s seen."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.endpoints: set[str] = set()
        self.samples = 0
        self._process = psutil.Process(pid)
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"endpoints-{pid}", daemon=True
        )

    def __enter__(self) -> EndpointSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def sample(self) -> None:
        try:
            connections = self._process.net_connections(kind="tcp")
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            return
        self.samples += 1
        for connection in connections:
            if connection.status == psutil.CONN_ESTABLISHED and connection.raddr:
                host = connection.raddr.ip
                if host.startswith("::ffff:"):
                    host = host[len("::ffff:") :]
                self.endpoints.add(f"{host}:{connection.raddr.port}")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)


def run_java_clients(
    bootstrap: str,
    topic: str,
    *,
    sasl_username: str | None = None,
    sasl_password: str | None = None,
    sasl_mechanism: str = "SCRAM-SHA-512",
    records: int = 10_000,
    txn_records: int = 100,
    partitions: int = 6,
    replication_factor: int = 0,
    group: str | None = None,
    group_protocol: str = "classic",
    instance_id_timeout_ms: int = 10_000,
    client_props: Mapping[str, Any] | None = None,
    allow_existing_topic: bool = False,
    timeout: float = 240.0,
    log_level: str = "WARN",
    extra_args: Iterable[str] = (),
) -> dict[str, Any]:
    """Runs the Java clients (see GatewayClientsCheck.java for what they do; `client_props`
    are set on every client last, over the runner's own settings) and returns the
    runner's JSON result plus `remote_endpoints` (sorted "host:port" the JVM was connected to),
    `returncode`, `wall_seconds` and `stderr_tail`. Raises RuntimeError when the runner printed
    no result (crash, timeout); a result with `ok: false` is returned for the test to assert."""
    classes = compiled_classes()
    java = java_bin()
    assert java is not None
    command = [
        *_proc.die_with_parent(),
        java,
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        f"-Dlog4j2.configurationFile={_log_config(classes, log_level)}",
        "-cp",
        f"{classes}{os.pathsep}{classpath()}",
        MAIN_CLASS,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--records",
        str(records),
        "--txn-records",
        str(txn_records),
        "--partitions",
        str(partitions),
        "--replication-factor",
        str(replication_factor),
        "--group-protocol",
        group_protocol,
        "--instance-id-timeout-ms",
        str(instance_id_timeout_ms),
        "--timeout-ms",
        str(int(max(10.0, timeout - 30.0) * 1000 / 2)),
        "--allow-existing-topic",
        "true" if allow_existing_topic else "false",
    ]
    if group is not None:
        command += ["--group", group]
    if sasl_username is not None:
        command += [
            "--sasl-username",
            sasl_username,
            "--sasl-password",
            sasl_password or "",
        ]
        command += ["--sasl-mechanism", sasl_mechanism]
    for key, value in (client_props or {}).items():
        command += ["--prop", f"{key}={value}"]
    command += list(extra_args)

    started = time.monotonic()
    with (
        tempfile.TemporaryFile() as stdout,
        tempfile.NamedTemporaryFile(
            prefix="ktc-java-clients-", suffix=".log", delete=False
        ) as stderr,
    ):
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=_proc.clean_env(("KAFKA_", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS")),
            start_new_session=True,
        )
        _proc.register(process)
        try:
            with EndpointSampler(process.pid) as sampler:
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            returncode = _proc.kill(process)
        stdout.seek(0)
        output = stdout.read().decode("utf-8", "replace")
        stderr_path = Path(stderr.name)
    stderr_tail = _proc.tail(stderr_path, 40)
    if returncode == 0:
        stderr_path.unlink(missing_ok=True)
    lines = [line for line in output.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        raise RuntimeError(
            f"the Java clients printed no result (exit {returncode}, "
            f"{time.monotonic() - started:.0f} s); stdout:\n{output[-4000:]}\n"
            f"stderr ({stderr_path}):\n{stderr_tail}"
        )
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT_PREFIX) :])
    result["remote_endpoints"] = sorted(sampler.endpoints)
    result["endpoint_samples"] = sampler.samples
    result["returncode"] = returncode
    result["wall_seconds"] = round(time.monotonic() - started, 2)
    result["stderr_tail"] = stderr_tail
    result["stderr_path"] = str(stderr_path)
    return result
