"""What a SASL mechanism's server side is and how it fails (the mechanisms served are in
``collector.security.sasl.servers``).

Kafka's ``SaslServer`` contract, reduced to what the collector needs: ``evaluate`` takes the
client's token and returns the server's (``b""`` when there is nothing to say), and
``complete`` turns true once the exchange succeeded; ``authorization_id`` is then the user.

Two failure kinds, as Kafka's ``SaslServerAuthenticator`` tells them apart:

| raised                      | Kafka's                      | the client is told                  |
|-----------------------------|------------------------------|-------------------------------------|
| :class:`SaslAuthenticationFailed` | ``SaslAuthenticationException`` | its message, as is            |
| :class:`SaslFailure`        | ``SaslException``            | "Authentication failed during       |
|                             |                              | authentication due to invalid       |
|                             |                              | credentials with SASL mechanism X"  |

A ``SaslFailure``'s own message (which may say whether a user exists) is for the server's
debug log only.
"""

from __future__ import annotations

from typing import Protocol

__all__ = [
    "SaslAuthenticationFailed",
    "SaslFailure",
    "SaslServer",
    "completed_id",
]


class SaslFailure(Exception):
    """The exchange failed; the client gets Kafka's generic message, not this one."""


class SaslAuthenticationFailed(SaslFailure):
    """The exchange failed with a message the client may see (Kafka's
    ``SaslAuthenticationException``)."""


class SaslServer(Protocol):
    mechanism: str

    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to the client's ``token``; raises a :class:`SaslFailure`."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user (only once ``complete``)."""
        ...


def completed_id(authorization_id: str | None) -> str:
    """The ``authorization_id`` a server answers, given the user it authenticated (None
    until the exchange completed: asking before that is an error)."""
    if authorization_id is None:
        raise RuntimeError("Authentication exchange has not completed")
    return authorization_id
