"""Subscriptions kept in a Kafka cluster: its own CLIENT_METRICS configs, served as read.

In Kafka, one ``kafka-client-metrics.sh --alter`` reaches every broker through the
cluster's metadata. Several collector nodes (the replicas of a gateway in front of one
cluster) get the same from this store: the subscriptions are the set last read from the
cluster (``install``, called by whoever reads it: ``collector.gateway.cluster_subscriptions``),
so every node that reads the same cluster serves the same subscriptions, and a node that
restarts needs nothing local. Client quotas stay the node's own (the ones its quota engine
enforces), in the local :class:`~subscriptions.store.ConfigStore` this store wraps.

The cluster validated every value when it was altered (Kafka's controller, the same rules
as ``ConfigStore.alter_subscription``), so a stored subscription normally applies as read.
One the collector cannot apply (a ``match`` pattern ``java.util.regex`` takes and RE2
refuses: docs/subscriptions.md) is skipped with one log line, as the local store skips a
subscription in its file that does not validate (KAFKA-19851), and the rest apply.

Order: Kafka merges matching subscriptions in the order its broker learned them (which
decides only where two metric names collide in a Java hash table). A name already known
keeps its place; names new in a read are added in the order the cluster listed them.

While the cluster turns out not to serve CLIENT_METRICS configs (:meth:`use_local`), the
subscriptions are the local store's; a set read later (:meth:`install`: the cluster
serves them now) makes them the cluster's again. Before the first read the snapshot holds
the local store's too, but the node serves none of it: ``SubscriptionRefresh.unread``
(collector/gateway/cluster_subscriptions.py) keeps it unready and its
GetTelemetrySubscriptions answered with a retriable error until a read works.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any

from proto.errors import Errors, KafkaError
from subscriptions.durable_store import OnReload
from subscriptions.model import Subscription
from subscriptions.quota_entities import QuotaEntity, QuotaFilterComponent
from subscriptions.store import ConfigSnapshot, ConfigStore, OnChange, _freeze

__all__ = ["ClusterSubscriptionStore", "SubscriptionStore"]

log = logging.getLogger(__name__)

ClusterConfigs = Mapping[str, Mapping[str, str]]  # name -> {key: value}, as read


class ClusterSubscriptionStore:
    """The node's config store when its subscriptions are a Kafka cluster's.

    Offers what the node, the ClientMetricsManager (``version``, ``snapshot()``) and the
    admin APIs ask of a store; quota operations, reloads and the file watch go to the
    local store.
    """

    def __init__(self, local: ConfigStore, cluster: str) -> None:
        self.local = local
        # Where the subscriptions come from, for log lines and errors ("host:port,...").
        self.cluster = cluster
        self._lock = threading.RLock()
        # The set last read from the cluster, in merge order; None: not read yet.
        self._configs: dict[str, dict[str, str]] | None = None
        self.in_cluster = True
        self._snapshot = self._build(1)
        # A plain attribute: the manager asks it on every request (subscription_source.py).
        self.version = self._snapshot.version
        self._local_version = local.version

    # -- what the reader of the cluster calls -----------------------------------------

    def install(self, read: ClusterConfigs) -> bool:
        """Make ``read`` (the cluster's subscriptions, as listed) the subscriptions in
        force; True when that changed them."""
        with self._lock:
            previous = self._configs or {}
            ordered = {name: dict(read[name]) for name in previous if name in read} | {
                name: dict(configs) for name, configs in read.items()
            }
            if (
                self.in_cluster
                and self._configs is not None
                and ordered == self._configs
            ):
                return False
            self.in_cluster = True
            self._configs = ordered
            self._rebuild()
            return True

    def use_local(self) -> None:
        """The cluster does not serve CLIENT_METRICS configs: serve the local store's
        (until :meth:`install` is given a set read from it)."""
        with self._lock:
            self.in_cluster = False
            self._configs = None
            self._rebuild()

    @property
    def read_from_cluster(self) -> bool:
        """Whether the subscriptions in force are a set read from the cluster."""
        return self.in_cluster and self._configs is not None

    # -- what the node and the manager ask ----------------------------------------------

    def snapshot(self) -> ConfigSnapshot:
        if self.local.version != self._local_version:
            with self._lock:  # the local quotas (or the fallback subscriptions) changed
                self._rebuild()
        return self._snapshot

    def load(self) -> ConfigSnapshot:
        self.local.load()
        return self.snapshot()

    def reload(self) -> bool:
        """SIGHUP: the local store's files (the quotas) are read again."""
        changed = self.local.reload()
        self.snapshot()
        return changed

    async def watch(
        self,
        on_change: OnChange,
        stop_event: asyncio.Event | None = None,
        **options: Any,
    ) -> None:
        """Watch the local store's files (the quotas), as ConfigStore.watch."""

        def changed(_: ConfigSnapshot) -> Awaitable[None] | None:
            return on_change(self.snapshot())

        await self.local.watch(changed, stop_event, **options)

    async def watch_directory(
        self,
        on_change: OnReload = lambda: None,
        stop_event: asyncio.Event | None = None,
        *,
        debounce_ms: int = 300,
        force_polling: bool | None = None,
        ready: asyncio.Event | None = None,
    ) -> None:
        """Watch the local store's directory (the quotas), as ConfigStore does."""
        await self.local.watch_directory(
            on_change,
            stop_event,
            debounce_ms=debounce_ms,
            force_polling=force_polling,
            ready=ready,
        )

    @property
    def last_error(self) -> str | None:
        return self.local.last_error

    @property
    def config_dir(self) -> Any:
        return self.local.config_dir

    # -- subscriptions, read only here: they are altered at the cluster ----------------

    def list_names(self) -> list[str]:
        return list(self.snapshot().subscription_configs)

    def describe(self, name: str, include_defaults: bool = False) -> dict[str, str]:
        return self.snapshot().describe(name, include_defaults)

    def alter_subscription(
        self,
        name: str,
        set: Mapping[str, str | None],
        delete: Iterable[str] = (),
        validate_only: bool = False,
    ) -> Subscription | None:
        if not self.in_cluster:
            return self.local.alter_subscription(name, set, delete, validate_only)
        raise KafkaError(
            f"client-metrics subscriptions are kept in the Kafka cluster "
            f"({self.cluster}): alter them there",
            Errors.INVALID_REQUEST,
        )

    def delete_subscription(self, name: str) -> bool:
        if not self.in_cluster:
            return self.local.delete_subscription(name)
        self.alter_subscription(name, {})
        return False

    def proposed_subscriptions(
        self, name: str, set: Mapping[str, str | None], delete: Iterable[str] = ()
    ) -> tuple[Subscription, ...]:
        """What would be in force after the alteration, by the local store's rules (the
        same validation as the cluster's controller); nothing is written."""
        if not self.in_cluster:
            return self.local.proposed_subscriptions(name, set, delete)
        scratch = _Scratch(self.snapshot().subscription_configs)
        return scratch.proposed(name, set, delete)

    # -- quotas: the node's own ---------------------------------------------------------

    def alter_quotas(
        self,
        entity: Mapping[str, str | None],
        set: Mapping[str, object],
        delete: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        self.local.alter_quotas(entity, set, delete, validate_only)
        self.snapshot()

    def describe_quotas(
        self, components: Sequence[QuotaFilterComponent] = (), strict: bool = False
    ) -> dict[QuotaEntity, dict[str, float]]:
        return self.local.describe_quotas(components, strict)

    # -- internals ----------------------------------------------------------------------

    def _rebuild(self) -> None:
        previous = self._snapshot
        self._local_version = self.local.version
        self._snapshot = self._build(previous.version + 1)
        self.version = self._snapshot.version
        if self.in_cluster:
            self._log_skipped(previous)

    def _build(self, version: int) -> ConfigSnapshot:
        local = self.local.snapshot()
        if not self.in_cluster or self._configs is None:
            configs: Mapping[str, Mapping[str, str]] = local.subscription_configs
        else:
            configs = self._configs
        return _freeze(
            version,
            {name: dict(values) for name, values in configs.items()},
            {entity: dict(values) for entity, values in local.quotas.items()},
        )

    def _log_skipped(self, previous: ConfigSnapshot) -> None:
        snapshot = self._snapshot
        for name, reason in snapshot.skipped.items():
            if previous.skipped.get(name) != reason:
                log.error(
                    "client-metrics subscription %r of the Kafka cluster (%s) skipped, "
                    "the collector cannot apply it: %s",
                    name,
                    self.cluster,
                    reason,
                )
        for name, keys in snapshot.ignored_keys.items():
            if previous.ignored_keys.get(name) != keys:
                log.warning(
                    "client-metrics subscription %r of the Kafka cluster (%s): unknown "
                    "configuration ignored: %s",
                    name,
                    self.cluster,
                    ", ".join(keys),
                )


class _Scratch(ConfigStore):
    """The local store's alteration rules over a set held in memory (never written)."""

    def __init__(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        self._lock = threading.RLock()
        self._configs = {name: dict(values) for name, values in configs.items()}
        self._quota_values = {}
        self._snapshot = _freeze(0, self._configs, {})

    def proposed(
        self, name: str, set: Mapping[str, str | None], delete: Iterable[str]
    ) -> tuple[Subscription, ...]:
        return self.proposed_subscriptions(name, set, delete)


# A node's config store: the local one, or the one whose subscriptions a cluster keeps.
SubscriptionStore = ConfigStore | ClusterSubscriptionStore
