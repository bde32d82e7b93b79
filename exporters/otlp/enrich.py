"""Stamp each pushed ``MetricsData`` with who sent it, as resource attributes.

librdkafka pushes an empty ``Resource``: without these labels a backend cannot tell one
client from another.  The key set is the one a Confluent example broker plugin
(``io.confluent.developer.ClientOtlpMetricsReporter``) appends; the values are strings,
as in Kafka's ``ClientMetricsInstanceMetadata`` attribute map (the port and broker id too),
so they map onto labels without a type conflict in any backend.

Behind a gateway (``ktc gateway``) two more say which Kafka cluster and which of its
brokers the client was talking to; a standalone collector has neither and adds neither.

Attributes the client set itself win: a key already present on a resource is left as it is.
Nothing else in the payload is touched (temporality, monotonicity, points, scopes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData, ResourceMetrics

from exporters.context import TelemetryContext

__all__ = [
    "RESOURCE_ATTRIBUTES",
    "UPSTREAM_RESOURCE_ATTRIBUTES",
    "count_data_points",
    "enrich",
    "enrichment_attributes",
]

# attribute key -> how to read it from the context.  Order is the order they are appended.
RESOURCE_ATTRIBUTES: tuple[tuple[str, Callable[[TelemetryContext], object]], ...] = (
    ("client_instance_id", lambda c: c.client_instance_id),
    ("client_id", lambda c: c.client_id),
    ("client_software_name", lambda c: c.client_software_name),
    ("client_software_version", lambda c: c.client_software_version),
    ("client_source_address", lambda c: c.client_source_address),
    ("client_source_port", lambda c: c.client_source_port),
    ("principal", lambda c: c.principal),
    # The same under the kafka.* namespace of OpenTelemetry's registry (kafka.cluster.id):
    # the semantic conventions name no principal attribute.
    ("kafka.principal", lambda c: c.principal),
    ("kafka.broker.id", lambda c: c.node_id),
    ("kafka.cluster.id", lambda c: c.cluster_id),
)

# Gateway mode: appended after the ones above, each only when the context has a value
# (a standalone collector has no upstream; the bootstrap listener stands for no broker).
UPSTREAM_RESOURCE_ATTRIBUTES: tuple[
    tuple[str, Callable[[TelemetryContext], object]], ...
] = (
    ("kafka.upstream.cluster.id", lambda c: c.upstream_cluster_id),
    ("kafka.upstream.broker.id", lambda c: c.upstream_node_id),
)

# Metric.data oneof name -> every kind keeps its points in ``data_points``.
_METRIC_KINDS = ("gauge", "sum", "histogram", "exponential_histogram", "summary")


def enrichment_attributes(context: TelemetryContext) -> tuple[tuple[str, str], ...]:
    """The (key, value) pairs for one push.  A null ``client_id`` becomes ``""``, as Kafka's
    instance metadata has it, so every enriched resource carries the same key set; the
    upstream attributes follow when they have a value."""
    return tuple(
        (key, "" if (value := read(context)) is None else str(value))
        for key, read in RESOURCE_ATTRIBUTES
    ) + tuple(
        (key, str(value))
        for key, read in UPSTREAM_RESOURCE_ATTRIBUTES
        if (value := read(context)) is not None
    )


def enrich(metrics: MetricsData, context: TelemetryContext) -> None:
    """Add the context's attributes to every resource of ``metrics``, in place."""
    attributes = enrichment_attributes(context)
    for resource_metrics in metrics.resource_metrics:
        resource = resource_metrics.resource
        present = {kv.key for kv in resource.attributes}
        resource.attributes.extend(
            KeyValue(key=key, value=AnyValue(string_value=value))
            for key, value in attributes
            if key not in present
        )


def count_data_points(resource_metrics: Iterable[ResourceMetrics]) -> int:
    """Data points across all metrics: the Collector's unit for ``*_metric_points``."""
    total = 0
    for rm in resource_metrics:
        for scope_metrics in rm.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind in _METRIC_KINDS:
                    total += len(getattr(metric, kind).data_points)
    return total
