"""The gateway's SASL client (collector/security/sasl/client.py) against the collector's own
PLAIN and SCRAM servers, sans-IO, and what it refuses of a server."""

from __future__ import annotations

import base64

import pytest

from collector.security.credentials import (
    CredentialStore,
    ScramMechanism,
    scram_credential_from_password,
)
from collector.security.sasl.client import SaslClientError, ScramClient, new_sasl_client
from collector.security.sasl.plain import PlainServer
from collector.security.sasl.scram import ScramServer

PASSWORD = "gateway-login-Pw"


def store() -> CredentialStore:
    return CredentialStore(
        {
            "gw": {
                m: scram_credential_from_password(m, PASSWORD, b"salt-gw", 4096)
                for m in ScramMechanism
            }
        }
    )


@pytest.mark.parametrize("mechanism", list(ScramMechanism), ids=lambda m: m.name)
def test_scram_login_against_the_server(mechanism: ScramMechanism) -> None:
    server = ScramServer(mechanism, store())
    client = new_sasl_client(mechanism.mechanism_name, "gw", PASSWORD)
    final = client.respond(server.evaluate(client.first()))
    assert final is not None
    assert client.respond(server.evaluate(final)) is None
    assert server.authorization_id == "gw"


def test_plain_login_against_the_server() -> None:
    server = PlainServer(store())
    client = new_sasl_client("PLAIN", "gw", PASSWORD)
    assert client.respond(server.evaluate(client.first())) is None
    assert server.authorization_id == "gw"


def test_a_server_that_does_not_know_the_password_is_refused() -> None:
    client = ScramClient(ScramMechanism.SCRAM_SHA_512, "gw", PASSWORD, nonce="abc")
    client.first()
    salt = base64.b64encode(b"salt-gw").decode()
    client.respond(f"r=abcdef,s={salt},i=4096".encode())
    forged = base64.b64encode(b"x" * 64).decode()
    with pytest.raises(SaslClientError, match="invalid server signature"):
        client.respond(f"v={forged}".encode())


@pytest.mark.parametrize(
    ("server_first", "message"),
    [
        ("r=zzz,s=c2FsdA==,i=4096", "invalid server nonce"),  # not our nonce
        ("r=abc,s=c2FsdA==,i=4096", "invalid server nonce"),  # no server part
        ("r=abcdef,s=c2FsdA==,i=1024", "less than the minimum"),
        ("r=abcdef,i=4096", "invalid server first message"),
    ],
)
def test_server_first_messages_refused(server_first: str, message: str) -> None:
    client = ScramClient(ScramMechanism.SCRAM_SHA_256, "gw", PASSWORD, nonce="abc")
    client.first()
    with pytest.raises(SaslClientError, match=message):
        client.respond(server_first.encode())
