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

Strict mutation quotas are checked per request: the partitions the request would mutate
(counted as Kafka's controller counts them, ``requests.py``) are recorded at once, and when
the quota is already exceeded the whole request is answered 89 here.  (A broker records
topic by topic, so a request whose own topics cross the limit has its later topics refused
there; here they pass and the next request is refused.  The broker's own quotas, if any,
still apply upstream.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from collector.gateway import requests
from proto import ApiKeys
from quota import QuotaType
from quota.errors import ThrottlingQuotaExceededError

__all__ = ["GatewayQuotas"]

# ControllerApis: newQuotaFor(request, strictSinceVersion): from these versions a request
# over the quota is refused (89); before, it is admitted and throttled after.
_STRICT_SINCE: Final = {
    ApiKeys.CREATE_TOPICS: 6,
    ApiKeys.CREATE_PARTITIONS: 3,
    ApiKeys.DELETE_TOPICS: 5,
}


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

    def mutation_check(
        self,
        frame: Any,
        session: Any,
        channel: Any,
        now_ms: int,
        partition_count: Callable[[Any], int | None],
    ) -> bytes | int:
        """The local THROTTLING_QUOTA_EXCEEDED answer of a strict request over its quota,
        else the throttle the request's mutations earned (0 when none)."""
        request = requests.decode_mutation_request(frame)
        api_key = frame.api_key
        if api_key == ApiKeys.CREATE_TOPICS:
            permits = requests.create_topics_mutations(request)
        elif api_key == ApiKeys.CREATE_PARTITIONS:
            permits = requests.create_partitions_mutations(request, partition_count)
        else:
            permits = requests.delete_topics_mutations(request, partition_count)
        strict = frame.api_version >= _STRICT_SINCE[api_key]
        user = session.principal_name
        client_id = frame.client_id
        quota = self.engine.mutation_quota(user, client_id, strict, now_ms)
        try:
            quota.record(permits, now_ms)
        except ThrottlingQuotaExceededError:
            throttle_ms = quota.throttle_time_ms(now_ms)
            self.enforcer.count_throttle(
                QuotaType.CONTROLLER_MUTATION, user, client_id, throttle_ms, now_ms
            )
            if throttle_ms > 0:
                self.mute(channel, user, client_id, throttle_ms)
            return requests.quota_exceeded_response(frame, throttle_ms)
        throttle_ms = quota.throttle_time_ms(now_ms)
        if throttle_ms > 0:
            self.enforcer.count_throttle(
                QuotaType.CONTROLLER_MUTATION, user, client_id, throttle_ms, now_ms
            )
        return throttle_ms
