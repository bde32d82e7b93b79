"""Where the quota engine (``quota.QuotaEngine``, a port of Kafka's quota managers) meets
the server.

| Kafka                                            | here                                     |
|--------------------------------------------------|------------------------------------------|
| ``ClientRequestQuotaManager`` records handler    | :meth:`QuotaEnforcer.record`, called by  |
| time per request (``maybeRecordAndGetThrottle``) | the dispatcher after each handler        |
| ``throttle_time_ms`` in the response, channel    | the dispatcher sets the field;           |
| muted until the throttle expires (KIP-219)       | :meth:`QuotaEnforcer.throttle` mutes and |
|                                                  | queues the channel in the engine's       |
|                                                  | ``ThrottledChannelQueue``; one timer     |
|                                                  | unmutes what expired                     |
| ``ConnectionQuotas`` at accept                   | ``collector.acceptor.Acceptor`` asks     |
|                                                  | :meth:`QuotaEnforcer.on_accept`          |
| quota configs from the metadata log              | the config store's ``quotas.yaml``,      |
|                                                  | re-applied on every store change         |

The quota user is the principal's name (``ANONYMOUS`` on PLAINTEXT, as Kafka's
``KafkaPrincipal.getName``), the client id the request header's.  No request type the
collector serves is exempt in Kafka (only cluster actions are), so every request counts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from collector.config import CollectorConfig
from quota import ConnectionDecision, QuotaEngine
from quota.entity_quotas import InvalidQuotaError

if TYPE_CHECKING:
    from collector.dispatch import RequestContext
    from collector.protocol import KafkaProtocol

__all__ = ["QuotaEnforcer", "quota_settings"]

log = logging.getLogger(__name__)


def quota_settings(config: CollectorConfig) -> dict[str, object]:
    """The broker keys QuotaEngineConfig.from_mapping reads, from the collector config."""
    return {
        "quota.window.num": config.quota_window_num,
        "quota.window.size.seconds": config.quota_window_size_seconds,
        "max.connections": config.max_connections,
        "max.connections.per.ip": config.max_connections_per_ip,
        "max.connections.per.ip.overrides": config.max_connections_per_ip_overrides,
        "max.connection.creation.rate": config.max_connection_creation_rate,
        "listeners": config.listeners,
    }


def principal_name(principal: str) -> str:
    """``User:ANONYMOUS`` -> ``ANONYMOUS`` (KafkaPrincipal.getName)."""
    return principal.partition(":")[2] or principal


class QuotaEnforcer:
    """Implements the dispatcher's ``RequestQuota`` and the acceptor's connection checks."""

    def __init__(self, engine: QuotaEngine, clock_ms: Callable[[], int]) -> None:
        self.engine = engine
        self._clock_ms = clock_ms
        self._reaper: asyncio.TimerHandle | None = None
        self._reaper_deadline_ms: int | None = None

    # -- requests ------------------------------------------------------------------------
    def record(self, context: RequestContext, request_bytes: int, handling_ns: int) -> int:
        return self.engine.record_request(
            context.connection.principal_name,
            context.frame.client_id,
            handling_ns,
            context.now_ms,
        )

    def throttle(self, context: RequestContext, throttle_ms: int) -> None:
        connection = context.connection
        connection.mute()
        now_ms = self._clock_ms()
        self.engine.throttle(
            connection,
            connection.principal_name,
            context.frame.client_id,
            throttle_ms,
            now_ms,
        )
        self._arm(now_ms)

    def _arm(self, now_ms: int) -> None:
        deadline = self.engine.next_deadline_ms()
        if deadline is None:
            return
        if self._reaper is not None and self._reaper_deadline_ms is not None:
            if self._reaper_deadline_ms <= deadline:
                return
            self._reaper.cancel()
        self._reaper_deadline_ms = deadline
        self._reaper = asyncio.get_running_loop().call_later(
            max(0, deadline - now_ms) / 1000.0, self._reap
        )

    def _reap(self) -> None:
        self._reaper = None
        self._reaper_deadline_ms = None
        now_ms = self._clock_ms()
        for throttled in self.engine.pop_expired(now_ms):
            connection: KafkaProtocol = throttled.channel
            connection.unmute()
        self._arm(now_ms)

    # -- connections ---------------------------------------------------------------------
    def on_accept(self, listener: str, ip: str) -> ConnectionDecision:
        return self.engine.on_accept(listener, ip, self._clock_ms())

    def on_close(self, listener: str, ip: str) -> None:
        self.engine.on_close(listener, ip)

    # -- configuration -------------------------------------------------------------------
    def apply_entity_quotas(self, quotas: Mapping[Any, Mapping[str, object]]) -> None:
        """Make the engine's entity quotas exactly the store's (invalid: keep the old)."""
        try:
            changes = self.engine.apply_entity_quotas(quotas)
        except InvalidQuotaError as exc:
            log.error("quotas not applied, the previous ones stay in force: %s", exc)
            return
        for change in changes:
            log.info("quota %s %s = %s", change.entity, change.key, change.value)

    def expire_inactive_sensors(self) -> None:
        self.engine.expire_inactive_sensors(self._clock_ms())

    def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
