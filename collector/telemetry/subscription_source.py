"""The subscription store as the ClientMetricsManager sees it (its ``SubscriptionSource``):
a version, asked on every request, and a resolver, asked when an instance is (re)created.

Compiled, and the version is a plain attribute of the store: asking through the store's
``snapshot()`` ran two interpreted Python calls on every push.
"""

from __future__ import annotations

import uuid
from typing import Any

from subscriptions import effective as subscriptions_effective
from subscriptions.effective import EffectiveSubscription
from subscriptions.matching import ClientMetadata
from subscriptions.model import Subscription

__all__ = ["StoreSubscriptions"]


class StoreSubscriptions:
    """Adapts ``subscriptions.store.ConfigStore`` to the manager's ``SubscriptionSource``."""

    def __init__(self, store: Any, *, honour_long_intervals: bool) -> None:
        self._store = store
        self._honour_long_intervals = honour_long_intervals

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
        return subscriptions_effective.resolve(
            subscriptions,
            metadata,
            client_instance_id,
            honour_long_intervals=self._honour_long_intervals,
        )
