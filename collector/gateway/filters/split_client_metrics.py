"""Client-metrics administration at the gateway (``collector.gateway.admin_split``).

With the subscriptions kept in the cluster (the default) the three APIs are forwarded
untouched, and a forwarded alter of CLIENT_METRICS resources makes the gateway read the
cluster's subscriptions again. With the local store, the CLIENT_METRICS resources of
DescribeConfigs, IncrementalAlterConfigs and ListConfigResources are answered by the node's
own admin APIs (the gateway's subscription store, the node's authorizer), the rest by the
upstream; a request naming both is split and the answers merged in request order."""

from __future__ import annotations

from typing import Any

from collector.gateway.filters.base import (
    CONTINUE,
    Body,
    Exchange,
    Filter,
    LocalAnswers,
    malformed,
)
from proto import KafkaError

__all__ = ["SplitClientMetrics"]


class SplitClientMetrics(Filter):
    __slots__ = ()

    @classmethod
    def answers_here(cls, answers: LocalAnswers) -> bool:
        return True

    def on_request(self, exchange: Exchange) -> object:
        frame = exchange.frame
        try:
            split = self.services.admin.split(frame, exchange.session, exchange.channel)
        except KafkaError as exc:
            raise malformed(frame, exc) from None
        if isinstance(split, bytes):
            return split  # only CLIENT_METRICS resources: answered here
        if split is not None:
            exchange.state, exchange.raw = split
        return CONTINUE

    def on_response(self, exchange: Exchange, body: Body) -> Body:
        split: Any = exchange.state  # what split() returned for this request
        if split is None:
            return body
        return self.services.admin.merge(split, exchange.frame, exchange.response)
