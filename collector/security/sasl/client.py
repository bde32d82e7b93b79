"""The client side of PLAIN and SCRAM, sans-IO: what the gateway sends to log in to a cluster
with credentials of its own (``gateway.upstream.sasl.*``), as Kafka's ``PlainSaslClient``
(via ``PlainLoginModule``) and ``ScramSaslClient`` do.

    client = new_sasl_client("SCRAM-SHA-512", "gateway", password)
    token = client.first()                  # SaslAuthenticate #1
    token = client.respond(server_first)    # SaslAuthenticate #2
    client.respond(server_final)            # None: done (the server's signature checked)

| mechanism     | client sends                                   | then                       |
|---------------|------------------------------------------------|----------------------------|
| PLAIN         | ``NUL user NUL password`` (RFC 4616)           | done on an empty answer    |
| SCRAM-SHA-*   | ``n,,n=user,r=cnonce`` (RFC 5802, Kafka's only | ``c=biws,r=nonce,p=proof`` |
|               | gs2 header: no channel binding)                | then ``v=`` is checked     |

A server-first message is checked as Kafka's ``ScramSaslClient`` checks it: its nonce must
begin with ours, its iteration count must reach the mechanism's minimum (4096); the
server's signature must be the one the password gives (a server that does not know the
password cannot pass for the cluster).  Nothing here logs or puts the password in a message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from typing import Protocol

from collector.security.credentials import ScramMechanism, salted_password

__all__ = ["SaslClient", "SaslClientError", "new_sasl_client"]


class SaslClientError(Exception):
    """The server's answer cannot be accepted (the login fails)."""


class SaslClient(Protocol):
    def first(self) -> bytes:
        """The first SaslAuthenticate token."""

    def respond(self, challenge: bytes) -> bytes | None:
        """The next token for the server's answer, or None when the exchange is done."""


class PlainClient:
    def __init__(self, username: str, password: str) -> None:
        self._token = f"\0{username}\0{password}".encode()

    def first(self) -> bytes:
        return self._token

    def respond(self, challenge: bytes) -> bytes | None:
        if challenge:
            raise SaslClientError("PLAIN: unexpected challenge from the server")
        return None


def _escape(username: str) -> str:
    """ScramFormatter.saslName: "=" and "," escaped."""
    return username.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    def __init__(
        self,
        mechanism: ScramMechanism,
        username: str,
        password: str,
        *,
        nonce: str | None = None,
    ) -> None:
        self._scram = mechanism
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={_escape(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return ("n,," + self._first_bare).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if self._server_signature is None:
            return self._final(challenge.decode("utf-8", "replace"))
        self._verify(challenge.decode("utf-8", "replace"))
        return None

    def _final(self, server_first: str) -> bytes:
        attributes = dict(
            item.split("=", 1) for item in server_first.split(",") if "=" in item
        )
        try:
            nonce = attributes["r"]
            salt = base64.b64decode(attributes["s"], validate=True)
            iterations = int(attributes["i"])
        except (KeyError, ValueError, binascii.Error):
            raise SaslClientError("SCRAM: invalid server first message") from None
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise SaslClientError("SCRAM: invalid server nonce")
        if iterations < self._scram.min_iterations:
            raise SaslClientError(
                f"SCRAM: requested iterations {iterations} is less than the minimum "
                f"{self._scram.min_iterations} for {self._scram.mechanism_name}"
            )
        hash_name = self._scram.hash_name
        salted = salted_password(self._scram, self._password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", hash_name)
        stored_key = hashlib.new(hash_name, client_key).digest()
        signature = hmac.digest(stored_key, auth_message, hash_name)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", hash_name)
        self._server_signature = hmac.digest(server_key, auth_message, hash_name)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify(self, server_final: str) -> None:
        assert self._server_signature is not None
        if server_final.startswith("e="):
            raise SaslClientError(f"SCRAM: the server refused: {server_final[2:]}")
        if not server_final.startswith("v="):
            raise SaslClientError("SCRAM: invalid server final message")
        try:
            signature = base64.b64decode(server_final[2:], validate=True)
        except (ValueError, binascii.Error):
            raise SaslClientError("SCRAM: invalid server final message") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslClientError("SCRAM: invalid server signature")


def new_sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """A client of ``mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."""
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    scram = ScramMechanism.from_name(mechanism)
    if scram is None:
        raise ValueError(f"unsupported SASL mechanism {mechanism}")
    return ScramClient(scram, username, password)
