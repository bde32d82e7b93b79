"""SASL listeners with real librdkafka clients (confluent-kafka): PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512 over SASL_PLAINTEXT push telemetry and their pushes land under
``User:<name>``; a wrong password is refused (SASL_AUTHENTICATION_FAILED) and counted; a
request other than ApiVersions/SASL before authentication closes the connection."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from collector.security.credentials import (
    ScramMechanism,
    scram_credential_from_password,
)
from collector.security.credentials_file import DurableCredentialStore
from proto import encode_request
from proto.messages import MetadataRequest
from subscriptions.store import ConfigStore
from tests.integration.collector_harness import RunningCollector, wait_for
from tests.integration.test_quotas_real_clients import scrape
from tests.secrets_under_test import SASL_USERS, WRONG_PASSWORD

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

USERS = {user: SASL_USERS[user] for user in ("alice", "bob", "carol")}


def prepare(data_dir: Path) -> None:
    ConfigStore(data_dir).alter_subscription(
        "sasl", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )
    DurableCredentialStore(data_dir).write(
        {
            user: {
                m: scram_credential_from_password(m, pw, user.encode() * 8, 4096)
                for m in ScramMechanism
            }
            for user, pw in USERS.items()
        }
    )


def producer(
    bootstrap: str,
    mechanism: str,
    user: str,
    password: str,
    client_id: str,
    **more: object,
) -> Producer:
    return Producer(
        {
            **more,
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "log_level": 3,
        }
    )


def test_plain_and_scram_clients_land_under_their_principal(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    prepare(data_dir)
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    }
    cases = [("PLAIN", "alice"), ("SCRAM-SHA-256", "bob"), ("SCRAM-SHA-512", "carol")]
    with RunningCollector(data_dir, **settings) as collector:
        clients = [
            producer(collector.bootstrap, mechanism, user, USERS[user], f"sasl-{user}")
            for mechanism, user in cases
        ]
        try:
            landed = wait_for(
                lambda: (
                    found
                    if len(
                        found := {r.context.client_id: r for r in collector.landed()}
                    )
                    >= 3
                    else None
                ),
                timeout_s=30,
                what="a push from each SASL client",
            )
        finally:
            for client in clients:
                client.close()
    for _, user in cases:
        assert landed[f"sasl-{user}"].context.principal == f"User:{user}"


def test_wrong_password_is_refused_and_counted(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    prepare(data_dir)
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    with RunningCollector(data_dir, **settings) as collector:
        errors: list[KafkaError] = []
        client = producer(
            collector.bootstrap,
            "SCRAM-SHA-512",
            "alice",
            WRONG_PASSWORD,
            "bad",
            error_cb=errors.append,
        )
        try:
            with pytest.raises(KafkaException):
                client.list_topics(timeout=5)
        finally:
            client.close()
        server = collector.server
        assert server is not None
        failed = wait_for(
            lambda: server.authentication.failed or None,
            timeout_s=10,
            what="the failed authentication counted",
        )
        assert failed >= 1 and not collector.landed()
        samples = scrape(collector)
    # librdkafka reports Kafka's message from the SaslAuthenticate answer (58).
    assert any(
        e.code() == KafkaError._AUTHENTICATION
        and "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512"
        in e.str()
        for e in errors
    ), errors
    assert any(name == "ktc_failed_authentication_total" for name, _ in samples)


def test_a_request_before_authentication_closes_the_connection(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    prepare(data_dir)
    with RunningCollector(
        data_dir, listeners="SASL_PLAINTEXT://127.0.0.1:0"
    ) as collector:
        host, port = collector.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(encode_request(3, 12, 1, "raw", MetadataRequest()))
            # Closed with nothing written (recv returns b"" at EOF).
            assert sock.recv(4096) == b""
        # The close is the SASL gate's (counted as a failed authentication).
        assert collector.server is not None
        assert collector.server.authentication.failed == 1
