"""Where the quota engine (``quota.QuotaEngine``, a port of Kafka's quota managers) meets
the server, applied the way a Kafka broker applies it (``KafkaApis`` /
``RequestHandlerHelper`` / ``SocketServer``).

| Kafka                                              | here                                      |
|----------------------------------------------------|-------------------------------------------|
| ``ClientRequestQuotaManager`` records handler time | :meth:`QuotaEnforcer.record`, called by   |
| of every request (``maybeRecordAndGetThrottle``)   | the dispatcher after each handler         |
| ``handleProduce`` records the request size against | PushTelemetry: the request's size against |
| ``producer_byte_rate`` (client -> broker bytes)    | ``producer_byte_rate``                    |
| ``sendResponseMaybeThrottleWithControllerQuota``:  | admin mutations: the handler takes a      |
| the mutation quota's throttle joins the request    | quota from :meth:`mutation_quota`; its    |
| quota's                                            | throttle joins in :meth:`record`          |
| the response carries the largest throttle and the  | :meth:`record` returns the largest, the   |
| channel is muted under the quota that produced it  | dispatcher sets ``throttle_time_ms`` and  |
| (KIP-219: response first, then no reads)           | calls :meth:`throttle`, which mutes       |
| one ``ThrottledChannelReaper`` per quota type      | one timer over the engine's delay queue   |
| ``ConnectionQuotas`` in the acceptor               | :meth:`on_accept` (``collector.net.acceptor``)|
| quota configs from the metadata log                | the config store's ``quotas.yaml``,       |
|                                                    | re-applied on every store change          |

Push-interval gating (a Get or Push too early, answered THROTTLING_QUOTA_EXCEEDED by the
ClientMetricsManager with ``throttle_time_ms`` 0, as Kafka answers it) stays its own
throttle; the dispatcher reports each such answer to :meth:`count_push_interval_gate`,
which counts it in the same throttle metrics, as ``push_interval``.

The quota user is the principal's name (``ANONYMOUS`` on PLAINTEXT, as Kafka's
``KafkaPrincipal.getName``), the client id the request header's.  No request type the
collector serves is exempt in Kafka (only cluster actions are), so every request counts.

Metrics (:meth:`collect`, on the server's ``/metrics``): the engine's own, named as Kafka's
JMX export (``kafka_server_produce_byte_rate{user,client_id}``, ``..._throttle_time``,
``kafka_server_request_request_time``, ``kafka_server_controllermutation_tokens``,
``kafka_server_socket_server_metrics_connection_accept_rate{listener|ip}`` ...), plus
counters of what this module decided.  Labels are quota entities (user, client-id,
listener), never a client instance.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from prometheus_client.core import CounterMetricFamily, Metric

from proto import ApiKeys
from quota import (
    Accept,
    ConnectionDecision,
    ControllerMutationQuota,
    Delay,
    QuotaEngine,
    QuotaType,
    Reject,
    RejectReason,
    WaitForSlot,
)
from quota.entity_quotas import InvalidQuotaError
from quota.prometheus import QuotaMetricsCollector

if TYPE_CHECKING:
    from clock import Clock, Timer
    from collector.core.channel import Channel
    from collector.core.context import RequestContext

__all__ = ["PUSH_INTERVAL", "QuotaEnforcer"]

log = logging.getLogger(__name__)

# The label of push-interval gating in the throttle counters, beside the quota types.
PUSH_INTERVAL: Final = "push_interval"

# Metric label of each quota type (Prometheus style of Kafka's QuotaType names).
_QUOTA_LABEL: Final[Mapping[QuotaType, str]] = {
    QuotaType.PRODUCE: "produce",
    QuotaType.FETCH: "fetch",
    QuotaType.REQUEST: "request",
    QuotaType.CONTROLLER_MUTATION: "controller_mutation",
}

# Throttle counters of a (quota, user, client-id) idle this long are dropped, as the
# engine drops an idle client's sensors (Kafka: 1 h inactive-sensor expiry).
_COUNTER_EXPIRY_MS: Final = 3600 * 1000


@dataclass(slots=True)
class _ThrottleCount:
    responses: int = 0
    throttle_ms: int = 0
    last_ms: int = 0


class QuotaEnforcer:
    """The dispatcher's quota recording and throttling, the acceptor's connection checks and
    the admin APIs' mutation quotas; ``collect`` gives the quota metrics (registered with
    ``collector.pipeline.metrics.ScrapeCollector``)."""

    def __init__(self, engine: QuotaEngine, *, clock: Clock) -> None:
        self.engine = engine
        self._clock = clock
        self._reaper: Timer | None = None
        self._reaper_deadline_ms: int | None = None
        # The quota whose throttle record() returned last: throttle() mutes under it.  The
        # dispatcher calls record() then throttle() for one request with no await between,
        # and everything runs on one event loop, so a plain attribute is enough.
        self._throttled_by = QuotaType.REQUEST
        # The mutation quota a handler took for the request being handled (its throttle
        # joins the request's in record()).
        self._pending_mutation: (
            tuple[RequestContext, ControllerMutationQuota] | None
        ) = None
        self._engine_metrics = QuotaMetricsCollector(
            engine.metrics_snapshot, clock.now_ms
        )
        # (quota label, user, client-id) -> throttled responses and their throttle time.
        self.throttles: dict[tuple[str, str, str], _ThrottleCount] = {}
        # (listener, decision) -> count, for refused and held connections.
        self.connection_decisions: dict[tuple[str, str], int] = {}

    # -- requests ------------------------------------------------------------------------
    def record(
        self,
        context: RequestContext,
        request_bytes: int,
        handling_ns: int,
        response: Any = None,
    ) -> int:
        """Record one handled request; the throttle for its response (0 = none).

        Every request's handler time counts against ``request_percentage``; a
        PushTelemetry's size against ``producer_byte_rate`` (Kafka's handleProduce records
        ``request.sizeInBytes``: header and body, ``frame.raw``); an admin mutation's quota
        adds its own.  The largest wins, and names the quota the channel is muted under.
        """
        frame = context.frame
        engine = self.engine
        api_key = frame.api_key
        if self.is_idle():
            # Fast path: the engine would record nothing and return 0 (each manager checks
            # the same flag first).
            return 0
        user = context.session.principal_name
        client_id = frame.client_id
        now_ms = context.now_ms
        if api_key == ApiKeys.PUSH_TELEMETRY:
            return self.record_push(
                user, client_id, len(frame.raw), handling_ns, now_ms
            )
        throttle_ms = engine.record_request(user, client_id, handling_ns, now_ms)
        throttled_by = QuotaType.REQUEST
        pending = self._pending_mutation
        if pending is not None:
            self._pending_mutation = None
            if pending[0] is context:
                mutation_ms = pending[1].throttle_time_ms(now_ms)
                # Kafka: controllerThrottleTimeMs > requestThrottleTimeMs -> mutation quota.
                if mutation_ms > throttle_ms:
                    throttle_ms, throttled_by = (
                        mutation_ms,
                        QuotaType.CONTROLLER_MUTATION,
                    )
        if throttle_ms > 0:
            self._throttled_by = throttled_by
            self._count(
                _QUOTA_LABEL[throttled_by], user, client_id, throttle_ms, now_ms
            )
        return throttle_ms

    def record_push(
        self,
        user: str,
        client_id: str | None,
        push_bytes: int,
        handling_ns: int,
        now_ms: int,
    ) -> int:
        """``record`` for a PushTelemetry, from its parts (the dispatcher's push path builds
        no RequestContext): its handler time against ``request_percentage``, its size
        (header and body, as Kafka's handleProduce records ``request.sizeInBytes``)
        against ``producer_byte_rate``; the larger throttle wins and names the quota the
        channel is muted under."""
        engine = self.engine
        throttle_ms = engine.record_request(user, client_id, handling_ns, now_ms)  # type: ignore[arg-type]
        bytes_ms = engine.record_produce_bytes(user, client_id, push_bytes, now_ms)  # type: ignore[arg-type]
        if throttle_ms > 0 or bytes_ms > 0:
            throttled_by = QuotaType.REQUEST
            if bytes_ms > throttle_ms:
                throttle_ms, throttled_by = bytes_ms, QuotaType.PRODUCE
            self._throttled_by = throttled_by
            self._count(
                _QUOTA_LABEL[throttled_by], user, client_id or "", throttle_ms, now_ms
            )
        return throttle_ms

    def is_idle(self) -> bool:
        """No request or produce quota of any kind is configured (the managers' own
        ``quota_types_enabled`` flags, so an ``AlterClientQuotas`` takes effect on the next
        request) and no mutation quota is pending: ``record`` would return 0."""
        engine = self.engine
        return (
            not engine.request.quota_types_enabled
            and not engine.produce.quota_types_enabled
            and self._pending_mutation is None
        )

    def count_push_interval_gate(
        self, user: str, client_id: str | None, now_ms: int
    ) -> None:
        """A Get or Push refused by push-interval gating (89): counted with the throttles,
        with no throttle time of its own (the client waits for its interval).  The one
        place it is counted (the dispatcher calls it for every such answer)."""
        self._count(PUSH_INTERVAL, user, client_id or "", 0, now_ms)

    def throttle(self, context: RequestContext, throttle_ms: int) -> None:
        """Mute the channel for ``throttle_ms`` under the quota that produced it; its
        response (already built, carrying ``throttle_time_ms``) is still written."""
        self.mute(
            context.channel,
            context.session.principal_name,
            context.frame.client_id,
            throttle_ms,
        )

    def mute(
        self, channel: Channel, user: str, client_id: str, throttle_ms: int
    ) -> None:
        """Mute ``channel`` for ``throttle_ms`` under the quota that produced the throttle
        (the last one counted); the engine's delay queue unmutes it."""
        channel.mute()
        now_ms = self._clock.now_ms()
        self.engine.throttle(
            channel, user, client_id, throttle_ms, now_ms, self._throttled_by
        )
        self._arm(now_ms)

    def count_throttle(
        self,
        quota_type: QuotaType,
        user: str,
        client_id: str,
        throttle_ms: int,
        now_ms: int,
    ) -> None:
        """A throttle a gateway's forwarded request earned under ``quota_type`` (recorded by
        the engine already): counted with the others, and the quota a mute is under."""
        self._throttled_by = quota_type
        self._count(_QUOTA_LABEL[quota_type], user, client_id, throttle_ms, now_ms)

    def mutation_quota(
        self, context: RequestContext, strict: bool
    ) -> ControllerMutationQuota:
        """The controller-mutation quota of one admin request (``record(permits, now_ms)``
        raises ``ThrottlingQuotaExceededError`` when strict and exhausted); its throttle
        time joins the response's in :meth:`record`."""
        quota = self.engine.mutation_quota(
            context.session.principal_name,
            context.frame.client_id,
            strict,
            context.now_ms,
        )
        self._pending_mutation = (context, quota)
        return quota

    def _count(
        self, quota: str, user: str, client_id: str, throttle_ms: int, now_ms: int
    ) -> None:
        key = (quota, user, client_id)
        count = self.throttles.get(key)
        if count is None:
            count = self.throttles[key] = _ThrottleCount()
        count.responses += 1
        count.throttle_ms += throttle_ms
        count.last_ms = now_ms

    def _arm(self, now_ms: int) -> None:
        deadline = self.engine.next_deadline_ms()
        if deadline is None:
            return
        if self._reaper is not None and self._reaper_deadline_ms is not None:
            if self._reaper_deadline_ms <= deadline:
                return
            self._reaper.cancel()
        self._reaper_deadline_ms = deadline
        self._reaper = self._clock.call_later(max(0, deadline - now_ms), self._reap)

    def _reap(self) -> None:
        self._reaper = None
        self._reaper_deadline_ms = None
        now_ms = self._clock.now_ms()
        for throttled in self.engine.pop_expired(now_ms):
            channel: Channel = throttled.channel
            channel.unmute()
        self._arm(now_ms)

    # -- connections ---------------------------------------------------------------------
    def on_accept(self, listener: str, ip: str) -> ConnectionDecision:
        decision = self.engine.on_accept(listener, ip, self._clock.now_ms())
        if not isinstance(decision, Accept):
            key = (listener, _decision_label(decision))
            self.connection_decisions[key] = self.connection_decisions.get(key, 0) + 1
        return decision

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
        now_ms = self._clock.now_ms()
        self.engine.expire_inactive_sensors(now_ms)
        idle = [
            k
            for k, c in self.throttles.items()
            if now_ms - c.last_ms > _COUNTER_EXPIRY_MS
        ]
        for key in idle:
            del self.throttles[key]

    def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()

    # -- metrics -------------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        yield from self._engine_metrics.collect()
        labels = ["quota", "user", "client_id"]
        responses = CounterMetricFamily(
            "ktc_quota_throttled_responses",
            "Responses throttled, by the quota that set their throttle_time_ms (the largest), "
            "and Get/Push answered THROTTLING_QUOTA_EXCEEDED by push-interval gating",
            labels=labels,
        )
        seconds = CounterMetricFamily(
            "ktc_quota_throttle_time_seconds",
            "Throttle time given in responses (the channel is muted that long)",
            labels=labels,
        )
        for (quota, user, client_id), count in sorted(self.throttles.items()):
            responses.add_metric([quota, user, client_id], count.responses)
            seconds.add_metric([quota, user, client_id], count.throttle_ms / 1000.0)
        yield responses
        yield seconds
        decisions = CounterMetricFamily(
            "ktc_quota_connection_decisions",
            "Connections the connection quotas did not accept at once: refused "
            "(per_ip_count, per_ip_rate) or held (rate_delay, wait_for_slot)",
            labels=["listener", "decision"],
        )
        for (listener, decision), total in sorted(self.connection_decisions.items()):
            decisions.add_metric([listener, decision], total)
        yield decisions


def _decision_label(decision: ConnectionDecision) -> str:
    if isinstance(decision, Reject):
        return _REJECT_LABEL[decision.reason]
    if isinstance(decision, Delay):
        return "rate_delay"
    if isinstance(decision, WaitForSlot):
        return "wait_for_slot"
    return "accept"


_REJECT_LABEL: Final[Mapping[RejectReason, str]] = {
    RejectReason.TOO_MANY_CONNECTIONS_PER_IP: "per_ip_count",
    RejectReason.IP_CONNECTION_RATE_EXCEEDED: "per_ip_rate",
}
