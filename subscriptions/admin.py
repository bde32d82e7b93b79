"""Admin operations mirroring Apache Kafka's ``kafka-client-metrics.sh``.

Follows ``tools/.../ClientMetricsCommand.java``: ``--alter`` sends SET for each option
given and DELETE for an option given as the empty string (``--interval ""`` resets the
interval to its default); options not given are left alone; ``--generate-name`` names
the subscription with a random Kafka Uuid string. The CLI (``ktc subscriptions ...``)
prints what these return; the messages are the Kafka tool's.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable

from subscriptions.cluster_store import SubscriptionStore
from subscriptions.kafka_uuid import kafka_uuid_to_str, random_instance_id
from subscriptions.model import (
    CONFIG_INTERVAL_MS,
    CONFIG_MATCH,
    CONFIG_METRICS,
    Subscription,
)
from subscriptions.store import ConfigStore

__all__ = [
    "AdminUsageError",
    "alter",
    "alteration",
    "delete",
    "describe",
    "format_describe",
    "list",
    "list_subscriptions",
    "proposed",
]


class AdminUsageError(ValueError):
    """The operation was asked for wrongly (missing or conflicting options, unknown name)."""


def alter(
    store: ConfigStore,
    name: str | None = None,
    generate_name: bool = False,
    metrics: str | None = None,
    interval: str | None = None,
    match: str | None = None,
) -> str:
    """Create or change a subscription; returns its name.

    Each of ``metrics``/``interval``/``match``: ``None`` = untouched, ``""`` = delete the
    key (back to its default), anything else = set. Raises ``AdminUsageError`` for bad
    options and ``proto.errors.KafkaError`` (Kafka's code and message) for bad values.
    """
    subscription_name, to_set, to_delete = alteration(
        name, generate_name, metrics, interval, match
    )
    store.alter_subscription(subscription_name, to_set, to_delete)
    return subscription_name


def proposed(
    store: SubscriptionStore,
    name: str | None = None,
    generate_name: bool = False,
    metrics: str | None = None,
    interval: str | None = None,
    match: str | None = None,
) -> tuple[str, tuple[Subscription, ...]]:
    """What :func:`alter` with the same options would put in force, without storing it:
    ``(name, the subscriptions in force afterwards)``. Raises what ``alter`` raises."""
    subscription_name, to_set, to_delete = alteration(
        name, generate_name, metrics, interval, match
    )
    return subscription_name, store.proposed_subscriptions(
        subscription_name, to_set, to_delete
    )


def alteration(
    name: str | None,
    generate_name: bool,
    metrics: str | None,
    interval: str | None,
    match: str | None,
) -> tuple[str, dict[str, str | None], builtins.list[str]]:
    """The tool's options as (name, keys to SET, keys to DELETE)."""
    if (name is not None) == generate_name:
        raise AdminUsageError(
            "One of --name or --generate-name must be specified with --alter."
        )
    subscription_name = (
        kafka_uuid_to_str(random_instance_id()) if generate_name else name
    )
    assert subscription_name is not None
    options = {
        CONFIG_METRICS: metrics,
        CONFIG_INTERVAL_MS: interval,
        CONFIG_MATCH: match,
    }
    to_set: dict[str, str | None] = {
        key: value for key, value in options.items() if value
    }
    to_delete = [key for key, value in options.items() if value == ""]
    return subscription_name, to_set, to_delete


def delete(store: ConfigStore, name: str) -> None:
    """Remove a subscription (every key deleted)."""
    if not name:
        raise AdminUsageError(
            "A client metrics resource name must be specified with --delete."
        )
    if not store.delete_subscription(name):
        raise AdminUsageError(f"Client metrics subscription {name} does not exist.")


def describe(
    store: ConfigStore, name: str | None = None
) -> list[tuple[str, dict[str, str]]]:
    """``(name, configs)`` for one subscription or all, configs with defaults (Kafka 4.1+)."""
    if name is not None and name not in store.list_names():
        raise AdminUsageError(f"Client metrics subscription {name} does not exist.")
    names = [name] if name is not None else store.list_names()
    return [(each, store.describe(each, include_defaults=True)) for each in names]


def format_describe(described: list[tuple[str, dict[str, str]]]) -> str:
    """The Kafka tool's output: a header line per subscription, then ``  key=value``."""
    lines: list[str] = []
    for name, configs in described:
        lines.append(f"Client metrics configs for {name} are:")
        lines.extend(f"  {key}={value}" for key, value in configs.items())
    return "\n".join(lines)


def list_subscriptions(store: ConfigStore) -> list[str]:
    """Subscription names, in creation order."""
    return store.list_names()


def __getattr__(name: str) -> Callable[[ConfigStore], builtins.list[str]]:
    """``admin.list(store)``, the tool's verb, without shadowing the builtin in this module."""
    if name == "list":
        return list_subscriptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
