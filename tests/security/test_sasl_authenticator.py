"""The per-connection SASL state machine (Kafka's SaslServerAuthenticator), sans-IO: what
each request gets in each state, the answers' bytes decoded, re-authentication (KIP-368)
on a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from collector.core.session import Session
from collector.security.credentials import (
    CredentialStore,
    ScramMechanism,
    scram_credential_from_password,
)
from collector.security.sasl.authenticator import SaslAuthenticator, Step, StepKind
from proto import decode_response
from proto.messages import ApiVersionsRequest, MetadataRequest, PushTelemetryRequest
from tests.security.sasl_client import (
    ScramClient,
    authenticate,
    frame,
    handshake,
    plain_token,
)

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def credentials() -> CredentialStore:
    users = {}
    for user, password in {"alice": "s3cret", "bob": "hunter2"}.items():
        users[user] = {
            m: scram_credential_from_password(m, password, user.encode() * 4, 4096)
            for m in ScramMechanism
        }
    return CredentialStore(users)


def authenticator(
    max_reauth_ms: int = 0, mechanisms: tuple[str, ...] = MECHANISMS
) -> SaslAuthenticator:
    return SaslAuthenticator(mechanisms, credentials(), max_reauth_ms=max_reauth_ms)


def session() -> Session:
    return Session(1, "SASL", "SASL_PLAINTEXT")


def body(api_key: int, version: int, response: bytes | None) -> Any:
    assert response is not None
    return decode_response(api_key, version, response[4:]).message


def plain_login(
    auth: SaslAuthenticator, sess: Session, user: str, password: str, now_ms: int = 0
) -> Step:
    step = auth.receive(handshake("PLAIN"), sess, now_ms)
    assert step.kind is StepKind.ANSWER
    step = auth.receive(authenticate(plain_token(user, password)), sess, now_ms)
    return step


def test_api_versions_then_plain_sets_the_principal() -> None:
    auth, sess = authenticator(), session()
    assert (
        auth.receive(
            frame(18, 3, ApiVersionsRequest("librdkafka", "2.6.0")), sess, 0
        ).kind
        is StepKind.PASS
    )
    step = auth.receive(handshake("PLAIN"), sess, 0)
    answer = body(17, 1, step.response)
    # Kafka lists the enabled mechanisms in the order of a java.util.HashMap they were put
    # into as configured (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 here).
    assert answer.error_code == 0
    assert answer.mechanisms == ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256")
    step = auth.receive(authenticate(plain_token("alice", "s3cret")), sess, 0)
    assert step.kind is StepKind.ANSWER
    answer = body(36, 2, step.response)
    assert answer.error_code == 0 and answer.session_lifetime_ms == 0
    assert sess.principal == "User:alice" and sess.principal_name == "alice"
    assert auth.authenticated
    # Now every request goes to the node (which answers another handshake with 34).
    assert auth.receive(frame(3, 12, MetadataRequest()), sess, 0).kind is StepKind.PASS
    assert auth.receive(handshake("PLAIN"), sess, 0).kind is StepKind.PASS


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_over_sasl_authenticate(mechanism: str) -> None:
    auth, sess = authenticator(), session()
    auth.receive(handshake(mechanism), sess, 0)
    client = ScramClient("sha" + mechanism.rsplit("-", 1)[1], "bob", "hunter2")
    first = body(
        36, 1, auth.receive(authenticate(client.first(), version=1), sess, 0).response
    )
    assert first.error_code == 0 and not auth.authenticated
    final = body(
        36,
        1,
        auth.receive(
            authenticate(client.final(first.auth_bytes), 3, 1), sess, 0
        ).response,
    )
    assert final.error_code == 0 and client.verify(bytes(final.auth_bytes))
    assert sess.principal == "User:bob"


def test_unsupported_mechanism_fails_listing_the_enabled_ones() -> None:
    auth, sess = authenticator(mechanisms=("SCRAM-SHA-512",)), session()
    step = auth.receive(handshake("GSSAPI"), sess, 0)
    assert step.kind is StepKind.FAIL
    answer = body(17, 1, step.response)
    assert answer.error_code == 33 and answer.mechanisms == ("SCRAM-SHA-512",)
    assert step.reason == "Unsupported SASL mechanism GSSAPI"
    assert auth.receive(handshake("SCRAM-SHA-512"), sess, 0).kind is StepKind.CLOSE


def test_wrong_password_fails_with_58_and_kafkas_messages() -> None:
    auth, sess = authenticator(), session()
    step = plain_login(auth, sess, "alice", "wrong")
    assert step.kind is StepKind.FAIL
    answer = body(36, 2, step.response)
    assert answer.error_code == 58
    assert answer.error_message == "Authentication failed: Invalid username or password"
    assert sess.principal == "User:ANONYMOUS"
    # SCRAM: the generic message, never whether the user exists.
    auth, sess = authenticator(), session()
    auth.receive(handshake("SCRAM-SHA-256"), sess, 0)
    step = auth.receive(authenticate(b"n,,n=nobody,r=abc"), sess, 0)
    answer = body(36, 2, step.response)
    assert (answer.error_code, answer.error_message) == (
        58,
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256",
    )
    assert "wrong" not in step.reason and "s3cret" not in step.reason


def test_requests_before_authentication_close_the_connection() -> None:
    for request in (
        frame(3, 12, MetadataRequest()),
        frame(72, 0, PushTelemetryRequest()),
    ):
        auth = authenticator()
        step = auth.receive(request, session(), 0)
        assert step.kind is StepKind.CLOSE and step.response is None
        assert "during SASL handshake" in step.reason
    # After ApiVersions, a second ApiVersions closes too (Kafka: HANDSHAKE_REQUEST state).
    auth, sess = authenticator(), session()
    auth.receive(frame(18, 3, ApiVersionsRequest("a", "1")), sess, 0)
    assert (
        auth.receive(frame(18, 3, ApiVersionsRequest("a", "1")), sess, 0).kind
        is StepKind.CLOSE
    )
    # During the exchange: a Metadata request closes; a handshake is answered 34, then closes.
    auth, sess = authenticator(), session()
    auth.receive(handshake("PLAIN"), sess, 0)
    assert auth.receive(frame(3, 12, MetadataRequest()), sess, 0).kind is StepKind.CLOSE
    auth, sess = authenticator(), session()
    auth.receive(handshake("PLAIN"), sess, 0)
    step = auth.receive(handshake("PLAIN", 5), sess, 0)
    assert step.kind is StepKind.FAIL and body(17, 1, step.response).error_code == 34


def test_saslhandshake_v0_is_refused() -> None:
    auth = authenticator()
    step = auth.receive(handshake("PLAIN", version=0), session(), 0)
    assert step.kind is StepKind.CLOSE and "SASL_HANDSHAKE v0" in step.reason


def test_session_lifetime_and_reauthentication() -> None:
    auth, sess = authenticator(max_reauth_ms=5000), session()
    answer = body(
        36, 2, plain_login(auth, sess, "alice", "s3cret", now_ms=1000).response
    )
    assert answer.session_lifetime_ms == 5000 and auth.session_expires_ms == 6000
    assert (
        auth.receive(frame(3, 12, MetadataRequest()), sess, 6000).kind is StepKind.PASS
    )
    # Re-authentication before expiry: a new session, same principal.
    step = plain_login(auth, sess, "alice", "s3cret", now_ms=5500)
    assert body(36, 2, step.response).session_lifetime_ms == 5000
    assert auth.session_expires_ms == 10500 and auth.reauthentications == 1
    # At most one re-authentication a second: this handshake goes to the node (34).
    assert auth.receive(handshake("PLAIN"), sess, 6000).kind is StepKind.PASS
    # Past the expiry, anything but a re-authentication closes.
    step = auth.receive(frame(3, 12, MetadataRequest()), sess, 10501)
    assert step.kind is StepKind.CLOSE and "expired" in step.reason


def test_reauthentication_cannot_change_the_principal_or_mechanism() -> None:
    auth, sess = authenticator(max_reauth_ms=5000), session()
    plain_login(auth, sess, "alice", "s3cret")
    step = plain_login(auth, sess, "bob", "hunter2", now_ms=2000)
    assert step.kind is StepKind.FAIL
    assert body(36, 2, step.response).error_message == (
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    assert sess.principal == "User:alice"
    auth, sess = authenticator(max_reauth_ms=5000), session()
    plain_login(auth, sess, "alice", "s3cret")
    assert auth.receive(handshake("SCRAM-SHA-256"), sess, 2000).kind is StepKind.ANSWER
    step = auth.receive(authenticate(b"n,,n=alice,r=abc"), sess, 2000)
    assert step.kind is StepKind.FAIL and step.response is None
    assert "not supported for re-authentication of mechanism 'PLAIN'" in step.reason


def test_without_max_reauth_no_reauthentication_and_no_expiry() -> None:
    auth, sess = authenticator(), session()
    plain_login(auth, sess, "alice", "s3cret")
    assert auth.session_expires_ms is None
    assert auth.receive(handshake("PLAIN"), sess, 10**9).kind is StepKind.PASS
    assert (
        auth.receive(frame(3, 12, MetadataRequest()), sess, 10**9).kind is StepKind.PASS
    )


def test_unknown_mechanisms_cannot_be_enabled() -> None:
    with pytest.raises(ValueError, match="GSSAPI"):
        SaslAuthenticator(("GSSAPI",), credentials())
