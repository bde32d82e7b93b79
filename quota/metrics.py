"""``Metrics``: the registry of sensors (by name) and their metrics (by ``MetricName``).

Follows the parts of ``clients/.../common/metrics/Metrics.java`` the quota code uses:
get-or-create a sensor, remove it with its metrics, expire inactive sensors (Kafka runs
``ExpireSensorTask`` every 30 s; here the owner calls ``expire_inactive_sensors(now_ms)``),
and read every metric's value for an exporter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from quota.metric import KafkaMetric, MetricName, MetricRegistry
from quota.metric_config import MetricConfig
from quota.sensor import Sensor

__all__ = ["MetricValue", "Metrics"]


@dataclass(frozen=True, slots=True)
class MetricValue:
    """One metric's value at a point in time, for an exporter (Prometheus, logs)."""

    name: MetricName
    value: float


class Metrics(MetricRegistry):
    __slots__ = ("_metrics", "_removal_listeners", "_sensors", "default_config")

    def __init__(self, default_config: MetricConfig | None = None) -> None:
        # The broker's registry default: metrics.num.samples=2, metrics.sample.window.ms=30000.
        self.default_config = (
            default_config if default_config is not None else MetricConfig()
        )
        self._sensors: dict[str, Sensor] = {}
        self._metrics: dict[MetricName, KafkaMetric] = {}
        self._removal_listeners: list[Callable[[str], None]] = []

    def sensor(
        self,
        name: str,
        now_ms: int,
        config: MetricConfig | None = None,
        inactive_expiration_ms: int | None = None,
    ) -> Sensor:
        """The sensor called ``name``, created (with ``config`` or the default) if absent."""
        existing = self._sensors.get(name)
        if existing is not None:
            return existing
        created = Sensor(
            self,
            name,
            config if config is not None else self.default_config,
            now_ms,
            inactive_expiration_ms,
        )
        self._sensors[name] = created
        return created

    def get_sensor(self, name: str) -> Sensor | None:
        return self._sensors.get(name)

    def remove_sensor(self, name: str) -> None:
        sensor = self._sensors.pop(name, None)
        if sensor is None:
            return
        for metric in sensor.metrics:
            self._metrics.pop(metric.metric_name, None)
        for listener in self._removal_listeners:
            listener(name)

    def add_removal_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(sensor_name)`` after a sensor is removed (lets owners drop caches)."""
        self._removal_listeners.append(listener)

    def expire_inactive_sensors(self, now_ms: int) -> list[str]:
        """Remove every sensor idle for longer than its expiration; return their names."""
        expired = [
            name for name, sensor in self._sensors.items() if sensor.has_expired(now_ms)
        ]
        for name in expired:
            self.remove_sensor(name)
        return expired

    def register_metric(self, metric: KafkaMetric) -> None:
        if metric.metric_name in self._metrics:
            raise ValueError(
                f"A metric named '{metric.metric_name}' already exists, can't register another one."
            )
        self._metrics[metric.metric_name] = metric

    def metric(self, name: MetricName) -> KafkaMetric | None:
        return self._metrics.get(name)

    @property
    def metrics(self) -> dict[MetricName, KafkaMetric]:
        """Every registered metric (a live view: do not mutate)."""
        return self._metrics

    @property
    def sensors(self) -> dict[str, Sensor]:
        return self._sensors

    def snapshot(self, now_ms: int) -> list[MetricValue]:
        return [
            MetricValue(name, metric.measurable_value(now_ms))
            for name, metric in self._metrics.items()
        ]
