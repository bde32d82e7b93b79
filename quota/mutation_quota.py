"""``ControllerMutationQuotaManager``: KIP-599's token-bucket quota on partition mutations.

Follows core ``kafka/server/ControllerMutationQuotaManager.scala`` (server/.../quota/
{ControllerMutationQuotaManager,StrictControllerMutationQuota,PermissiveControllerMutationQuota,
AbstractControllerMutationQuota}.java on newer trunks).

The quota sensor carries two metrics: ``mutation-rate`` (a plain ``Rate``, for operators)
and ``tokens`` (a ``TokenBucket`` with the quota: refill ``controller_mutation_rate`` per
second, burst samples × window × rate).  Throttle time is −tokens / rate.

Two ways to apply it to one request, chosen by the request's version:

* strict (new clients): check *before* recording.  While the bucket is not negative any
  number of mutations is accepted (the balance may go deeply negative, paying a large
  request back later); once it is negative the request is rejected with
  THROTTLING_QUOTA_EXCEEDED (error code 89) and nothing is recorded.
* permissive (old clients, who don't know error 89): always record, and throttle as soon
  as the bucket is negative.

A quota object remembers the throttle of its last violation and reports it decayed by the
time elapsed since, because a request may wait (in purgatory) long after it was evaluated.
"""

from __future__ import annotations

from typing import Any, Protocol

from quota.client_quota_manager import ClientQuotaManager, ClientQuotaManagerConfig
from quota.errors import QuotaViolationError, ThrottlingQuotaExceededError
from quota.metric import MetricName
from quota.metrics import Metrics
from quota.quota_type import QuotaType
from quota.rate import Rate
from quota.sensor import Sensor
from quota.throttle import token_bucket_throttle_time_ms
from quota.throttled_channel import ThrottledChannelQueue
from quota.token_bucket import TokenBucket

__all__ = [
    "UNBOUNDED_MUTATION_QUOTA",
    "ControllerMutationQuota",
    "ControllerMutationQuotaManager",
    "PermissiveControllerMutationQuota",
    "StrictControllerMutationQuota",
    "UnboundedControllerMutationQuota",
    "mutation_throttle_time_ms",
]


def mutation_throttle_time_ms(violation: QuotaViolationError) -> int:
    """Time to refill a negative bucket to zero: −value / bound seconds, in ms."""
    if not violation.metric.is_token_bucket:
        raise ValueError(
            f"Metric {violation.metric.metric_name} is not a TokenBucket metric, "
            f"value {type(violation.metric.stat).__name__}"
        )
    return token_bucket_throttle_time_ms(violation.value, violation.bound)


class ControllerMutationQuota(Protocol):
    """The quota of one request: record its mutations, then read the throttle time."""

    @property
    def is_exceeded(self) -> bool: ...

    def record(self, permits: float, now_ms: int) -> None: ...

    def throttle_time_ms(self, now_ms: int) -> int: ...


class UnboundedControllerMutationQuota:
    """Used while no mutation quota is configured: never exceeded, never throttles."""

    __slots__ = ()

    @property
    def is_exceeded(self) -> bool:
        return False

    def record(self, permits: float, now_ms: int) -> None:
        pass

    def throttle_time_ms(self, now_ms: int) -> int:
        return 0


UNBOUNDED_MUTATION_QUOTA = UnboundedControllerMutationQuota()


class _RememberedThrottle:
    """AbstractControllerMutationQuota: the last violation's delay, decaying with time."""

    __slots__ = ("_last_recorded_time_ms", "_last_throttle_time_ms", "_quota_sensor")

    def __init__(self, quota_sensor: Sensor) -> None:
        self._quota_sensor = quota_sensor
        self._last_throttle_time_ms = 0
        self._last_recorded_time_ms = 0

    def _remember(self, violation: QuotaViolationError, now_ms: int) -> None:
        self._last_throttle_time_ms = mutation_throttle_time_ms(violation)
        self._last_recorded_time_ms = now_ms

    def throttle_time_ms(self, now_ms: int) -> int:
        elapsed_ms = now_ms - self._last_recorded_time_ms
        return max(0, self._last_throttle_time_ms - elapsed_ms)


class StrictControllerMutationQuota(_RememberedThrottle):
    """Accepts mutations until the bucket is negative, then rejects (error code 89)."""

    __slots__ = ()

    @property
    def is_exceeded(self) -> bool:
        return self._last_throttle_time_ms > 0

    def record(self, permits: float, now_ms: int) -> None:
        """Record ``permits`` or raise ``ThrottlingQuotaExceededError`` (recording nothing)."""
        try:
            self._quota_sensor.check_quotas(now_ms)
        except QuotaViolationError as violation:
            self._remember(violation, now_ms)
            raise ThrottlingQuotaExceededError(self._last_throttle_time_ms) from None
        self._quota_sensor.record(permits, now_ms, False)


class PermissiveControllerMutationQuota(_RememberedThrottle):
    """Always accepts; remembers the delay once the bucket is negative."""

    __slots__ = ()

    @property
    def is_exceeded(self) -> bool:
        return False

    def record(self, permits: float, now_ms: int) -> None:
        try:
            self._quota_sensor.record(permits, now_ms, True)
        except QuotaViolationError as violation:
            self._remember(violation, now_ms)


class ControllerMutationQuotaManager(ClientQuotaManager):
    quota_metric_name_str = "tokens"
    quota_metric_description = (
        "Tracking remaining tokens in the token bucket per user/client-id"
    )

    def __init__(
        self,
        config: ClientQuotaManagerConfig,
        metrics: Metrics,
        now_ms: int,
        queue: ThrottledChannelQueue[Any] | None = None,
    ) -> None:
        super().__init__(config, metrics, QuotaType.CONTROLLER_MUTATION, now_ms, queue)

    def _register_quota_metrics(self, sensor: Sensor, tags: tuple[str, str]) -> None:
        sensor.add(
            MetricName(
                "mutation-rate",
                str(QuotaType.CONTROLLER_MUTATION),
                (("user", tags[0]), ("client-id", tags[1])),
                "Tracking mutation-rate per user/client-id",
            ),
            Rate(),
        )
        sensor.add(
            self._quota_metric_name(tags),
            TokenBucket(),
            self._quota_metric_config_for(tags),
        )

    def record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        """Strict accounting: check first, record only when the bucket is not negative."""
        sensor = self.get_or_create_quota_sensors(user, client_id, now_ms).quota_sensor
        try:
            sensor.check_quotas(now_ms)
        except QuotaViolationError as violation:
            return mutation_throttle_time_ms(violation)
        sensor.record(value, now_ms, False)
        return 0

    def new_strict_quota_for(
        self, user: str, client_id: str, now_ms: int
    ) -> ControllerMutationQuota:
        if not self.quota_types_enabled:
            return UNBOUNDED_MUTATION_QUOTA
        sensor = self.get_or_create_quota_sensors(user, client_id, now_ms).quota_sensor
        return StrictControllerMutationQuota(sensor)

    def new_permissive_quota_for(
        self, user: str, client_id: str, now_ms: int
    ) -> ControllerMutationQuota:
        if not self.quota_types_enabled:
            return UNBOUNDED_MUTATION_QUOTA
        sensor = self.get_or_create_quota_sensors(user, client_id, now_ms).quota_sensor
        return PermissiveControllerMutationQuota(sensor)

    def new_quota_for(
        self,
        user: str,
        client_id: str,
        api_version: int,
        strict_since_version: int,
        now_ms: int,
    ) -> ControllerMutationQuota:
        """Strict from ``strict_since_version`` on (CreateTopics 6, DeleteTopics 5,
        CreatePartitions 3 in Kafka's ControllerApis), permissive below."""
        if api_version >= strict_since_version:
            return self.new_strict_quota_for(user, client_id, now_ms)
        return self.new_permissive_quota_for(user, client_id, now_ms)
