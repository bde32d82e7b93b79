"""``MetricName`` and ``KafkaMetric``: a named stat with a replaceable config.

Follows ``clients/.../common/{MetricName,metrics/KafkaMetric}.java``.  Changing a quota
limit replaces ``KafkaMetric.config``; the stat, and so the usage recorded so far, stays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mypy_extensions import trait

from quota.metric_config import MetricConfig
from quota.rate import Rate
from quota.sampled_stat import WindowedSum
from quota.stat import MeasurableStat
from quota.token_bucket import TokenBucket

__all__ = ["KafkaMetric", "MetricName", "MetricRegistry"]


@dataclass(frozen=True, slots=True)
class MetricName:
    """Identity of a metric: ``(name, group, tags)``; the description is not part of it.

    ``tags`` is a tuple of ``(key, value)`` pairs in a fixed order per kind of metric
    (``user`` before ``client-id``, as Kafka's ``LinkedHashMap``), which keeps it hashable.
    """

    name: str
    group: str
    tags: tuple[tuple[str, str], ...] = ()
    description: str = field(default="", compare=False)

    def tag(self, key: str) -> str | None:
        for tag_key, value in self.tags:
            if tag_key == key:
                return value
        return None


class KafkaMetric:
    __slots__ = (
        "config",
        "is_token_bucket",
        "metric_name",
        "rate_of_sum",
        "record",
        "stat",
    )

    def __init__(
        self, metric_name: MetricName, stat: MeasurableStat, config: MetricConfig
    ) -> None:
        self.metric_name = metric_name
        self.stat = stat
        self.config = config
        self.record: Callable[[MetricConfig, float, int], None]
        # Sensor.checkQuotas judges a token bucket by sign, everything else by its bound.
        self.is_token_bucket = isinstance(stat, TokenBucket)
        # What Sensor.record calls: a Rate only forwards to its sampled stat, so skip it.
        self.record = stat.stat.record if isinstance(stat, Rate) else stat.record
        # A rate of a plain windowed sum (every byte-rate and request quota) records and
        # checks in one call (Rate.record_within); None for anything else.  Kept as the
        # Rate, not its bound method, so compiled code calls it directly.
        self.rate_of_sum: Rate | None = (
            stat if isinstance(stat, Rate) and type(stat.stat) is WindowedSum else None
        )

    def measurable_value(self, now_ms: int) -> float:
        return self.stat.measure(self.config, now_ms)

    def __repr__(self) -> str:
        return f"KafkaMetric({self.metric_name!r}, {type(self.stat).__name__}, {self.config!r})"


@trait
class MetricRegistry:
    """Where a sensor registers the metrics added to it (``quota.metrics.Metrics``)."""

    def register_metric(self, metric: KafkaMetric) -> None:
        raise NotImplementedError
