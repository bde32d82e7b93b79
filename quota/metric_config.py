"""``Quota`` (a bound) and ``MetricConfig`` (how a stat samples time).

Follows ``clients/.../common/metrics/{Quota,MetricConfig}.java``.  Both are immutable
values here: Kafka changes a quota limit by replacing a metric's whole ``MetricConfig``
(``KafkaMetric.config(newConfig)``), never by mutating it, and that is the only kind of
change this package makes too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

__all__ = [
    "DEFAULT_NUM_SAMPLES",
    "DEFAULT_TIME_WINDOW_MS",
    "UNBOUNDED_EVENT_WINDOW",
    "MetricConfig",
    "Quota",
]

# MetricConfig() defaults in Kafka: 2 samples of 30 s, no event-count window.  The broker's
# registry default (metrics.num.samples / metrics.sample.window.ms) is the same.
DEFAULT_NUM_SAMPLES = 2
DEFAULT_TIME_WINDOW_MS = 30_000
UNBOUNDED_EVENT_WINDOW = sys.maxsize  # Java Long.MAX_VALUE on 64-bit


@dataclass(frozen=True, slots=True)
class Quota:
    """An upper (or lower) bound on a measured value."""

    bound: float
    upper: bool = True

    @classmethod
    def upper_bound(cls, bound: float) -> Quota:
        return cls(float(bound), True)

    def acceptable(self, value: float) -> bool:
        return value <= self.bound if self.upper else value >= self.bound


@dataclass(frozen=True, slots=True)
class MetricConfig:
    """How a stat is sampled: ``samples`` windows of ``time_window_ms`` each.

    For client quotas ``samples`` is ``quota.window.num`` (default 11: ten whole windows plus
    the current one) and ``time_window_ms`` is ``quota.window.size.seconds * 1000``.
    ``event_window`` closes a sample after that many events (unbounded by default).
    """

    quota: Quota | None = None
    samples: int = DEFAULT_NUM_SAMPLES
    time_window_ms: int = DEFAULT_TIME_WINDOW_MS
    event_window: int = UNBOUNDED_EVENT_WINDOW

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError("The number of samples must be at least 1.")
        if self.time_window_ms < 1:
            raise ValueError("The sample time window must be at least 1 ms.")
        if self.event_window < 1:
            raise ValueError("The sample event window must be at least 1 event.")
