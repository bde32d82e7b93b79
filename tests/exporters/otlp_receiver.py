"""A real OTLP/gRPC metrics receiver for tests: a grpc server on 127.0.0.1, port 0.

It implements ``MetricsService.Export`` the way an OpenTelemetry Collector's otlp receiver
answers, records every attempt, and can be told how to answer the next calls::

    with OtlpReceiver() as receiver:                 # bound and serving
        receiver.script(Fail(grpc.StatusCode.UNAVAILABLE, times=2), Accept())
        ...  # point an exporter at receiver.target
        receiver.stop(); receiver.start()            # an outage, same port
        assert receiver.wait_for_points(10)

Behaviours are consumed one per call; when the script is empty every call is accepted.
``ByteCountingProxy`` sits in front of it to observe what crosses the wire (compression).

Other areas may reuse this module: it depends only on grpcio, grpcio-status and
opentelemetry-proto.
"""

from __future__ import annotations

import collections
import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Self

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
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

from exporters.context import TelemetryContext

__all__ = [
    "Accept",
    "ByteCountingProxy",
    "Fail",
    "OtlpReceiver",
    "PartialSuccess",
    "ReceivedExport",
    "Slow",
    "point_values",
    "points_in",
    "resource_attributes",
    "sample_context",
    "sample_metrics_data",
]

ExportRequest = metrics_service_pb2.ExportMetricsServiceRequest
ExportResponse = metrics_service_pb2.ExportMetricsServiceResponse


@dataclasses.dataclass(frozen=True)
class Accept:
    """Answer OK."""


@dataclasses.dataclass(frozen=True)
class Fail:
    """Abort with ``code`` ``times`` times; ``retry_delay_s`` attaches google.rpc.RetryInfo."""

    code: grpc.StatusCode
    times: int = 1
    retry_delay_s: float | None = None
    message: str = "injected failure"


@dataclasses.dataclass(frozen=True)
class PartialSuccess:
    """Answer OK with ``partial_success.rejected_data_points``; the request still counts as
    received (a receiver keeps what it did not reject)."""

    rejected_data_points: int
    error_message: str = "some points rejected"


@dataclasses.dataclass(frozen=True)
class Slow:
    """Wait ``seconds`` before answering OK (or until the receiver stops)."""

    seconds: float


Behaviour = Accept | Fail | PartialSuccess | Slow


@dataclasses.dataclass(frozen=True)
class ReceivedExport:
    """One Export call as the server saw it."""

    request: metrics_service_pb2.ExportMetricsServiceRequest
    metadata: dict[str, str]
    outcome: str  # "accepted", "partial", "slow-accepted", or the failure code's name
    arrived_monotonic_s: float = dataclasses.field(default_factory=time.monotonic)


def points_in(resource_metrics: collections.abc.Iterable[ResourceMetrics]) -> int:
    total = 0
    for rm in resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                kind = metric.WhichOneof("data")
                if kind is not None:
                    total += len(getattr(metric, kind).data_points)
    return total


def sample_metrics_data(
    *,
    gauges: int = 2,
    points_per_metric: int = 1,
    start_value: int = 0,
    resource_attributes: dict[str, str] | None = None,
) -> MetricsData:
    """A push shaped like librdkafka's: one ResourceMetrics with an empty Resource (unless
    ``resource_attributes``), gauges plus one cumulative monotonic sum.  Point values count
    up from ``start_value`` so tests can check order and completeness."""
    value = start_value
    metrics: list[Metric] = []
    for g in range(gauges):
        points = []
        for _ in range(points_per_metric):
            points.append(
                NumberDataPoint(
                    time_unix_nano=1_700_000_000_000_000_000 + value, as_int=value
                )
            )
            value += 1
        metrics.append(
            Metric(
                name=f"org.apache.kafka.producer.gauge{g}",
                gauge=Gauge(data_points=points),
            )
        )
    metrics.append(
        Metric(
            name="org.apache.kafka.producer.record.queue.time.total",
            sum=Sum(
                data_points=[
                    NumberDataPoint(
                        time_unix_nano=1_700_000_000_000_000_000 + value, as_int=value
                    )
                ],
                aggregation_temporality=AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE,
                is_monotonic=True,
            ),
        )
    )
    resource = Resource(
        attributes=[
            KeyValue(key=k, value=AnyValue(string_value=v))
            for k, v in (resource_attributes or {}).items()
        ]
    )
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(
                resource=resource, scope_metrics=[ScopeMetrics(metrics=metrics)]
            )
        ]
    )


def sample_context(**overrides: object) -> TelemetryContext:
    """A TelemetryContext as the collector builds it for a librdkafka producer."""
    fields: dict[str, object] = {
        "client_instance_id": "AAAAAAAAAAAAAAAAAAAAAQ",
        "client_id": "producer-1",
        "client_software_name": "confluent-kafka-python",
        "client_software_version": "2.16.1-rdkafka-2.16.0",
        "client_source_address": "127.0.0.1",
        "client_source_port": 50123,
        "listener_name": "PLAINTEXT",
        "security_protocol": "PLAINTEXT",
        "principal": "User:ANONYMOUS",
        "push_interval_ms": 1000,
        "terminating": False,
        "received_time_unix_nano": 1_700_000_000_000_000_000,
        "node_id": 1,
        "cluster_id": "ktc-cluster-0001",
        "subscription_id": 12345,
        "compression_type": 4,
    }
    fields.update(overrides)
    return TelemetryContext(**fields)  # type: ignore[arg-type]


def point_values(
    resource_metrics: collections.abc.Iterable[ResourceMetrics],
) -> list[int]:
    """Every NumberDataPoint's int value, in wire order."""
    values: list[int] = []
    for rm in resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                kind = metric.WhichOneof("data")
                if kind in ("gauge", "sum"):
                    values.extend(p.as_int for p in getattr(metric, kind).data_points)
    return values


def resource_attributes(rm: ResourceMetrics) -> dict[str, str]:
    return {kv.key: kv.value.string_value for kv in rm.resource.attributes}


def _status_with_retry_info(
    code: grpc.StatusCode, message: str, delay_s: float
) -> grpc.Status:
    retry_info = error_details_pb2.RetryInfo(
        retry_delay=duration_pb2.Duration(
            seconds=int(delay_s), nanos=round((delay_s - int(delay_s)) * 1e9)
        )
    )
    detail = any_pb2.Any()
    detail.Pack(retry_info)
    status = status_pb2.Status(
        code=getattr(code_pb2, code.name), message=message, details=[detail]
    )
    return rpc_status.to_status(status)


class _Servicer(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(
        self, request: ExportRequest, context: grpc.ServicerContext
    ) -> ExportResponse:
        return self._receiver._handle(request, context)


class OtlpReceiver:
    def __init__(
        self, *, server_credentials: grpc.ServerCredentials | None = None
    ) -> None:
        self._credentials = server_credentials
        self._lock = threading.Condition()
        self._script: collections.deque[Behaviour] = collections.deque()
        self._attempts: list[ReceivedExport] = []
        self._server: grpc.Server | None = None
        self._stopping = threading.Event()
        self.port = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> int:
        """Bind 127.0.0.1 (port 0 the first time, the same port after a stop) and serve."""
        if self._server is not None:
            raise RuntimeError("receiver already running")
        self._stopping.clear()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(
            _Servicer(self), server
        )
        address = f"127.0.0.1:{self.port}"
        if self._credentials is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, self._credentials)
        if bound == 0:
            raise RuntimeError(f"could not bind {address}")
        self.port = bound
        server.start()
        self._server = server
        return bound

    def stop(self, grace_s: float | None = None) -> None:
        """Stop serving; in-flight calls are cancelled (a Slow call is cut short)."""
        self._stopping.set()
        if self._server is not None:
            self._server.stop(grace_s).wait()
            self._server = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ programming

    def script(self, *behaviours: Behaviour) -> None:
        """Append behaviours for the next calls; a ``Fail(times=n)`` covers n calls."""
        with self._lock:
            for behaviour in behaviours:
                if isinstance(behaviour, Fail):
                    self._script.extend(
                        [dataclasses.replace(behaviour, times=1)] * behaviour.times
                    )
                else:
                    self._script.append(behaviour)

    # ------------------------------------------------------------------ observing

    @property
    def attempts(self) -> list[ReceivedExport]:
        """Every call, failed ones included, in arrival order."""
        with self._lock:
            return list(self._attempts)

    @property
    def received(self) -> list[ReceivedExport]:
        """Calls whose data the receiver kept (accepted, partial, slow-accepted)."""
        return [
            a
            for a in self.attempts
            if a.outcome in ("accepted", "partial", "slow-accepted")
        ]

    def resource_metrics(self) -> Iterator[ResourceMetrics]:
        for export in self.received:
            yield from export.request.resource_metrics

    def points_received(self) -> int:
        return points_in(self.resource_metrics())

    def wait_for_attempts(self, count: int, timeout_s: float = 10.0) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: len(self._attempts) >= count, timeout_s)

    def wait_for_points(self, count: int, timeout_s: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self.points_received_locked() < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._lock.wait(remaining):
                    return self.points_received_locked() >= count
            return True

    def points_received_locked(self) -> int:
        return points_in(
            rm
            for a in self._attempts
            if a.outcome in ("accepted", "partial", "slow-accepted")
            for rm in a.request.resource_metrics
        )

    # ------------------------------------------------------------------ serving

    def _record(
        self, request: ExportRequest, context: grpc.ServicerContext, outcome: str
    ) -> None:
        metadata = {m.key: m.value for m in context.invocation_metadata()}
        with self._lock:
            self._attempts.append(ReceivedExport(request, metadata, outcome))
            self._lock.notify_all()

    def _handle(
        self, request: ExportRequest, context: grpc.ServicerContext
    ) -> ExportResponse:
        with self._lock:
            behaviour: Behaviour = self._script.popleft() if self._script else Accept()
        if isinstance(behaviour, Fail):
            self._record(request, context, behaviour.code.name)
            if behaviour.retry_delay_s is not None:
                context.abort_with_status(
                    _status_with_retry_info(
                        behaviour.code, behaviour.message, behaviour.retry_delay_s
                    )
                )
            context.abort(behaviour.code, behaviour.message)
        if isinstance(behaviour, Slow):
            # Answer late; if the client gave up meanwhile, the data was never acknowledged,
            # but a real receiver would have kept it: record it as received only if the call
            # is still alive, and mark it so tests can tell.
            self._stopping.wait(behaviour.seconds)
            outcome = "slow-accepted" if context.is_active() else "slow-abandoned"
            self._record(request, context, outcome)
            return ExportResponse()
        if isinstance(behaviour, PartialSuccess):
            self._record(request, context, "partial")
            response = ExportResponse()
            response.partial_success.rejected_data_points = (
                behaviour.rejected_data_points
            )
            response.partial_success.error_message = behaviour.error_message
            return response
        self._record(request, context, "accepted")
        return ExportResponse()


class ByteCountingProxy:
    """A TCP relay on 127.0.0.1:0 that counts the bytes clients send to ``upstream_port``.

    gRPC hides the message encoding from the servicer, so compression is observed where it
    matters: on the wire.
    """

    def __init__(self, upstream_port: int) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self.bytes_upstream = 0
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
            self._sockets += [client, upstream]
            threading.Thread(
                target=self._pump, args=(client, upstream, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(upstream, client, False), daemon=True
            ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, count: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if count:
                    with self._lock:
                        self.bytes_upstream += len(chunk)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            s.close()
