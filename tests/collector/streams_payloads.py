"""OTLP payloads as a Kafka Streams process's clients push them (shapes measured from
Kafka Streams 4.4.0, /v1/applications' tests), built with the real protobuf classes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

__all__ = ["T0", "gauge", "payload", "point", "delta_sum"]

T0 = 1_764_600_000_000_000_000  # a point's time_unix_nano


def _attributes(values: Mapping[str, str]) -> list[KeyValue]:
    return [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in values.items()]


def point(
    value: float, time: int = T0, *, integer: bool = False, **attributes: str
) -> NumberDataPoint:
    if integer:
        return NumberDataPoint(
            as_int=int(value), time_unix_nano=time, attributes=_attributes(attributes)
        )
    return NumberDataPoint(
        as_double=value, time_unix_nano=time, attributes=_attributes(attributes)
    )


def gauge(name: str, *points: NumberDataPoint) -> Metric:
    return Metric(name=name, gauge=Gauge(data_points=points))


def delta_sum(name: str, *points: NumberDataPoint) -> Metric:
    return Metric(
        name=name,
        sum=Sum(
            data_points=points,
            aggregation_temporality=AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA,
            is_monotonic=True,
        ),
    )


def payload(
    metrics: Sequence[Metric], resource: Mapping[str, str] | None = None
) -> bytes:
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(
                resource=Resource(attributes=_attributes(resource or {})),
                scope_metrics=[ScopeMetrics(metrics=metrics)],
            )
        ]
    ).SerializeToString()
