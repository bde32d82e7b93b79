"""Golden bytes of ApiVersions (18), SaslHandshake (17) and SaslAuthenticate (36), every
version Kafka 4.4.0 defines: ``golden_sasl.txt`` is what Kafka's own message classes
serialize (java/GoldenSasl.java). The generated codecs read each body to the same message
and write it back byte for byte, and the collector's SASL state machine answers the golden
requests (a PLAIN login with the right and a wrong password, a mechanism it does not serve)
with exactly the golden responses, in every version it speaks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from collector.core.session import Session
from collector.security.credentials import (
    CredentialStore,
    ScramMechanism,
    scram_credential_from_password,
)
from collector.security.sasl.authenticator import SaslAuthenticator, StepKind
from proto.messages import (
    api_versions_request,
    api_versions_response,
    sasl_authenticate_request,
    sasl_authenticate_response,
    sasl_handshake_request,
    sasl_handshake_response,
)
from tests.gateway.golden import kafka_classpath
from tests.security.sasl_client import frame

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden_sasl.txt"
# The golden login's password: a fixed value in Kafka's bytes, no real secret.
PASSWORD = "golden-pw"
LIFETIME_MS = 60_000
ENABLED = ("PLAIN", "SCRAM-SHA-512")


def _api(key: int, low: int, high: int) -> api_versions_response.ApiVersion:
    return api_versions_response.ApiVersion(
        api_key=key, min_version=low, max_version=high
    )


HANDSHAKE_OK = sasl_handshake_response.SaslHandshakeResponse(
    error_code=0, mechanisms=ENABLED
)
AUTH_FAILED = "Authentication failed: Invalid username or password"
MESSAGES: dict[str, tuple[Any, Any]] = {
    "ApiVersionsRequest": (
        api_versions_request,
        api_versions_request.ApiVersionsRequest(
            client_software_name="librdkafka", client_software_version="2.16.0"
        ),
    ),
    "ApiVersionsResponse": (
        api_versions_response,
        api_versions_response.ApiVersionsResponse(
            error_code=0,
            throttle_time_ms=0,
            api_keys=(
                _api(17, 1, 1),
                _api(18, 0, 4),
                _api(36, 0, 2),
                _api(71, 0, 0),
                _api(72, 0, 0),
            ),
        ),
    ),
    "SaslHandshakeRequestPlain": (
        sasl_handshake_request,
        sasl_handshake_request.SaslHandshakeRequest(mechanism="PLAIN"),
    ),
    "SaslHandshakeRequestGssapi": (
        sasl_handshake_request,
        sasl_handshake_request.SaslHandshakeRequest(mechanism="GSSAPI"),
    ),
    "SaslHandshakeResponse": (sasl_handshake_response, HANDSHAKE_OK),
    "SaslHandshakeResponseUnsupported": (
        sasl_handshake_response,
        sasl_handshake_response.SaslHandshakeResponse(
            error_code=33, mechanisms=ENABLED
        ),
    ),
    "SaslAuthenticateRequest": (
        sasl_authenticate_request,
        sasl_authenticate_request.SaslAuthenticateRequest(
            auth_bytes=f"\0alice\0{PASSWORD}".encode()
        ),
    ),
    "SaslAuthenticateRequestWrong": (
        sasl_authenticate_request,
        sasl_authenticate_request.SaslAuthenticateRequest(
            auth_bytes=b"\0alice\0not-it"
        ),
    ),
    "SaslAuthenticateResponse": (
        sasl_authenticate_response,
        sasl_authenticate_response.SaslAuthenticateResponse(
            error_code=0,
            error_message="",
            auth_bytes=b"",
            session_lifetime_ms=LIFETIME_MS,
        ),
    ),
    "SaslAuthenticateResponseFailed": (
        sasl_authenticate_response,
        sasl_authenticate_response.SaslAuthenticateResponse(
            error_code=58,
            error_message=AUTH_FAILED,
            auth_bytes=b"",
            session_lifetime_ms=0,
        ),
    ),
}


def goldens() -> list[tuple[str, int, bytes]]:
    rows = []
    for line in GOLDEN.read_text().splitlines():
        name, version, *data = line.split()
        rows.append((name, int(version), bytes.fromhex(data[0] if data else "")))
    return rows


def golden(name: str, version: int) -> bytes:
    return next(data for n, v, data in goldens() if n == name and v == version)


def test_every_version_of_the_three_apis_has_goldens() -> None:
    have = {(name, version) for name, version, _ in goldens()}
    for name, (module, _) in MESSAGES.items():
        low, high = module.VALID_VERSIONS
        for version in range(low, high + 1):
            assert (name, version) in have, (name, version)


@pytest.mark.parametrize(
    ("name", "version", "data"), goldens(), ids=[f"{n}-v{v}" for n, v, _ in goldens()]
)
def test_codec_reads_and_writes_kafkas_bytes(
    name: str, version: int, data: bytes
) -> None:
    module, expected = MESSAGES[name]
    message, end = module.READERS[version](memoryview(data), 0)
    assert end == len(data)
    if version == 0 and module is sasl_authenticate_response:
        expected = expected.__class__(
            error_code=expected.error_code,
            error_message=expected.error_message,
            auth_bytes=b"",
        )
    if module is api_versions_request and version < 3:
        expected = module.ApiVersionsRequest()
    assert message == expected
    out = bytearray()
    module.WRITERS[version](expected, out)
    assert bytes(out) == data


def authenticator() -> SaslAuthenticator:
    credential = {
        m: scram_credential_from_password(m, PASSWORD, b"golden-salt-0123", 4096)
        for m in ScramMechanism
    }
    return SaslAuthenticator(
        ENABLED, CredentialStore({"alice": credential}), max_reauth_ms=LIFETIME_MS
    )


def answered(step: Any, api_key: int, version: int) -> bytes:
    """The body of the answer the state machine wrote (after the size, the correlation id
    and, in a flexible version, the empty header tag buffer)."""
    assert step.kind in (StepKind.ANSWER, StepKind.FAIL), step
    data = bytes(step.response)
    header = 9 if (api_key, version) == (36, 2) else 8
    return data[header:]


def request(name: str, api_key: int, version: int) -> Any:
    module, _ = MESSAGES[name]
    message, _ = module.READERS[version](memoryview(golden(name, version)), 0)
    return frame(api_key, version, message)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_collector_answers_a_plain_login_with_kafkas_bytes(version: int) -> None:
    auth, session = authenticator(), Session(1, "SASL_SSL", "SASL_SSL")
    step = auth.receive(request("SaslHandshakeRequestPlain", 17, 1), session, 0)
    assert answered(step, 17, 1) == golden("SaslHandshakeResponse", 1)
    step = auth.receive(request("SaslAuthenticateRequest", 36, version), session, 0)
    assert answered(step, 36, version) == golden("SaslAuthenticateResponse", version)
    assert session.principal == "User:alice"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_collector_answers_a_wrong_password_with_kafkas_bytes(version: int) -> None:
    auth, session = authenticator(), Session(1, "SASL_SSL", "SASL_SSL")
    auth.receive(request("SaslHandshakeRequestPlain", 17, 1), session, 0)
    step = auth.receive(
        request("SaslAuthenticateRequestWrong", 36, version), session, 0
    )
    assert step.kind is StepKind.FAIL
    assert answered(step, 36, version) == golden(
        "SaslAuthenticateResponseFailed", version
    )


def test_the_collector_answers_an_unserved_mechanism_with_kafkas_bytes() -> None:
    auth, session = authenticator(), Session(1, "SASL_SSL", "SASL_SSL")
    step = auth.receive(request("SaslHandshakeRequestGssapi", 17, 1), session, 0)
    assert answered(step, 17, 1) == golden("SaslHandshakeResponseUnsupported", 1)


def test_goldens_are_what_kafka_serializes(tmp_path: Path) -> None:
    """Re-runs the Java program and compares with the committed file."""
    java, classpath = shutil.which("java"), kafka_classpath()
    if java is None or classpath is None:
        reason = "needs java and the kafka-clients 4.4.0 jar (make kafka-libs)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    done = subprocess.run(
        [
            java,
            f"-Djava.io.tmpdir={tmp_path}",
            "-cp",
            classpath,
            str(HERE / "java" / "GoldenSasl.java"),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.stdout == GOLDEN.read_text()
