"""The subscription a client actually gets: matched subscriptions merged the Kafka way.

Follows ``ClientMetricsManager.createClientInstance`` (server module)::

    interval = 300000; metrics = new HashSet<>(); all = false
    for info in subscriptionMap.values():          # ConcurrentHashMap order of names
        if metadata.isMatch(info.matchPattern()):
            all |= info.metrics().contains("*")
            metrics.addAll(info.metrics())         # each info.metrics() is new HashSet<>(list)
            interval = min(interval, info.intervalMs())
    if all: metrics = {"*"}
    subscriptionId = crc32c(metrics.toString() + interval) ^ instanceId.hashCode()

Consequences kept on purpose: a configured ``interval.ms`` above 300000 is never
delivered (the start value caps it) unless ``honour_long_intervals``; a matched
subscription with no metrics still lowers the interval; ``RequestedMetrics`` is sent in
the merged HashSet's iteration order, which the id also depends on.

Subscription-name order: the given subscriptions are inserted, in the given order, into
a modelled ``ConcurrentHashMap`` (a broker that created them in that order); the store
keeps document order, new names last.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from subscriptions.java_chm import ConcurrentHashMapOrder
from subscriptions.java_hashset import JavaHashSet
from subscriptions.matching import ClientMetadata, matches
from subscriptions.model import ALL_METRICS, DEFAULT_INTERVAL_MS, Subscription
from subscriptions.subscription_id import compute_subscription_id

__all__ = ["SUBSCRIPTION_SET_JDK", "EffectiveSubscription", "merge", "resolve"]

# new HashSet<>(list) sizes its table differently on JDK 17 and JDK 19+ (see
# java_hashset); Kafka 4.x brokers commonly run on 17, and the JDK test uses 17.
SUBSCRIPTION_SET_JDK = 17


@dataclass(frozen=True, slots=True)
class EffectiveSubscription:
    """What GetTelemetrySubscriptions returns to one client instance."""

    metrics: tuple[
        str, ...
    ]  # RequestedMetrics, in Kafka's order; ("*",) = all; () = none
    push_interval_ms: int
    subscription_id: int  # signed int32
    matched: tuple[
        str, ...
    ] = ()  # names of the subscriptions that matched, in merge order


@functools.lru_cache(maxsize=1024)
def _name_order(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(ConcurrentHashMapOrder(names).keys())


@functools.lru_cache(maxsize=4096)
def _set_order(metrics: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(JavaHashSet.copy_of(metrics, jdk=SUBSCRIPTION_SET_JDK))


@functools.lru_cache(maxsize=4096)
def merge(
    matched: tuple[Subscription, ...], honour_long_intervals: bool = False
) -> tuple[tuple[str, ...], int]:
    """Merge subscriptions (already in map order): (metrics in HashSet order, interval)."""
    interval_ms = None if honour_long_intervals else DEFAULT_INTERVAL_MS
    merged = JavaHashSet()
    all_metrics = False
    for subscription in matched:
        all_metrics = all_metrics or ALL_METRICS in subscription.metrics
        merged.add_all(_set_order(subscription.metrics))
        interval_ms = (
            subscription.interval_ms
            if interval_ms is None
            else min(interval_ms, subscription.interval_ms)
        )
    if interval_ms is None:
        interval_ms = DEFAULT_INTERVAL_MS
    metrics = (ALL_METRICS,) if all_metrics else tuple(merged)
    return metrics, interval_ms


def resolve(
    subscriptions: Iterable[Subscription],
    metadata: ClientMetadata,
    instance_id: uuid.UUID,
    honour_long_intervals: bool = False,
) -> EffectiveSubscription:
    """The effective subscription and SubscriptionId of one client instance.

    ``subscriptions`` in creation order; a later one with the same name replaces the
    earlier (``ConcurrentHashMap.put`` keeps the original position).
    """
    by_name: dict[str, Subscription] = {}
    for subscription in subscriptions:
        by_name[subscription.name] = subscription
    ordered = [by_name[name] for name in _name_order(tuple(by_name))]
    matched = tuple(
        subscription for subscription in ordered if matches(subscription, metadata)
    )
    metrics, interval_ms = merge(matched, honour_long_intervals)
    return EffectiveSubscription(
        metrics=metrics,
        push_interval_ms=interval_ms,
        subscription_id=compute_subscription_id(metrics, interval_ms, instance_id),
        matched=tuple(subscription.name for subscription in matched),
    )
