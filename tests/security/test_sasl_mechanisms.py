"""PLAIN and SCRAM servers, sans-IO: RFC 7677's SCRAM-SHA-256 exchange byte for byte, a
SCRAM-SHA-512 exchange with an independent client, and Kafka's refusals and messages."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest

from collector.security.credentials import (
    CredentialStore,
    ScramMechanism,
    scram_credential_from_password,
)
from collector.security.sasl.mechanism import SaslAuthenticationFailed, SaslFailure
from collector.security.sasl.plain import PlainServer
from collector.security.sasl.scram import ScramServer, server_nonce
from tests.security.sasl_client import ScramClient, plain_token

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def store(**passwords: str) -> CredentialStore:
    users = {}
    for user, password in passwords.items():
        users[user] = {
            m: scram_credential_from_password(
                m, password, f"salt-{user}".encode(), 4096
            )
            for m in (SHA256, SHA512)
        }
    return CredentialStore(users)


# RFC 7677 section 3: user "user", password "pencil".
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def test_rfc7677_scram_sha_256_exchange() -> None:
    credentials = CredentialStore(
        {
            "user": {
                SHA256: scram_credential_from_password(
                    SHA256, "pencil", RFC7677_SALT, 4096
                )
            }
        }
    )
    server = ScramServer(SHA256, credentials, nonce=RFC7677_SERVER_NONCE)
    server_first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert server_first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert not server.complete
    server_final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


@pytest.mark.parametrize("mechanism", [SHA256, SHA512], ids=lambda m: m.mechanism_name)
def test_scram_exchange_with_an_independent_client(mechanism: ScramMechanism) -> None:
    server = ScramServer(mechanism, store(alice="s3cret"))
    client = ScramClient(mechanism.hash_name, "alice", "s3cret")
    server_first = server.evaluate(client.first())
    assert server_first.startswith(b"r=cnonce123") and len(server_first) > 40
    assert client.verify(server.evaluate(client.final(server_first)))
    assert server.authorization_id == "alice"


def test_scram_wrong_password_is_a_generic_failure() -> None:
    server = ScramServer(SHA512, store(alice="s3cret"))
    client = ScramClient("sha512", "alice", "wrong")
    server_first = server.evaluate(client.first())
    with pytest.raises(SaslFailure) as failure:
        server.evaluate(client.final(server_first))
    # Not the message the client is shown (the authenticator replaces a SaslFailure's).
    assert type(failure.value) is SaslFailure
    assert not server.complete


def test_scram_unknown_user_fails_on_the_first_message() -> None:
    server = ScramServer(SHA256, store(alice="s3cret"))
    with pytest.raises(SaslFailure, match="Invalid user credentials"):
        server.evaluate(b"n,,n=mallory,r=abc")


@pytest.mark.parametrize(
    "first",
    [
        b"y,,n=alice,r=abc",  # channel binding flag other than n
        b"p=tls-unique,,n=alice,r=abc",
        b"n,,n=alice",  # no nonce
        b"n,,r=abc",
        b"n,,n=al,ice,r=abc",  # an unescaped comma in the name
    ],
)
def test_scram_malformed_first_messages(first: bytes) -> None:
    with pytest.raises(SaslFailure, match="Invalid SCRAM client first message format"):
        ScramServer(SHA256, store(alice="s3cret")).evaluate(first)


def test_scram_authzid_must_be_the_user_and_tokenauth_is_refused() -> None:
    with pytest.raises(SaslAuthenticationFailed, match="different from username"):
        ScramServer(SHA256, store(alice="s3cret")).evaluate(b"n,a=bob,n=alice,r=abc")
    server = ScramServer(SHA256, store(alice="s3cret"))
    assert server.evaluate(b"n,a=alice,n=alice,r=abc").startswith(b"r=abc")
    with pytest.raises(SaslFailure, match="Token Authentication failed"):
        ScramServer(SHA256, store(alice="s3cret")).evaluate(
            b"n,,n=alice,r=abc,tokenauth=true"
        )
    # Other extensions are ignored, as Kafka ignores them.
    assert ScramServer(SHA256, store(alice="s3cret")).evaluate(
        b"n,,n=alice,r=abc,foo=bar"
    )


def test_scram_escaped_names_and_iterations_floor() -> None:
    credentials = store(**{"a,b=c": "pw"})
    server = ScramServer(SHA256, credentials)
    client = ScramClient("sha256", "a=2Cb=3Dc", "pw")
    assert client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    assert server.authorization_id == "a,b=c"
    weak = CredentialStore(
        {"w": {SHA256: scram_credential_from_password(SHA256, "pw", b"s", 4095)}}
    )
    with pytest.raises(
        SaslFailure, match="Iterations 4095 is less than the minimum 4096"
    ):
        ScramServer(SHA256, weak).evaluate(b"n,,n=w,r=abc")


def test_scram_final_message_checks() -> None:
    server = ScramServer(SHA256, store(alice="s3cret"))
    client = ScramClient("sha256", "alice", "s3cret")
    server_first = server.evaluate(client.first())
    nonce = server_first.decode().split(",")[0][2:]
    with pytest.raises(SaslFailure, match="Invalid client nonce"):
        server.evaluate(b"c=biws,r=" + nonce.encode() + b"x,p=AAAA")
    server = ScramServer(SHA256, store(alice="s3cret"))
    server_first = server.evaluate(client.first())
    final = client.final(server_first).replace(
        b"c=biws", b"c=eSws"
    )  # "y,," channel binding
    with pytest.raises(SaslFailure, match="channel binding"):
        server.evaluate(final)
    # A finished or failed exchange takes no more tokens.
    with pytest.raises(SaslFailure):
        server.evaluate(b"anything")


def _exchange_to_final(
    mechanism: ScramMechanism = SHA512,
) -> tuple[ScramServer, ScramClient, bytes, str]:
    server = ScramServer(mechanism, store(alice="s3cret"))
    client = ScramClient(mechanism.hash_name, "alice", "s3cret")
    server_first = server.evaluate(client.first())
    nonce = server_first.decode().split(",")[0][2:]
    return server, client, server_first, nonce


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda nonce: nonce[:-1], id="shortened"),
        pytest.param(lambda nonce: nonce[: len("cnonce123")], id="client-part-only"),
        pytest.param(lambda nonce: nonce + "x", id="lengthened"),
        pytest.param(lambda nonce: nonce[:-1] + "!", id="last-char-changed"),
    ],
)
def test_scram_client_final_nonce_must_be_the_whole_server_nonce(
    mutate: Callable[[str], str],
) -> None:
    # The proof is computed over the mutated message, as a client that means it would: only
    # the nonce check can refuse it (Kafka's ScramSaslServer:
    # ``!clientFinalMessage.nonce().equals(serverFirstMessage.nonce())``).
    server, client, server_first, nonce = _exchange_to_final()
    final = client.final(server_first, nonce=mutate(nonce))
    with pytest.raises(SaslFailure, match="Invalid client nonce"):
        server.evaluate(final)
    assert not server.complete
    # The unmutated message with its proof is accepted by a server in the same state.
    server, client, server_first, nonce = _exchange_to_final()
    assert client.verify(server.evaluate(client.final(server_first, nonce=nonce)))


@pytest.mark.parametrize(
    "channel_binding",
    [
        pytest.param("eSws", id="y-flag"),  # base64("y,,")
        pytest.param("cD10bHMtdW5pcXVlLCw=", id="p-flag"),  # base64("p=tls-unique,,")
        pytest.param("biwsYT1hbGljZSw=", id="other-header"),  # base64("n,,a=alice,")
        pytest.param("", id="empty"),
    ],
)
def test_scram_wrong_channel_binding_is_refused(channel_binding: str) -> None:
    server, client, server_first, _ = _exchange_to_final()
    final = client.final(server_first, channel_binding=channel_binding)
    with pytest.raises(SaslFailure):
        server.evaluate(final)
    assert not server.complete


def test_scram_replayed_client_final_is_refused() -> None:
    server, client, server_first, _ = _exchange_to_final()
    final = client.final(server_first)
    assert client.verify(server.evaluate(final))
    # The same message again on the finished exchange: no more tokens.
    with pytest.raises(SaslFailure, match="Unexpected challenge"):
        server.evaluate(final)
    # ... and on a new exchange of the same client (same client nonce): the server's fresh
    # nonce differs, so the recorded message and its proof are worthless.
    again = ScramServer(SHA512, store(alice="s3cret"))
    assert again.evaluate(client.first()) != server_first
    with pytest.raises(SaslFailure, match="Invalid client nonce"):
        again.evaluate(final)
    assert not again.complete


def test_server_nonces_are_fresh_base36() -> None:
    nonces = {server_nonce() for _ in range(100)}
    assert len(nonces) == 100
    assert all(n.isalnum() and n == n.lower() for n in nonces)


def test_plain_accepts_the_right_password_only() -> None:
    credentials = store(alice="s3cret")
    server = PlainServer(credentials)
    assert server.evaluate(plain_token("alice", "s3cret")) == b""
    assert server.complete and server.authorization_id == "alice"
    assert (
        PlainServer(credentials).evaluate(
            plain_token("alice", "s3cret", authzid="alice")
        )
        == b""
    )
    for token, message in [
        (
            plain_token("alice", "wrong"),
            "Authentication failed: Invalid username or password",
        ),
        (
            plain_token("nobody", "s3cret"),
            "Authentication failed: Invalid username or password",
        ),
        (plain_token("", "s3cret"), "Authentication failed: username not specified"),
        (plain_token("alice", ""), "Authentication failed: password not specified"),
        (
            plain_token("alice", "s3cret", authzid="bob"),
            "Authentication failed: Client requested an authorization id that is different "
            "from username",
        ),
        (b"alice\0s3cret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (
            b"a\0alice\0s3cret\0x",
            "Invalid SASL/PLAIN response: expected 3 tokens, got 4",
        ),
    ]:
        server = PlainServer(credentials)
        with pytest.raises(SaslAuthenticationFailed) as failure:
            server.evaluate(token)
        assert str(failure.value) == message
        assert not server.complete
