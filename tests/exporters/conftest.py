"""Fixtures shared by the exporter tests: telemetry contexts and real OTLP payloads."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from exporters.context import TelemetryContext


def telemetry_context(index: int = 0, **overrides: object) -> TelemetryContext:
    fields: dict[str, object] = dict(
        client_instance_id=f"AAAAAAAAAAAAAAAAAAA{index % 1000:03d}",
        client_id=f"client-{index}",
        client_software_name="confluent-kafka-python",
        client_software_version="2.16.1-rdkafka-2.16.0",
        client_source_address="127.0.0.1",
        client_source_port=40000 + index % 20000,
        listener_name="PLAINTEXT",
        security_protocol="PLAINTEXT",
        principal="User:ANONYMOUS",
        push_interval_ms=1000,
        terminating=False,
        received_time_unix_nano=1_763_700_000_000_000_000 + index,
        node_id=1,
        cluster_id="ktc-test-cluster",
        subscription_id=123456,
        compression_type=4,
        correlation_id=index,
    )
    fields.update(overrides)
    return TelemetryContext(**fields)  # type: ignore[arg-type]


def metrics_data(index: int = 0, *, points: int = 3) -> MetricsData:
    """A producer-like MetricsData (librdkafka sends an empty Resource)."""
    time_unix_nano = 1_763_700_000_000_000_000 + index * 1_000_000
    gauge = Metric(
        name="org.apache.kafka.producer.node.request.latency.avg",
        gauge=Gauge(
            data_points=[
                NumberDataPoint(
                    time_unix_nano=time_unix_nano,
                    as_double=float(index) + p / 10,
                    attributes=[
                        KeyValue(key="node.id", value=AnyValue(string_value=str(p)))
                    ],
                )
                for p in range(points)
            ]
        ),
    )
    total = Metric(
        name="org.apache.kafka.producer.record.queue.time.total",
        sum=Sum(
            data_points=[
                NumberDataPoint(time_unix_nano=time_unix_nano, as_int=index * 7)
            ],
            aggregation_temporality=AGGREGATION_TEMPORALITY_CUMULATIVE,
            is_monotonic=True,
        ),
    )
    scope = ScopeMetrics(metrics=[gauge, total])
    return MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[scope])])


@pytest.fixture
def make_context() -> Callable[..., TelemetryContext]:
    return telemetry_context


@pytest.fixture
def make_metrics() -> Callable[..., MetricsData]:
    return metrics_data


@pytest.fixture
def make_payload() -> Callable[[int], bytes]:
    return lambda index: metrics_data(index).SerializeToString()
