"""``Sensor``: records a value into every stat it owns, then (optionally) checks quotas.

Follows ``clients/.../common/metrics/Sensor.java``.  Left out: parent sensors, recording
levels and compound stats, which no quota path uses.  Kafka guards ``record`` +
``checkQuotas`` with locks; this package is driven from one event loop and takes none.
"""

from __future__ import annotations

from quota.errors import QuotaViolationError
from quota.metric import KafkaMetric, MetricName, MetricRegistry
from quota.metric_config import MetricConfig
from quota.stat import MeasurableStat

__all__ = ["Sensor"]


class Sensor:
    __slots__ = (
        "_metric_list",
        "_metrics",
        "_registry",
        "config",
        "inactive_expiration_ms",
        "last_record_time_ms",
        "name",
    )

    def __init__(
        self,
        registry: MetricRegistry | None,
        name: str,
        config: MetricConfig,
        now_ms: int,
        inactive_expiration_ms: int | None = None,
    ) -> None:
        self._registry = registry
        self.name = name
        self.config = config
        # None: never expires (Kafka passes Long.MAX_VALUE seconds for such sensors).
        self.inactive_expiration_ms = inactive_expiration_ms
        self.last_record_time_ms = now_ms
        self._metrics: dict[MetricName, KafkaMetric] = {}
        self._metric_list: list[KafkaMetric] = []  # the same, for the hot loops

    def record(self, value: float, now_ms: int, check_quotas: bool = True) -> None:
        """Add ``value`` to every stat; with ``check_quotas`` raise on a violated bound.

        The value stays recorded even when this raises: a violation is a throttle, not a
        rollback (a caller that wants it gone records ``-value``, see ``unrecord``).
        """
        self.last_record_time_ms = now_ms
        metrics = self._metric_list
        if check_quotas and len(metrics) == 1:
            # A quota sensor's usual shape (one rate of a windowed sum under an upper
            # bound): record and check in one call (Rate.record_within: None = certainly
            # within), else the same acceptance test as below on the measured rate.
            metric = metrics[0]
            rate = metric.rate_of_sum
            quota = metric.config.quota
            if rate is not None and quota is not None and quota.upper:
                measured = rate.record_within(metric.config, value, now_ms, quota.bound)
                if measured is not None and not measured <= quota.bound:
                    raise QuotaViolationError(metric, measured, quota.bound)
                return
        for metric in metrics:
            metric.record(metric.config, value, now_ms)
        if not check_quotas:
            return
        for metric in metrics:  # check_quotas, inlined: this is every request's path
            quota = metric.config.quota
            if quota is None:
                continue
            measured = metric.stat.measure(metric.config, now_ms)
            if metric.is_token_bucket:
                if measured < 0:
                    raise QuotaViolationError(metric, measured, quota.bound)
            # Quota.acceptable, inlined; written as "not acceptable" so NaN violates, as in Java
            elif not (
                (measured <= quota.bound) if quota.upper else (measured >= quota.bound)
            ):
                raise QuotaViolationError(metric, measured, quota.bound)

    def unrecord(self, value: float, now_ms: int) -> None:
        """Take back a recorded ``value`` by recording its negative, without a quota check.

        Windowed sums are additive, so this restores the previous total (Kafka does it for
        throttled fetches and for rejected connections).
        """
        self.record(-value, now_ms, check_quotas=False)

    def check_quotas(self, now_ms: int) -> None:
        for metric in self._metric_list:
            config = metric.config
            quota = config.quota
            if quota is None:
                continue
            value = metric.stat.measure(config, now_ms)
            if metric.is_token_bucket:
                if value < 0:
                    raise QuotaViolationError(metric, value, quota.bound)
            elif not quota.acceptable(value):
                raise QuotaViolationError(metric, value, quota.bound)

    def add(
        self,
        metric_name: MetricName,
        stat: MeasurableStat,
        config: MetricConfig | None = None,
        now_ms: int | None = None,
    ) -> bool:
        """Register ``stat`` under ``metric_name``; False if the sensor expired by ``now_ms``.

        Adding a name this sensor already has is a no-op (the first stat stays); a name that
        another sensor registered is an error.
        """
        if now_ms is not None and self.has_expired(now_ms):
            return False
        if metric_name in self._metrics:
            return True
        metric = KafkaMetric(
            metric_name, stat, config if config is not None else self.config
        )
        if self._registry is not None:
            self._registry.register_metric(metric)
        self._metrics[metric_name] = metric
        self._metric_list.append(metric)
        return True

    def has_expired(self, now_ms: int) -> bool:
        if self.inactive_expiration_ms is None:
            return False
        return now_ms - self.last_record_time_ms > self.inactive_expiration_ms

    @property
    def has_metrics(self) -> bool:
        return bool(self._metrics)

    @property
    def metrics(self) -> list[KafkaMetric]:
        return list(self._metrics.values())

    def __repr__(self) -> str:
        return f"Sensor({self.name!r}, metrics={list(self._metrics)!r})"
