"""The quotas a Kafka broker records per API, on the traffic the gateway forwards
(``KafkaApis``'s handleProduceRequest, handleFetchRequest and the topic-mutation handlers),
with the node's quota engine (``collector.gateway.forwarded_quotas``):

| filter | API | request | response |
|---|---|---|---|
| :class:`ProduceQuota` | Produce | ``producer_byte_rate``: the request's size; acks=0 expects no response | - |
| :class:`FetchQuota` | Fetch | MaxBytes clamped to what the fetch quota allows | ``consumer_byte_rate``: the response's size; throttled: answered empty |
| :class:`MutationQuota` | CreateTopics, CreatePartitions, DeleteTopics | ``controller_mutation``: partitions mutated; strict (newer versions) over the quota: THROTTLING_QUOTA_EXCEEDED here | - |

The request-time quota (``request_percentage``) and the throttle in every forwarded
response are the chain runner's (``forwarding.ClientPair``): every API has them.
"""

from __future__ import annotations

from collector.gateway import requests
from collector.gateway.filters.base import CONTINUE, Body, Exchange, Filter, malformed
from proto import KafkaError

__all__ = ["FetchQuota", "MutationQuota", "ProduceQuota"]


class ProduceQuota(Filter):
    __slots__ = ()

    def on_request(self, exchange: Exchange) -> object:
        services = self.services
        frame = exchange.frame
        exchange.throttle_ms = services.quotas.record_produce_bytes(
            exchange.session.principal_name,
            frame.client_id,
            len(frame.raw),
            services.now_ms(),
        )
        try:
            acks = requests.produce_acks(frame.api_version, frame.body)
        except KafkaError as exc:
            raise malformed(frame, exc) from None
        if acks == 0:
            # The broker sends nothing back, so there is no response to carry a throttle
            # time; the channel is muted all the same (Kafka's handleProduceRequest).
            exchange.expects_response = False
        return CONTINUE


class FetchQuota(Filter):
    __slots__ = ()

    def on_request(self, exchange: Exchange) -> object:
        # MaxBytes clamped to what the client's fetch quota allows (as KafkaApis does).
        exchange.raw = self.services.quotas.fetch_request(
            exchange.frame, exchange.session.principal_name, self.services.now_ms()
        )
        return CONTINUE

    def on_response(self, exchange: Exchange, body: Body) -> Body:
        services = self.services
        throttle_ms = services.quotas.record_fetch_bytes(
            exchange.session.principal_name,
            exchange.frame.client_id,
            len(exchange.response) + 4,
            services.now_ms(),
        )
        if throttle_ms > exchange.response_throttle_ms:
            exchange.response_throttle_ms = throttle_ms
        return body

    def on_throttled(
        self, exchange: Exchange, body: memoryview, throttle_ms: int
    ) -> bytes | None:
        # Kafka answers a fetch it throttles empty, un-recorded (forwarded_quotas.py).
        services = self.services
        return services.quotas.throttled_fetch_response(
            exchange.frame,
            body,
            len(exchange.response) + 4,
            exchange.session.principal_name,
            throttle_ms,
            services.now_ms(),
        )


class MutationQuota(Filter):
    __slots__ = ()

    def on_request(self, exchange: Exchange) -> object:
        services = self.services
        frame = exchange.frame
        try:
            decision = services.quotas.mutation_check(
                frame,
                exchange.session,
                exchange.channel,
                services.now_ms(),
                services.cluster.partition_counts.get,
            )
        except KafkaError as exc:
            raise malformed(frame, exc) from None
        if isinstance(decision, bytes):
            return decision  # strict quota exceeded: answered here, not forwarded
        exchange.throttle_ms = decision
        return CONTINUE
