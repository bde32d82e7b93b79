"""OTLP/gRPC forwarding of landed client telemetry (the Collector's ``otlp`` exporter)."""

from exporters.otlp.config import OtlpExporterConfig, parse_go_duration
from exporters.otlp.enrich import (
    RESOURCE_ATTRIBUTES,
    UPSTREAM_RESOURCE_ATTRIBUTES,
    count_data_points,
    enrich,
)
from exporters.otlp.forwarder import (
    CONSUMER_NAME,
    ForwardStats,
    OtlpForwarder,
    consumer_name_for,
)
from exporters.otlp.retry import ALWAYS_RETRYABLE_CODES, ExponentialBackoff, RpcFailure
from exporters.otlp.transport import ExportAccepted, OtlpGrpcTransport

__all__ = [
    "ALWAYS_RETRYABLE_CODES",
    "CONSUMER_NAME",
    "RESOURCE_ATTRIBUTES",
    "ExponentialBackoff",
    "ExportAccepted",
    "ForwardStats",
    "OtlpExporterConfig",
    "OtlpForwarder",
    "OtlpGrpcTransport",
    "RpcFailure",
    "UPSTREAM_RESOURCE_ATTRIBUTES",
    "consumer_name_for",
    "count_data_points",
    "enrich",
    "parse_go_duration",
]
