"""``POST /v1/subscriptions/preview``: what a subscription change would do to the live
client instances, without storing it.

The proposed subscriptions come from ``subscriptions.admin.proposed`` (the same
alteration and loading rules as ``ktc subscriptions alter``), and each instance's new
subscription from ``ClientMetricsManager.subscription_for`` — the evaluation the manager
runs when the real change re-creates the instance on its next request.  An instance is
affected when its new subscription id, metrics or interval differ from the ones it holds
now (what its client was last told).

The cache is walked in pages of ``PAGE`` instances, yielding to the event loop between
pages, so a full cache never stalls the listeners.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from collector.telemetry.client_metrics import (
    ClientMetricsInstance,
    ClientMetricsManager,
)
from subscriptions import admin
from subscriptions.cluster_store import SubscriptionStore
from subscriptions.effective import EffectiveSubscription

__all__ = ["PAGE", "PreviewRequestError", "preview"]

PAGE = 500

# The request body's keys: ``ktc subscriptions alter``'s options (None = untouched,
# "" = reset to the default, as the real alter).
_OPTIONS = ("name", "generate_name", "metrics", "interval", "match")


class PreviewRequestError(ValueError):
    """A body the endpoint refuses (a 400)."""


def _options(body: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(body) - set(_OPTIONS))
    if unknown:
        raise PreviewRequestError(
            f"unknown keys {', '.join(unknown)} (known: {', '.join(_OPTIONS)})"
        )
    options: dict[str, Any] = {}
    for key in _OPTIONS:
        value = body.get(key)
        if key == "generate_name":
            if not isinstance(value, bool | None):
                raise PreviewRequestError("generate_name must be true or false")
            options[key] = bool(value)
        elif value is not None and not isinstance(value, str):
            raise PreviewRequestError(
                f"{key} must be a string (as on the command line)"
            )
        else:
            options[key] = value
    return options


async def preview(
    store: SubscriptionStore, manager: ClientMetricsManager, body: Mapping[str, Any]
) -> dict[str, Any]:
    """The JSON answer: the subscription's name, each affected instance's old and new
    subscription, and how many instances are unaffected.  Raises ``PreviewRequestError``,
    ``admin.AdminUsageError`` or ``KafkaError`` as the real alter would."""
    name, proposed = admin.proposed(store, **_options(body))
    affected: list[dict[str, Any]] = []
    unaffected = 0
    cursor = -1
    while page := manager.instances_after(cursor, PAGE):
        for instance in page:
            new = manager.subscription_for(
                instance.metadata, instance.client_instance_id, proposed
            )
            if _holds(instance, new):
                unaffected += 1
            else:
                affected.append(_change(instance, new))
        cursor = page[-1].client_instance_id.int
        await asyncio.sleep(0)  # let the listeners run between pages
    return {
        "name": name,
        "affected": affected,
        "unaffected": unaffected,
        "stored": False,
    }


def _holds(instance: ClientMetricsInstance, new: EffectiveSubscription) -> bool:
    return (
        new.subscription_id == instance.subscription_id
        and new.metrics == instance.metrics
        and new.push_interval_ms == instance.push_interval_ms
    )


def _change(
    instance: ClientMetricsInstance, new: EffectiveSubscription
) -> dict[str, Any]:
    metadata = instance.metadata
    return {
        "client_instance_id": instance.instance_id_str,
        "client_id": metadata.client_id,
        "client_software_name": metadata.client_software_name,
        "client_software_version": metadata.client_software_version,
        "old": {
            "subscription_id": instance.subscription_id,
            "metrics": list(instance.metrics),
            "push_interval_ms": instance.push_interval_ms,
            "subscriptions": list(instance.matched),
        },
        "new": {
            "subscription_id": new.subscription_id,
            "metrics": list(new.metrics),
            "push_interval_ms": new.push_interval_ms,
            "subscriptions": list(new.matched),
        },
    }
