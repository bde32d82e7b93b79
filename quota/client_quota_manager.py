"""``ClientQuotaManager``: per-entity rate quotas (produce/fetch bytes; base of request/mutation).

Follows ``server/.../quota/ClientQuotaManager.java`` (``core/.../ClientQuotaManager.scala`` on
older trunks) with its ``DefaultQuotaCallback``.

One sensor per (quota type, resolved entity).  The limit lives in the sensor's metric
config and the usage in its ``Rate``; changing a limit replaces the config and keeps the
usage.  A client's entity is resolved through the precedence table in ``entity.py``.

Fast path: while no quota of this type is configured (``quota_types_enabled`` is 0), the
record calls return 0 before touching any sensor.  When exactly one level kind is in use
(client-id only, user only, or (user, client-id) only) the metric tags follow directly from
it; only with several kinds is the eight-rank table walked.  Kafka keeps a reference count
per kind so that removing the last quota of a kind turns its bit off again.

With quotas, a (user, client-id) -> sensors cache makes the lookup one dict probe per
request (Kafka computes the tags and looks the sensors up by name every time); the cache is
dropped whenever a quota changes (the resolution may change) or a sensor is removed.

Not thread-safe: drive it from one event loop (Kafka's read/write lock guards what the
event loop serialises for us).
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

from quota.entity import (
    DEFAULT,
    QUOTA_PRECEDENCE,
    ClientQuotaEntity,
    EntityKey,
    PrecedenceLevel,
    sanitize_user,
)
from quota.errors import QuotaViolationError
from quota.metric import MetricName
from quota.metric_config import MetricConfig, Quota
from quota.metrics import Metrics
from quota.quota_type import QuotaType
from quota.rate import Rate
from quota.sampled_stat import Avg
from quota.sensor import Sensor
from quota.throttle import max_value_in_quota_window, throttle_time_ms
from quota.throttled_channel import ThrottledChannelQueue

__all__ = [
    "INACTIVE_SENSOR_EXPIRATION_MS",
    "UNLIMITED",
    "ClientQuotaManager",
    "ClientQuotaManagerConfig",
    "ClientSensors",
    "QuotaTypes",
]

# Purge per-client sensors after one hour without a recording.
INACTIVE_SENSOR_EXPIRATION_MS: Final = 3600 * 1000
# The limit reported for an entity with no quota (Kafka: Long.MAX_VALUE as a double).
UNLIMITED: Final = float(2**63 - 1)
# Cached (user, client-id) -> sensors lookups; dropped wholesale past this size.
_MAX_CACHED_CLIENTS: Final = 65_536

USER_TAG: Final = "user"
CLIENT_ID_TAG: Final = "client-id"


class QuotaTypes(enum.IntFlag):
    """Which kinds of entity currently carry a quota (``ClientQuotaManager`` constants)."""

    NO_QUOTAS = 0
    CLIENT_ID = 1
    USER = 2
    USER_CLIENT_ID = 4


# The single-kind fast paths of quotaMetricTags: kind -> (keep user tag, keep client-id tag).
_SINGLE_KIND_TAGS: Final[dict[int, tuple[bool, bool]]] = {
    QuotaTypes.NO_QUOTAS.value: (False, True),
    QuotaTypes.CLIENT_ID.value: (False, True),
    QuotaTypes.USER.value: (True, False),
    QuotaTypes.USER_CLIENT_ID.value: (True, True),
}

# Ranks grouped by the tag shape they produce, in precedence order (quotaLimit's lookup).
_LEVELS_BY_TAG_SHAPE: Final[dict[tuple[bool, bool], tuple[PrecedenceLevel, ...]]] = {
    shape: tuple(level for level in QUOTA_PRECEDENCE if level.tag_shape == shape)
    for shape in {level.tag_shape for level in QUOTA_PRECEDENCE}
}


def _kind_of(key: EntityKey) -> QuotaTypes:
    user, client_id = key
    if user is not None and client_id is not None:
        return QuotaTypes.USER_CLIENT_ID
    return QuotaTypes.USER if user is not None else QuotaTypes.CLIENT_ID


@dataclass(frozen=True, slots=True)
class ClientQuotaManagerConfig:
    """``quota.window.num`` samples of ``quota.window.size.seconds`` each."""

    num_quota_samples: int = 11
    quota_window_size_seconds: int = 1

    def __post_init__(self) -> None:
        if self.num_quota_samples < 1:
            raise ValueError(
                f"quota.window.num must be at least 1, got {self.num_quota_samples}"
            )
        if self.quota_window_size_seconds < 1:
            raise ValueError(
                "quota.window.size.seconds must be at least 1, "
                f"got {self.quota_window_size_seconds}"
            )


@dataclass(frozen=True, slots=True)
class ClientSensors:
    """The quota sensor and throttle-time sensor a client records into."""

    metric_tags: tuple[
        str, str
    ]  # (user, client-id) as resolved; "" = not part of the entity
    quota_sensor: Sensor
    throttle_time_sensor: Sensor


class _QueueSize:
    """A gauge over the delay queue (Kafka keeps a CumulativeSum in step with it)."""

    __slots__ = ("_queue", "_quota_type")

    def __init__(self, queue: ThrottledChannelQueue[Any], quota_type: str) -> None:
        self._queue = queue
        self._quota_type = quota_type

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        pass

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return float(self._queue.size(self._quota_type))


class ClientQuotaManager:
    # The quota metric's name in Kafka's metrics group for this manager.
    quota_metric_name_str = "byte-rate"
    quota_metric_description = "Tracking byte-rate per user/client-id"

    def __init__(
        self,
        config: ClientQuotaManagerConfig,
        metrics: Metrics,
        quota_type: QuotaType,
        now_ms: int,
        queue: ThrottledChannelQueue[Any] | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.quota_type = quota_type
        self.queue: ThrottledChannelQueue[Any] = (
            queue if queue is not None else ThrottledChannelQueue()
        )
        # A plain int (a QuotaTypes bit set): the fast path tests it on every request.
        self.quota_types_enabled: int = QuotaTypes.NO_QUOTAS.value
        # Configured limits by entity key (DefaultQuotaCallback.overriddenQuotas).
        self._overridden_quotas: dict[EntityKey, float] = {}
        self._active_entities_by_kind: Counter[QuotaTypes] = Counter()
        self._sensors_by_client: dict[tuple[str, str], ClientSensors] = {}
        metrics.add_removal_listener(self._forget_cached_sensors)
        delay_queue_sensor = metrics.sensor(f"{quota_type}-delayQueue", now_ms)
        delay_queue_sensor.add(
            MetricName(
                "queue-size",
                str(quota_type),
                description="Tracks the size of the delay queue",
            ),
            _QueueSize(self.queue, str(quota_type)),
        )

    # -- recording -------------------------------------------------------------------------

    @property
    def quotas_enabled(self) -> bool:
        return self.quota_types_enabled != QuotaTypes.NO_QUOTAS

    def maybe_record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        """Record ``value`` if any quota of this type exists; the throttle time in ms (0 = none)."""
        if not self.quota_types_enabled:
            return 0
        return self.record_and_get_throttle_time_ms(user, client_id, value, now_ms)

    def record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        sensors = self._sensors_by_client.get((user, client_id))
        if sensors is None:
            sensors = self.get_or_create_quota_sensors(user, client_id, now_ms)
        try:
            sensors.quota_sensor.record(value, now_ms, True)
        except QuotaViolationError as violation:
            return self._throttle_time_ms(violation, now_ms)
        return 0

    def record_no_throttle(
        self, user: str, client_id: str, value: float, now_ms: int
    ) -> None:
        """Record without checking; the next checked record sees the sum."""
        sensors = self.get_or_create_quota_sensors(user, client_id, now_ms)
        sensors.quota_sensor.record(value, now_ms, False)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (Kafka: unrecordQuotaSensor; a throttled fetch returns
        no data, so it used none)."""
        sensors = self.get_or_create_quota_sensors(user, client_id, now_ms)
        sensors.quota_sensor.unrecord(value, now_ms)

    def max_value_in_quota_window(
        self, user: str, client_id: str, now_ms: int
    ) -> float:
        """The largest value not guaranteed to throttle (limit · (N − 1) · W), or +inf."""
        if not self.quota_types_enabled:
            return float("inf")
        sensors = self.get_or_create_quota_sensors(user, client_id, now_ms)
        limit = self._quota_limit(sensors.metric_tags)
        if limit is None:
            return float("inf")
        return max_value_in_quota_window(
            limit, self.config.num_quota_samples, self.config.quota_window_size_seconds
        )

    def throttle(
        self,
        user: str,
        client_id: str,
        channel: object,
        throttle_time_ms: int,
        now_ms: int,
    ) -> None:
        """Mute ``channel`` for ``throttle_time_ms``: record it and put it on the delay queue."""
        if throttle_time_ms <= 0:
            return
        sensors = self.get_or_create_quota_sensors(user, client_id, now_ms)
        sensors.throttle_time_sensor.record(throttle_time_ms, now_ms)
        self.queue.add(channel, throttle_time_ms, now_ms, str(self.quota_type))

    def quota(self, user: str, client_id: str) -> Quota:
        """The limit that applies to (user, client-id) now (UNLIMITED when none)."""
        tags = self._quota_metric_tags(sanitize_user(user), client_id)
        limit = self._quota_limit(tags)
        return Quota.upper_bound(UNLIMITED if limit is None else limit)

    def _throttle_time_ms(self, violation: QuotaViolationError, now_ms: int) -> int:
        return throttle_time_ms(violation, now_ms)

    # -- sensors ---------------------------------------------------------------------------

    def get_or_create_quota_sensors(
        self, user: str, client_id: str, now_ms: int
    ) -> ClientSensors:
        cache_key = (user, client_id)
        cached = self._sensors_by_client.get(cache_key)
        if cached is not None:
            return cached
        tags = self._quota_metric_tags(sanitize_user(user), client_id)
        suffix = f"{tags[0]}:{tags[1]}"
        quota_sensor_name = f"{self.quota_type}-{suffix}"
        quota_sensor = self.metrics.get_sensor(quota_sensor_name)
        if quota_sensor is None:
            quota_sensor = self.metrics.sensor(
                quota_sensor_name,
                now_ms,
                inactive_expiration_ms=INACTIVE_SENSOR_EXPIRATION_MS,
            )
            self._register_quota_metrics(quota_sensor, tags)
        throttle_sensor_name = f"{self.quota_type}ThrottleTime-{suffix}"
        throttle_sensor = self.metrics.get_sensor(throttle_sensor_name)
        if throttle_sensor is None:
            throttle_sensor = self.metrics.sensor(
                throttle_sensor_name,
                now_ms,
                inactive_expiration_ms=INACTIVE_SENSOR_EXPIRATION_MS,
            )
            throttle_sensor.add(
                MetricName(
                    "throttle-time",
                    str(self.quota_type),
                    _tag_pairs(tags),
                    "Tracking average throttle-time per user/client-id",
                ),
                Avg(),
            )
        sensors = ClientSensors(tags, quota_sensor, throttle_sensor)
        if len(self._sensors_by_client) >= _MAX_CACHED_CLIENTS:
            self._sensors_by_client.clear()
        self._sensors_by_client[cache_key] = sensors
        return sensors

    def _register_quota_metrics(self, sensor: Sensor, tags: tuple[str, str]) -> None:
        sensor.add(
            self._quota_metric_name(tags), Rate(), self._quota_metric_config_for(tags)
        )

    def _quota_metric_name(self, tags: tuple[str, str]) -> MetricName:
        return MetricName(
            self.quota_metric_name_str,
            str(self.quota_type),
            _tag_pairs(tags),
            self.quota_metric_description,
        )

    def _quota_metric_config_for(self, tags: tuple[str, str]) -> MetricConfig:
        limit = self._quota_limit(tags)
        return self._quota_metric_config(UNLIMITED if limit is None else limit)

    def _quota_metric_config(self, limit: float) -> MetricConfig:
        return MetricConfig(
            quota=Quota.upper_bound(limit),
            samples=self.config.num_quota_samples,
            time_window_ms=self.config.quota_window_size_seconds * 1000,
        )

    def _forget_cached_sensors(self, sensor_name: str) -> None:
        self._sensors_by_client.clear()

    # -- entity resolution -----------------------------------------------------------------

    def _quota_metric_tags(
        self, sanitized_user: str, client_id: str
    ) -> tuple[str, str]:
        """The (user, client-id) tags of the sensor this client records into."""
        single_kind = _SINGLE_KIND_TAGS.get(self.quota_types_enabled)
        if single_kind is not None:
            keep_user, keep_client_id = single_kind
            return (
                sanitized_user if keep_user else "",
                client_id if keep_client_id else "",
            )
        for level in QUOTA_PRECEDENCE:
            if level.entity_key(sanitized_user, client_id) in self._overridden_quotas:
                return level.metric_tags(sanitized_user, client_id)
        return ("", client_id)

    def _quota_limit(self, tags: tuple[str, str]) -> float | None:
        """The configured limit for a sensor with these tags, or None."""
        user_tag, client_id_tag = tags
        levels = _LEVELS_BY_TAG_SHAPE.get((bool(user_tag), bool(client_id_tag)), ())
        for level in levels:
            limit = self._overridden_quotas.get(
                level.entity_key(user_tag, client_id_tag)
            )
            if limit is not None:
                return limit
        return None

    # -- configuration ---------------------------------------------------------------------

    def update_quota(self, entity: ClientQuotaEntity, quota: Quota | None) -> None:
        """Set (or with ``None`` remove) the quota of ``entity``; recorded usage is kept."""
        key = entity.key
        kind = _kind_of(key)
        is_active = key in self._overridden_quotas
        if quota is not None:
            if not is_active:
                self._active_entities_by_kind[kind] += 1
                self.quota_types_enabled |= kind.value
            self._overridden_quotas[key] = quota.bound
        else:
            if is_active:
                self._active_entities_by_kind[kind] -= 1
                if self._active_entities_by_kind[kind] <= 0:
                    del self._active_entities_by_kind[kind]
                    self.quota_types_enabled &= ~kind.value
                del self._overridden_quotas[key]
        # Which sensor a client uses may have changed with the precedence: look again.
        self._sensors_by_client.clear()
        # A <default> entity may apply to many sensors, so they are all visited.
        self.update_quota_metric_configs(None if DEFAULT in key else key)

    def update_quota_metric_configs(self, updated_key: EntityKey | None = None) -> None:
        """Give existing quota metrics their current limit (only their config changes)."""
        single_update = (
            updated_key is not None and self.quota_types_enabled in _SINGLE_KIND_TAGS
        )
        if single_update:
            assert updated_key is not None
            user, client_id = updated_key
            tags = (
                user if isinstance(user, str) else "",
                client_id if isinstance(client_id, str) else "",
            )
            metric = self.metrics.metric(self._quota_metric_name(tags))
            if metric is not None:
                metric.config = self._quota_metric_config_for(tags)
            return
        probe = self._quota_metric_name(("", ""))
        for name, metric in self.metrics.metrics.items():
            if name.name != probe.name or name.group != probe.group:
                continue
            tags = (name.tag(USER_TAG) or "", name.tag(CLIENT_ID_TAG) or "")
            limit = self._quota_limit(tags)
            new_limit = UNLIMITED if limit is None else limit
            if metric.config.quota is None or metric.config.quota.bound != new_limit:
                metric.config = self._quota_metric_config(new_limit)


def _tag_pairs(tags: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return ((USER_TAG, tags[0]), (CLIENT_ID_TAG, tags[1]))
