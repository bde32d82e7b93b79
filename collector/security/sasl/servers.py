"""The SASL mechanisms the collector serves: name (as in ``sasl.enabled.mechanisms``) ->
a fresh server for one exchange."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from collector.security.credentials import CredentialStore, ScramMechanism
from collector.security.sasl.mechanism import SaslServer
from collector.security.sasl.plain import PlainServer
from collector.security.sasl.scram import ScramServer

__all__ = ["MECHANISMS", "new_sasl_server"]


def _scram(mechanism: ScramMechanism) -> Callable[[CredentialStore], SaslServer]:
    return lambda credentials: ScramServer(mechanism, credentials)


MECHANISMS: Mapping[str, Callable[[CredentialStore], SaslServer]] = {
    "PLAIN": PlainServer,
    "SCRAM-SHA-256": _scram(ScramMechanism.SCRAM_SHA_256),
    "SCRAM-SHA-512": _scram(ScramMechanism.SCRAM_SHA_512),
}


def new_sasl_server(mechanism: str, credentials: CredentialStore) -> SaslServer:
    """A fresh server for one exchange of ``mechanism`` (one of :data:`MECHANISMS`)."""
    return MECHANISMS[mechanism](credentials)
