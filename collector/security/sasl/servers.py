"""The SASL mechanisms the collector serves: name (as in ``sasl.enabled.mechanisms``) ->
a fresh server for one exchange, made from what the node checks clients against
(:class:`SaslCallbacks`: the SCRAM credentials, the OAUTHBEARER token validator)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from collector.security.credentials import CredentialStore, ScramMechanism
from collector.security.sasl.mechanism import SaslServer
from collector.security.sasl.oauthbearer import OAuthBearerServer, TokenValidator
from collector.security.sasl.plain import PlainServer
from collector.security.sasl.scram import ScramServer

__all__ = ["MECHANISMS", "SaslCallbacks", "new_sasl_server"]


@dataclasses.dataclass(frozen=True, slots=True)
class SaslCallbacks:
    """What the mechanisms check against (Kafka's server callback handlers)."""

    credentials: CredentialStore
    # None: OAUTHBEARER is not configured (no sasl.oauthbearer.jwks.endpoint.url).
    token_validator: TokenValidator | None = None


def _scram(mechanism: ScramMechanism) -> Callable[[SaslCallbacks], SaslServer]:
    return lambda callbacks: ScramServer(mechanism, callbacks.credentials)


def _oauthbearer(callbacks: SaslCallbacks) -> SaslServer:
    if callbacks.token_validator is None:
        raise ValueError(
            "OAUTHBEARER needs a token validator (sasl.oauthbearer.jwks.endpoint.url)"
        )
    return OAuthBearerServer(callbacks.token_validator)


MECHANISMS: Mapping[str, Callable[[SaslCallbacks], SaslServer]] = {
    "PLAIN": lambda callbacks: PlainServer(callbacks.credentials),
    "SCRAM-SHA-256": _scram(ScramMechanism.SCRAM_SHA_256),
    "SCRAM-SHA-512": _scram(ScramMechanism.SCRAM_SHA_512),
    "OAUTHBEARER": _oauthbearer,
}


def new_sasl_server(mechanism: str, callbacks: SaslCallbacks) -> SaslServer:
    """A fresh server for one exchange of ``mechanism`` (one of :data:`MECHANISMS`)."""
    return MECHANISMS[mechanism](callbacks)
