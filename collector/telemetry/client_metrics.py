"""The broker-side KIP-714 state machine: a sans-IO port of Apache Kafka's
``server/src/main/java/org/apache/kafka/server/ClientMetricsManager.java`` together with
``server/.../metrics/ClientMetricsInstance.java`` (trunk, 4.x line).

What it keeps, per client instance (one per ``client_instance_id``):

* the metadata captured when the instance was created (client id, software name/version,
  peer address/port), used to match subscriptions;
* the merged subscription (metrics, push interval, subscription id) and the store version
  it was computed from; a newer store version re-creates the instance lazily on its next
  request, exactly like Kafka's ``subscriptionUpdateVersion``;
* the gating timestamps, the terminating flag and the last error;
* for the live view (``GET /v1/clients``): the listener and principal it was created on,
  the names of the subscriptions it matched, when it was first seen and last answered,
  and how many pushes were accepted, refused (by error code) and gated.  The push path
  pays two attribute stores for them; an instance re-created for a newer store version
  keeps them (the client is the same);
* for the conformance view (``GET /v1/clients/conformance``): what a sample of its pushes
  held (``SHAPE_SAMPLE_EVERY``: required metric names, roles and temporalities as bits),
  its terminating pushes and a few gaps between accepted pushes, kept the same way.

Time is always a parameter (``now_ms``, any monotonic millisecond clock); nothing here
sleeps, reads a clock for logic, or touches a socket.  The asyncio layer calls
:meth:`ClientMetricsManager.get_telemetry_subscriptions`,
:meth:`ClientMetricsManager.push_telemetry`, :meth:`ClientMetricsManager.connection_closed`
and, periodically, :meth:`ClientMetricsManager.expire`.

Deliberate differences from Kafka, each small:

* Kafka's timestamps start at 0 on a wall clock, so the first Get of an instance always
  passes the gate.  Our clock may start anywhere (tests start at 0), so "never" is a very
  negative number instead, which keeps the same outcome.
* Kafka expires instances with a timer thread per broker (``SystemTimer``); here one heap
  ordered by deadline, with at most one entry per instance, is drained by :meth:`expire`.
* An LRU eviction also drops the instance's connection mapping (Kafka leaves it until the
  connection closes).
"""

from __future__ import annotations

import bisect
import heapq
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, ValuesView
from typing import Final, Protocol

from clock import SYSTEM_CLOCK, Clock
from collector.core.handler import PushTelemetryHandler
from collector.core.session import Session
from collector.telemetry.application_signals import (
    ApplicationSignals,
    observe_push,
)
from collector.telemetry.payload import MetricsDataValidator, holds_a_metric
from collector.telemetry.push_shape import PushShape, read_shape
from collector.telemetry.stats import ClientMetricsStats
from exporters.base import Exporter
from exporters.context import TelemetryContext
from proto.compression import decompress
from proto.errors import Errors, TelemetryTooLargeError
from proto.messages import (
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from proto.primitives import BytesLike
from subscriptions.effective import EffectiveSubscription
from subscriptions.kafka_uuid import RESERVED_UUIDS, ZERO_UUID
from subscriptions.matching import ClientMetadata
from subscriptions.model import Subscription

__all__ = [
    "DELTA_TEMPORALITY",
    "GAP_SAMPLES",
    "SHAPE_SAMPLE_EVERY",
    "SUPPORTED_COMPRESSION_TYPES",
    "ClientMetricsInstance",
    "ClientMetricsManager",
    "SubscriptionSource",
    "shape_sampled",
]

log = logging.getLogger(__name__)

# The same by value: an int hashes in C, a UUID through its Python __hash__ (push path).
_RESERVED_UUID_INTS = frozenset(u.int for u in RESERVED_UUIDS)

# ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES: a preference list, zstd first.
SUPPORTED_COMPRESSION_TYPES: tuple[int, ...] = (4, 3, 1, 2)
# CompressionType.forId accepts 0..4; NONE is accepted although never advertised.
KNOWN_COMPRESSION_TYPES = frozenset({0, 1, 2, 3, 4})

# ClientMetricsManager.DEFAULT_CACHE_EXPIRY_MS
DEFAULT_CACHE_EXPIRY_MS = 60_000
DEFAULT_CACHE_MAX_SIZE = 16_384

# A Get right after a push rejected with one of these is exempt from the interval gate, so
# the client can fetch the new subscription at once (Kafka PR #19959, 2025; before it the
# guard was written `!= A || != B`, always true).
GET_GATE_EXEMPT_ERRORS = frozenset(
    {Errors.UNKNOWN_SUBSCRIPTION_ID, Errors.UNSUPPORTED_COMPRESSION_TYPE}
)

# "Never happened": far enough in the past that now - NEVER_MS exceeds any interval.
NEVER_MS = -(1 << 62)

# What every Get answer asks of the client: delta sums (the landing and the Prometheus
# view add them up); the conformance view compares what clients send with it.
DELTA_TEMPORALITY: Final = True

# The conformance view's sample of the push path (``shape_sampled``): a push's shape (its
# required metric names, roles and temporalities, push_shape.read_shape) is read on an
# instance's accepted pushes number 0, 1, 2, 4 and 8, then on every 16th.  The walk visits
# every metric: compiled, 99 us for a payload of 300 metrics whose OTLP parse takes 280 us
# (2 vCPUs, loaded), so reading every push would add a third to the push's parse; one in
# 16 adds about 2 %, while a client that pushes a handful of times (a batch job, a test)
# is still read five times.  The gap to the previous accepted push is sampled on the same
# pushes.
SHAPE_SAMPLE_EVERY: Final = 16
# Gaps kept per instance for the median interval (the newest; ~240 pushes at 1 in 16).
GAP_SAMPLES: Final = 15


def shape_sampled(accepted: int) -> bool:
    """Whether the push accepted after ``accepted`` others is sampled."""
    if accepted % SHAPE_SAMPLE_EVERY == 0:
        return True
    return accepted < SHAPE_SAMPLE_EVERY and accepted & (accepted - 1) == 0


class SubscriptionSource(Protocol):
    """The subscription store as the manager sees it: a version and a resolver."""

    @property
    def version(self) -> int: ...

    def resolve(
        self,
        metadata: ClientMetadata,
        client_instance_id: uuid.UUID,
        subscriptions: tuple[Subscription, ...] | None = None,
    ) -> EffectiveSubscription:
        """The instance's subscription under the store's subscriptions, or under
        ``subscriptions`` instead (a proposed change, evaluated without storing it)."""
        ...


class ClientMetricsInstance:
    """Mutable per-instance state (Kafka's ``ClientMetricsInstance``).

    Slotted and small on purpose: the cache holds up to 16,384 of these and the budget is
    2 KiB each including the cache's own bookkeeping.
    """

    __slots__ = (
        "application",
        "client_instance_id",
        "connection_id",
        "errors",
        "expires_at_ms",
        "first_seen_ms",
        "gated",
        "instance_id_str",
        "last_get_answered_ms",
        "last_get_ms",
        "last_known_error",
        "last_push_accepted_ms",
        "last_push_ms",
        "listener_name",
        "matched",
        "metadata",
        "metrics",
        "principal",
        "push_interval_ms",
        "pushes_accepted",
        "empty_pushes",
        "scheduled_at_ms",
        "subscription_id",
        "subscription_version",
        "terminating",
        # The conformance view's sample (SHAPE_SAMPLE_EVERY), bounded: bits and counts.
        "shapes_read",
        "metrics_read",
        "required_seen",
        "roles_seen",
        "temporalities_seen",
        "terminating_pushes",
        "push_gaps",
    )

    def __init__(
        self,
        client_instance_id: uuid.UUID,
        instance_id_str: str,
        metadata: ClientMetadata,
        connection_id: int,
        subscription: EffectiveSubscription,
        subscription_version: int,
    ) -> None:
        self.client_instance_id = client_instance_id
        self.instance_id_str = instance_id_str
        self.metadata = metadata
        self.connection_id = connection_id
        self.subscription_id: int = subscription.subscription_id
        self.metrics: tuple[str, ...] = tuple(subscription.metrics)
        self.push_interval_ms: int = subscription.push_interval_ms
        self.subscription_version = subscription_version
        self.last_get_ms = NEVER_MS
        self.last_push_ms = NEVER_MS
        self.terminating = False
        self.last_known_error = Errors.NONE
        self.expires_at_ms = 0
        # Deadline of this instance's single entry in the expiry heap (None: no entry).
        self.scheduled_at_ms: int | None = None
        # The live view's fields (monotonic ms like the gating timestamps; NEVER_MS: never).
        self.matched: tuple[str, ...] = subscription.matched
        self.listener_name = ""
        self.principal = ""
        self.first_seen_ms = NEVER_MS
        self.last_get_answered_ms = NEVER_MS
        self.last_push_accepted_ms = NEVER_MS
        self.pushes_accepted = 0
        # Accepted pushes that held no metric while the subscription asked for some.
        self.empty_pushes = 0
        # Gets and pushes refused by the push-interval gate.
        self.gated = 0
        # error code -> pushes answered with it; None until the first refused push.
        self.errors: dict[int, int] | None = None
        # Conformance: pushes whose shape was read and the metrics they held, the union of
        # their required-metric, role and temporality bits (push_shape), accepted
        # terminating pushes, and the newest GAP_SAMPLES sampled gaps between accepted
        # pushes in thousandths of the push interval (None until the first).
        self.shapes_read = 0
        self.metrics_read = 0
        self.required_seen = 0
        self.roles_seen = 0
        self.temporalities_seen = 0
        self.terminating_pushes = 0
        self.push_gaps: list[int] | None = None
        # What the pushes said about the client's application (application_signals.py):
        # None until a push was read; read again only while ``streams``.
        self.application: ApplicationSignals | None = None

    def inherit_counters(self, previous: ClientMetricsInstance) -> None:
        """Carry the live view's history over to a re-created instance (same client)."""
        self.listener_name = previous.listener_name
        self.principal = previous.principal
        self.first_seen_ms = previous.first_seen_ms
        self.last_get_answered_ms = previous.last_get_answered_ms
        self.last_push_accepted_ms = previous.last_push_accepted_ms
        self.pushes_accepted = previous.pushes_accepted
        self.empty_pushes = previous.empty_pushes
        self.gated = previous.gated
        self.errors = previous.errors
        self.shapes_read = previous.shapes_read
        self.metrics_read = previous.metrics_read
        self.required_seen = previous.required_seen
        self.roles_seen = previous.roles_seen
        self.temporalities_seen = previous.temporalities_seen
        self.terminating_pushes = previous.terminating_pushes
        self.push_gaps = previous.push_gaps
        self.application = previous.application

    def record_shape(self, shape: PushShape) -> None:
        self.shapes_read += 1
        self.metrics_read += shape.metrics
        self.required_seen |= shape.required
        self.roles_seen |= shape.roles
        self.temporalities_seen |= shape.temporalities

    def record_gap(self, gap_ms: int) -> None:
        """A sampled gap between two accepted pushes, kept relative to the interval."""
        if self.push_interval_ms <= 0:
            return
        gaps = self.push_gaps
        if gaps is None:
            gaps = self.push_gaps = []
        gaps.append(gap_ms * 1000 // self.push_interval_ms)
        if len(gaps) > GAP_SAMPLES:
            del gaps[0]

    def count_error(self, error: int) -> None:
        errors = self.errors
        if errors is None:
            errors = self.errors = {}
        errors[error] = errors.get(error, 0) + 1

    def maybe_update_get_request_timestamp(self, now_ms: int) -> bool:
        """ClientMetricsInstance.maybeUpdateGetRequestTimestamp."""
        last = max(self.last_get_ms, self.last_push_ms)
        if now_ms - last >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def maybe_update_push_request_timestamp(self, now_ms: int) -> bool:
        """ClientMetricsInstance.maybeUpdatePushRequestTimestamp.

        The first push after a Get is accepted whatever the elapsed time: clients stagger
        it (Java 0.5-1.5x, librdkafka 0.8-1.2x the interval), so a 5000 ms subscription
        may see its first push after 2500 ms.
        """
        if (
            self.last_get_ms > self.last_push_ms
            or now_ms - self.last_push_ms >= self.push_interval_ms
        ):
            self.last_push_ms = now_ms
            return True
        return False


class _PushRejected(Exception):
    """A push validation failure with its Kafka error code (ApiException in Kafka)."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error


class _InstanceCache:
    """The instance LRU (Kafka's ``LRUCache<Uuid, ClientMetricsInstance>``) on an
    ``OrderedDict`` keyed by the id's 128-bit int: a lookup and its LRU refresh are two C
    calls and an int hashes in C, where a ``uuid.UUID`` hashes through a Python
    ``__hash__`` (cachetools' LRUCache took ~1.3 us per push in three Python methods).
    Evicting for size tells the manager, before the new instance goes in.

    A sorted list of the keys lets the live view page through the cache in id order from a
    cursor (a bisection, then a slice) without copying or walking the whole cache; it
    changes only when an instance is added or removed, never on a push."""

    __slots__ = ("_entries", "_ids", "_on_evict", "maxsize")

    def __init__(
        self, maxsize: int, on_evict: Callable[[ClientMetricsInstance], None]
    ) -> None:
        if maxsize < 1:
            raise ValueError(f"instance cache size must be at least 1, got {maxsize}")
        self.maxsize = maxsize
        self._on_evict = on_evict
        self._entries: OrderedDict[int, ClientMetricsInstance] = OrderedDict()
        self._ids: list[int] = []  # the keys of _entries, ascending

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, instance_id: uuid.UUID) -> bool:
        return instance_id.int in self._entries

    def values(self) -> ValuesView[ClientMetricsInstance]:
        return self._entries.values()

    def get(self, instance_id: uuid.UUID) -> ClientMetricsInstance | None:
        """The instance, refreshed as most recently used; None when absent."""
        key = instance_id.int
        entries = self._entries
        instance = entries.get(key)
        if instance is not None:
            entries.move_to_end(key)
        return instance

    def peek(self, instance_id: uuid.UUID) -> ClientMetricsInstance | None:
        """The instance without refreshing its LRU position."""
        return self._entries.get(instance_id.int)

    def __setitem__(
        self, instance_id: uuid.UUID, instance: ClientMetricsInstance
    ) -> None:
        key = instance_id.int
        entries = self._entries
        if key in entries:
            entries.move_to_end(key)
        else:
            while len(entries) >= self.maxsize:
                evicted_key, evicted = entries.popitem(last=False)
                self._forget_id(evicted_key)
                self._on_evict(evicted)
            bisect.insort(self._ids, key)
        entries[key] = instance

    def pop(self, instance_id: uuid.UUID) -> ClientMetricsInstance | None:
        instance = self._entries.pop(instance_id.int, None)
        if instance is not None:
            self._forget_id(instance_id.int)
        return instance

    def __delitem__(self, instance_id: uuid.UUID) -> None:
        del self._entries[instance_id.int]
        self._forget_id(instance_id.int)

    def _forget_id(self, key: int) -> None:
        ids = self._ids
        index = bisect.bisect_left(ids, key)
        if index < len(ids) and ids[index] == key:
            del ids[index]

    def after(self, cursor: int, limit: int) -> list[ClientMetricsInstance]:
        """Up to ``limit`` instances whose id (as an int) is above ``cursor``, ascending."""
        ids = self._ids
        start = bisect.bisect_right(ids, cursor)
        entries = self._entries
        return [entries[key] for key in ids[start : start + limit]]


class ClientMetricsManager(PushTelemetryHandler):
    """Instance cache, gating and the Get/Push ladders, in Kafka's order."""

    def __init__(
        self,
        *,
        subscriptions: SubscriptionSource,
        exporter: Exporter,
        instance_id_to_str: Callable[[uuid.UUID], str],
        new_instance_id: Callable[[], uuid.UUID],
        telemetry_max_bytes: int = 1_048_576,
        node_id: int = 1,
        cluster_id: str = "",
        cache_max_size: int = DEFAULT_CACHE_MAX_SIZE,
        cache_expiry_ms: int = DEFAULT_CACHE_EXPIRY_MS,
        # Kafka's ClientMetricsStats sensors (group client-metrics); None: a private set.
        stats: ClientMetricsStats | None = None,
        # Stamps each exported push's context (wall clock); ``now_ms`` is a parameter.
        clock: Clock = SYSTEM_CLOCK,
        # What the push path reads of a payload beyond the parse: its shape, sampled
        # (``/v1/clients/conformance``), and its application's signals
        # (``/v1/applications``); off, the pushes are not read for them.
        read_shapes: bool = True,
        read_applications: bool = True,
    ) -> None:
        self._read_shapes = read_shapes
        self._read_applications = read_applications
        self._subscriptions = subscriptions
        self._exporter = exporter
        self._to_str = instance_id_to_str
        self._new_instance_id = new_instance_id
        self.telemetry_max_bytes = telemetry_max_bytes
        self._node_id = node_id
        self._cluster_id = cluster_id
        self._cache_expiry_ms = cache_expiry_ms
        # A compiled class, not a protocol: its calls from here are direct C calls.
        self._stats = stats if stats is not None else ClientMetricsStats()
        # Rejects bytes that are not an OTLP MetricsData message (raises DecodeError).
        self._validator = MetricsDataValidator()
        # The clock's bound method, read once (one call per exported push).
        self._time_ns: Callable[[], int] = clock.time_ns
        self._cache = _InstanceCache(cache_max_size, self._evicted)
        # Kafka's clientConnectionIdMap: the connection that last (re)created an instance.
        self._connection_instances: dict[int, uuid.UUID] = {}
        # (deadline_ms, instance id): at most one live entry per cached instance.
        self._expiry_heap: list[tuple[int, uuid.UUID]] = []

    # ------------------------------------------------------------------ introspection
    @property
    def instance_count(self) -> int:
        return len(self._cache)

    def instance(self, client_instance_id: uuid.UUID) -> ClientMetricsInstance | None:
        """The cached instance, without touching LRU order (for tests and /debug)."""
        return self._cache.peek(client_instance_id)

    def instances(self) -> list[ClientMetricsInstance]:
        """Every cached instance, least recently used first (for tests and /debug)."""
        return list(self._cache.values())

    def instances_after(self, cursor: int, limit: int) -> list[ClientMetricsInstance]:
        """One page of the cache in instance-id order: up to ``limit`` instances whose id,
        as a 128-bit int, is above ``cursor`` (-1 for the first page).  Costs a bisection
        and ``limit`` lookups, whatever the cache's size."""
        return self._cache.after(cursor, limit)

    def subscription_for(
        self,
        metadata: ClientMetadata,
        client_instance_id: uuid.UUID,
        subscriptions: tuple[Subscription, ...] | None = None,
    ) -> EffectiveSubscription:
        """The subscription an instance gets when it is (re)created, from its metadata as
        captured at creation: under the store's subscriptions, or under ``subscriptions``
        (a proposed change).  The one evaluation: creation, re-creation after a store
        change and the subscription preview all call it."""
        return self._subscriptions.resolve(metadata, client_instance_id, subscriptions)

    @property
    def scheduled_expiries(self) -> int:
        """Entries in the expiry schedule (at most one per cached instance)."""
        return len(self._expiry_heap)

    def connection_instance(self, connection_id: int) -> uuid.UUID | None:
        """The instance a connection last (re)created, while it is cached."""
        return self._connection_instances.get(connection_id)

    # ------------------------------------------------------------------ Get (api 71)
    def get_telemetry_subscriptions(
        self,
        client_instance_id: uuid.UUID,
        session: Session,
        client_id: str | None,
        now_ms: int,
    ) -> GetTelemetrySubscriptionsResponse:
        """ClientMetricsManager.processGetTelemetrySubscriptionRequest."""
        instance_id = client_instance_id
        if instance_id == ZERO_UUID:
            instance_id = self._generate_new_client_id()
        instance = self._client_instance(instance_id, session, client_id, now_ms)

        if (
            not instance.maybe_update_get_request_timestamp(now_ms)
            and instance.last_known_error not in GET_GATE_EXEMPT_ERRORS
        ):
            self._stats.record_throttle(instance.instance_id_str)
            instance.gated += 1
            return GetTelemetrySubscriptionsResponse(
                throttle_time_ms=0, error_code=Errors.THROTTLING_QUOTA_EXCEEDED
            )

        instance.last_known_error = Errors.NONE
        instance.last_get_answered_ms = now_ms
        return GetTelemetrySubscriptionsResponse(
            throttle_time_ms=0,
            error_code=Errors.NONE,
            # Always the effective, non-zero id (Java clients reject a zero one).
            client_instance_id=instance_id,
            subscription_id=instance.subscription_id,
            accepted_compression_types=SUPPORTED_COMPRESSION_TYPES,
            push_interval_ms=instance.push_interval_ms,
            telemetry_max_bytes=self.telemetry_max_bytes,
            delta_temporality=DELTA_TEMPORALITY,
            requested_metrics=instance.metrics,
        )

    # ------------------------------------------------------------------ Push (api 72)
    def push_telemetry(
        self,
        request: PushTelemetryRequest,
        session: Session,
        client_id: str | None,
        correlation_id: int,
        now_ms: int,
    ) -> PushTelemetryResponse:
        """ClientMetricsManager.processPushTelemetryRequest."""
        # The request's fields, read once: a message is a plain Python object, and each
        # attribute read from compiled code is a dictionary lookup.
        instance_id = request.client_instance_id
        terminating = request.terminating
        metrics = request.metrics
        if instance_id is None or instance_id.int in _RESERVED_UUID_INTS:
            return _push_error(Errors.INVALID_REQUEST)

        instance = self._client_instance(instance_id, session, client_id, now_ms)
        compression_type = request.compression_type
        try:
            self._validate_push(
                instance,
                request.subscription_id,
                terminating,
                compression_type,
                metrics,
                now_ms,
            )
        except _PushRejected as rejected:
            log.debug("push from %s rejected: %s", instance.instance_id_str, rejected)
            instance.last_known_error = rejected.error
            instance.count_error(rejected.error)
            return _push_error(rejected.error)
        finally:
            # Kafka stores the flag whatever the outcome (a `finally` block): after any
            # terminating push, even a rejected one, the next push is INVALID_REQUEST.
            instance.terminating = terminating

        if metrics:
            error = self._export(
                instance,
                session,
                client_id,
                correlation_id,
                terminating,
                compression_type,
                metrics,
            )
            if error is not None:
                instance.last_known_error = error
                instance.count_error(error)
                return _push_error(error)

        instance.last_known_error = _NO_ERROR
        accepted = instance.pushes_accepted
        if terminating:
            instance.terminating_pushes += 1
        elif (
            self._read_shapes
            and shape_sampled(accepted)
            and instance.last_push_accepted_ms != NEVER_MS
        ):
            instance.record_gap(now_ms - instance.last_push_accepted_ms)
        instance.pushes_accepted = accepted + 1
        instance.last_push_accepted_ms = now_ms
        return _PUSH_OK

    def _validate_push(
        self,
        instance: ClientMetricsInstance,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        metrics: BytesLike | None,
        now_ms: int,
    ) -> None:
        """ClientMetricsManager.validatePushRequest: first failure wins, in this order."""
        if instance.terminating:
            raise _PushRejected(
                Errors.INVALID_REQUEST,
                "the client already sent a terminating push; no request is accepted after it",
            )
        # Note the order: the timestamp is consumed before the remaining checks, so a push
        # rejected below still uses up the interval (as in Kafka).
        if not instance.maybe_update_push_request_timestamp(now_ms) and not terminating:
            self._stats.record_throttle(instance.instance_id_str)
            instance.gated += 1
            raise _PushRejected(
                Errors.THROTTLING_QUOTA_EXCEEDED,
                "push arrived before the push interval elapsed",
            )
        if subscription_id != instance.subscription_id:
            self._stats.record_unknown_subscription()
            raise _PushRejected(
                Errors.UNKNOWN_SUBSCRIPTION_ID,
                f"subscription id {subscription_id} != current {instance.subscription_id}",
            )
        if compression_type not in KNOWN_COMPRESSION_TYPES:
            raise _PushRejected(
                Errors.UNSUPPORTED_COMPRESSION_TYPE,
                f"unknown compression type {compression_type}",
            )
        size = len(metrics) if metrics is not None else 0
        if size > self.telemetry_max_bytes:
            raise _PushRejected(
                Errors.TELEMETRY_TOO_LARGE,
                f"compressed metrics are {size} bytes, telemetry.max.bytes is {self.telemetry_max_bytes}",
            )

    def _export(
        self,
        instance: ClientMetricsInstance,
        session: Session,
        client_id: str | None,
        correlation_id: int,
        terminating: bool,
        compression_type: int,
        metrics: BytesLike,
    ) -> Errors | None:
        """Decompress (bounded), validate, hand to the exporter.

        Kafka catches Throwable around the plugin call and answers INVALID_RECORD (87),
        which makes clients stop pushing for good.  The one exception is a decompressed
        size over telemetry.max.bytes (the cap #22327 added): trunk answers
        TELEMETRY_TOO_LARGE (118) for it since KAFKA-21076 (apache/kafka#23444), because
        a payload that is small on the wire but inflates past the cap is the client's
        retryable problem, not broken serialization.
        """
        started = _perf_counter()
        try:
            # Both compiled, called directly (the bounded codec, then the OTLP parse).
            payload = decompress(compression_type, metrics, self.telemetry_max_bytes)
            self._validator.validate(payload)
            # Keywords cost nothing here: both classes are compiled, and mypyc resolves
            # them to the same C call as positional arguments.
            context = TelemetryContext(
                client_instance_id=instance.instance_id_str,
                client_id=client_id,
                client_software_name=session.client_software_name,
                client_software_version=session.client_software_version,
                client_source_address=session.client_source_address,
                client_source_port=session.client_source_port,
                listener_name=session.listener_name,
                security_protocol=session.security_protocol,
                principal=session.principal,
                push_interval_ms=instance.push_interval_ms,
                terminating=terminating,
                received_time_unix_nano=self._time_ns(),
                node_id=self._node_id,
                cluster_id=self._cluster_id,
                upstream_cluster_id=session.upstream_cluster_id,
                upstream_node_id=session.upstream_node_id,
                subscription_id=instance.subscription_id,
                compression_type=compression_type,
                correlation_id=correlation_id,
            )
            result = self._exporter.export(context, payload)
        except TelemetryTooLargeError as exc:
            self._stats.record_plugin_error(instance.instance_id_str)
            log.warning(
                "push from client instance %s not exported: %s",
                instance.instance_id_str,
                exc,
            )
            return Errors.TELEMETRY_TOO_LARGE
        except Exception as error:  # Kafka catches Throwable here
            self._stats.record_plugin_error(instance.instance_id_str)
            log.warning(
                "push from client instance %s not exported: %s: %s",
                instance.instance_id_str,
                type(error).__name__,
                error,
            )
            return Errors.INVALID_RECORD
        if not result.ok:
            self._stats.record_plugin_error(instance.instance_id_str)
            log.error(
                "exporter failed for client instance %s: %s",
                instance.instance_id_str,
                result.error,
            )
            if result.retriable:
                # The landing log cannot write now (full or failing disk). 87 or 42 would stop
                # the client's telemetry for good, and so would Kafka's own storage error 56
                # for the Java client (ClientTelemetryUtils.maybeFetchErrorIntervalMs: an
                # unmapped code disables telemetry); 89 makes librdkafka
                # (rdkafka_telemetry.c: rd_kafka_handle_push_telemetry) and the Java client
                # ask for the subscription again after one push interval, then push.
                return Errors.THROTTLING_QUOTA_EXCEEDED
            return Errors.INVALID_RECORD
        self._stats.record_plugin_export(
            instance.instance_id_str, _perf_counter() - started
        )
        if instance.metrics and not holds_a_metric(payload):
            # Asked for metrics, sent none: a client library's quirk or bug that no error
            # answer would show (franz-go under Kafka's ["*"], subscriptions.md).
            instance.empty_pushes += 1
            self._stats.record_empty_push(
                session.client_software_name, session.client_software_version
            )
        if self._read_shapes and shape_sampled(instance.pushes_accepted):
            instance.record_shape(read_shape(payload))
        application = instance.application
        if self._read_applications and (application is None or application.streams):
            # The first push decides; only a Kafka Streams client's pushes are read after
            # it (GET /v1/applications, collector/app/applications.py).
            instance.application = observe_push(payload, application, client_id)
        return None

    # ------------------------------------------------------------------ lifetime
    def connection_closed(self, connection_id: int) -> None:
        """ClientConnectionDisconnectListener.onDisconnect (Kafka 4.0+, KAFKA-17778)."""
        instance_id = self._connection_instances.pop(connection_id, None)
        if instance_id is None:
            return
        instance = self._cache.pop(instance_id)
        if instance is not None:
            self._stats.instance_removed(instance.instance_id_str)

    def expire(self, now_ms: int) -> int:
        """Drop instances idle for max(cache expiry, 3 x push interval); returns how many."""
        expired = 0
        heap = self._expiry_heap
        while heap and heap[0][0] <= now_ms:
            deadline, instance_id = heapq.heappop(heap)
            instance = self._cache.peek(instance_id)
            if instance is None or instance.scheduled_at_ms != deadline:
                continue  # evicted, disconnected or re-created: a stale entry
            if instance.expires_at_ms > now_ms:
                # Re-armed since this entry was pushed: move it to the new deadline.
                instance.scheduled_at_ms = instance.expires_at_ms
                heapq.heappush(heap, (instance.expires_at_ms, instance_id))
                continue
            del self._cache[instance_id]
            if self._connection_instances.get(instance.connection_id) == instance_id:
                del self._connection_instances[instance.connection_id]
            self._stats.instance_removed(instance.instance_id_str)
            expired += 1
        return expired

    # ------------------------------------------------------------------ internals
    def _generate_new_client_id(self) -> uuid.UUID:
        instance_id = self._new_instance_id()
        while instance_id in self._cache or instance_id in RESERVED_UUIDS:
            instance_id = self._new_instance_id()
        return instance_id

    def _client_instance(
        self,
        instance_id: uuid.UUID,
        session: Session,
        client_id: str | None,
        now_ms: int,
    ) -> ClientMetricsInstance:
        """ClientMetricsManager.clientInstance: look up, (re)create, re-arm expiry."""
        instance = self._cache.get(instance_id)
        version = self._subscriptions.version
        if instance is None:
            metadata = ClientMetadata(
                client_instance_id=self._to_str(instance_id),
                client_id=client_id,
                client_software_name=session.client_software_name,
                client_software_version=session.client_software_version,
                client_source_address=session.client_source_address or None,
                client_source_port=str(session.client_source_port),
            )
            instance = self._create(
                instance_id, metadata, session.connection_id, version, None
            )
            instance.listener_name = session.listener_name
            instance.principal = session.principal
            instance.first_seen_ms = now_ms
        elif instance.subscription_version < version:
            # Re-evaluated from the *old* metadata; timestamps, terminating flag and last
            # error start fresh, so the client's next Get is answered at once.
            previous = instance
            instance = self._create(
                instance_id,
                instance.metadata,
                session.connection_id,
                version,
                instance.scheduled_at_ms,
            )
            instance.inherit_counters(previous)

        instance.expires_at_ms = now_ms + max(
            self._cache_expiry_ms, 3 * instance.push_interval_ms
        )
        if instance.scheduled_at_ms is None:
            instance.scheduled_at_ms = instance.expires_at_ms
            heapq.heappush(self._expiry_heap, (instance.expires_at_ms, instance_id))
        return instance

    def _create(
        self,
        instance_id: uuid.UUID,
        metadata: ClientMetadata,
        connection_id: int,
        version: int,
        scheduled_at_ms: int | None,
    ) -> ClientMetricsInstance:
        subscription = self.subscription_for(metadata, instance_id)
        instance = ClientMetricsInstance(
            instance_id,
            metadata.client_instance_id,
            metadata,
            connection_id,
            subscription,
            version,
        )
        instance.scheduled_at_ms = (
            scheduled_at_ms  # inherit the live heap entry, if any
        )
        self._cache[instance_id] = instance
        self._connection_instances[connection_id] = instance_id
        return instance

    def _evicted(self, instance: ClientMetricsInstance) -> None:
        if (
            self._connection_instances.get(instance.connection_id)
            == instance.client_instance_id
        ):
            del self._connection_instances[instance.connection_id]
        self._stats.instance_removed(instance.instance_id_str)


# Bound once: from compiled code, a module attribute or an enum member is a dictionary
# lookup on every push.
_perf_counter: Final = time.perf_counter
_NO_ERROR: Final = Errors.NONE
_PUSH_OK = PushTelemetryResponse(throttle_time_ms=0, error_code=Errors.NONE)
_PUSH_ERRORS = {
    e: PushTelemetryResponse(throttle_time_ms=0, error_code=e) for e in Errors
}


def _push_error(error: Errors) -> PushTelemetryResponse:
    return _PUSH_ERRORS[error]
