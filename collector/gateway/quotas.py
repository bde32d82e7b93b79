"""Kafka's quotas on the traffic a gateway forwards, recorded as a broker records them.

The engine, its entity precedence and its config store are the collector's own
(``collector.pipeline.quotas.QuotaEnforcer``); this module says *what* of the forwarded
traffic each quota meters (``KafkaApis`` is the model):

| quota                      | Kafka (``KafkaApis``)                 | here                                 |
|----------------------------|---------------------------------------|--------------------------------------|
| ``producer_byte_rate``     | ``handleProduceRequest`` records      | the Produce request's size, header   |
|                            | ``request.sizeInBytes``               | and body, when it is forwarded       |
| ``consumer_byte_rate``     | ``handleFetchRequest`` records the    | the Fetch response's size, when it   |
|                            | response size                         | comes back                           |
| ``request_percentage``     | handler + network-thread time         | the gateway's own time on the pair   |
| ``controller_mutation_rate`` | ``ControllerMutationQuota.record``  | checked before forwarding: strict    |
|                            | per topic; strict versions answer     | versions get THROTTLING_QUOTA_       |
|                            | THROTTLING_QUOTA_EXCEEDED (89)        | EXCEEDED here, not forwarded         |

Strict mutation quotas are checked per request: when the quota is already exceeded the
whole request is answered 89 here; otherwise every topic's partitions are recorded and the
request is forwarded.  (A broker checks before each topic, so a request whose own topics
cross the limit has its later topics refused there; here they pass and the next request
is refused.  The broker's own quotas, if any, still apply upstream.)
"""

from __future__ import annotations

from typing import Any

from collector.gateway import requests
from quota import QuotaType
from quota.errors import ThrottlingQuotaExceededError

__all__ = ["GatewayQuotas"]


class GatewayQuotas:
    def __init__(self, enforcer: Any) -> None:
        self.enforcer = enforcer
        self.engine = enforcer.engine

    @property
    def active(self) -> bool:
        """Some request, produce or fetch quota is configured (else nothing is recorded)."""
        engine = self.engine
        return bool(
            engine.request.quota_types_enabled
            or engine.produce.quota_types_enabled
            or engine.fetch.quota_types_enabled
        )

    def record_produce_bytes(self, user: str, client_id: str, nbytes: int, now_ms: int) -> int:
        if not self.engine.produce.quota_types_enabled:
            return 0
        throttle_ms = self.engine.record_produce_bytes(user, client_id, nbytes, now_ms)
        if throttle_ms > 0:
            self.enforcer.count_throttle(QuotaType.PRODUCE, user, client_id, throttle_ms, now_ms)
        return throttle_ms

    def record_fetch_bytes(self, user: str, client_id: str, nbytes: int, now_ms: int) -> int:
        if not self.engine.fetch.quota_types_enabled:
            return 0
        throttle_ms = self.engine.record_fetch_bytes(user, client_id, nbytes, now_ms)
        if throttle_ms > 0:
            self.enforcer.count_throttle(QuotaType.FETCH, user, client_id, throttle_ms, now_ms)
        return throttle_ms

    def record_request_time(self, user: str, client_id: str, handling_ns: int, now_ms: int) -> int:
        if not self.engine.request.quota_types_enabled:
            return 0
        throttle_ms = self.engine.record_request(user, client_id, handling_ns, now_ms)
        if throttle_ms > 0:
            self.enforcer.count_throttle(QuotaType.REQUEST, user, client_id, throttle_ms, now_ms)
        return throttle_ms

    def mute(self, channel: Any, user: str, client_id: str, throttle_ms: int) -> None:
        """Mute the client's channel for the gateway's part of a throttle (KIP-219)."""
        self.enforcer.mute(channel, user, client_id, throttle_ms)

    def mutation_check(self, frame: Any, session: Any, channel: Any, now_ms: int) -> bytes | int:
        """The local THROTTLING_QUOTA_EXCEEDED answer of a strict request over its quota,
        else the throttle the request's mutations earned (0 when none)."""
        permits = requests.mutation_permits(frame)
        strict = requests.mutation_is_strict(frame.api_key, frame.api_version)
        user = session.principal_name
        client_id = frame.client_id
        quota = self.engine.mutation_quota(user, client_id, strict, now_ms)
        try:
            for count in permits:
                quota.record(count, now_ms)
        except ThrottlingQuotaExceededError:
            throttle_ms = quota.throttle_time_ms(now_ms)
            self.enforcer.count_throttle(
                QuotaType.CONTROLLER_MUTATION, user, client_id, throttle_ms, now_ms
            )
            if throttle_ms > 0:
                self.mute(channel, user, client_id, throttle_ms)
            return requests.mutation_rejection(frame, throttle_ms)
        throttle_ms = quota.throttle_time_ms(now_ms)
        if throttle_ms > 0:
            self.enforcer.count_throttle(
                QuotaType.CONTROLLER_MUTATION, user, client_id, throttle_ms, now_ms
            )
        return throttle_ms
