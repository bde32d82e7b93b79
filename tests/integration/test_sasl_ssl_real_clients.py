"""SASL_SSL with real clients: librdkafka (confluent-kafka) and the Java client
(kafka-clients 4.4.0, java/SaslTelemetryClient.java) each log in with SCRAM-SHA-512,
SCRAM-SHA-256 and PLAIN over TLS, push telemetry, and their pushes land under
``User:<name>``. With a small ``connections.max.reauth.ms`` both keep pushing for several
session lifetimes by re-authenticating on the same connection (KIP-368), counted in
``ktc_reauthentications_total``."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Producer

from collector.security.credentials import (
    ScramMechanism,
    scram_credential_from_password,
)
from collector.security.credentials_file import DurableCredentialStore
from exporters.landing import LandingRecord
from subscriptions.store import ConfigStore
from tests.gateway.golden import kafka_classpath
from tests.integration.collector_harness import RunningCollector, wait_for
from tests.integration.test_quotas_real_clients import scrape
from tests.integration.test_tls import pki  # noqa: F401 - the module-scoped CA and server certificate
from tests.secrets_under_test import SASL_USERS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

HERE = Path(__file__).resolve().parent
# (mechanism, user): one user per mechanism, so a landed principal names its mechanism too.
CASES = [("SCRAM-SHA-512", "alice"), ("SCRAM-SHA-256", "bob"), ("PLAIN", "carol")]
PUSH_INTERVAL_MS = 500


def prepare(data_dir: Path) -> None:
    ConfigStore(data_dir).alter_subscription(
        "sasl-ssl",
        {"metrics": "org.apache.kafka.", "interval.ms": str(PUSH_INTERVAL_MS)},
        [],
    )
    DurableCredentialStore(data_dir).write(
        {
            user: {
                m: scram_credential_from_password(m, pw, user.encode() * 8, 4096)
                for m in ScramMechanism
            }
            for user, pw in SASL_USERS.items()
        }
    )


def sasl_ssl_settings(pki: Path, **more: str) -> dict[str, str]:  # noqa: F811
    return {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "ssl.keystore.location": str(pki / "server-keystore.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"),
        **more,
    }


def librdkafka(
    collector: RunningCollector,
    pki: Path,  # noqa: F811 - the pki fixture imported above
    mechanism: str,
    user: str,
    client_id: str,
) -> Producer:
    return Producer(
        {
            "bootstrap.servers": collector.bootstrap,
            "client.id": client_id,
            "enable.metrics.push": True,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki / "ca.pem"),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": SASL_USERS[user],
            "log_level": 3,
        }
    )


def java_or_skip() -> tuple[str, str]:
    java, classpath = shutil.which("java"), kafka_classpath()
    if java is None or classpath is None:
        reason = "needs java and the kafka-clients 4.4.0 jar (make kafka-libs)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return java, classpath


@contextmanager
def java_client(
    collector: RunningCollector,
    pki: Path,  # noqa: F811 - the pki fixture imported above
    mechanism: str,
    user: str,
    client_id: str,
    work: Path,
) -> Iterator[subprocess.Popen[str]]:
    """The Java producer, pushing until this block ends (its stdin is closed)."""
    java, classpath = java_or_skip()
    process = subprocess.Popen(
        [
            java,
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work}",
            "-cp",
            classpath,
            str(HERE / "java" / "SaslTelemetryClient.java"),
            "--bootstrap",
            collector.bootstrap,
            "--protocol",
            "SASL_SSL",
            "--mechanism",
            mechanism,
            "--user",
            user,
            "--password",
            SASL_USERS[user],
            "--client-id",
            client_id,
            "--truststore",
            str(pki / "ca.pem"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        try:  # closes its stdin: the client stops
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        assert "KTC error" not in out, f"{client_id}: {out}\n{err[-3000:]}"


def pushes_by_client(collector: RunningCollector) -> dict[str, list[LandingRecord]]:
    found: dict[str, list[LandingRecord]] = {}
    for record in collector.landed():
        assert record.context.client_id is not None
        found.setdefault(record.context.client_id, []).append(record)
    return found


def wait_for_pushes(
    collector: RunningCollector, client_ids: list[str], count: int, timeout_s: float
) -> dict[str, list[LandingRecord]]:
    return wait_for(
        lambda: (
            (found if all(len(found.get(c, ())) >= count for c in client_ids) else None)
            if (found := pushes_by_client(collector)) is not None
            else None
        ),
        timeout_s=timeout_s,
        what=f"{count} pushes from each of {client_ids}",
    )


def assert_principals(landed: dict[str, list[LandingRecord]], prefix: str) -> None:
    for _, user in CASES:
        records = landed[f"{prefix}-{user}"]
        assert {r.context.principal for r in records} == {f"User:{user}"}
        assert {r.context.security_protocol for r in records} == {"SASL_SSL"}


def test_librdkafka_over_sasl_ssl_lands_under_each_principal(
    tmp_path: Path,
    pki: Path,  # noqa: F811
) -> None:
    prepare(tmp_path / "data")
    with RunningCollector(tmp_path / "data", **sasl_ssl_settings(pki)) as collector:
        clients = [librdkafka(collector, pki, m, u, f"rdkafka-{u}") for m, u in CASES]
        try:
            landed = wait_for_pushes(
                collector, [f"rdkafka-{u}" for _, u in CASES], 2, 40
            )
        finally:
            for client in clients:
                client.close()
        assert (
            collector.server is not None and collector.server.authentication.failed == 0
        )
    assert_principals(landed, "rdkafka")


def test_java_client_over_sasl_ssl_lands_under_each_principal(
    tmp_path: Path,
    pki: Path,  # noqa: F811
) -> None:
    java_or_skip()
    prepare(tmp_path / "data")
    with (
        RunningCollector(tmp_path / "data", **sasl_ssl_settings(pki)) as collector,
        ExitStack() as clients,
    ):
        for mechanism, user in CASES:
            clients.enter_context(
                java_client(collector, pki, mechanism, user, f"java-{user}", tmp_path)
            )
        landed = wait_for_pushes(collector, [f"java-{u}" for _, u in CASES], 2, 120)
    assert_principals(landed, "java")


REAUTH_MS = 2000
LIFETIMES = 4


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_reauthentication_keeps_a_long_running_client_pushing(
    client: str,
    tmp_path: Path,
    pki: Path,  # noqa: F811
) -> None:
    """Both clients re-authenticate before ``connections.max.reauth.ms`` runs out (KIP-368):
    pushes go on across several lifetimes, on one connection, with no failed login."""
    prepare(tmp_path / "data")
    settings = sasl_ssl_settings(pki, **{"connections.max.reauth.ms": str(REAUTH_MS)})
    with (
        RunningCollector(tmp_path / "data", **settings) as collector,
        ExitStack() as stack,
    ):
        server = collector.server
        assert server is not None
        if client == "java":
            stack.enter_context(
                java_client(
                    collector, pki, "SCRAM-SHA-512", "alice", "long-java", tmp_path
                )
            )
        else:
            producer = librdkafka(
                collector, pki, "SCRAM-SHA-512", "alice", "long-rdkafka"
            )
            stack.callback(producer.close)
        client_id = f"long-{'java' if client == 'java' else 'rdkafka'}"
        wait_for_pushes(collector, [client_id], 1, 90)
        wait_for(
            lambda: server.authentication.reauthentications >= LIFETIMES,
            timeout_s=LIFETIMES * 5,
            what=f"{LIFETIMES} re-authentications",
        )
        before = len(pushes_by_client(collector)[client_id])
        # Still pushing after them: a push lands once the last re-authentication is done.
        wait_for_pushes(collector, [client_id], before + 2, 10)
        assert server.authentication.failed == 0
        samples = scrape(collector)
    reauthentications = {
        value
        for (name, _), value in samples.items()
        if name == "ktc_reauthentications_total"
    }
    assert reauthentications and min(reauthentications) >= LIFETIMES
    # Every push came over the same connection: re-authenticated, never reconnected.
    records = pushes_by_client(collector)[client_id]
    assert {r.context.principal for r in records} == {"User:alice"}
    ports = {r.context.client_source_port for r in records}
    assert len(ports) == 1, ports
