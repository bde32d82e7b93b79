"""What a push's shape tells, read from its ``MetricsData`` bytes without building messages:
how many metrics it holds, which of KIP-714's required metrics are among them, whose they
are (producer or consumer names) and the aggregation temporalities of its sums and
histograms.  The conformance view (``collector/app/conformance.py``) grades client
libraries on it.

A walk of tags and lengths like :func:`collector.telemetry.payload.holds_a_metric`, one
level deeper: into each ``Metric`` for its name (field 1) and into its ``Sum`` (7),
``Histogram`` (9) or ``ExponentialHistogram`` (10) for ``aggregation_temporality`` (2); a
``Gauge`` and a ``Summary`` carry none.  The payload has already parsed as ``MetricsData``.
The walk visits every metric (compiled, about a third of a microsecond each), so the push
path runs it on a sample of pushes only (``SHAPE_SAMPLE_EVERY`` in client_metrics.py).

Bounded by construction: a name is never kept, only looked up in :data:`REQUIRED_METRIC_BITS`
(a bit per required name) and tested against the two role prefixes.
"""

from __future__ import annotations

from typing import Final

from collector.telemetry.protobuf_wire import read_varint, skip_field

__all__ = [
    "REQUIRED_CONSUMER_METRICS",
    "REQUIRED_METRIC_BITS",
    "REQUIRED_PRODUCER_METRICS",
    "ROLE_CONSUMER",
    "ROLE_PRODUCER",
    "TEMPORALITY_BITS",
    "PushShape",
    "read_shape",
]

# KIP-714's "Client metrics" section, its tables "Standard producer metrics" and "Standard
# consumer metrics": the metrics marked required there (the others are recommended).
# https://cwiki.apache.org/confluence/display/KAFKA/KIP-714%3A+Client+metrics+and+observability
REQUIRED_PRODUCER_METRICS: Final = (
    "org.apache.kafka.producer.node.request.latency.avg",
    "org.apache.kafka.producer.node.request.latency.max",
    "org.apache.kafka.producer.produce.throttle.time.avg",
    "org.apache.kafka.producer.produce.throttle.time.max",
    "org.apache.kafka.producer.record.queue.time.avg",
    "org.apache.kafka.producer.record.queue.time.max",
)
REQUIRED_CONSUMER_METRICS: Final = (
    "org.apache.kafka.consumer.node.request.latency.avg",
    "org.apache.kafka.consumer.node.request.latency.max",
    "org.apache.kafka.consumer.coordinator.commit.latency.avg",
    "org.apache.kafka.consumer.coordinator.commit.latency.max",
    "org.apache.kafka.consumer.coordinator.assigned.partitions",
    "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg",
    "org.apache.kafka.consumer.fetch.manager.fetch.latency.max",
)
# Name (as the payload's bytes) -> its bit in PushShape.required (producer's first).
REQUIRED_METRIC_BITS: Final[dict[bytes, int]] = {
    name.encode(): 1 << index
    for index, name in enumerate(REQUIRED_PRODUCER_METRICS + REQUIRED_CONSUMER_METRICS)
}

# PushShape.roles: the push held a name under the role's prefix.
ROLE_PRODUCER: Final = 1
ROLE_CONSUMER: Final = 2
_PRODUCER_PREFIX: Final = b"org.apache.kafka.producer."
_CONSUMER_PREFIX: Final = b"org.apache.kafka.consumer."

# PushShape.temporalities: bit (1 << AggregationTemporality) for the values OTLP defines,
# the last bit for any other value.
TEMPORALITY_BITS: Final = {"unspecified": 1, "delta": 2, "cumulative": 4, "other": 8}
_OTHER_TEMPORALITY: Final = 8

_LENGTH_DELIMITED: Final = 2
# (field << 3) | wire type of the fields the walk descends into or reads.
_RESOURCE_METRICS: Final = (1 << 3) | _LENGTH_DELIMITED  # MetricsData.resource_metrics
_SCOPE_METRICS: Final = (2 << 3) | _LENGTH_DELIMITED  # ResourceMetrics.scope_metrics
_METRICS: Final = (2 << 3) | _LENGTH_DELIMITED  # ScopeMetrics.metrics
_NAME: Final = (1 << 3) | _LENGTH_DELIMITED  # Metric.name
_SUM: Final = (7 << 3) | _LENGTH_DELIMITED  # Metric.sum
_HISTOGRAM: Final = (9 << 3) | _LENGTH_DELIMITED  # Metric.histogram
_EXPONENTIAL_HISTOGRAM: Final = (10 << 3) | _LENGTH_DELIMITED
_TEMPORALITY: Final = 2 << 3  # Sum/Histogram.aggregation_temporality, a varint


class PushShape:
    """One push's shape: ``metrics`` (how many ``Metric`` messages), ``required`` (bits of
    :data:`REQUIRED_METRIC_BITS` seen), ``roles`` and ``temporalities`` (bits)."""

    __slots__ = ("metrics", "required", "roles", "temporalities")

    def __init__(self) -> None:
        self.metrics = 0
        self.required = 0
        self.roles = 0
        self.temporalities = 0


def read_shape(
    payload: bytes, known: dict[bytes, int] = REQUIRED_METRIC_BITS
) -> PushShape:
    """The shape of ``payload``, a serialized ``MetricsData`` that already parsed."""
    shape = PushShape()
    end = len(payload)
    pos = 0
    while pos < end:
        key, pos = read_varint(payload, pos)
        if key == _RESOURCE_METRICS:
            length, pos = read_varint(payload, pos)
            _resource_metrics(payload, pos, min(pos + length, end), known, shape)
            pos += length
        else:
            pos = skip_field(payload, pos, key)
    return shape


def _resource_metrics(
    buf: bytes, pos: int, end: int, known: dict[bytes, int], shape: PushShape
) -> None:
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _SCOPE_METRICS:
            length, pos = read_varint(buf, pos)
            _scope_metrics(buf, pos, min(pos + length, end), known, shape)
            pos += length
        else:
            pos = skip_field(buf, pos, key)


def _scope_metrics(
    buf: bytes, pos: int, end: int, known: dict[bytes, int], shape: PushShape
) -> None:
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _METRICS:
            length, pos = read_varint(buf, pos)
            _metric(buf, pos, min(pos + length, end), known, shape)
            pos += length
        else:
            pos = skip_field(buf, pos, key)


def _metric(
    buf: bytes, pos: int, end: int, known: dict[bytes, int], shape: PushShape
) -> None:
    shape.metrics += 1
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _NAME:
            length, pos = read_varint(buf, pos)
            name = buf[pos : min(pos + length, end)]
            shape.required |= known.get(name, 0)
            if name.startswith(_PRODUCER_PREFIX):
                shape.roles |= ROLE_PRODUCER
            elif name.startswith(_CONSUMER_PREFIX):
                shape.roles |= ROLE_CONSUMER
            pos += length
        elif key == _SUM or key == _HISTOGRAM or key == _EXPONENTIAL_HISTOGRAM:
            length, pos = read_varint(buf, pos)
            shape.temporalities |= _temporality(buf, pos, min(pos + length, end))
            pos += length
        else:
            pos = skip_field(buf, pos, key)


def _temporality(buf: bytes, pos: int, end: int) -> int:
    """The bit of a Sum's or Histogram's temporality (absent: proto3's 0, unspecified)."""
    value = 0
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _TEMPORALITY:
            value, pos = read_varint(buf, pos)
        else:
            pos = skip_field(buf, pos, key)
    return 1 << value if 0 <= value <= 2 else _OTHER_TEMPORALITY
