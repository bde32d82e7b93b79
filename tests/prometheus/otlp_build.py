"""Small OTLP MetricsData builders for the /metrics/clients tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    AGGREGATION_TEMPORALITY_DELTA,
    AggregationTemporality,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
    Summary,
    SummaryDataPoint,
)

DELTA, CUMULATIVE = AGGREGATION_TEMPORALITY_DELTA, AGGREGATION_TEMPORALITY_CUMULATIVE


def attributes(labels: Mapping[str, str] | None) -> list[KeyValue]:
    return [
        KeyValue(key=k, value=AnyValue(string_value=v))
        for k, v in (labels or {}).items()
    ]


def gauge(
    name: str,
    value: float,
    t: int,
    unit: str = "",
    labels: Mapping[str, str] | None = None,
) -> Metric:
    return Metric(
        name=name,
        unit=unit,
        description=f"{name} help",
        gauge=Gauge(data_points=[NumberDataPoint(as_double=value, time_unix_nano=t, attributes=attributes(labels))]),
    )  # fmt: skip


def total(
    name: str, value: int, start: int, t: int, *, temporality: AggregationTemporality.ValueType = DELTA,
    monotonic: bool = True, unit: str = "", labels: Mapping[str, str] | None = None,
) -> Metric:  # fmt: skip
    return Metric(
        name=name,
        unit=unit,
        description=f"{name} help",
        sum=Sum(
            aggregation_temporality=temporality,
            is_monotonic=monotonic,
            data_points=[NumberDataPoint(as_int=value, start_time_unix_nano=start, time_unix_nano=t, attributes=attributes(labels))],
        ),
    )  # fmt: skip


def histogram(
    name: str, bounds: list[float], counts: list[int], total_sum: float, start: int, t: int,
    *, temporality: AggregationTemporality.ValueType = DELTA, unit: str = "", labels: Mapping[str, str] | None = None,
) -> Metric:  # fmt: skip
    return Metric(
        name=name,
        unit=unit,
        description=f"{name} help",
        histogram=Histogram(
            aggregation_temporality=temporality,
            data_points=[HistogramDataPoint(
                explicit_bounds=bounds, bucket_counts=counts, count=sum(counts), sum=total_sum,
                start_time_unix_nano=start, time_unix_nano=t, attributes=attributes(labels),
            )],
        ),
    )  # fmt: skip


def summary(
    name: str, quantiles: Mapping[float, float], count: int, total_sum: float, t: int,
    unit: str = "", labels: Mapping[str, str] | None = None,
) -> Metric:  # fmt: skip
    return Metric(
        name=name,
        unit=unit,
        description=f"{name} help",
        summary=Summary(data_points=[SummaryDataPoint(
            count=count, sum=total_sum, time_unix_nano=t, attributes=attributes(labels),
            quantile_values=[SummaryDataPoint.ValueAtQuantile(quantile=q, value=v) for q, v in quantiles.items()],
        )]),
    )  # fmt: skip


def payload(metrics: Iterable[Metric]) -> bytes:
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=list(metrics))])
        ]
    ).SerializeToString()
