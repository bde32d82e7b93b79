"""One connection's SASL authentication, sans-IO, as Kafka's ``SaslServerAuthenticator``
(and the ``KafkaChannel`` / ``SocketServer`` checks around it for re-authentication).

The network layer hands every request frame of a SASL listener to :meth:`receive` with the
time; the answer is a :class:`Step`: pass the request on to the node's handler, answer it
here, fail (answer, then close after ``connection.failed.authentication.delay.ms``), or
close at once.  States, in Kafka's names:

| state                          | request                   | step                                  |
|--------------------------------|---------------------------|---------------------------------------|
| INITIAL_REQUEST,               | ApiVersions               | pass (the node answers); next:        |
| HANDSHAKE_OR_VERSIONS_REQUEST  |                           | HANDSHAKE_REQUEST                     |
| any of the three before        | SaslHandshake v1,         | answer, mechanisms listed; AUTHENTICATE|
| AUTHENTICATE                   | mechanism enabled         |                                       |
|                                | SaslHandshake, mechanism  | fail: UNSUPPORTED_SASL_MECHANISM (33),|
|                                | not enabled               | the enabled mechanisms listed         |
| HANDSHAKE_REQUEST              | ApiVersions (a second)    | close                                 |
| before AUTHENTICATE            | anything else             | close ("Unexpected Kafka request of   |
|                                |                           | type X during SASL handshake.")       |
| AUTHENTICATE                   | SaslAuthenticate v0-v2    | the mechanism's answer; once complete:|
|                                |                           | the principal ``User:<name>``,        |
|                                |                           | ``session_lifetime_ms``; COMPLETE     |
|                                | SaslAuthenticate, refused | fail: SASL_AUTHENTICATION_FAILED (58) |
|                                | SaslHandshake/ApiVersions | fail: ILLEGAL_SASL_STATE (34)         |
|                                | anything else             | close                                 |
| COMPLETE                       | SaslHandshake, session    | re-authentication (KIP-368): as the   |
|                                | lifetime set, none begun  | handshake above, the same mechanism   |
|                                | in the last second        | and principal required                |
|                                | anything, session expired | close                                 |
|                                | anything else             | pass (the node answers SaslHandshake  |
|                                |                           | and SaslAuthenticate with 34, as      |
|                                |                           | KafkaApis)                            |

SaslHandshake v0 (unframed SASL tokens after it) is not served: the node advertises
SaslHandshake v1 only, and a v0 request closes the connection.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable, Sequence
from typing import Any

from collector.core.session import Session
from collector.security.credentials import CredentialStore
from collector.security.sasl.mechanism import (
    SaslAuthenticationFailed,
    SaslFailure,
    SaslServer,
)
from collector.security.sasl.oauthbearer import TokenValidator
from collector.security.sasl.servers import MECHANISMS, SaslCallbacks, new_sasl_server
from proto import ApiKeys, RequestFrame, api_name, decode_request, encode_response
from proto.errors import Errors, KafkaError
from proto.messages.api_versions_response import ApiVersionsResponse
from proto.messages.sasl_authenticate_response import SaslAuthenticateResponse
from proto.messages.sasl_handshake_response import SaslHandshakeResponse
from subscriptions.java_hashset import JavaHashSet

__all__ = ["REAUTH_MIN_INTERVAL_MS", "SaslAuthenticator", "Step", "StepKind"]

log = logging.getLogger(__name__)

# KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: re-authentication at most once a second.
REAUTH_MIN_INTERVAL_MS = 1000

_API_VERSIONS = int(ApiKeys.API_VERSIONS)
_SASL_HANDSHAKE = int(ApiKeys.SASL_HANDSHAKE)
_SASL_AUTHENTICATE = int(ApiKeys.SASL_AUTHENTICATE)


class StepKind(enum.Enum):
    PASS = "pass"  # hand the request to the node's handler
    ANSWER = "answer"  # write ``response``
    FAIL = "fail"  # write ``response`` (if any) after the failed-auth delay, then close
    CLOSE = "close"  # close now, nothing written


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    kind: StepKind
    response: bytes | None = None
    # Why the connection closes (FAIL, CLOSE): for the log, never a secret.
    reason: str = ""


_PASS = Step(StepKind.PASS)


class _State(enum.Enum):
    INITIAL_REQUEST = 1
    HANDSHAKE_OR_VERSIONS_REQUEST = 2
    HANDSHAKE_REQUEST = 3
    AUTHENTICATE = 4
    COMPLETE = 5
    FAILED = 6
    REAUTH_BAD_MECHANISM = 7


class SaslAuthenticator:
    """The SASL state of one connection on a SASL_PLAINTEXT or SASL_SSL listener."""

    def __init__(
        self,
        enabled_mechanisms: Sequence[str],
        credentials: CredentialStore,
        *,
        max_reauth_ms: int = 0,
        token_validator: TokenValidator | None = None,
        wall_ms: Callable[[], int] | None = None,
    ) -> None:
        unknown = [m for m in enabled_mechanisms if m not in MECHANISMS]
        if not enabled_mechanisms or unknown:
            raise ValueError(f"SASL mechanisms not served: {unknown or 'none enabled'}")
        if "OAUTHBEARER" in enabled_mechanisms and (
            token_validator is None or wall_ms is None
        ):
            raise ValueError("OAUTHBEARER needs a token validator and the wall clock")
        # Listed in java.util.HashMap order, as Kafka's SaslServerAuthenticator lists the
        # keys of its per-mechanism map (SCRAM-SHA-512,SCRAM-SHA-256,PLAIN is answered as
        # SCRAM-SHA-512, PLAIN, SCRAM-SHA-256).
        in_hash_order = JavaHashSet()
        in_hash_order.add_all(enabled_mechanisms)
        self._enabled = tuple(in_hash_order)
        self._callbacks = SaslCallbacks(credentials, token_validator)
        # Wall-clock ms: a credential's expiry (an OAUTHBEARER token's exp) is wall time.
        self._wall_ms = wall_ms
        self._max_reauth_ms = max_reauth_ms
        self._state = _State.INITIAL_REQUEST
        self._server: SaslServer | None = None
        self.mechanism: str | None = None
        # Set once authenticated: who (``User:<name>``), until when the session holds
        # (None: no expiry), when the last re-authentication began (None: never).
        self.principal: str | None = None
        self.session_expires_ms: int | None = None
        self._reauth_started_ms: int | None = None
        self._reauthenticating = False
        self._bad_mechanism_message = ""
        # How many exchanges failed and re-authentications succeeded (metrics, tests).
        self.reauthentications = 0

    @property
    def authenticated(self) -> bool:
        return self._state is _State.COMPLETE

    # ------------------------------------------------------------------ entry
    def receive(self, frame: RequestFrame, session: Session, now_ms: int) -> Step:
        state = self._state
        api_key = frame.api_key
        if state is _State.COMPLETE:
            if api_key == _SASL_HANDSHAKE and self._may_reauthenticate(now_ms):
                return self._begin_reauthentication(frame, now_ms)
            expires = self.session_expires_ms
            if expires is not None and now_ms > expires:
                return Step(
                    StepKind.CLOSE,
                    reason="SASL session expired (connections.max.reauth.ms or the credential's "
                    "expiry)",
                )
            return _PASS
        if state is _State.AUTHENTICATE:
            return self._authenticate(frame, session, now_ms)
        if state is _State.REAUTH_BAD_MECHANISM:
            self._state = _State.FAILED
            return Step(StepKind.FAIL, reason=self._bad_mechanism_message)
        if state is _State.FAILED:
            return Step(StepKind.CLOSE, reason="SASL authentication failed")
        return self._handshake_phase(frame)

    # ------------------------------------------------------------------ handshake
    def _handshake_phase(self, frame: RequestFrame) -> Step:
        api_key = frame.api_key
        if api_key == _API_VERSIONS:
            if self._state is _State.HANDSHAKE_REQUEST:
                self._state = _State.FAILED
                return Step(
                    StepKind.CLOSE,
                    reason="Unexpected ApiVersions request received during SASL authentication "
                    "state HANDSHAKE_REQUEST",
                )
            self._state = _State.HANDSHAKE_REQUEST
            return _PASS
        if api_key != _SASL_HANDSHAKE:
            self._state = _State.FAILED
            return Step(
                StepKind.CLOSE,
                reason=f"Unexpected Kafka request of type {api_name(api_key)} during SASL "
                "handshake.",
            )
        return self._handshake(frame)

    def _handshake(self, frame: RequestFrame) -> Step:
        request = self._decode(frame)
        if isinstance(request, Step):
            return request
        mechanism = request.mechanism
        if mechanism not in self._enabled:
            self._state = _State.FAILED
            return Step(
                StepKind.FAIL,
                self._encode(
                    frame,
                    SaslHandshakeResponse(
                        error_code=Errors.UNSUPPORTED_SASL_MECHANISM,
                        mechanisms=self._enabled,
                    ),
                ),
                reason=f"Unsupported SASL mechanism {mechanism}",
            )
        answer = self._encode(
            frame,
            SaslHandshakeResponse(error_code=Errors.NONE, mechanisms=self._enabled),
        )
        if self._reauthenticating and mechanism != self.mechanism:
            # Kafka answers the handshake and fails on the next token (REAUTH_BAD_MECHANISM).
            self._bad_mechanism_message = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.mechanism}'"
            )
            self._state = _State.REAUTH_BAD_MECHANISM
            return Step(StepKind.ANSWER, answer)
        self.mechanism = mechanism
        self._server = new_sasl_server(mechanism, self._callbacks)
        self._state = _State.AUTHENTICATE
        return Step(StepKind.ANSWER, answer)

    # ------------------------------------------------------------------ authenticate
    def _authenticate(self, frame: RequestFrame, session: Session, now_ms: int) -> Step:
        api_key = frame.api_key
        if api_key != _SASL_AUTHENTICATE:
            self._state = _State.FAILED
            reason = f"Unexpected Kafka request of type {api_name(api_key)} during SASL authentication."
            response: object | None = None
            if api_key == _SASL_HANDSHAKE:
                response = SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE)
            elif api_key == _API_VERSIONS:
                response = ApiVersionsResponse(error_code=Errors.ILLEGAL_SASL_STATE)
            if response is None or isinstance(self._decode(frame), Step):
                return Step(StepKind.CLOSE, reason=reason)
            return Step(StepKind.FAIL, self._encode(frame, response), reason=reason)
        request = self._decode(frame)
        if isinstance(request, Step):
            return request
        server = self._server
        assert server is not None
        try:
            token = server.evaluate(bytes(request.auth_bytes))
            if server.complete:
                principal = f"User:{server.authorization_id}"
                if self._reauthenticating and principal != self.principal:
                    previous = (self.principal or "").replace(":", ".", 1)
                    raise SaslAuthenticationFailed(
                        "Cannot change principals during re-authentication from "
                        f"{previous}: {principal.replace(':', '.', 1)}"
                    )
        except SaslFailure as exc:
            self._state = _State.FAILED
            if isinstance(exc, SaslAuthenticationFailed):
                message = str(exc)
            else:
                log.debug("SASL/%s failed: %s", self.mechanism, exc)
                message = (
                    f"Authentication failed during {self._authentication_text()} due to invalid "
                    f"credentials with SASL mechanism {self.mechanism}"
                )
            return Step(
                StepKind.FAIL,
                self._encode(
                    frame,
                    SaslAuthenticateResponse(
                        error_code=Errors.SASL_AUTHENTICATION_FAILED,
                        error_message=message,
                    ),
                ),
                reason=message,
            )
        lifetime_ms = 0
        if server.complete:
            remaining_ms = self._credential_remaining_ms(server)
            lifetime_ms = self._complete(session, principal, now_ms, remaining_ms)
        return Step(
            StepKind.ANSWER,
            self._encode(
                frame,
                SaslAuthenticateResponse(
                    error_code=Errors.NONE,
                    auth_bytes=token,
                    session_lifetime_ms=lifetime_ms,
                ),
            ),
        )

    def _credential_remaining_ms(self, server: SaslServer) -> int | None:
        """How long the credential stays valid (SaslInternalConfigs.CREDENTIAL_LIFETIME_MS):
        an OAUTHBEARER token's exp less now; None for SCRAM and PLAIN, which never expire."""
        expiry = getattr(server, "credential_expiry_wall_ms", None)
        if expiry is None or self._wall_ms is None:
            return None
        return int(expiry) - self._wall_ms()

    def _complete(
        self,
        session: Session,
        principal: str,
        now_ms: int,
        credential_remaining_ms: int | None,
    ) -> int:
        """ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs: the session lasts
        connections.max.reauth.ms, or until the credential expires, whichever is first."""
        if self._reauthenticating:
            self.reauthentications += 1
        self._reauthenticating = False
        self.principal = principal
        session.set_principal(principal)
        self._server = None
        self._state = _State.COMPLETE
        max_reauth = self._max_reauth_ms
        if credential_remaining_ms is None and max_reauth <= 0:
            self.session_expires_ms = None
            return 0
        if credential_remaining_ms is None:
            lifetime = max_reauth
        elif max_reauth <= 0:
            lifetime = credential_remaining_ms
        else:
            lifetime = min(credential_remaining_ms, max_reauth)
        lifetime = max(0, lifetime)
        self.session_expires_ms = now_ms + lifetime
        return lifetime

    # ------------------------------------------------------------------ re-authentication
    def _may_reauthenticate(self, now_ms: int) -> bool:
        """KafkaChannel.maybeBeginServerReauthentication: only with a session lifetime, and
        at most once a second; otherwise the handshake goes to the node (answered 34)."""
        if self.session_expires_ms is None:
            return False
        started = self._reauth_started_ms
        return started is None or now_ms - started >= REAUTH_MIN_INTERVAL_MS

    def _begin_reauthentication(self, frame: RequestFrame, now_ms: int) -> Step:
        self._reauth_started_ms = now_ms
        self._reauthenticating = True
        return self._handshake(frame)

    def _authentication_text(self) -> str:
        return "re-authentication" if self._reauthenticating else "authentication"

    # ------------------------------------------------------------------ codec
    def _decode(self, frame: RequestFrame) -> Any:
        try:
            return decode_request(frame)
        except KafkaError as exc:
            # An unsupported version (SaslHandshake v0 among them) or a malformed body:
            # Kafka cannot answer either during authentication and closes.
            self._state = _State.FAILED
            return Step(
                StepKind.CLOSE,
                reason=f"{api_name(frame.api_key)} v{frame.api_version} refused during SASL "
                f"authentication: {exc}",
            )

    @staticmethod
    def _encode(frame: RequestFrame, response: object) -> bytes:
        return encode_response(
            frame.api_key, frame.api_version, frame.correlation_id, response
        )
