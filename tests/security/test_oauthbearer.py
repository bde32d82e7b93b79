"""SASL/OAUTHBEARER, sans-IO: the JWKS read from a real file, tokens signed by RSA keys made
here (cryptography) and checked by the validator on a fake clock (valid, expired, within
and beyond the clock skew, not yet valid, wrong key, wrong issuer and audience, no subject,
another subject claim, ``alg: none`` and HS256 with the public key), the mechanism's
RFC 7628 exchange (the error then ``\\x01`` then the failure) and the authenticator's session
lifetime bounded by the token's expiry (KIP-368)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from clock.testing import FakeClock
from collector.app.config import ConfigError, load_config
from collector.core.session import Session
from collector.security.credentials import CredentialStore
from collector.security.jwks import (
    MAX_KEYS,
    JwksError,
    JwksSource,
    check_jwks_url,
    refresh_forever,
)
from collector.security.jwt_validator import InvalidToken, JwtValidator
from collector.security.sasl.authenticator import SaslAuthenticator, StepKind
from collector.security.sasl.mechanism import SaslAuthenticationFailed, SaslFailure
from collector.security.sasl.oauthbearer import OAuthBearerServer
from proto import decode_response
from tests.security.sasl_client import authenticate, handshake
from tests.waiting import eventually

ISSUER = "https://issuer.example"
AUDIENCE = "ktc"
NOW_S = 1_800_000_000  # the fake clock's wall time


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


KEY, OTHER_KEY = rsa_key(), rsa_key()


def jwks_file(tmp_path: Path, *keys: tuple[str, rsa.RSAPrivateKey]) -> Path:
    entries = []
    for kid, key in keys:
        entry = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        entries.append({**entry, "kid": kid, "alg": "RS256", "use": "sig"})
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": entries}))
    return path


def sign(
    key: Any = KEY, kid: str = "k1", algorithm: str = "RS256", **claims: Any
) -> str:
    payload = {
        "sub": "alice",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": NOW_S,
        "exp": NOW_S + 600,
    }
    payload.update(claims)
    return jwt.encode(
        {k: v for k, v in payload.items() if v is not None},
        key,
        algorithm,
        headers={"kid": kid},
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall_ns=NOW_S * 1_000_000_000)


@pytest.fixture
def validator(tmp_path: Path, clock: FakeClock) -> JwtValidator:
    source = JwksSource(jwks_file(tmp_path, ("k1", KEY)).as_uri())
    assert source.load() == 1
    return JwtValidator(
        source,
        lambda: clock.time_ns() // 1_000_000,
        expected_issuer=ISSUER,
        expected_audiences=[AUDIENCE, "other"],
    )


def test_a_valid_token_grants_its_subject(validator: JwtValidator) -> None:
    token = validator.validate(sign(scope="telemetry push"))
    assert token.principal_name == "alice"
    assert (
        token.lifetime_ms == (NOW_S + 600) * 1000
        and token.start_time_ms == NOW_S * 1000
    )
    assert token.scopes == frozenset(
        {"telemetry push"}
    )  # a string is one scope, as Kafka


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({"exp": NOW_S - 31}, "no longer valid"),  # beyond the 30 s default skew
        ({"exp": None}, "No exp claim"),
        ({"iat": None}, "No iat claim"),
        ({"nbf": NOW_S + 31}, "not yet valid"),
        ({"iss": "https://elsewhere.example"}, "Invalid issuer"),
        ({"aud": "someone-else"}, "Audience doesn't match"),
        ({"sub": None}, "sub value must be a non-blank string"),
        ({"sub": "  "}, "sub value must be a non-blank string"),
        ({"sub": 42}, "Subject must be a string"),  # PyJWT checks sub itself
    ],
)
def test_refused_claims(
    validator: JwtValidator, claims: dict[str, Any], why: str
) -> None:
    with pytest.raises(InvalidToken, match=why):
        validator.validate(sign(**claims))


def test_clock_skew_is_honoured(validator: JwtValidator, clock: FakeClock) -> None:
    token = sign(exp=NOW_S - 29, nbf=NOW_S + 29)
    assert validator.validate(token).principal_name == "alice"  # within 30 s either way
    clock.advance(31_000)  # the fake clock's wall time moves with it
    with pytest.raises(InvalidToken, match="no longer valid"):
        validator.validate(token)


def test_a_token_signed_by_another_key_is_refused(validator: JwtValidator) -> None:
    with pytest.raises(InvalidToken, match="Signature verification failed"):
        validator.validate(sign(OTHER_KEY))
    with pytest.raises(
        InvalidToken, match="Unable to find a suitable verification key"
    ):
        validator.validate(sign(OTHER_KEY, kid="k2"))


def test_algorithm_tricks_are_refused(validator: JwtValidator) -> None:
    unsigned = jwt.encode(
        {"sub": "mallory", "iat": NOW_S, "exp": NOW_S + 60},
        # PyJWT's alg "none" takes the key None; encode()'s annotation leaves None out.
        None,  # type: ignore[arg-type]
        "none",
        headers={"kid": "k1"},
    )
    with pytest.raises(InvalidToken):
        validator.validate(unsigned)
    # HS256 "signed" with the public key's bytes (the classic confusion): refused, the key's
    # algorithm (RS256) is the only one accepted.
    header, payload, _ = sign().split(".")
    with pytest.raises(InvalidToken):
        validator.validate(f"{header}.{payload}.c2lnbmF0dXJl")
    with pytest.raises(InvalidToken, match="three sections"):
        validator.validate("not-a-jwt")


def test_the_subject_claim_and_no_expected_issuer(
    tmp_path: Path, clock: FakeClock
) -> None:
    source = JwksSource(jwks_file(tmp_path, ("k1", KEY)).as_uri())
    source.load()
    validator = JwtValidator(
        source, lambda: clock.time_ns() // 1_000_000, sub_claim_name="client_id"
    )
    assert (
        validator.validate(
            sign(client_id="orders-app", iss="any", aud="any")
        ).principal_name
        == "orders-app"
    )
    with pytest.raises(InvalidToken, match="client_id value"):
        validator.validate(sign())


def test_jwks_reload_keeps_the_last_good_keys_and_is_bounded(
    tmp_path: Path, validator: JwtValidator
) -> None:
    path = tmp_path / "jwks.json"
    source = JwksSource(path.as_uri())
    source.load()
    path.write_text("{not json")
    with pytest.raises(JwksError, match="not a JSON document"):
        source.load()
    assert source.key("k1") is not None  # still in force
    entry = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))
    path.write_text(
        json.dumps({"keys": [{**entry, "kid": str(i)} for i in range(MAX_KEYS + 1)]})
    )
    with pytest.raises(JwksError, match=f"more than {MAX_KEYS} keys"):
        source.load()
    path.write_text(json.dumps({"keys": [{**entry, "use": "enc"}]}))
    with pytest.raises(JwksError, match="no usable signing key"):
        source.load()
    path.write_text(" " * (1 << 20) + "{}")
    with pytest.raises(JwksError, match="larger than"):
        source.load()
    with pytest.raises(JwksError, match="cannot read"):
        JwksSource((tmp_path / "missing.json").as_uri()).load()


def test_jwks_url_schemes() -> None:
    assert check_jwks_url(" https://idp.example/jwks ") == "https://idp.example/jwks"
    with pytest.raises(ValueError, match="invalid protocol \\(ftp\\)"):
        check_jwks_url("ftp://idp.example/jwks")
    with pytest.raises(ValueError, match="missing the protocol"):
        check_jwks_url("/etc/jwks.json")


# ---------------------------------------------------------------------- the mechanism
def initial(token: str, authzid: str = "", extensions: str = "") -> bytes:
    """OAuthBearerClientInitialResponse.toBytes()."""
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}{extensions}\x01\x01".encode()


def test_the_mechanism_completes_with_the_tokens_principal(
    validator: JwtValidator,
) -> None:
    server = OAuthBearerServer(validator)
    assert server.evaluate(initial(sign(), extensions="\x01traceId=abc 1")) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.credential_expiry_wall_ms == (NOW_S + 600) * 1000
    assert server.extensions == {"traceId": "abc 1"}


def test_a_refused_token_gets_the_rfc_7628_error_then_fails(
    validator: JwtValidator,
) -> None:
    server = OAuthBearerServer(validator)
    assert (
        server.evaluate(initial(sign(exp=NOW_S - 3600)))
        == b'{"status":"invalid_token"}'
    )
    assert not server.complete
    with pytest.raises(SaslAuthenticationFailed, match='^{"status":"invalid_token"}$'):
        server.evaluate(b"\x01")


@pytest.mark.parametrize(
    "message",
    [
        b"n,,auth=Bearer x\x01\x01",
        b"n,,\x01auth=Basic abc\x01\x01",
        b"n,,\x01\x01",
        b"p,,\x01auth=Bearer a\x01\x01",
    ],
)
def test_malformed_messages_fail(validator: JwtValidator, message: bytes) -> None:
    with pytest.raises(SaslFailure):
        OAuthBearerServer(validator).evaluate(message)


def test_an_authorization_id_must_be_the_principal(validator: JwtValidator) -> None:
    assert (
        OAuthBearerServer(validator).evaluate(initial(sign(), authzid="alice")) == b""
    )
    with pytest.raises(
        SaslAuthenticationFailed, match=r"authorization id \(bob\) that is different"
    ):
        OAuthBearerServer(validator).evaluate(initial(sign(), authzid="bob"))


# ---------------------------------------------------------------------- the authenticator
def login(auth: SaslAuthenticator, sess: Session, token: bytes, now_ms: int) -> object:
    assert auth.receive(handshake("OAUTHBEARER"), sess, now_ms).kind is StepKind.ANSWER
    step = auth.receive(authenticate(token), sess, now_ms)
    return step


@pytest.mark.parametrize(
    ("max_reauth_ms", "lifetime_ms"),
    [(0, 600_000), (60_000, 60_000), (900_000, 600_000)],
)
def test_the_session_ends_with_the_token(
    validator: JwtValidator, clock: FakeClock, max_reauth_ms: int, lifetime_ms: int
) -> None:
    auth = SaslAuthenticator(
        ("OAUTHBEARER",),
        CredentialStore(),
        max_reauth_ms=max_reauth_ms,
        token_validator=validator,
        wall_ms=lambda: clock.time_ns() // 1_000_000,
    )
    sess = Session(1, "SASL", "SASL_PLAINTEXT")
    step = login(auth, sess, initial(sign()), clock.now_ms())
    answer = decode_response(36, 2, step.response[4:]).message  # type: ignore[attr-defined]
    assert answer.error_code == 0 and answer.session_lifetime_ms == lifetime_ms
    assert sess.principal == "User:alice"
    assert auth.session_expires_ms == clock.now_ms() + lifetime_ms


def test_an_expired_token_fails_with_58(
    validator: JwtValidator, clock: FakeClock
) -> None:
    auth = SaslAuthenticator(
        ("OAUTHBEARER",),
        CredentialStore(),
        token_validator=validator,
        wall_ms=lambda: clock.time_ns() // 1_000_000,
    )
    sess = Session(1, "SASL", "SASL_PLAINTEXT")
    step = login(auth, sess, initial(sign(exp=NOW_S - 60)), 0)
    first = decode_response(36, 2, step.response[4:]).message  # type: ignore[attr-defined]
    assert (
        first.error_code == 0
        and bytes(first.auth_bytes) == b'{"status":"invalid_token"}'
    )
    step = auth.receive(authenticate(b"\x01"), sess, 0)
    assert step.kind is StepKind.FAIL
    failed = decode_response(36, 2, step.response[4:]).message  # type: ignore[index]
    assert (
        failed.error_code == 58 and failed.error_message == '{"status":"invalid_token"}'
    )
    assert sess.principal != "User:alice"


def test_oauthbearer_needs_a_validator() -> None:
    with pytest.raises(ValueError, match="OAUTHBEARER needs a token validator"):
        SaslAuthenticator(("OAUTHBEARER",), CredentialStore())


async def test_the_key_set_is_read_again_every_refresh(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = jwks_file(tmp_path, ("k1", KEY))
    source = JwksSource(path.as_uri())
    source.load()
    task = asyncio.create_task(refresh_forever(source, clock, 60_000))

    async def asleep() -> None:
        # The refresher sleeps on the fake clock before the test moves it: a read that
        # ran in a worker thread returns to the task on the event loop's schedule.
        await eventually(
            lambda: clock.pending == 1, timeout_s=10, what="the refresher asleep"
        )

    try:
        await asleep()
        jwks_file(tmp_path, ("k2", OTHER_KEY))  # the provider rotated its key
        clock.advance(59_999)
        await asyncio.sleep(0)
        assert source.loads == 1 and source.key("k2") is None
        clock.advance(1)
        await eventually(
            lambda: source.loads == 2, timeout_s=10, what="the JWKS read again"
        )
        assert source.key("k2") is not None and source.key("k1") is None
        path.write_text("[]")  # a bad read keeps the last good keys
        await asleep()
        clock.advance(60_000)
        await eventually(
            lambda: source.failed_loads == 1, timeout_s=10, what="the bad read"
        )
        assert source.loads == 2 and source.key("k2") is not None
    finally:
        task.cancel()


def test_config_requires_a_key_set_for_oauthbearer(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match="sasl.oauthbearer.jwks.endpoint.url: required"
    ):
        load_config(
            environ={},
            overrides={"listener.name.sasl.sasl.enabled.mechanisms": "OAUTHBEARER"},
        )
    with pytest.raises(ConfigError, match="invalid protocol"):
        load_config(
            environ={}, overrides={"sasl.oauthbearer.jwks.endpoint.url": "ldap://idp"}
        )
    config = load_config(
        environ={},
        overrides={
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "jwks.json").as_uri(),
            "sasl.oauthbearer.expected.audience": "ktc, other ",
        },
    )
    assert config.oauthbearer_enabled() and config.oauthbearer_audiences() == (
        "ktc",
        "other",
    )
