"""Exceptions of the quota engine.

``QuotaViolationError`` is internal plumbing (Kafka's ``QuotaViolationException``): the
managers catch it and turn it into a throttle time, it never leaves the package through
the facade.  ``ThrottlingQuotaExceededError`` is the one a caller sees: a strict
controller-mutation quota rejecting a request.  It carries Kafka's wire error code so the
collector can answer without this package importing ``proto``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from quota.metric import KafkaMetric

__all__ = [
    "THROTTLING_QUOTA_EXCEEDED",
    "QuotaConfigError",
    "QuotaViolationError",
    "ThrottlingQuotaExceededError",
]

# Errors.THROTTLING_QUOTA_EXCEEDED in clients/.../common/protocol/Errors.java (KIP-599).
THROTTLING_QUOTA_EXCEEDED = 89


class QuotaViolationError(Exception):
    """A recorded value moved ``metric`` outside its quota: ``value`` against ``bound``."""

    def __init__(self, metric: KafkaMetric, value: float, bound: float) -> None:
        super().__init__(
            f"'{metric.metric_name.name}' violated quota. Actual: {value}, Threshold: {bound}"
        )
        self.metric = metric
        self.value = value
        self.bound = bound


class ThrottlingQuotaExceededError(Exception):
    """A strict mutation quota is exhausted; retry after ``throttle_time_ms``."""

    error_code: ClassVar[int] = THROTTLING_QUOTA_EXCEEDED

    def __init__(self, throttle_time_ms: int) -> None:
        super().__init__("The throttling quota has been exceeded.")
        self.throttle_time_ms = throttle_time_ms


class QuotaConfigError(ValueError):
    """A quota or connection-limit setting is invalid; the message names the key."""
