"""The differential test's two servers, started once per session: Apache Kafka 4.4.0 (one
KRaft node from the `make kafka-libs` jars, client telemetry turned on by a no-op Java plugin)
and the server `ktc serve` runs, configured alike; plus the report printed at the end of the
run (every API/version compared with its count of compared fields, and the table of known
deliberate differences).

Without java or the Kafka jars the test skips, except in CI (CI=true), where it fails."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent

from collector.security.credentials import (  # noqa: E402
    ScramMechanism,
    scram_credential_from_password,
)
from collector.security.credentials_file import DurableCredentialStore  # noqa: E402
from tests.compat.differential import Report, Servers  # noqa: E402
from tests.gateway.harness import kafka_cluster as kafka_cluster_module  # noqa: E402
from tests.gateway.harness.kafka_cluster import (  # noqa: E402
    DEFAULT_SASL_USERS,
    KafkaCluster,
    classpath,
    java_bin,
    kafka_libs_dir,
)
from tests.integration.collector_harness import RunningCollector  # noqa: E402

PLUGIN_SOURCE = HERE / "java" / "NoopClientTelemetry.java"
PLUGIN_CLASS = "NoopClientTelemetry"
# Kafka's StorageTool writes SCRAM credentials with this many iterations (its default).
SCRAM_ITERATIONS = 4096
MECHANISMS = "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"
SUPER_USERS = "User:ANONYMOUS;User:alice"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_report = Report()
_compile_lock = threading.Lock()


def require(reason: str | None) -> None:
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(
            f"differential test prerequisite missing in CI: {reason}", pytrace=False
        )
    pytest.skip(reason)


def compiled_plugin() -> Path:
    """javac once per machine (per source and jar set), into a directory outside the tree."""
    libs = kafka_libs_dir()
    digest = hashlib.sha256(PLUGIN_SOURCE.read_bytes())
    digest.update("\0".join(sorted(p.name for p in libs.glob("*.jar"))).encode())
    target = (
        Path(tempfile.gettempdir()) / f"ktc-telemetry-plugin-{digest.hexdigest()[:16]}"
    )
    with _compile_lock:
        if (target / f"{PLUGIN_CLASS}.class").is_file():
            return target
        java = java_bin()
        assert java is not None
        javac = str(Path(os.path.realpath(java)).with_name("javac"))
        if not os.access(javac, os.X_OK):
            javac = shutil.which("javac") or javac
        staging = Path(tempfile.mkdtemp(prefix="ktc-telemetry-plugin-build-"))
        done = subprocess.run(
            [javac, "-cp", classpath(libs), "-d", str(staging), str(PLUGIN_SOURCE)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise RuntimeError(f"javac failed:\n{done.stdout}{done.stderr}")
        try:
            os.replace(staging, target)
        except OSError:  # another process got there first
            shutil.rmtree(staging, ignore_errors=True)
        return target


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    require(kafka_cluster_module.missing_prerequisites())
    plugin = compiled_plugin()
    broker = KafkaCluster(
        nodes=1,
        heap="384m",
        work_dir=tmp_path_factory.mktemp("kafka-reference"),
        extra_classpath=(plugin,),
        log_level="WARN",
        broker_config={
            "metric.reporters": PLUGIN_CLASS,
            "authorizer.class.name": AUTHORIZER,
            "super.users": SUPER_USERS,
            "auto.create.topics.enable": "false",
            "sasl.enabled.mechanisms": MECHANISMS,
        },
    )
    data_dir = tmp_path_factory.mktemp("collector-reference")
    DurableCredentialStore(data_dir).write(
        {
            user: {
                mechanism: scram_credential_from_password(
                    mechanism, password, user.encode() * 8, SCRAM_ITERATIONS
                )
                for mechanism in ScramMechanism
            }
            for user, password in DEFAULT_SASL_USERS.items()
        }
    )
    collector = RunningCollector(
        data_dir,
        **{
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": MECHANISMS,
            "authorizer.class.name": AUTHORIZER,
            "super.users": SUPER_USERS,
        },
    )
    try:
        broker.start()
        collector.__enter__()
        server = collector.server
        assert server is not None
        node = broker.node_ports[1]
        yield Servers(
            kafka={
                "PLAINTEXT": node["PLAINTEXT"],
                "SASL_PLAINTEXT": node["SASL_PLAINTEXT"],
            },
            collector={
                "PLAINTEXT": server.port("PLAINTEXT"),
                "SASL_PLAINTEXT": server.port("SASL_PLAINTEXT"),
            },
            kafka_cluster_id=broker.cluster_id,
            collector_cluster_id=server.cluster_id,
            kafka_node_id=1,
            collector_node_id=collector.config.node_id,
            report=_report,
            broker=broker,
            running_collector=collector,
        )
    finally:
        collector.stop()
        broker.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _report.exchanges:
        return
    terminalreporter.section("Apache Kafka 4.4.0 differential (tests/compat)")
    for line in _report.lines():
        terminalreporter.write_line(line)
