"""What a push says about the application its client belongs to, read from the OTLP bytes
without building a message (a walk of tags and lengths, like ``payload.holds_a_metric``).

From a ``MetricsData`` payload (opentelemetry/proto/metrics/v1/metrics.proto):

* the resource attribute ``group_id`` (the Java consumer sets it for a consumer in a
  group; a Kafka Streams thread's main consumer carries its application id there);
* whether it holds a metric named ``org.apache.kafka.stream.*`` (a Kafka Streams client) or
  ``org.apache.kafka.consumer.share.*`` (a KIP-932 share consumer);
* for the few Streams metrics an application's state is made of (:data:`STREAMS_POINTS`),
  the latest data point of each series: its value and its ``process_id``,
  ``application_id`` and ``thread_id`` attributes.

The manager (collector/telemetry/client_metrics.py) reads a client instance's first pushes
with :func:`read_signals` until one decides what it is, then only the pushes of Streams
instances (whose states change); every other instance costs one attribute read a push.

Fields walked, by number (metrics.proto, common.proto, resource.proto):

=================  ==========================================================
MetricsData        1 resource_metrics
ResourceMetrics    1 resource, 2 scope_metrics
Resource           1 attributes (KeyValue)
KeyValue           1 key, 2 value (AnyValue: 1 string_value, 3 int_value)
ScopeMetrics       2 metrics
Metric             1 name, 5 gauge, 7 sum
Gauge / Sum        1 data_points; Sum: 2 aggregation_temporality
NumberDataPoint    3 time_unix_nano (fixed64), 4 as_double, 6 as_int, 7 attributes
=================  ==========================================================
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, replace
from typing import Final

from collector.telemetry.protobuf_wire import read_varint, skip_field
from proto.streams_states import CLIENT_STATE_METRIC, THREAD_STATE_METRIC

__all__ = [
    "ALIVE_THREADS_METRIC",
    "FAILED_THREADS_METRIC",
    "NOT_AN_APPLICATION",
    "STREAMS_POINTS",
    "ApplicationSignals",
    "StreamsClientId",
    "StreamsPoint",
    "observe_push",
    "parse_streams_client_id",
    "read_signals",
    "walks_every_push",
]

ALIVE_THREADS_METRIC: Final = "org.apache.kafka.stream.alive.stream.threads"
FAILED_THREADS_METRIC: Final = "org.apache.kafka.stream.failed.stream.threads"
# The Streams series kept, latest point each.
STREAMS_POINTS: Final = frozenset(
    {
        CLIENT_STATE_METRIC,
        THREAD_STATE_METRIC,
        ALIVE_THREADS_METRIC,
        FAILED_THREADS_METRIC,
    }
)
_STREAMS_POINT_NAMES: Final = frozenset(n.encode() for n in STREAMS_POINTS)
_STREAMS_PREFIX: Final = b"org.apache.kafka.stream."
_SHARE_PREFIX: Final = b"org.apache.kafka.consumer.share."
_POINT_ATTRIBUTES: Final = frozenset({b"process_id", b"application_id", b"thread_id"})
_DELTA: Final = 1  # AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
_DOUBLE: Final = struct.Struct("<d")
_INT64: Final = struct.Struct("<q")
_UINT64: Final = struct.Struct("<Q")


@dataclass(frozen=True, slots=True)
class StreamsPoint:
    """The latest point of one Streams series (metric, thread_id) of one instance.

    ``value`` is the point's value, except for a delta Sum (``failed.stream.threads`` is a
    cumulative count the collector asks for as deltas), where it is the running total of
    the deltas seen.  ``since_unix_nano``: the time of the first point of the latest run of
    this value (when a state was entered, as far as the pushes tell)."""

    metric: str
    value: float
    time_unix_nano: int
    since_unix_nano: int
    process_id: str | None
    application_id: str | None
    thread_id: str | None


@dataclass(frozen=True, slots=True)
class ApplicationSignals:
    """What an instance's pushes said about its application (see the module docstring)."""

    group_id: str | None
    streams: bool
    share_consumer: bool
    points: tuple[StreamsPoint, ...]


# An instance decided not to belong to an application: its pushes are not read again.
NOT_AN_APPLICATION: Final = ApplicationSignals(None, False, False, ())


@dataclass(frozen=True, slots=True)
class StreamsClientId:
    """A client id as Kafka Streams names its clients (``ClientUtils`` in
    streams/src/main/java/org/apache/kafka/streams/processor/internals/): ``<prefix>-admin``,
    ``<prefix>-global-consumer``, ``<prefix>-StreamThread-<n>-consumer|producer|restore-consumer``
    and ``<prefix>-StateUpdater-<n>-restore-consumer``, where ``<prefix>`` is the process's
    ``client.id``, by default ``<application.id>-<process uuid>``.

    ``process_key`` is that prefix (one per process); ``application_id`` and ``process_id``
    are the halves of a default prefix (None when ``client.id`` was set); ``thread_id`` is
    the stream thread's name for its clients (``<prefix>-StreamThread-<n>``, the
    ``thread_id`` attribute of its ``thread.state``); ``role`` is admin, consumer,
    producer, restore-consumer or global-consumer."""

    process_key: str
    role: str
    thread_id: str | None
    application_id: str | None
    process_id: str | None


_STREAMS_CLIENT_ID: Final = re.compile(
    r"(?P<prefix>.+?)-(?:(?P<admin>admin)|(?P<global>global-consumer)"
    r"|(?P<thread>(?:StreamThread|StateUpdater)-[0-9]+)-"
    r"(?P<role>consumer|producer|restore-consumer))"
)
_PROCESS_UUID: Final = re.compile(
    r"(?P<application>.+)-(?P<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
)


def parse_streams_client_id(client_id: str | None) -> StreamsClientId | None:
    """The parts of a Streams client id; None for a client id Streams would not give."""
    if not client_id:
        return None
    found = _STREAMS_CLIENT_ID.fullmatch(client_id)
    if found is None:
        return None
    prefix = found.group("prefix")
    thread = found.group("thread")
    if found.group("admin"):
        role = "admin"
    elif found.group("global"):
        role = "global-consumer"
    else:
        role = found.group("role")
        if thread.startswith("StateUpdater-") and role != "restore-consumer":
            return None
    parts = _PROCESS_UUID.fullmatch(prefix)
    return StreamsClientId(
        prefix,
        role,
        f"{prefix}-{thread}" if thread and thread.startswith("StreamThread-") else None,
        parts.group("application") if parts is not None else None,
        parts.group("uuid") if parts is not None else None,
    )


def walks_every_push(signals: ApplicationSignals, client_id: str | None) -> bool:
    """Whether an instance's later pushes are read too: a Streams client's (its states
    change), told by a ``stream.*`` metric or by the client id of a process's admin client
    or a thread's main consumer (which carry the state metrics, should a first push lack
    them)."""
    if signals.streams:
        return True
    parsed = parse_streams_client_id(client_id)
    if parsed is None:
        return False
    return (parsed.role == "admin" and parsed.process_id is not None) or (
        parsed.role == "consumer" and parsed.thread_id is not None
    )


def observe_push(
    payload: bytes, previous: ApplicationSignals | None, client_id: str | None
) -> ApplicationSignals:
    """An instance's signals after an accepted push of ``payload``.

    ``previous`` None: the instance's first push read, which decides.  A Streams client
    (:func:`walks_every_push`) is marked ``streams`` and read at every push; a consumer in
    a group (``group_id``) or a share consumer keeps what this push said and is not read
    again (a group does not change in a client's life); anything else is
    :data:`NOT_AN_APPLICATION`, not read again either."""
    signals = read_signals(payload, previous)
    if previous is not None:
        return signals
    if walks_every_push(signals, client_id):
        return signals if signals.streams else replace(signals, streams=True)
    if signals.group_id is None and not signals.share_consumer:
        return NOT_AN_APPLICATION
    return signals


class _Walk:
    """One payload's findings (a mutable scratch object; the result is immutable)."""

    __slots__ = ("group_id", "points", "share", "streams")

    def __init__(self) -> None:
        self.group_id: str | None = None
        self.streams = False
        self.share = False
        # (metric, thread_id) -> (value, time_unix_nano, process_id, application_id, delta)
        self.points: dict[
            tuple[str, str | None],
            tuple[float, int, str | None, str | None, bool],
        ] = {}


def read_signals(
    payload: bytes, previous: ApplicationSignals | None = None
) -> ApplicationSignals:
    """The signals of ``payload`` (a ``MetricsData`` that already parsed), merged with
    ``previous`` (the same instance's earlier pushes): resource attributes and flags seen
    once stay; a series absent from this push keeps its previous point."""
    walk = _Walk()
    pos = 0
    end = len(payload)
    while pos < end:
        key, pos = read_varint(payload, pos)
        if key == _field(1, 2):
            length, pos = read_varint(payload, pos)
            _resource_metrics(payload, pos, min(pos + length, end), walk)
            pos += length
        else:
            pos = skip_field(payload, pos, key)
    return _merge(walk, previous)


def _merge(walk: _Walk, previous: ApplicationSignals | None) -> ApplicationSignals:
    old: dict[tuple[str, str | None], StreamsPoint] = {}
    if previous is not None:
        old = {(p.metric, p.thread_id): p for p in previous.points}
    merged = dict(old)
    for (metric, thread_id), (value, time, process, application, delta) in sorted(
        walk.points.items(), key=lambda item: (item[0][0], item[0][1] or "")
    ):
        before = old.get((metric, thread_id))
        if before is not None and time < before.time_unix_nano:
            continue  # an older point than the one kept (pushes out of order)
        if delta:
            value += before.value if before is not None else 0.0
        since = time
        if before is not None and before.value == value:
            since = before.since_unix_nano
        merged[(metric, thread_id)] = StreamsPoint(
            metric,
            value,
            time,
            since,
            process if process is not None or before is None else before.process_id,
            application
            if application is not None or before is None
            else before.application_id,
            thread_id,
        )
    was = previous if previous is not None else NOT_AN_APPLICATION
    return ApplicationSignals(
        walk.group_id if walk.group_id is not None else was.group_id,
        walk.streams or was.streams,
        walk.share or was.share_consumer,
        tuple(merged[k] for k in sorted(merged, key=lambda k: (k[0], k[1] or ""))),
    )


def _field(number: int, wire_type: int) -> int:
    return (number << 3) | wire_type


def _resource_metrics(buf: bytes, pos: int, end: int, walk: _Walk) -> None:
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _field(1, 2):  # resource
            length, pos = read_varint(buf, pos)
            _resource(buf, pos, min(pos + length, end), walk)
            pos += length
        elif key == _field(2, 2):  # scope_metrics
            length, pos = read_varint(buf, pos)
            _scope_metrics(buf, pos, min(pos + length, end), walk)
            pos += length
        else:
            pos = skip_field(buf, pos, key)


def _resource(buf: bytes, pos: int, end: int, walk: _Walk) -> None:
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _field(1, 2):  # attributes
            length, pos = read_varint(buf, pos)
            name, value = _key_value(buf, pos, min(pos + length, end))
            if name == b"group_id":
                walk.group_id = value
            pos += length
        else:
            pos = skip_field(buf, pos, key)


def _key_value(buf: bytes, pos: int, end: int) -> tuple[bytes, str | None]:
    """A KeyValue's key, and its value when it is a string or an int (as text)."""
    name = b""
    value: str | None = None
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _field(1, 2):
            length, pos = read_varint(buf, pos)
            name = buf[pos : min(pos + length, end)]
            pos += length
        elif key == _field(2, 2):
            length, pos = read_varint(buf, pos)
            value = _any_value(buf, pos, min(pos + length, end))
            pos += length
        else:
            pos = skip_field(buf, pos, key)
    return name, value


def _any_value(buf: bytes, pos: int, end: int) -> str | None:
    value: str | None = None
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _field(1, 2):  # string_value
            length, pos = read_varint(buf, pos)
            value = buf[pos : min(pos + length, end)].decode("utf-8", "replace")
            pos += length
        elif key == _field(3, 0):  # int_value
            number, pos = read_varint(buf, pos)
            value = str(number - (1 << 64) if number >= 1 << 63 else number)
        else:
            pos = skip_field(buf, pos, key)
    return value


def _scope_metrics(buf: bytes, pos: int, end: int, walk: _Walk) -> None:
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _field(2, 2):  # metrics
            length, pos = read_varint(buf, pos)
            _metric(buf, pos, min(pos + length, end), walk)
            pos += length
        else:
            pos = skip_field(buf, pos, key)


def _metric(buf: bytes, pos: int, end: int, walk: _Walk) -> None:
    # The name comes first as every OTLP encoder writes the fields in number order; a
    # payload that puts it after the data is read in a second pass over the same bytes.
    start = pos
    name = b""
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _field(1, 2):
            length, pos = read_varint(buf, pos)
            name = buf[pos : min(pos + length, end)]
            break
        pos = skip_field(buf, pos, key)
    if not name.startswith(_STREAMS_PREFIX):
        if name.startswith(_SHARE_PREFIX):
            walk.share = True
        return
    walk.streams = True
    if name not in _STREAMS_POINT_NAMES:
        return
    metric = name.decode()
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key in (_field(5, 2), _field(7, 2)):  # gauge, sum
            length, pos = read_varint(buf, pos)
            _data(buf, pos, min(pos + length, end), metric, key == _field(7, 2), walk)
            pos += length
        else:
            pos = skip_field(buf, pos, key)


def _data(
    buf: bytes, pos: int, end: int, metric: str, is_sum: bool, walk: _Walk
) -> None:
    points: list[tuple[int, int]] = []
    delta = False
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _field(1, 2):  # data_points
            length, pos = read_varint(buf, pos)
            points.append((pos, min(pos + length, end)))
            pos += length
        elif key == _field(2, 0):  # Sum.aggregation_temporality
            temporality, pos = read_varint(buf, pos)
            delta = is_sum and temporality == _DELTA
        else:
            pos = skip_field(buf, pos, key)
    for start, stop in points:
        _point(buf, start, stop, metric, delta, walk)


def _point(
    buf: bytes, pos: int, end: int, metric: str, delta: bool, walk: _Walk
) -> None:
    value = float("nan")
    time = 0
    attributes: dict[bytes, str | None] = {}
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == _field(3, 1):  # time_unix_nano
            time = _UINT64.unpack_from(buf, pos)[0] if pos + 8 <= end else 0
            pos += 8
        elif key == _field(4, 1):  # as_double
            value = _DOUBLE.unpack_from(buf, pos)[0] if pos + 8 <= end else value
            pos += 8
        elif key == _field(6, 1):  # as_int (sfixed64)
            value = float(_INT64.unpack_from(buf, pos)[0]) if pos + 8 <= end else value
            pos += 8
        elif key == _field(7, 2):  # attributes
            length, pos = read_varint(buf, pos)
            name, text = _key_value(buf, pos, min(pos + length, end))
            if name in _POINT_ATTRIBUTES:
                attributes[name] = text
            pos += length
        else:
            pos = skip_field(buf, pos, key)
    if value != value:
        return  # no value, or NaN: no state to tell
    series = (metric, attributes.get(b"thread_id"))
    kept = walk.points.get(series)
    if kept is not None and delta:
        value += kept[0]  # two deltas of one series in one push
    elif kept is not None and kept[1] > time:
        return
    walk.points[series] = (
        value,
        max(time, kept[1]) if kept is not None else time,
        attributes.get(b"process_id"),
        attributes.get(b"application_id"),
        delta,
    )
