"""SASL capture: the principal of PLAIN and SCRAM first messages, and never the password."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.gateway.requests import parse_request_header
from collector.gateway.sasl import (
    SaslCapture,
    authenticate_bytes,
    handshake_mechanism,
    principal_from_token,
)
from proto.api_keys import ApiKeys
from proto.connection import RequestFrame
from proto.messages import sasl_authenticate_request as sa
from proto.messages import sasl_handshake_request as sh
from proto.primitives import MalformedError
from tests.gateway.golden import requests

SECRET = "alice-secret"


def frame(api_key: int, version: int, body: bytes) -> RequestFrame:
    header = struct.pack(">hhih", api_key, version, 9, 3) + b"app"
    if api_key == ApiKeys.SASL_AUTHENTICATE and version >= 2:
        header += b"\x00"
    return parse_request_header(header + body)


def handshake(mechanism: str, version: int = 1) -> RequestFrame:
    out = bytearray()
    sh.WRITERS[version](sh.SaslHandshakeRequest(mechanism=mechanism), out)
    return frame(ApiKeys.SASL_HANDSHAKE, version, bytes(out))


def authenticate(token: bytes, version: int = 2) -> RequestFrame:
    out = bytearray()
    sa.WRITERS[version](sa.SaslAuthenticateRequest(auth_bytes=token), out)
    return frame(ApiKeys.SASL_AUTHENTICATE, version, bytes(out))


@pytest.mark.parametrize(
    ("token", "principal"),
    [
        (b"\x00alice\x00alice-secret", "User:alice"),
        (b"alice\x00alice\x00alice-secret", "User:alice"),  # authzid = authcid
        (b"bob\x00alice\x00alice-secret", None),  # another authzid: Kafka refuses
        (b"\x00\x00alice-secret", None),  # no username
        (b"\x00alice", None),  # two tokens
        (b"\x00alice\x00pw\x00extra", None),  # four tokens
        ("\x00jos\u00e9\x00pw".encode(), "User:jos\u00e9"),
    ],
)
def test_plain(token: bytes, principal: str | None) -> None:
    assert principal_from_token("PLAIN", token) == principal


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize(
    ("token", "principal"),
    [
        (b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL", "User:alice"),
        (b"n,,n=al=2Cice=3D,r=abc", "User:al,ice="),  # =2C and =3D unescaped
        (b"n,a=alice,n=alice,r=abc", "User:alice"),  # authzid = user
        (b"n,a=mallory,n=alice,r=abc", None),  # authzid differs: Kafka refuses
        (b"n,,m=ext,n=alice,r=abc", "User:alice"),  # reserved-mext
        (b"n,,n=alice,r=abc,ext=1", "User:alice"),  # extensions
        (b"n,,n=alice,r=abc,tokenauth=true", None),  # delegation token: owner unknown
        (b"y,,n=alice,r=abc", None),  # channel binding flags: Kafka accepts only "n"
        (b"p=tls-unique,,n=alice,r=abc", None),
        (b"n,,n=al=2Xice,r=abc", None),  # a bad escape
        (b"n,,n=,r=abc", None),
        (b"n,,n=alice", None),  # no nonce
        ("n,,n=jos\u00e9,r=abc".encode(), None),  # Kafka's SASLNAME is ASCII
        (b"c=biws,r=abc,p=proof", None),  # a client-final message
    ],
)
def test_scram_client_first(
    mechanism: str, token: bytes, principal: str | None
) -> None:
    assert principal_from_token(mechanism, token) == principal


def test_other_mechanisms_give_no_principal() -> None:
    assert principal_from_token("GSSAPI", b"\x00alice\x00pw") is None
    assert principal_from_token("OAUTHBEARER", b"n,,\x01auth=Bearer x\x01\x01") is None


def test_capture_across_an_exchange() -> None:
    capture = SaslCapture()
    assert capture.on_request(handshake("SCRAM-SHA-512")) is None
    assert capture.mechanism == "SCRAM-SHA-512"
    first = authenticate(b"n,,n=alice,r=abc")
    assert capture.on_request(first) == "User:alice"
    # the client-final names no one and does not change the principal
    assert capture.on_request(authenticate(b"c=biws,r=abcdef,p=cHJvb2Y=")) is None
    assert capture.principal == "User:alice"
    capture.on_response(ApiKeys.SASL_AUTHENTICATE, struct.pack(">h", 0) + b"\x00")
    assert capture.principal == "User:alice"
    # re-authentication (KIP-368) starts over; a failure forgets the principal
    capture.on_request(handshake("PLAIN"))
    assert capture.principal is None
    assert capture.on_request(authenticate(b"\x00bob\x00pw")) == "User:bob"
    capture.on_response(ApiKeys.SASL_AUTHENTICATE, struct.pack(">h", 58) + b"\x00")
    assert capture.principal is None


def test_authenticate_before_handshake_captures_nothing() -> None:
    capture = SaslCapture()
    assert capture.on_request(authenticate(b"\x00alice\x00pw")) is None


def test_kafkas_own_sasl_requests() -> None:
    for g in requests("sasl_handshake"):
        assert (
            handshake_mechanism(frame(g.api_key, g.version, g.body)) == "SCRAM-SHA-512"
        )
    for g in requests("sasl_plain"):
        f = frame(g.api_key, g.version, g.body)
        assert bytes(authenticate_bytes(f)) == b"\x00alice\x00alice-secret"
        capture = SaslCapture()
        capture.on_request(handshake("PLAIN"))
        assert capture.on_request(f) == "User:alice"


def test_the_password_never_leaves() -> None:
    """Neither the principal, the capture's state, nor an error message holds the secret."""
    capture = SaslCapture()
    capture.on_request(handshake("PLAIN"))
    capture.on_request(authenticate(b"\x00alice\x00" + SECRET.encode()))
    state = (
        repr(capture.principal)
        + repr(capture.mechanism)
        + repr([getattr(capture, slot) for slot in SaslCapture.__slots__])
    )
    assert SECRET not in state
    broken = authenticate(b"\x00alice\x00" + SECRET.encode())
    truncated = RequestFrame(
        broken.api_key,
        broken.api_version,
        9,
        "app",
        broken.header_size,
        broken.raw[:-4],
    )
    with pytest.raises(MalformedError) as excinfo:
        authenticate_bytes(truncated)
    assert SECRET not in str(excinfo.value) and SECRET[:-4] not in str(excinfo.value)


@settings(max_examples=300, deadline=None)
@given(
    user=st.text(
        st.characters(min_codepoint=1, max_codepoint=0x7F), min_size=1, max_size=20
    ),
    password=st.text(min_size=1, max_size=30),
)
def test_any_plain_or_scram_user(user: str, password: str) -> None:
    if "\x00" not in user and "\x00" not in password:
        token = b"\x00" + user.encode() + b"\x00" + password.encode()
        principal = principal_from_token("PLAIN", token)
        assert principal == f"User:{user}"
    saslname = user.replace("=", "=3D").replace(",", "=2C")
    principal = principal_from_token(
        "SCRAM-SHA-256", f"n,,n={saslname},r=nonce".encode()
    )
    assert principal == f"User:{user}"


OK = (
    struct.pack(">h", 0) + b"\x00"
)  # a SaslAuthenticate/SaslHandshake answer without error
REFUSED = struct.pack(">h", 58) + b"\x00"  # SASL_AUTHENTICATION_FAILED


def test_scram_authenticates_only_with_the_brokers_answer_to_the_proof() -> None:
    capture = SaslCapture()
    assert not capture.authenticating
    capture.on_request(handshake("SCRAM-SHA-512"))
    assert capture.on_response(ApiKeys.SASL_HANDSHAKE, OK) is None
    assert capture.authenticating
    capture.on_request(authenticate(b"n,,n=alice,r=abc"))
    # The server-first message: the broker has only heard a name, no proof.
    assert capture.on_response(ApiKeys.SASL_AUTHENTICATE, OK) is None
    assert capture.authenticated is None and capture.authenticating
    capture.on_request(authenticate(b"c=biws,r=abcdef,p=cHJvb2Y="))
    assert not capture.authenticating  # nothing more is owed; the answer decides
    assert capture.on_response(ApiKeys.SASL_AUTHENTICATE, OK) == "User:alice"
    assert capture.authenticated == "User:alice"


def test_plain_authenticates_with_its_one_token() -> None:
    capture = SaslCapture()
    capture.on_request(handshake("PLAIN"))
    capture.on_request(authenticate(b"\x00bob\x00" + SECRET.encode()))
    assert not capture.authenticating
    assert capture.on_response(ApiKeys.SASL_AUTHENTICATE, OK) == "User:bob"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_refused_exchange_authenticates_no_one_and_stays_closed(
    mechanism: str,
) -> None:
    capture = SaslCapture()
    capture.on_request(handshake(mechanism))
    token = b"\x00alice\x00wrong" if mechanism == "PLAIN" else b"n,,n=alice,r=abc"
    capture.on_request(authenticate(token))
    if mechanism != "PLAIN":
        capture.on_response(ApiKeys.SASL_AUTHENTICATE, OK)
        capture.on_request(authenticate(b"c=biws,r=abcdef,p=d3Jvbmc="))
    assert capture.on_response(ApiKeys.SASL_AUTHENTICATE, REFUSED) is None
    assert capture.authenticated is None
    assert (
        capture.authenticating
    )  # the broker closes the connection; nothing else is served


def test_other_mechanisms_never_hold_the_connection() -> None:
    capture = SaslCapture()
    capture.on_request(handshake("GSSAPI"))
    capture.on_request(authenticate(b"\x60\x82kerberos"))
    assert not capture.authenticating
    assert capture.on_response(ApiKeys.SASL_AUTHENTICATE, OK) is None


def test_reauthentication_keeps_the_principal_until_it_succeeds() -> None:
    capture = SaslCapture()
    capture.on_request(handshake("PLAIN"))
    capture.on_request(authenticate(b"\x00alice\x00pw"))
    assert capture.on_response(ApiKeys.SASL_AUTHENTICATE, OK) == "User:alice"
    capture.on_request(handshake("PLAIN"))  # KIP-368 re-authentication
    assert capture.authenticating and capture.authenticated == "User:alice"
    capture.on_request(authenticate(b"\x00alice\x00pw"))
    assert capture.on_response(ApiKeys.SASL_AUTHENTICATE, OK) == "User:alice"
