"""Keeping a node's subscriptions the cluster's: read the cluster's CLIENT_METRICS configs
every ``refresh_ms``, and at once when asked (after an alter the gateway forwarded), into a
:class:`~subscriptions.cluster_store.ClusterSubscriptionStore`.

A read is what ``kafka-client-metrics.sh --describe`` does: ListConfigResources for
CLIENT_METRICS (v1; v0, ListClientMetricsResources, on Kafka 3.7-4.0), then one
DescribeConfigs of every name listed, keeping the keys the cluster reports as set (not its
defaults). A change made anywhere (through any replica, or at the cluster directly) is
therefore served by every replica at most ``refresh_ms`` plus one read later.

What the node serves, by what its reads have said (docs/scale-out.md, "While the cluster
is unreachable"):

* no read has worked yet: nothing. The node is not ready (:meth:`not_ready_reason`) and a
  GetTelemetrySubscriptions is answered with a retriable error, never with the empty set
  as if it were the cluster's (Kafka's own broker serves only once it has caught up with
  the metadata log);
* a read worked, later ones fail (the cluster unreachable, an error answer): the last set
  read stays in force; its age is exported, and past ``stale_after_ms`` the node says so
  (one WARNING, ``ktc_subscriptions_cluster_stale``). The first failure of a run is one
  WARNING, the rest DEBUG, the first read that works again one INFO;
* the cluster does not serve CLIENT_METRICS configs (Kafka before 3.7, Tansu: no
  ListConfigResources in its ApiVersions; or an answer that refuses the resource type)
  before any read of this node worked: said in one log line, and the local store is
  served, read again every ``refresh_ms`` (a rolling upgrade to 3.7+ is picked up). Once a
  read has worked the cluster is known to serve them, and such an answer (one broker of a
  rolling upgrade or downgrade) is a failed read like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from clock import Clock
from collector.gateway.cluster_admin import ClusterAdmin
from proto import ApiKeys, Errors, KafkaError
from proto.messages import DescribeConfigsRequest, ListConfigResourcesRequest
from proto.messages.describe_configs_request import DescribeConfigsResource
from subscriptions.cluster_store import ClusterSubscriptionStore

__all__ = [
    "DEFAULT_STALE_AFTER_MS",
    "NotServed",
    "SubscriptionRefresh",
    "read_client_metrics",
]

log = logging.getLogger(__name__)

CLIENT_METRICS: Final = 16  # ConfigResource.Type.CLIENT_METRICS
_DEFAULT_CONFIG: Final = 5  # DescribeConfigsResponse.ConfigSource.DEFAULT_CONFIG
# After an alter the gateway forwarded, read once at once and once this much later: the
# broker that answered the alter and the one read may apply the change a moment apart.
FOLLOW_UP_MS: Final = 500
# How old the last set read may be before the node says it may not be the cluster's any
# more (``gateway.subscriptions.stale.after.ms``, ``subscriptions.kafka.stale.after.ms``):
# 30 reads at the default refresh of 2000 ms.
DEFAULT_STALE_AFTER_MS: Final = 60_000
# What a DescribeConfigs of a resource type the broker does not know answers. Only these:
# any other error (UNKNOWN_SERVER_ERROR included) is a failed read, the cluster's
# subscriptions unknown for now, not the local store's.
_NOT_SERVED_ERRORS: Final = frozenset(
    {Errors.INVALID_REQUEST, Errors.UNSUPPORTED_VERSION, Errors.INVALID_CONFIG}
)


class NotServed(Exception):
    """The cluster does not serve CLIENT_METRICS configs (the message says how we know)."""


async def read_client_metrics(admin: ClusterAdmin) -> dict[str, dict[str, str]]:
    """The cluster's client-metrics subscriptions, name -> the keys set, in listing order.
    Raises NotServed, OSError (no answer) or KafkaError (an error answer)."""
    versions = await admin.api_versions()
    listing = versions.get(ApiKeys.LIST_CONFIG_RESOURCES)
    describing = versions.get(ApiKeys.DESCRIBE_CONFIGS)
    if listing is None or describing is None:
        raise NotServed(
            "its ApiVersions lists no ListConfigResources (Kafka 3.7+ has it)"
        )
    list_version = min(listing[1], 1)
    listed = await admin.ask(
        ApiKeys.LIST_CONFIG_RESOURCES,
        list_version,
        ListConfigResourcesRequest(
            resource_types=(CLIENT_METRICS,) if list_version >= 1 else ()
        ),
    )
    if listed.error_code != 0:
        _raise(listed.error_code, None, "ListConfigResources")
    names = [
        r.resource_name
        for r in listed.config_resources
        if r.resource_type == CLIENT_METRICS
    ]
    if not names:
        return {}
    described = await admin.ask(
        ApiKeys.DESCRIBE_CONFIGS,
        min(describing[1], 4),
        DescribeConfigsRequest(
            resources=tuple(
                DescribeConfigsResource(
                    resource_type=CLIENT_METRICS,
                    resource_name=name,
                    configuration_keys=None,
                )
                for name in names
            )
        ),
    )
    read: dict[str, dict[str, str]] = {}
    for result in described.results:
        if result.error_code == Errors.RESOURCE_NOT_FOUND:
            continue  # deleted between the listing and the describe
        if result.error_code != 0:
            _raise(result.error_code, result.error_message, "DescribeConfigs")
        configs = {
            config.name: config.value
            for config in result.configs
            if config.value is not None and config.config_source != _DEFAULT_CONFIG
        }
        if configs:
            read[result.resource_name] = configs
    return read


def _raise(code: int, message: str | None, api: str) -> None:
    try:
        error = Errors(code)
    except ValueError:
        error = Errors.UNKNOWN_SERVER_ERROR
    text = f"{api} answered {error.name} ({code})" + (f": {message}" if message else "")
    if error in _NOT_SERVED_ERRORS:
        raise NotServed(text)
    raise KafkaError(text, error)


class ReadWakeups:
    """When a :class:`SubscriptionRefresh` reads next: every ``refresh_ms`` on ``clock``,
    at once after :meth:`soon`, and once more ``FOLLOW_UP_MS`` after that."""

    def __init__(self, clock: Clock, refresh_ms: int) -> None:
        self._clock = clock
        self.refresh_ms = refresh_ms
        self._asked = asyncio.Event()
        self._follow_up = False

    def soon(self) -> None:
        self._follow_up = True
        self._asked.set()

    async def wait(self) -> None:
        """Until ``refresh_ms`` have passed, or :meth:`soon` was called."""
        wait_ms = self.refresh_ms
        if self._follow_up and not self._asked.is_set():
            self._follow_up = False
            wait_ms = min(wait_ms, FOLLOW_UP_MS)
        asked = asyncio.ensure_future(self._asked.wait())
        timer = asyncio.ensure_future(self._clock.sleep(wait_ms))
        try:
            await asyncio.wait({asked, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (asked, timer):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._asked.clear()


class SubscriptionRefresh:
    """Reads the cluster's subscriptions into ``store`` every ``refresh_ms`` and at once
    after :meth:`soon`: ``await refresh()`` once, then ``await run()``."""

    def __init__(
        self,
        store: ClusterSubscriptionStore,
        read: Callable[[], Awaitable[dict[str, dict[str, str]]]],
        *,
        clock: Clock,
        refresh_ms: int,
        stale_after_ms: int = DEFAULT_STALE_AFTER_MS,
        on_change: Callable[[], object] = lambda: None,
    ) -> None:
        self.store = store
        self._read = read
        self._clock = clock
        self._wakeups = ReadWakeups(clock, refresh_ms)
        self.stale_after_ms = stale_after_ms
        self._on_change = on_change
        self._failing = False
        self._said_stale = False
        # Reads that worked and that failed, for /metrics.
        self.reads = 0
        self.failures = 0
        # Why the last read failed (None after one that worked), for /readyz.
        self.last_error: str | None = None
        # The clock's time of the last read that worked, and of the last one that changed
        # the subscriptions (ms), None before the first.
        self.last_read_ms: int | None = None
        self.changed_ms: int | None = None

    def soon(self) -> None:
        """Read now (an alter was forwarded), and once more shortly after."""
        self._wakeups.soon()

    # -- what the node asks -------------------------------------------------------------

    @property
    def unread(self) -> bool:
        """No read has worked and the cluster is not known to lack CLIENT_METRICS
        configs: the subscriptions in force are unknown."""
        return self.store.in_cluster and self.last_read_ms is None

    def not_ready_reason(self) -> str | None:
        """/readyz: not ready until the cluster's subscriptions have been read once."""
        if not self.unread:
            return None
        return (
            f"the client-metrics subscriptions of the cluster ({self.store.cluster}) "
            f"have not been read yet: {self.last_error or 'reading'}"
        )

    def read_age_ms(self) -> int | None:
        """Since the last read that worked (ms); None before it or on the local store."""
        if self.last_read_ms is None or not self.store.in_cluster:
            return None
        return self._clock.now_ms() - self.last_read_ms

    @property
    def stale(self) -> bool:
        """The subscriptions in force are not known to be the cluster's now: never read,
        or the last read that worked is older than ``stale_after_ms``."""
        if self.unread:
            return True
        age = self.read_age_ms()
        return age is not None and age > self.stale_after_ms

    # -- reading ------------------------------------------------------------------------

    async def refresh(self) -> bool:
        """One read; whether it worked (the cluster's set, or the local store's on a
        cluster known not to serve them)."""
        try:
            read = await self._read()
        except NotServed as exc:
            if self.last_read_ms is None:
                self._not_served(exc)
                return True
            self._failed(exc)
            return False
        except (OSError, TimeoutError, KafkaError) as exc:
            self._failed(exc)
            return False
        if self._failing:
            self._failing = False
            log.info("client-metrics subscriptions read from the cluster again")
        self.reads += 1
        self.last_error = None
        self._said_stale = False
        self.last_read_ms = self._clock.now_ms()
        if self.store.install(read):
            self.changed_ms = self.last_read_ms
            log.info(
                "client-metrics subscriptions from the cluster: %d (version %d)",
                len(read),
                self.store.version,
            )
            self._on_change()
        return True

    def _not_served(self, exc: NotServed) -> None:
        if not self.store.in_cluster:
            return  # said when it was first seen; read again every refresh
        log.warning(
            "the upstream cluster (%s) does not serve CLIENT_METRICS configs: %s; "
            "client-metrics subscriptions come from the local store (%s), and the "
            "cluster is asked again every %d ms",
            self.store.cluster,
            exc,
            self.store.config_dir,
            self._wakeups.refresh_ms,
        )
        self.store.use_local()
        self._on_change()

    def _failed(self, exc: Exception) -> None:
        self.failures += 1
        self.last_error = str(exc) or type(exc).__name__
        level = logging.DEBUG if self._failing else logging.WARNING
        self._failing = True
        if self.last_read_ms is None:
            log.log(
                level,
                "cannot read the client-metrics subscriptions of the cluster (%s): %s; "
                "not ready, and no subscription is served until a read works",
                self.store.cluster,
                self.last_error,
            )
            return
        log.log(
            level,
            "cannot read the client-metrics subscriptions of the cluster (%s): %s; "
            "the last set read stays in force",
            self.store.cluster,
            self.last_error,
        )
        if self.stale and not self._said_stale:
            self._said_stale = True
            log.warning(
                "the client-metrics subscriptions in force were read from the cluster "
                "(%s) %.1f s ago, longer than the %d ms allowed: they may not be the "
                "cluster's any more",
                self.store.cluster,
                (self.read_age_ms() or 0) / 1000,
                self.stale_after_ms,
            )

    async def run(self) -> None:
        """Wait, read, and again, until cancelled (the first read is :meth:`refresh`, at
        start)."""
        while True:
            await self._wakeups.wait()
            await self.refresh()
