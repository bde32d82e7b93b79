"""What a SASL mechanism's server side is, how it fails, and which mechanisms are served.

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

from collections.abc import Callable, Mapping
from typing import Protocol

from collector.security.credentials import CredentialStore, ScramMechanism

__all__ = [
    "MECHANISMS",
    "SaslAuthenticationFailed",
    "SaslFailure",
    "SaslServer",
    "new_sasl_server",
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


def _plain(credentials: CredentialStore) -> SaslServer:
    from collector.security.sasl.plain import PlainServer

    return PlainServer(credentials)


def _scram(mechanism: ScramMechanism) -> Callable[[CredentialStore], SaslServer]:
    def build(credentials: CredentialStore) -> SaslServer:
        from collector.security.sasl.scram import ScramServer

        return ScramServer(mechanism, credentials)

    return build


# The mechanisms the collector serves: name (as in sasl.enabled.mechanisms) -> server.
MECHANISMS: Mapping[str, Callable[[CredentialStore], SaslServer]] = {
    "PLAIN": _plain,
    "SCRAM-SHA-256": _scram(ScramMechanism.SCRAM_SHA_256),
    "SCRAM-SHA-512": _scram(ScramMechanism.SCRAM_SHA_512),
}


def new_sasl_server(mechanism: str, credentials: CredentialStore) -> SaslServer:
    """A fresh server for one exchange of ``mechanism`` (one of :data:`MECHANISMS`)."""
    return MECHANISMS[mechanism](credentials)
