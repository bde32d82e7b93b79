"""Throttle-time math: how long to hold a client so its usage falls back to the quota.

Follows ``server-common/.../quota/QuotaUtils.java`` and
``ControllerMutationQuotaManager.throttleTimeMs``.

Rates.  O is the observed rate over a window W, T the target.  Delaying by X spreads the
same amount over W + X:  O·W / (W + X) = T, so

    X = (O − T) / T × W

KIP-13's example: T = 5 MB/s over W = 10 s; 9 s at 5 MB/s then a 15 MB burst gives
O = (9·5 + 15) / 10 = 6 MB/s and X = (6 − 5) / 5 × 10 s = 2 s.  W is the *padded* window
the rate was computed over (``Rate.window_size``), not the configured N·W.

Token buckets.  A balance of K < 0 tokens refilling at R per second is back to zero after
−K / R seconds (KIP-599: −60 tokens at 5/s -> 12 s).
"""

from __future__ import annotations

import math

from quota.errors import QuotaViolationError
from quota.rate import Rate

__all__ = [
    "MAX_THROTTLE_TIME_MS",
    "bounded_throttle_time_ms",
    "max_value_in_quota_window",
    "rate_throttle_time_ms",
    "throttle_time_ms",
    "token_bucket_throttle_time_ms",
]


# throttle_time_ms fields on the wire are INT32; a zero quota makes the formula infinite.
MAX_THROTTLE_TIME_MS = 2**31 - 1


def _java_round(value: float) -> int:
    """``Math.round``: halves round up (2.5 -> 3, -2.5 -> -2), unlike Python's ``round``.

    Infinite values saturate at ±``MAX_THROTTLE_TIME_MS`` and NaN gives 0, as Java's
    ``Math.round`` saturates and maps NaN to 0 (we saturate at INT32, the wire field's
    width, where Scala's ``.toInt`` of ``Long.MAX_VALUE`` would wrap to −1).
    """
    if math.isnan(value):
        return 0
    if value >= MAX_THROTTLE_TIME_MS:
        return MAX_THROTTLE_TIME_MS
    if value <= -MAX_THROTTLE_TIME_MS:
        return -MAX_THROTTLE_TIME_MS
    return math.floor(value + 0.5)


def rate_throttle_time_ms(observed: float, target: float, window_ms: float) -> int:
    """X = (O − T) / T × W in ms, rounded like ``Math.round``; negative when O < T."""
    if target == 0:
        # Java double division: x/0 is ±inf, 0/0 is NaN.
        return _java_round(math.copysign(math.inf, observed) if observed else math.nan)
    return _java_round((observed - target) / target * window_ms)


def throttle_time_ms(violation: QuotaViolationError, now_ms: int) -> int:
    """``QuotaUtils.throttleTime``: the delay for a violated ``Rate`` metric."""
    metric = violation.metric
    if not isinstance(metric.stat, Rate):
        raise ValueError(
            f"Metric {metric.metric_name} is not a Rate metric, value {type(metric.stat).__name__}"
        )
    window_ms = metric.stat.window_size(metric.config, now_ms)
    return rate_throttle_time_ms(violation.value, violation.bound, window_ms)


def bounded_throttle_time_ms(
    violation: QuotaViolationError, max_throttle_time_ms: int, now_ms: int
) -> int:
    """``QuotaUtils.boundedThrottleTime``: as ``throttle_time_ms`` but at most the cap.

    The request quota and connection-rate quotas cap at one quota window, so a single
    expensive request (or a GC pause) never holds a client longer than that (KIP-124).
    """
    return min(throttle_time_ms(violation, now_ms), max_throttle_time_ms)


def token_bucket_throttle_time_ms(tokens: float, refill_rate_per_s: float) -> int:
    """Time for a balance of ``tokens`` (< 0) to refill to zero: −K / R seconds."""
    if refill_rate_per_s == 0:
        return _java_round(math.copysign(math.inf, -tokens) if tokens else math.nan)
    return _java_round(-tokens / refill_rate_per_s * 1000.0)


def max_value_in_quota_window(limit: float, samples: int, window_s: float) -> float:
    """The largest single value that is not *guaranteed* to be throttled: limit·(N − 1)·W.

    A fetch larger than this would be throttled even on an idle sensor, because the padded
    window is never shorter than N − 1 windows (Kafka clamps fetch.max.bytes to it).
    """
    return limit * (samples - 1) * window_s
