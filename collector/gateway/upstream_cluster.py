"""The upstream cluster as the gateway reaches it: how it connects (TLS), who it is when the
cluster requires SASL (its own login), how it asks the cluster for its brokers, and what it
knows of whether the cluster lets in clients that did not authenticate
(:class:`~collector.gateway.authentication.AuthenticationPolicy`).

At start, :meth:`UpstreamCluster.learn_authentication` checks the gateway's listeners
against the cluster and, where it matters and configuration did not say, asks the cluster
(``discovery.ask_authentication``; bounded by the upstream connect timeout):

| the gateway's listeners | the cluster | at start |
|---|---|---|
| any, with ``gateway.upstream.sasl.*`` (a login of its own) | requires SASL (told) | every listener must authenticate its clients (SASL_*), else refused: the cluster would take a client for the gateway's user |
| some SASL | requires SASL (told) | refused: two logins, and the gateway has none of its own |
| some SASL | not told | asked: closes the connection -> refused (two logins); answers -> not required |
| PLAINTEXT or SSL only | not told | asked while ``gateway.telemetry.require.authentication``: closes -> required, answers -> not required, no answer -> unknown (learned from clients' traffic) |
| PLAINTEXT or SSL only | requires SASL (told), or not told and authentication not required | nothing to ask |
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
from collections.abc import Mapping
from typing import Final

from collector.gateway.authentication import (
    SASL_PROTOCOLS,
    AuthenticationPolicy,
    UpstreamAuthentication,
)
from collector.gateway.cluster_admin import ClusterAdmin
from collector.gateway.discovery import Discovered, ask_authentication, discover_brokers
from collector.gateway.upstream_login import LoginSink, UpstreamLogin, log_in
from collector.net.kafka_cluster import KafkaClusterSettings
from collector.net.upstream import Upstream, UpstreamSink, open_upstream

__all__ = ["UpstreamCluster", "UpstreamClusterError", "UpstreamSettings"]

log = logging.getLogger(__name__)

# A SASL listener on the gateway in front of a cluster that requires SASL: the gateway would
# have to log in to the cluster with credentials of its own, which it does not hold.
_TWO_LOGINS: Final = (
    "listeners {0} authenticate clients at the gateway (SASL), but the cluster requires "
    "SASL too ({1}) and the gateway has no login of its own for it: set "
    "gateway.upstream.security.protocol SASL_PLAINTEXT or SASL_SSL and "
    "gateway.upstream.sasl.mechanism, .username, .password; or give the gateway PLAINTEXT "
    "or SSL listeners (clients' SASL then passes through to the cluster)"
)
# The gateway's own upstream login on a connection of a client that did not log in at the
# gateway: the cluster would take that client for the gateway's user.
_BORROWED_LOGIN: Final = (
    "gateway.upstream.sasl.mechanism: the gateway logs in to the cluster for its clients, "
    "so every listener must authenticate them (SASL_PLAINTEXT or SASL_SSL); {0} does not"
)
_CLOSED: Final = "it closed the connection on the gateway's Metadata request"


class UpstreamClusterError(Exception):
    """The gateway cannot work with this cluster as configured (it does not start)."""


@dataclasses.dataclass(frozen=True, slots=True)
class UpstreamSettings:
    """``gateway.upstream.*`` and what depends on it, as the gateway uses them."""

    # The cluster, with the gateway's own login (gateway.upstream.sasl.*), used on every
    # upstream connection.
    cluster: KafkaClusterSettings
    # The login that reads the cluster's CLIENT_METRICS configs when there is no ``login``
    # (gateway.subscriptions.sasl.*).
    subscriptions_login: UpstreamLogin | None = None
    connect_timeout_s: float = 10.0
    max_response_size: int = 104857600
    # gateway.telemetry.require.authentication
    require_authentication_when_unknown: bool = True
    # The bootstrap servers as (host, port) pairs, parsed once.
    bootstrap: tuple[tuple[str, int], ...] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bootstrap", self.cluster.bootstrap())

    @property
    def security_protocol(self) -> str:
        return self.cluster.security_protocol

    @property
    def login(self) -> UpstreamLogin | None:
        return self.cluster.login


class UpstreamCluster:
    """How the gateway reaches the cluster and what it knows of its authentication."""

    def __init__(self, settings: UpstreamSettings) -> None:
        self.settings = settings
        self.ssl_context = _ssl_context(settings)
        # Whether clients must authenticate before the gateway answers them, shared by
        # every client pair (told by configuration, asked at start, learned from traffic).
        self.authentication = AuthenticationPolicy(
            upstream_security_protocol=settings.security_protocol,
            require_when_unknown=settings.require_authentication_when_unknown,
        )

    @property
    def bootstrap(self) -> tuple[tuple[str, int], ...]:
        return self.settings.bootstrap

    async def open(self, host: str, port: int, sink: UpstreamSink) -> Upstream:
        """A connection to one broker whose responses go to ``sink``, logged in first when
        the gateway has a login of its own; raises ``OSError`` or ``TimeoutError``."""
        settings = self.settings
        login = settings.login
        login_sink = LoginSink() if login is not None else None
        upstream = await open_upstream(
            host,
            port,
            sink if login_sink is None else login_sink,
            max_response_size=settings.max_response_size,
            ssl_context=self.ssl_context,
            connect_timeout_s=settings.connect_timeout_s,
        )
        if login is None or login_sink is None:
            return upstream
        try:
            await asyncio.wait_for(
                log_in(upstream, login_sink, login), settings.connect_timeout_s
            )
        except BaseException:
            upstream.close()
            raise
        upstream.set_sink(sink)
        return upstream

    async def discover(self) -> Discovered | None:
        """The cluster's id and brokers, asked of the bootstrap servers (``discovery.py``)."""
        settings = self.settings
        return await discover_brokers(
            settings.bootstrap,
            ssl_context=self.ssl_context,
            timeout_s=settings.connect_timeout_s,
            max_response_size=settings.max_response_size,
        )

    async def learn_authentication(self, listeners: Mapping[str, str]) -> None:
        """Check the gateway's ``listeners`` (name -> security protocol) against the
        cluster, asking it when that decides something (the module's table); raises
        :class:`UpstreamClusterError` for a setup that cannot work."""
        policy = self.authentication
        settings = self.settings
        sasl = sorted(name for name, p in listeners.items() if p in SASL_PROTOCOLS)
        if settings.login is not None:
            # Told (the config requires a SASL protocol with a login); no client's SASL
            # passes through, so every client must log in at the gateway.
            plain = sorted(name for name in listeners if name not in sasl)
            if plain:
                raise UpstreamClusterError(_BORROWED_LOGIN.format(", ".join(plain)))
            return
        if sasl and policy.told:
            raise UpstreamClusterError(
                _TWO_LOGINS.format(
                    ", ".join(sasl),
                    "gateway.upstream.security.protocol " + settings.security_protocol,
                )
            )
        if policy.told or not (policy.require_when_unknown or sasl):
            return
        requires, _ = await ask_authentication(
            settings.bootstrap,
            ssl_context=self.ssl_context,
            timeout_s=settings.connect_timeout_s,
            max_response_size=settings.max_response_size,
        )
        if requires and sasl:
            raise UpstreamClusterError(_TWO_LOGINS.format(", ".join(sasl), _CLOSED))
        if requires:
            policy.learned_required(_CLOSED)
        elif requires is False:
            policy.learned_not_required(
                "it answered the gateway's Metadata request without credentials"
            )
        if policy.state is UpstreamAuthentication.UNKNOWN:
            log.warning(
                "cannot tell yet whether the upstream cluster requires authentication: "
                "until it answers a client, only clients that authenticated are served "
                "telemetry and administration (gateway.telemetry.require.authentication)"
            )

    def subscriptions_admin(self, local_store: str) -> ClusterAdmin | None:
        """The admin client that reads the cluster's CLIENT_METRICS configs; None when the
        cluster requires SASL and the gateway has no login to read them with (the
        subscriptions then come from ``local_store``, which is said once)."""
        settings = self.settings
        login = settings.login or settings.subscriptions_login
        if (
            self.authentication.state is UpstreamAuthentication.REQUIRED
            and login is None
        ):
            log.warning(
                "the upstream cluster (%s) requires SASL and the gateway has no login to "
                "read its CLIENT_METRICS configs with (gateway.subscriptions.sasl.*): "
                "client-metrics subscriptions come from the local store (%s)",
                ",".join(f"{host}:{port}" for host, port in settings.bootstrap),
                local_store,
            )
            return None
        return ClusterAdmin(
            settings.bootstrap,
            ssl_context=self.ssl_context,
            login=login,
            timeout_s=settings.connect_timeout_s,
            max_response_size=settings.max_response_size,
        )


def _ssl_context(settings: UpstreamSettings) -> ssl.SSLContext | None:
    """The TLS context of every upstream connection (SSL and SASL_SSL), or None."""
    try:
        return settings.cluster.ssl_context()
    except (OSError, ssl.SSLError) as exc:
        raise UpstreamClusterError(f"gateway.upstream.ssl: {exc}") from exc
