"""SCRAM credentials managed over the wire by the Java Admin (kafka-clients 4.4.0):
alterUserScramCredentials / describeUserScramCredentials against the collector with
Kafka's results and exceptions, the file in the data dir holding no password, and the new
credentials letting the Java client in over SASL_PLAINTEXT (java/ScramAdminCheck.java);
credentials made with ``ktc users`` let librdkafka in (SCRAM-SHA-256)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from collector.app.cli import cli
from collector.security.credentials_file import SCRAM_CREDENTIALS_FILE
from tests.gateway.golden import kafka_classpath
from tests.integration.collector_harness import RunningCollector, wait_for
from tests.secrets_under_test import SCRAM_ADMIN_PASSWORD

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

HERE = Path(__file__).resolve().parent
PASSWORD = SCRAM_ADMIN_PASSWORD
LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"


def run_check(collector: RunningCollector, work: Path) -> dict[str, str]:
    java, classpath = shutil.which("java"), kafka_classpath()
    if java is None or classpath is None:
        reason = "needs java and the kafka-clients 4.4.0 jar (make kafka-libs)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    assert collector.server is not None
    sasl_port = collector.server.port("SASL_PLAINTEXT")
    done = subprocess.run(
        [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work}",
            "-cp",
            classpath,
            str(HERE / "java" / "ScramAdminCheck.java"),
            "--bootstrap",
            collector.bootstrap,
            "--sasl-bootstrap",
            f"127.0.0.1:{sasl_port}",
            "--password",
            PASSWORD,
        ],
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
    )
    steps = {}
    for line in done.stdout.splitlines():
        if line.startswith("KTC "):
            _, step, outcome = (line + " ").split(" ", 2)
            steps[step] = outcome.strip()
    assert "done" in steps, (
        f"exit {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    )
    return steps


def test_java_admin_manages_scram_credentials(tmp_path: Path) -> None:
    settings = {"listeners": LISTENERS, "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    with RunningCollector(tmp_path / "data", **settings) as collector:
        steps = run_check(collector, tmp_path)
    assert steps["alter"] == "ok"
    assert (
        steps["describe-all"]
        == "ok {alice=SCRAM_SHA_512/8192;, bob=SCRAM_SHA_256/4096;}"
    )
    assert steps["describe-alice"] == "ok {alice=SCRAM_SHA_512/8192;}"
    assert steps["describe-unknown-all"] == "ok {nobody=}"
    assert steps["describe-unknown"] == (
        "error org.apache.kafka.common.errors.ResourceNotFoundException: "
        "Attempt to describe a user credential that does not exist: nobody"
    )
    assert steps["alter-few-iterations"] == (
        "error org.apache.kafka.common.errors.UnacceptableCredentialException: Too few iterations"
    )
    assert steps["delete-unknown"] == (
        "error org.apache.kafka.common.errors.ResourceNotFoundException: "
        "Attempt to delete a user credential that does not exist"
    )
    assert steps["delete-bob"] == "ok {alice=SCRAM_SHA_512/8192;}"
    assert steps["sasl-login"] == "ok {alice=SCRAM_SHA_512/8192;}"
    assert steps["sasl-wrong-password"].startswith(
        "error org.apache.kafka.common.errors.SaslAuthenticationException"
    )
    stored = (tmp_path / "data" / "config" / SCRAM_CREDENTIALS_FILE).read_text()
    assert "alice" in stored and PASSWORD not in stored


def test_ktc_users_credentials_let_librdkafka_in(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    }
    with RunningCollector(data_dir, **settings) as collector:
        # Created while the collector runs: the watcher puts it in force.
        result = CliRunner().invoke(
            cli,
            [
                "users",
                "alter",
                "--data-dir",
                str(data_dir),
                "--entity-name",
                "dana",
                "--add-config",
                f"SCRAM-SHA-256=[iterations=8192,password={PASSWORD}]",
            ],
        )
        assert result.exit_code == 0, result.output
        assert collector.server is not None and collector.server.credentials is not None
        credentials = collector.server.credentials
        wait_for(
            lambda: "dana" in credentials.users(),
            timeout_s=10,
            what="the credential reloaded",
        )

        def admin(password: str) -> AdminClient:
            return AdminClient(
                {
                    "bootstrap.servers": collector.bootstrap,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-256",
                    "sasl.username": "dana",
                    "sasl.password": password,
                    "log_level": 0,
                }
            )

        assert admin(PASSWORD).list_topics(timeout=10).cluster_id
        with pytest.raises(KafkaException):  # librdkafka: a transport failure
            admin(PASSWORD + "-wrong").list_topics(timeout=5)
    assert PASSWORD not in (data_dir / "config" / SCRAM_CREDENTIALS_FILE).read_text()
