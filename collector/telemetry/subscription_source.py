"""The subscription store as the ClientMetricsManager sees it (its ``SubscriptionSource``):
a version, asked on every request, and a resolver, asked when an instance is (re)created.

Compiled, and the version is a plain attribute of the store: asking through the store's
``snapshot()`` ran two interpreted Python calls on every push.

The one place the collector answers other than Kafka: a client library listed in
``subscriptions.wildcard.as.empty.prefix.for`` that gets every metric (Kafka's ``["*"]``) is
answered ``[""]``, the KIP's "all", with the subscription id of that answer (the id it
pushes back). Everything else, including every other client's id, is Kafka's.
"""

from __future__ import annotations

import uuid
from typing import Any

from subscriptions import effective as subscriptions_effective
from subscriptions.effective import EffectiveSubscription
from subscriptions.matching import ClientMetadata
from subscriptions.model import ALL_METRICS, Subscription
from subscriptions.subscription_id import compute_subscription_id

__all__ = ["EVERY_METRIC_AS_PREFIX", "StoreSubscriptions"]

# KIP-714's "all metrics": one empty prefix, which every name starts with.
EVERY_METRIC_AS_PREFIX = ("",)


class StoreSubscriptions:
    """Adapts ``subscriptions.store.ConfigStore`` to the manager's ``SubscriptionSource``."""

    def __init__(
        self,
        store: Any,
        *,
        honour_long_intervals: bool,
        wildcard_as_empty_prefix_for: frozenset[str] = frozenset(),
    ) -> None:
        self._store = store
        self._honour_long_intervals = honour_long_intervals
        self._wildcard_as_empty_prefix_for = wildcard_as_empty_prefix_for

    @property
    def version(self) -> int:
        # ConfigStore.version: the current snapshot's version, kept as an attribute.
        return self._store.version  # type: ignore[no-any-return]

    def resolve(
        self,
        metadata: ClientMetadata,
        client_instance_id: uuid.UUID,
        subscriptions: tuple[Subscription, ...] | None = None,
    ) -> EffectiveSubscription:
        """Under the store's subscriptions in force, or under ``subscriptions`` (a
        proposed change: the preview evaluates it exactly as the change would be)."""
        if subscriptions is None:
            subscriptions = self._store.snapshot().subscriptions
        effective = subscriptions_effective.resolve(
            subscriptions,
            metadata,
            client_instance_id,
            honour_long_intervals=self._honour_long_intervals,
        )
        if (
            effective.metrics == (ALL_METRICS,)
            and metadata.client_software_name in self._wildcard_as_empty_prefix_for
        ):
            return EffectiveSubscription(
                metrics=EVERY_METRIC_AS_PREFIX,
                push_interval_ms=effective.push_interval_ms,
                subscription_id=compute_subscription_id(
                    EVERY_METRIC_AS_PREFIX,
                    effective.push_interval_ms,
                    client_instance_id,
                ),
                matched=effective.matched,
            )
        return effective
