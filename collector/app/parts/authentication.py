"""How a node authenticates clients on its SASL listeners: the SCRAM credentials (PLAIN
checks against them too), OAUTHBEARER's key set and token validator, and the gate in front
of each SASL connection's handler (nothing but ApiVersions and the SASL exchange reaches
the handler before the exchange succeeds)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from clock import Clock
from collector.app.config import CollectorConfig
from collector.app.parts.errors import StartupError
from collector.app.parts.tasks import BackgroundTasks
from collector.core.handler import RequestHandler
from collector.core.session import Session
from collector.net.listeners import EndPoint
from collector.net.sasl_gate import SaslGate
from collector.security.credentials import CredentialStore
from collector.security.credentials_file import DurableCredentialStore
from collector.security.sasl.authenticator import SaslAuthenticator

if TYPE_CHECKING:
    # Imported where used: PyJWT is loaded only by a node that has OAUTHBEARER.
    from collector.security.jwks import JwksSource
    from collector.security.jwt_validator import JwtValidator

__all__ = ["Authentication"]


class Authentication:
    """The node's SASL side; ``failed`` and ``reauthentications`` count what Kafka's
    failed-authentication-total and successful-reauthentication-total count."""

    def __init__(self, config: CollectorConfig, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        # SCRAM credentials (SASL SCRAM and PLAIN check against them), once opened.
        self.credentials: DurableCredentialStore | None = None
        # SASL/OAUTHBEARER: the JWKS and the token validator over it, once opened.
        self.jwks: JwksSource | None = None
        self._token_validator: JwtValidator | None = None
        self.failed = 0
        self.reauthentications = 0

    def open_credentials(self) -> DurableCredentialStore:
        """The SCRAM credential store (``config/scram-credentials.yaml``), opened once."""
        if self.credentials is None:
            try:
                self.credentials = DurableCredentialStore(self._config.data_dir)
            except Exception as exc:
                raise StartupError(f"credentials: {exc}") from exc
        return self.credentials

    async def open_oauthbearer(self) -> None:
        """OAUTHBEARER's keys, read once before the listeners open (in a worker thread:
        an http(s) JWKS is a network fetch); a set that cannot be read fails the start."""
        config = self._config
        url = config.sasl_oauthbearer_jwks_endpoint_url
        if not config.oauthbearer_enabled() or url is None:
            return
        from collector.security.jwks import JwksError, JwksSource
        from collector.security.jwt_validator import JwtValidator

        source = JwksSource(url)
        try:
            await asyncio.to_thread(source.load)
        except JwksError as exc:
            raise StartupError(f"sasl.oauthbearer.jwks.endpoint.url: {exc}") from exc
        self.jwks = source
        self._token_validator = JwtValidator(
            source,
            self._wall_ms,
            expected_issuer=config.sasl_oauthbearer_expected_issuer,
            expected_audiences=config.oauthbearer_audiences(),
            sub_claim_name=config.sasl_oauthbearer_sub_claim_name,
            scope_claim_name=config.sasl_oauthbearer_scope_claim_name,
            clock_skew_seconds=config.sasl_oauthbearer_clock_skew_seconds,
        )

    def keep_keys_fresh(self, tasks: BackgroundTasks) -> None:
        """Read the key set again every ``...jwks.endpoint.refresh.ms`` (with OAUTHBEARER)."""
        if self.jwks is not None:
            from collector.security.jwks import refresh_forever

            refresh = refresh_forever(
                self.jwks,
                self._clock,
                self._config.sasl_oauthbearer_jwks_endpoint_refresh_ms,
            )
            tasks.start(refresh, "jwks-refresh")

    def gate(self, endpoint: EndPoint, inner: RequestHandler) -> RequestHandler:
        """``inner`` behind a SASL authenticator with the listener's mechanisms."""
        config = self._config
        # Without the node's credential store, an empty one: nobody gets in.
        credentials: CredentialStore | None = self.credentials
        if credentials is None:
            credentials = CredentialStore()
        authenticator = SaslAuthenticator(
            config.sasl_mechanisms(endpoint.listener_name),
            credentials,
            max_reauth_ms=config.connections_max_reauth_ms,
            token_validator=self._token_validator,
            wall_ms=self._wall_ms,
        )
        return SaslGate(
            inner,
            authenticator,
            clock=self._clock,
            failed_delay_ms=config.connection_failed_authentication_delay_ms,
            on_failure=self._failed,
            on_reauthenticated=self._reauthenticated,
        ).handler()

    def _wall_ms(self) -> int:
        return self._clock.time_ns() // 1_000_000

    def _failed(self, session: Session) -> None:
        self.failed += 1

    def _reauthenticated(self, session: Session) -> None:
        self.reauthentications += 1
