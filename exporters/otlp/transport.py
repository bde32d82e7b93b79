"""One gRPC ``MetricsService/Export`` attempt: bytes in, a classified outcome out.

Why a synchronous channel, used from the forwarder's own threads, rather than ``grpc.aio``
on the collector's event loop: that loop answers Kafka clients and its latency is the
product; the forwarder's work is reading log files, parsing and re-encoding protobuf, and
waiting on the network, all of which would stall the loop or need to be pushed to threads
anyway.  A blocking call with a per-attempt ``timeout`` and a ``threading.Event`` to cut a
backoff short is also the simplest correct shape.  The sync channel is thread-safe, so one
channel serves all consumer threads.

The request goes out as bytes the caller already has: an ``ExportMetricsServiceRequest`` and
a ``MetricsData`` both keep their ``ResourceMetrics`` in field 1, and concatenated protobuf
messages merge their repeated fields, so the concatenation of enriched ``MetricsData``
encodings *is* a valid request.  No second parse and re-encode per batch.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

from exporters.otlp.config import OtlpExporterConfig
from exporters.otlp.retry import RpcFailure, classify_rpc_error

__all__ = ["EXPORT_METHOD", "ExportAccepted", "OtlpGrpcTransport"]

_SERVICE = metrics_service_pb2.DESCRIPTOR.services_by_name["MetricsService"]
# "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
EXPORT_METHOD = f"/{_SERVICE.full_name}/{_SERVICE.methods_by_name['Export'].name}"

_COMPRESSION: dict[str, grpc.Compression] = {
    "gzip": grpc.Compression.Gzip,
    "deflate": grpc.Compression.Deflate,
    "none": grpc.Compression.NoCompression,
    "": grpc.Compression.NoCompression,
}

# The reconnect floor keeps a flapping receiver from being hammered; the ceiling is tied to
# the retry cap so that, after an outage, the channel is connected again by the time the
# next retry fires (gRPC's own default ceiling is 120 s, which would waste retries).
_MIN_RECONNECT_BACKOFF_MS = 100


@dataclasses.dataclass(frozen=True, slots=True)
class ExportAccepted:
    """The receiver answered OK.  ``rejected_data_points`` > 0 is a partial success."""

    rejected_data_points: int = 0
    error_message: str = ""


def _read(path: str | None) -> bytes | None:
    return None if path is None else Path(path).read_bytes()


def _credentials(config: OtlpExporterConfig) -> grpc.ChannelCredentials:
    tls = config.tls
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_file),
        private_key=_read(tls.key_file),
        certificate_chain=_read(tls.cert_file),
    )


class OtlpGrpcTransport:
    """A channel to one OTLP/gRPC endpoint.  ``export`` makes exactly one attempt."""

    def __init__(
        self, config: OtlpExporterConfig, user_agent: str = "ktc-otlp-forwarder"
    ) -> None:
        self._config = config
        retry = config.retry_on_failure
        options: list[tuple[str, int | str]] = [
            ("grpc.primary_user_agent", user_agent),
            ("grpc.min_reconnect_backoff_ms", _MIN_RECONNECT_BACKOFF_MS),
            (
                "grpc.initial_reconnect_backoff_ms",
                max(
                    _MIN_RECONNECT_BACKOFF_MS,
                    int(retry.initial_interval.total_seconds() * 1000),
                ),
            ),
            (
                "grpc.max_reconnect_backoff_ms",
                max(
                    _MIN_RECONNECT_BACKOFF_MS,
                    int(retry.max_interval.total_seconds() * 1000),
                ),
            ),
        ]
        if config.tls.server_name_override:
            options.append(
                ("grpc.ssl_target_name_override", config.tls.server_name_override)
            )
        if config.use_tls:
            self._channel = grpc.secure_channel(
                config.target, _credentials(config), options
            )
        else:
            self._channel = grpc.insecure_channel(config.target, options)
        self._export = self._channel.unary_unary(
            EXPORT_METHOD,
            request_serializer=None,  # the request is already bytes
            response_deserializer=metrics_service_pb2.ExportMetricsServiceResponse.FromString,
        )
        self._metadata = config.metadata
        self._compression = _COMPRESSION[config.compression]

    def export(self, request_bytes: bytes) -> ExportAccepted | RpcFailure:
        """Send one serialized ``ExportMetricsServiceRequest``; never raises on RPC errors."""
        try:
            response = self._export(
                request_bytes,
                timeout=self._config.timeout_s,
                metadata=self._metadata,
                compression=self._compression,
            )
        except grpc.RpcError as error:
            return classify_rpc_error(error)
        partial = response.partial_success
        return ExportAccepted(partial.rejected_data_points, partial.error_message)

    def close(self) -> None:
        self._channel.close()
