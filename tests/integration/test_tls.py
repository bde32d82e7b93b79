"""SSL listeners with real certificates (made by the openssl CLI) and a real librdkafka
client authenticating with its own certificate."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Producer

from subscriptions.store import ConfigStore
from tests.integration.collector_harness import RunningCollector, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1/localhost, a client certificate."""
    d = tmp_path_factory.mktemp("pki")
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
        cwd=d,
    )
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, subject in (
        ("server", "/CN=localhost"),
        ("client", "/C=US/O=Acme, Inc./OU=payments/CN=orders-app"),
    ):
        openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            subject,
            cwd=d,
        )
        extra = ["-extfile", "san.ext"] if name == "server" else []
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.pem",
            "-days",
            "2",
            *extra,
            cwd=d,
        )
    # Kafka's PEM keystore: the private key and the certificate chain in one file.
    (d / "server-keystore.pem").write_text(
        (d / "server.key").read_text() + (d / "server.pem").read_text()
    )
    return d


def test_mutual_tls_push_carries_the_certificate_principal(
    tmp_path: Path, pki: Path
) -> None:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "tls", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )
    settings = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki / "server-keystore.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"),
        "ssl.client.auth": "required",
    }
    with RunningCollector(data_dir, **settings) as collector:
        client = Producer(
            {
                "bootstrap.servers": collector.bootstrap,
                "client.id": "tls-producer",
                "security.protocol": "SSL",
                "ssl.ca.location": str(pki / "ca.pem"),
                "ssl.certificate.location": str(pki / "client.pem"),
                "ssl.key.location": str(pki / "client.key"),
                "log_level": 3,
            }
        )
        try:
            (record, *_) = wait_for(
                lambda: [
                    r
                    for r in collector.landed()
                    if r.context.client_id == "tls-producer"
                ],
                timeout_s=20,
                what="a push over TLS",
            )
        finally:
            client.close()
    assert record.context.security_protocol == "SSL"
    assert record.context.listener_name == "SSL"
    # Kafka's default principal: the subject as X500Principal.getName() renders it.
    assert (
        record.context.principal == r"User:CN=orders-app,OU=payments,O=Acme\, Inc.,C=US"
    )


def test_a_client_without_a_certificate_is_refused(tmp_path: Path, pki: Path) -> None:
    settings = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki / "server-keystore.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"),
        "ssl.client.auth": "required",
    }
    with RunningCollector(tmp_path / "data", **settings) as collector:
        client = Producer(
            {
                "bootstrap.servers": collector.bootstrap,
                "security.protocol": "SSL",
                "ssl.ca.location": str(pki / "ca.pem"),
                "log_level": 3,
            }
        )
        try:
            metadata_error = None
            try:
                client.list_topics(timeout=3)
            except Exception as exc:  # KafkaException: transport failure
                metadata_error = exc
            assert metadata_error is not None
            assert collector.server is not None and not collector.server.connections()
        finally:
            client.close()
