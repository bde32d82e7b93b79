"""SASL/PLAIN (RFC 4616), as Kafka's ``PlainSaslServer``: one message,
``[authzid] NUL authcid NUL passwd`` in UTF-8, checked against the salted credential store
(``CredentialStore.verify_plain``: constant time, the same cost for an unknown user).

The authorization id must be empty or the user's own name (Kafka refuses any other: no
impersonation).  Messages are Kafka's, word for word.
"""

from __future__ import annotations

from collector.security.credentials import CredentialStore
from collector.security.sasl.mechanism import SaslAuthenticationFailed, completed_id

__all__ = ["PlainServer"]


def _tokens(message: str) -> list[str]:
    """PlainSaslServer.extractTokens: split on NUL into at most 4 pieces; exactly 3 wanted."""
    tokens = message.split("\0", 3)
    if len(tokens) != 3:
        raise SaslAuthenticationFailed(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
        )
    return tokens


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, credentials: CredentialStore) -> None:
        self._credentials = credentials
        self._user: str | None = None

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        return completed_id(self._user)

    def evaluate(self, token: bytes) -> bytes:
        if self._user is not None:
            # PlainSaslServer: "Authentication exchange has completed" (IllegalStateException).
            raise SaslAuthenticationFailed("Authentication exchange has completed")
        authzid, user, password = _tokens(token.decode("utf-8", "replace"))
        if not user:
            raise SaslAuthenticationFailed(
                "Authentication failed: username not specified"
            )
        if not password:
            raise SaslAuthenticationFailed(
                "Authentication failed: password not specified"
            )
        if not self._credentials.verify_plain(user, password):
            raise SaslAuthenticationFailed(
                "Authentication failed: Invalid username or password"
            )
        if authzid and authzid != user:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self._user = user
        return b""
