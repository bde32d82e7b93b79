"""The stat protocol every metric value provider implements, and the one non-windowed stat.

Follows ``clients/.../common/metrics/MeasurableStat.java`` and ``stats/CumulativeSum.java``:
a stat is told about values (``record``) and asked for a number (``measure``), always with
the metric's current ``MetricConfig`` and the time, never reading a clock itself.
"""

from __future__ import annotations

from typing import Protocol

from quota.metric_config import MetricConfig

__all__ = ["CumulativeSum", "MeasurableStat"]


class MeasurableStat(Protocol):
    def record(self, config: MetricConfig, value: float, now_ms: int) -> None: ...

    def measure(self, config: MetricConfig, now_ms: int) -> float: ...


class CumulativeSum:
    """The running total of every recorded value (Kafka uses it for delay-queue sizes)."""

    __slots__ = ("_total",)

    def __init__(self, initial_value: float = 0.0) -> None:
        self._total = initial_value

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self._total += value

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self._total
