"""Whether a client of the gateway must authenticate before the gateway answers it.

A Kafka broker's SASL listener serves an unauthenticated connection ApiVersions and the SASL
exchange only; any other request closes the connection with nothing written
(``SaslServerAuthenticator.handleKafkaRequest``: "Unexpected Kafka request of type ... during
SASL handshake", an ``IllegalSaslStateException``, which the ``Selector`` answers by closing
the channel).  The gateway forwards most requests, and the cluster enforces that itself; but
it answers some requests itself (telemetry, the client-metrics, quota and ACL
administration), and those must meet the same rule, or anyone reaching a gateway port could
push telemetry and rewrite every client's subscription without credentials.

So, per client connection, before its SASL exchange has been accepted by the cluster:

| the cluster (``UpstreamAuthentication``)     | ApiVersions, SASL | what the gateway answers  | the rest         |
|----------------------------------------------|-------------------|---------------------------|------------------|
| REQUIRED: ``gateway.upstream.security.       | forwarded         | connection closed,        | forwarded: the   |
| protocol`` is SASL_*, or learned             |                   | nothing written (Kafka's  | cluster closes   |
|                                              |                   | SASL listener does so)    | it (and so the   |
|                                              |                   |                           | gateway)         |
| NOT_REQUIRED: learned (it answered a request | forwarded         | answered                  | forwarded        |
| of a connection that never authenticated)    |                   |                           |                  |
| UNKNOWN: not told, not learned yet           | forwarded         | closed while ``gateway.   | forwarded        |
|                                              |                   | telemetry.require.authen- |                  |
|                                              |                   | tication`` (default), else|                  |
|                                              |                   | answered                  |                  |

Forwarded requests are left to the cluster, which closes the connection of a client that
has not authenticated exactly as the gateway would (and the gateway then closes the
client's): so a mechanism whose exchange the gateway does not read (GSSAPI, OAUTHBEARER)
still works, and its connection counts as authenticated once the cluster has answered it a
request other than ApiVersions and SASL.

What teaches the gateway (protocol PLAINTEXT or SSL configured):

* its own question at start (``discovery.ask_authentication``: one Metadata request with no
  credentials): answered -> NOT_REQUIRED; the connection closed after it -> REQUIRED;
* a SaslHandshake a client sends through it answered without an error: only a SASL listener
  does (Kafka's ``KafkaApis`` answers it ILLEGAL_SASL_STATE on any other) -> REQUIRED;
* a forwarded request other than ApiVersions and SASL answered on a connection that never
  began a SASL exchange -> NOT_REQUIRED (unless already REQUIRED: a SASL listener never
  does).

A connection whose SASL exchange the cluster accepted (PLAIN's one SaslAuthenticate,
SCRAM's second, which carries the proof: ``sasl.SaslCapture``) is authenticated; its
principal is the one the authorizer checks.
"""

from __future__ import annotations

import enum
import logging
from typing import Final

from proto import ApiKeys

__all__ = ["AuthenticationPolicy", "UpstreamAuthentication", "BEFORE_AUTHENTICATION"]

log = logging.getLogger(__name__)

# What an unauthenticated connection of a SASL listener may send (SaslServerAuthenticator).
BEFORE_AUTHENTICATION: Final = frozenset(
    {
        int(ApiKeys.API_VERSIONS),
        int(ApiKeys.SASL_HANDSHAKE),
        int(ApiKeys.SASL_AUTHENTICATE),
    }
)
SASL_PROTOCOLS: Final = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


class UpstreamAuthentication(enum.Enum):
    REQUIRED = "required"
    NOT_REQUIRED = "not required"
    UNKNOWN = "unknown"


class AuthenticationPolicy:
    """What the gateway knows of the cluster's listener, shared by every client pair."""

    __slots__ = ("_state", "_told", "require_when_unknown")

    def __init__(
        self, *, upstream_security_protocol: str, require_when_unknown: bool
    ) -> None:
        # Told by configuration: a SASL listener; nothing learned overrides it.
        self._told = upstream_security_protocol in SASL_PROTOCOLS
        self._state = (
            UpstreamAuthentication.REQUIRED
            if self._told
            else UpstreamAuthentication.UNKNOWN
        )
        # gateway.telemetry.require.authentication
        self.require_when_unknown = require_when_unknown

    @property
    def state(self) -> UpstreamAuthentication:
        return self._state

    @property
    def told(self) -> bool:
        return self._told

    def learned_required(self, how: str) -> None:
        if self._state is UpstreamAuthentication.REQUIRED:
            return
        log.info(
            "the upstream cluster requires SASL authentication (%s): clients of the "
            "gateway must log in before anything but ApiVersions and SASL is served",
            how,
        )
        self._state = UpstreamAuthentication.REQUIRED

    def learned_not_required(self, how: str) -> None:
        if self._state is not UpstreamAuthentication.UNKNOWN:
            return
        log.info(
            "the upstream cluster serves clients that have not authenticated (%s)", how
        )
        self._state = UpstreamAuthentication.NOT_REQUIRED

    def refuses(self, api_key: int, local: bool) -> bool:
        """Whether a request from a connection that has not authenticated closes it:
        ``local`` when the gateway would answer it (at least partly) itself."""
        if not local or api_key in BEFORE_AUTHENTICATION:
            return False  # forwarded: the cluster decides
        state = self._state
        if state is UpstreamAuthentication.REQUIRED:
            return True
        if state is UpstreamAuthentication.NOT_REQUIRED:
            return False
        return self.require_when_unknown
