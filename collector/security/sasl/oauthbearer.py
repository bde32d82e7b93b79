"""SASL/OAUTHBEARER (RFC 7628), the server side, as Kafka's ``OAuthBearerSaslServer`` with
``OAuthBearerValidatorCallbackHandler``: the client's initial response carries a bearer
token, the token validator (``collector.security.jwt_validator``) decides.

| step | client sends                                    | server answers                  |
|------|-------------------------------------------------|---------------------------------|
| 1    | ``n,[a=authzid],\\x01auth=Bearer <token>\\x01``  | ``b""``: complete, the principal|
|      | ``[key=value\\x01]...\\x01``                      | is the token's subject claim    |
| 1    | the same, a token the validator refuses         | ``{"status":"invalid_token"}``  |
|      |                                                 | (RFC 7628 section 3.2.2)        |
| 2    | ``\\x01`` (after that error)                     | SASL_AUTHENTICATION_FAILED with |
|      |                                                 | ``{"status":"invalid_token"}``  |

A malformed message or a scheme other than ``Bearer`` fails at once with Kafka's generic
message; an authorization id must be the token's principal name.  Extensions are parsed
and checked against RFC 7628's grammar and otherwise ignored (Kafka's default extension
validator accepts none of them and ignores them the same way).  Once complete,
:attr:`credential_expiry_wall_ms` is the token's ``exp``: the authenticator bounds the session
by it (KIP-368), so a client re-authenticates before its token expires.
"""

from __future__ import annotations

import logging
import re
from typing import Protocol

from collector.security.jwt_validator import InvalidToken, OAuthBearerToken
from collector.security.sasl.mechanism import (
    SaslAuthenticationFailed,
    SaslFailure,
    completed_id,
)

__all__ = ["MECHANISM", "OAuthBearerServer", "TokenValidator"]

log = logging.getLogger(__name__)

MECHANISM = "OAUTHBEARER"
_SEPARATOR = "\x01"
# OAuthBearerClientInitialResponse's patterns, in Python's syntax.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"  # [\x01-\x7F] but "," and "="
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
_CLIENT_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEPARATOR}"
    rf"(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEPARATOR})*){_SEPARATOR}"
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)", re.ASCII)
_KEY_RE = re.compile(_KEY)
_VALUE_RE = re.compile(_VALUE)
# OAuthBearerValidatorCallbackHandler answers every refused token with this status.
INVALID_TOKEN_RESPONSE = '{"status":"invalid_token"}'


class TokenValidator(Protocol):
    def validate(self, access_token: str) -> OAuthBearerToken:
        """The token's grant; raises :class:`InvalidToken`."""
        ...


class OAuthBearerServer:
    mechanism = MECHANISM

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._token: OAuthBearerToken | None = None
        self._error: str | None = None
        self.extensions: dict[str, str] = {}

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        return completed_id(None if self._token is None else self._token.principal_name)

    @property
    def token(self) -> OAuthBearerToken | None:
        return self._token

    @property
    def credential_expiry_wall_ms(self) -> int | None:
        """SaslInternalConfigs.CREDENTIAL_LIFETIME_MS: the token's expiry (wall-clock ms)."""
        return None if self._token is None else self._token.lifetime_ms

    def evaluate(self, token: bytes) -> bytes:
        if self._token is not None:
            raise SaslAuthenticationFailed("Authentication exchange has completed")
        if token == _SEPARATOR.encode() and self._error is not None:
            # The client acknowledged our error (RFC 7628 section 3.2.3): fail with it.
            raise SaslAuthenticationFailed(self._error)
        self._error = None
        authzid, access_token = self._parse(token.decode("utf-8", "replace"))
        try:
            granted = self._validator.validate(access_token)
        except InvalidToken as exc:
            # Kafka logs the reason at WARN; the client is told only the status.
            log.warning("OAUTHBEARER token refused: %s", exc)
            self._error = INVALID_TOKEN_RESPONSE
            return self._error.encode("utf-8")
        if authzid and authzid != granted.principal_name:
            raise SaslAuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) that "
                f"is different from the token's principal name ({granted.principal_name})"
            )
        self._token = granted
        return b""

    def _parse(self, message: str) -> tuple[str, str]:
        """OAuthBearerClientInitialResponse(byte[]): (authorization id, token)."""
        match = _CLIENT_INITIAL_RESPONSE.fullmatch(message)
        if match is None:
            raise SaslFailure("Invalid OAUTHBEARER client first message")
        properties: dict[str, str] = {}
        for pair in filter(None, match["kvpairs"].split(_SEPARATOR)):
            key, _, value = pair.partition("=")
            properties[key] = value
        auth = properties.pop("auth", None)
        if auth is None:
            raise SaslFailure(
                "Invalid OAUTHBEARER client first message: 'auth' not specified"
            )
        for key, value in properties.items():
            if not _KEY_RE.fullmatch(key) or not _VALUE_RE.fullmatch(value):
                raise SaslFailure(f"Extension name {key} is invalid")
        auth_match = _AUTH.fullmatch(auth)
        if auth_match is None:
            raise SaslFailure(
                "Invalid OAUTHBEARER client first message: invalid 'auth' format"
            )
        if auth_match["scheme"].lower() != "bearer":
            raise SaslFailure(
                f"Invalid scheme in OAUTHBEARER client first message: {auth_match['scheme']}"
            )
        self.extensions = properties
        return match["authzid"] or "", auth_match["token"]
