"""The client side of PLAIN and SCRAM for the tests (RFC 5802 with hashlib/hmac), and frame
helpers: what a real client sends, built independently of the server code under test."""

from __future__ import annotations

import base64
import hashlib
import hmac

from proto import RequestFrame, ServerConnection, encode_request
from proto.messages import SaslAuthenticateRequest, SaslHandshakeRequest


def frame(
    api_key: int, version: int, message: object, correlation_id: int = 1
) -> RequestFrame:
    codec = ServerConnection()
    codec.receive_data(
        encode_request(api_key, version, correlation_id, "test-client", message)
    )
    parsed = codec.next_request()
    assert parsed is not None
    return parsed


def handshake(
    mechanism: str, correlation_id: int = 1, version: int = 1
) -> RequestFrame:
    return frame(17, version, SaslHandshakeRequest(mechanism=mechanism), correlation_id)


def authenticate(
    token: bytes, correlation_id: int = 2, version: int = 2
) -> RequestFrame:
    return frame(36, version, SaslAuthenticateRequest(auth_bytes=token), correlation_id)


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


class ScramClient:
    """RFC 5802 client: first(), then final(server_first), then verify(server_final)."""

    def __init__(
        self, hash_name: str, user: str, password: str, nonce: str = "cnonce123"
    ) -> None:
        self.hash_name = hash_name
        self.user = user
        self.password = password
        self.nonce = nonce
        self.bare = f"n={user},r={nonce}"
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        return ("n,," + self.bare).encode()

    def final(
        self,
        server_first: bytes,
        proof_override: bytes | None = None,
        *,
        nonce: str | None = None,
        channel_binding: str = "biws",
    ) -> bytes:
        """The client-final message; ``nonce`` and ``channel_binding`` replace what a
        correct client sends (the server's nonce; ``biws``, base64 of ``n,,``) with the
        proof computed over the replaced values, as a client that means them would."""
        attrs = dict(item.split("=", 1) for item in server_first.decode().split(","))
        salt = base64.b64decode(attrs["s"])
        self._salted = hashlib.pbkdf2_hmac(
            self.hash_name, self.password.encode(), salt, int(attrs["i"])
        )
        nonce = attrs["r"] if nonce is None else nonce
        without_proof = f"c={channel_binding},r={nonce}"
        self._auth_message = (
            f"{self.bare},{server_first.decode()},{without_proof}".encode()
        )
        client_key = hmac.digest(self._salted, b"Client Key", self.hash_name)
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        signature = hmac.digest(stored_key, self._auth_message, self.hash_name)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        if proof_override is not None:
            proof = proof_override
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        server_key = hmac.digest(self._salted, b"Server Key", self.hash_name)
        expected = hmac.digest(server_key, self._auth_message, self.hash_name)
        return server_final == b"v=" + base64.b64encode(expected)
