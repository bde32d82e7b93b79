"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, as Kafka's
``ScramSaslServer``: two client messages, two answers, checked against a stored
``ScramCredential`` (salt, StoredKey, ServerKey, iterations; never the password).

| step | client sends                          | server answers                       |
|------|---------------------------------------|--------------------------------------|
| 1    | ``n,[a=authzid],n=user,r=cnonce[,ext]`` | ``r=cnonce+snonce,s=salt,i=iterations`` |
| 2    | ``c=biws,r=cnonce+snonce,p=proof``    | ``v=ServerSignature``                |

Kafka's rules kept here: only the ``n`` gs2 flag (no channel binding), message formats as
``ScramMessages``' patterns, the authorization id empty or the user's own name, at least the
mechanism's minimum iterations (4096), extensions ignored except ``tokenauth`` (delegation
tokens, which the collector does not issue: such a client is refused).  One addition from
RFC 5802 section 5.1: the ``c=`` attribute must be the gs2 header the client sent first.

The AuthMessage is built from the messages as received (RFC 5802 section 3); Kafka rebuilds
them from their parsed parts, which is the same text for every client that sends no
extensions.  The proof is checked with ``hmac.compare_digest``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets

from collector.security.credentials import (
    CredentialStore,
    ScramCredential,
    ScramMechanism,
)
from collector.security.sasl.mechanism import (
    SaslAuthenticationFailed,
    SaslFailure,
    completed_id,
)

__all__ = ["ScramServer", "server_nonce"]

# ScramMessages.AbstractScramMessage, in Python's syntax.
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # [\x01-\x7F] but ","
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # [\x21-\x7E] but ","
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"  # but "," and "=", or escapes
_B64 = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>{_RESERVED}n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})"
)
_TOKEN_AUTH = "tokenauth"  # ScramLoginModule.TOKEN_AUTH_CONFIG

_RECEIVE_CLIENT_FIRST, _RECEIVE_CLIENT_FINAL, _COMPLETE, _FAILED = range(4)


def server_nonce() -> str:
    """ScramFormatter.secureRandomString: 130 random bits in base 36."""
    value = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = []
    while value:
        value, digit = divmod(value, 36)
        out.append(digits[digit])
    return "".join(reversed(out)) or "0"


def _username(saslname: str) -> str:
    """ScramFormatter.username: the saslname with its escapes undone."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _extensions(text: str) -> dict[str, str]:
    """``,k=v,k2=v2`` -> {k: v, k2: v2} (ScramExtensions over Utils.parseMap)."""
    out: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        out[key] = value
    return out


class ScramServer:
    def __init__(
        self,
        mechanism: ScramMechanism,
        credentials: CredentialStore,
        *,
        nonce: str | None = None,
    ) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._credentials = credentials
        # A fixed server nonce only for tests replaying an RFC exchange.
        self._nonce = nonce
        self._state = _RECEIVE_CLIENT_FIRST
        self._user = ""
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        # The nonce of the server-first message (client's + server's part).
        self._combined_nonce = ""

    @property
    def complete(self) -> bool:
        return self._state == _COMPLETE

    @property
    def authorization_id(self) -> str:
        return completed_id(self._user if self._state == _COMPLETE else None)

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == _RECEIVE_CLIENT_FIRST:
                return self._client_first(token.decode("utf-8", "replace"))
            if self._state == _RECEIVE_CLIENT_FINAL:
                return self._client_final(token.decode("utf-8", "replace"))
            raise SaslAuthenticationFailed(
                f"Unexpected challenge in Sasl server state {self._state_name()}"
            )
        except SaslFailure:
            self._credential = None
            self._state = _FAILED
            raise

    def _state_name(self) -> str:
        return (
            "RECEIVE_CLIENT_FIRST_MESSAGE",
            "RECEIVE_CLIENT_FINAL_MESSAGE",
            "COMPLETE",
            "FAILED",
        )[self._state]

    def _client_first(self, message: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            # Kafka's text names the message; it is for the log only (SaslFailure).
            raise SaslFailure("Invalid SCRAM client first message format")
        user = _username(match["saslname"])
        extensions = _extensions(match["extensions"])
        if extensions.get(_TOKEN_AUTH, "").lower() == "true":
            raise SaslFailure("Token Authentication failed: Invalid tokenId")
        credential = self._credentials.scram_credential(user, self._scram)
        if credential is None:
            raise SaslFailure("Authentication failed: Invalid user credentials")
        authzid = match["authzid"] or ""
        if authzid and authzid != user:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        if credential.iterations < self._scram.min_iterations:
            raise SaslFailure(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{self._scram.min_iterations} for {self.mechanism}"
            )
        self._user = user
        self._credential = credential
        self._gs2_header = match["gs2"]
        self._client_first_bare = match["bare"]
        nonce = match["nonce"] + (
            self._nonce if self._nonce is not None else server_nonce()
        )
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._combined_nonce = nonce
        self._server_first = f"r={nonce},s={salt},i={credential.iterations}"
        self._state = _RECEIVE_CLIENT_FINAL
        return self._server_first.encode("ascii")

    def _client_final(self, message: str) -> bytes:
        credential = self._credential
        assert credential is not None
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise SaslFailure("Invalid SCRAM client final message format")
        # The whole nonce, exactly (ScramSaslServer: ``!clientFinalMessage.nonce().equals(
        # serverFirstMessage.nonce())``): a prefix (the client's part alone) or a longer
        # nonce would let a recorded client-final message be replayed.
        if match["nonce"] != self._combined_nonce:
            raise SaslFailure("Invalid client nonce in the final client message.")
        try:
            channel = base64.b64decode(match["channel"], validate=True)
            proof = base64.b64decode(match["proof"], validate=True)
        except (binascii.Error, ValueError):
            raise SaslFailure(
                "Authentication failed: Invalid client final message"
            ) from None
        if channel != self._gs2_header.encode("ascii"):
            raise SaslFailure("Invalid channel binding in the final client message.")
        hash_name = self._scram.hash_name
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, match["without_proof"])
        ).encode("utf-8")
        client_signature = hmac.digest(credential.stored_key, auth_message, hash_name)
        if len(proof) != len(client_signature):
            raise SaslFailure("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        computed_stored_key = hashlib.new(hash_name, client_key).digest()
        if not hmac.compare_digest(computed_stored_key, credential.stored_key):
            raise SaslFailure("Invalid client credentials")
        server_signature = hmac.digest(credential.server_key, auth_message, hash_name)
        self._credential = None
        self._state = _COMPLETE
        return b"v=" + base64.b64encode(server_signature)
