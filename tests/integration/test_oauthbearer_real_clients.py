"""SASL/OAUTHBEARER with real clients over SASL_PLAINTEXT: tokens are JWTs signed by an RSA
key this test makes (cryptography), the collector checks them against the JWKS file it
is given. librdkafka (confluent-kafka's ``oauth_cb``) and the Java client (a login callback
handler returning the test's token, java/OAuthTelemetryClient.java) push telemetry that
lands under ``User:<sub>``; an expired token and one signed by another key get
SASL_AUTHENTICATION_FAILED and the connection is closed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from confluent_kafka import KafkaError, Producer
from cryptography.hazmat.primitives.asymmetric import rsa

from subscriptions.store import ConfigStore
from tests.gateway.golden import kafka_classpath
from tests.integration.collector_harness import RunningCollector, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

HERE = Path(__file__).resolve().parent
ISSUER = "https://idp.ktc.test"
AUDIENCE = "ktc-collector"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def token(sub: str, *, key: Any = KEY, lifetime_s: int = 600) -> tuple[str, float]:
    """A signed JWT and its expiry (epoch seconds), as an identity provider would issue."""
    # The token's times are wall-clock claims compared with the collector's wall clock.
    now = int(time.time())
    claims = {
        "sub": sub,
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now - 5,
        "exp": now + lifetime_s,
        "scope": "telemetry",
    }
    return jwt.encode(claims, key, "RS256", headers={"kid": "test-key"}), float(
        now + lifetime_s
    )


def prepare(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "oauth", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(
        json.dumps({"keys": [{**jwk, "kid": "test-key", "alg": "RS256", "use": "sig"}]})
    )
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
    }
    return data_dir, settings


def producer(bootstrap: str, client_id: str, make_token: Any, **more: Any) -> Producer:
    return Producer(
        {
            **more,
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: make_token(),
            "log_level": 3,
        }
    )


def test_librdkafka_pushes_under_the_tokens_subject(tmp_path: Path) -> None:
    data_dir, settings = prepare(tmp_path)
    with RunningCollector(data_dir, **settings) as collector:
        client = producer(
            collector.bootstrap, "oauth-rdkafka", lambda: token("orders-app")
        )
        try:

            def landed() -> Any:
                client.poll(0.1)  # librdkafka calls oauth_cb from poll
                return next(
                    (
                        r
                        for r in collector.landed()
                        if r.context.client_id == "oauth-rdkafka"
                    ),
                    None,
                )

            record = wait_for(landed, timeout_s=40, what="a push over OAUTHBEARER")
        finally:
            client.close()
        assert (
            collector.server is not None and collector.server.authentication.failed == 0
        )
    assert record.context.principal == "User:orders-app"


@pytest.mark.parametrize(
    ("case", "make_token"),
    [
        ("expired", lambda: (token("late-app", lifetime_s=-120)[0], time.time() + 60)),
        ("other-key", lambda: token("forged-app", key=OTHER_KEY)),
    ],
)
def test_a_bad_token_is_refused_and_closed(
    tmp_path: Path, case: str, make_token: Any
) -> None:
    data_dir, settings = prepare(tmp_path)
    with RunningCollector(data_dir, **settings) as collector:
        errors: list[KafkaError] = []
        client = producer(
            collector.bootstrap, f"oauth-{case}", make_token, error_cb=errors.append
        )
        try:

            def failed() -> Any:
                client.poll(0.1)
                assert collector.server is not None
                return collector.server.authentication.failed or None

            wait_for(failed, timeout_s=30, what="the refused token counted")
            wait_for(
                lambda: client.poll(0.1) >= 0 and errors or None,
                timeout_s=15,
                what="librdkafka told of the failure",
            )
        finally:
            client.close()
        assert not collector.landed()
    # librdkafka reports the SaslAuthenticate error (58) with Kafka's message.
    assert any(
        e.code() == KafkaError._AUTHENTICATION and "invalid_token" in e.str()
        for e in errors
    ), errors


def run_java(
    collector: RunningCollector, work: Path, jwt_value: str, client_id: str
) -> subprocess.Popen[str]:
    java, classpath = shutil.which("java"), kafka_classpath()
    if java is None or classpath is None:
        reason = "needs java and the kafka-clients 4.4.0 jar (make kafka-libs)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    env = {
        **os.environ,
        "KTC_TEST_JWT": jwt_value,
    }  # the token is not on the command line
    return subprocess.Popen(
        [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work}",
            "-cp",
            classpath,
            str(HERE / "java" / "OAuthTelemetryClient.java"),
            "--bootstrap",
            collector.bootstrap,
            "--client-id",
            client_id,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_the_java_client_pushes_under_the_tokens_subject(tmp_path: Path) -> None:
    data_dir, settings = prepare(tmp_path)
    with RunningCollector(data_dir, **settings) as collector:
        process = run_java(collector, tmp_path, token("java-app")[0], "oauth-java")
        try:
            record = wait_for(
                lambda: (
                    process.poll() is None
                    and next(
                        (
                            r
                            for r in collector.landed()
                            if r.context.client_id == "oauth-java"
                        ),
                        None,
                    )
                ),
                timeout_s=90,
                what="a push from the Java client over OAUTHBEARER",
            )
        finally:
            out, err = process.communicate(input="", timeout=60)
        assert "KTC done ok" in out, f"{out}\n{err[-3000:]}"
    assert record.context.principal == "User:java-app"


def test_the_java_client_with_a_forged_token_is_refused(tmp_path: Path) -> None:
    data_dir, settings = prepare(tmp_path)
    with RunningCollector(data_dir, **settings) as collector:
        process = run_java(
            collector, tmp_path, token("java-forged", key=OTHER_KEY)[0], "oauth-forged"
        )
        out, err = process.communicate(input="", timeout=120)
        assert (
            collector.server is not None and collector.server.authentication.failed >= 1
        )
        assert not collector.landed()
    assert "KTC error" in out and "SaslAuthenticationException" in out, (
        f"{out}\n{err[-3000:]}"
    )
    assert "invalid_token" in out
