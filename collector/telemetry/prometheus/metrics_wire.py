"""An OTLP ``MetricsData`` payload walked from its bytes into what the fold reads
(points.py), no protobuf message built.

protobuf-python's ``MetricsData.FromString`` decodes a push in a few microseconds, but each
field the fold then reads is an attribute lookup on a message wrapper made on demand: on a
librdkafka push (12 data points) the fold spent more than ten times the decode's time
reading fields.  This walk (compiled with mypyc, over ``protobuf_wire``'s varints) makes
plain objects holding only the fields the fold uses, and leaves a metric's data points
unread unless the caller wants its name (the metric-name allowlist):

| message | field (number) | kept as |
|---|---|---|
| ResourceMetrics | resource (1) -> attributes (1) | ``WireResource.attributes``: the KeyValue fields' raw bytes |
| ResourceMetrics | scope_metrics (2) -> metrics (2) | ``WireResource.metrics``: each ``WireMetric``, its data unread |
| Metric | name (1), description (2), unit (3) | text |
| Metric | gauge (5), sum (7), histogram (9), exponential_histogram (10), summary (11) | ``kind`` and the bytes of that message (the last one wins, as in a oneof) |
| Sum / Histogram | aggregation_temporality (2), is_monotonic (3, Sum) | numbers |
| a data point | attributes | their raw bytes: a series' key, rendered into labels once (points.py) |
| NumberDataPoint | start (2), time (3), as_double (4), as_int (6), flags (8) | numbers |
| HistogramDataPoint | start (2), time (3), count (4), sum (5), bucket_counts (6), explicit_bounds (7), flags (10) | numbers, lists |
| SummaryDataPoint | start (2), time (3), count (4), sum (5), quantile_values (6), flags (8) | numbers, pairs |

Exemplars, scopes, metadata and schema URLs are skipped.  A payload this walk cannot
read (a length past its end, text that is not UTF-8) raises ``ValueError``, as
``FromString`` raises ``DecodeError``: the fold counts it undecodable.
"""

from __future__ import annotations

import struct
from typing import ClassVar, Final

from collector.telemetry.protobuf_wire import read_varint, skip_field

__all__ = [
    "WireHistogramPoint",
    "WireMetric",
    "WireNumberPoint",
    "WireResource",
    "WireSummaryPoint",
    "any_value_text",
    "key_values",
    "resources",
]

_DOUBLE: Final = struct.Struct("<d")
_FIXED64: Final = struct.Struct("<Q")
_SFIXED64: Final = struct.Struct("<q")

# Metric's data oneof: field number -> kind (as ``WhichOneof("data")`` names it).
_KINDS: Final[dict[int, str]] = {
    5: "gauge",
    7: "sum",
    9: "histogram",
    10: "exponential_histogram",
    11: "summary",
}


def _field_end(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """A length-delimited field's value at ``pos``: (its start, its end)."""
    length, pos = read_varint(buf, pos)
    stop = pos + length
    if stop > end:
        raise ValueError("a field runs past the end of its message")
    return pos, stop


def _skip(buf: bytes, pos: int, key: int, end: int) -> int:
    pos = skip_field(buf, pos, key)
    if pos > end:
        raise ValueError("a field runs past the end of its message")
    return pos


def _fixed64(buf: bytes, pos: int, end: int) -> int:
    if pos + 8 > end:
        raise ValueError("a fixed64 runs past the end of its message")
    value: int = _FIXED64.unpack_from(buf, pos)[0]
    return value


def _double(buf: bytes, pos: int, end: int) -> float:
    if pos + 8 > end:
        raise ValueError("a double runs past the end of its message")
    value: float = _DOUBLE.unpack_from(buf, pos)[0]
    return value


def _text(buf: bytes, start: int, stop: int) -> str:
    return buf[start:stop].decode()  # UnicodeDecodeError is a ValueError


class WireResource:
    """One ResourceMetrics: its resource's attributes (raw) and its metrics."""

    __slots__ = ("attributes", "metrics")

    def __init__(self, attributes: bytes, metrics: list[WireMetric]) -> None:
        self.attributes = attributes
        self.metrics = metrics


class WireMetric:
    """One Metric: its names, its kind (None: no data), and its data's bytes, read by
    :meth:`read` only when asked."""

    __slots__ = (
        "buf",
        "data_end",
        "data_start",
        "description",
        "is_monotonic",
        "kind",
        "name",
        "temporality",
        "unit",
    )

    def __init__(self, buf: bytes, start: int, end: int) -> None:
        self.buf = buf
        self.name = ""
        self.description = ""
        self.unit = ""
        self.kind: str | None = None
        self.data_start = 0
        self.data_end = 0
        self.temporality = 0
        self.is_monotonic = False
        pos = start
        while pos < end:
            key, pos = read_varint(buf, pos)
            number = key >> 3
            if key & 7 != 2:
                pos = _skip(buf, pos, key, end)
                continue
            field_start, field_end = _field_end(buf, pos, end)
            pos = field_end
            if number == 1:
                self.name = _text(buf, field_start, field_end)
            elif number == 2:
                self.description = _text(buf, field_start, field_end)
            elif number == 3:
                self.unit = _text(buf, field_start, field_end)
            else:
                kind = _KINDS.get(number)
                if kind is not None:
                    self.kind = kind
                    self.data_start = field_start
                    self.data_end = field_end

    def number_points(self) -> list[WireNumberPoint]:
        """The data points of its gauge or sum (and the sum's temporality and
        monotonicity, set on this metric)."""
        return [WireNumberPoint(self.buf, s, e) for s, e in self._data_points()]

    def histogram_points(self) -> list[WireHistogramPoint]:
        """The data points of its histogram (and its temporality)."""
        return [WireHistogramPoint(self.buf, s, e) for s, e in self._data_points()]

    def summary_points(self) -> list[WireSummaryPoint]:
        """The data points of its summary."""
        return [WireSummaryPoint(self.buf, s, e) for s, e in self._data_points()]

    def _data_points(self) -> list[tuple[int, int]]:
        """Where its data's points are: (start, end) each; the data's temporality and
        monotonicity are set on this metric on the way."""
        buf = self.buf
        spans: list[tuple[int, int]] = []
        pos = self.data_start
        end = self.data_end
        while pos < end:
            key, pos = read_varint(buf, pos)
            if key == (1 << 3 | 2):  # data_points
                field_start, pos = _field_end(buf, pos, end)
                spans.append((field_start, pos))
            elif key == (2 << 3 | 0):  # aggregation_temporality
                self.temporality, pos = read_varint(buf, pos)
            elif key == (3 << 3 | 0):  # is_monotonic
                value, pos = read_varint(buf, pos)
                self.is_monotonic = value != 0
            else:
                pos = _skip(buf, pos, key, end)
        return spans


class _WirePoint:
    """What every kind of data point has, and the walk of its fields: the attributes (at
    ``ATTRIBUTES``, kept as their raw bytes), the flags (at ``FLAGS``), the start and the
    time (2 and 3 in every kind); a subclass reads the rest in :meth:`_field`."""

    ATTRIBUTES: ClassVar[int] = 0
    FLAGS: ClassVar[int] = 0

    def __init__(self, buf: bytes, start: int, end: int) -> None:
        self.flags = 0
        self.start_time_unix_nano = 0
        self.time_unix_nano = 0
        attributes_key = self.ATTRIBUTES << 3 | 2
        flags_key = self.FLAGS << 3
        spans: list[bytes] = []
        pos = start
        while pos < end:
            field = pos
            key, pos = read_varint(buf, pos)
            if key == attributes_key:
                pos = _field_end(buf, pos, end)[1]
                spans.append(buf[field:pos])
            elif key == (2 << 3 | 1):
                self.start_time_unix_nano = _fixed64(buf, pos, end)
                pos += 8
            elif key == (3 << 3 | 1):
                self.time_unix_nano = _fixed64(buf, pos, end)
                pos += 8
            elif key == flags_key:
                self.flags, pos = read_varint(buf, pos)
            else:
                pos = self._field(buf, pos, key, end)
        self.attributes = b"".join(spans)

    def _field(self, buf: bytes, pos: int, key: int, end: int) -> int:
        """Read the field whose key was just read at ``pos``: the position after it."""
        return _skip(buf, pos, key, end)


class WireNumberPoint(_WirePoint):
    """A NumberDataPoint (of a gauge or a sum)."""

    ATTRIBUTES: ClassVar[int] = 7
    FLAGS: ClassVar[int] = 8

    def __init__(self, buf: bytes, start: int, end: int) -> None:
        self.as_double = 0.0
        self.as_int = 0
        super().__init__(buf, start, end)

    def _field(self, buf: bytes, pos: int, key: int, end: int) -> int:
        if key == (4 << 3 | 1):  # the value oneof: the last one set wins
            self.as_double = _double(buf, pos, end)
            self.as_int = 0
            return pos + 8
        if key == (6 << 3 | 1):
            if pos + 8 > end:
                raise ValueError("a sfixed64 runs past the end of its message")
            self.as_int = _SFIXED64.unpack_from(buf, pos)[0]
            self.as_double = 0.0
            return pos + 8
        return _skip(buf, pos, key, end)


class WireHistogramPoint(_WirePoint):
    """A HistogramDataPoint."""

    ATTRIBUTES: ClassVar[int] = 9
    FLAGS: ClassVar[int] = 10

    def __init__(self, buf: bytes, start: int, end: int) -> None:
        self.count = 0
        self.sum = 0.0
        self.bucket_counts: list[int] = []
        self.explicit_bounds: list[float] = []
        super().__init__(buf, start, end)

    def _field(self, buf: bytes, pos: int, key: int, end: int) -> int:
        if key == (4 << 3 | 1):
            self.count = _fixed64(buf, pos, end)
        elif key == (5 << 3 | 1):
            self.sum = _double(buf, pos, end)
        elif key == (6 << 3 | 2):  # packed
            start, stop = _field_end(buf, pos, end)
            for at in range(start, stop - 7, 8):
                self.bucket_counts.append(_fixed64(buf, at, stop))
            return stop
        elif key == (7 << 3 | 2):  # packed
            start, stop = _field_end(buf, pos, end)
            for at in range(start, stop - 7, 8):
                self.explicit_bounds.append(_double(buf, at, stop))
            return stop
        elif key == (6 << 3 | 1):  # one element, not packed
            self.bucket_counts.append(_fixed64(buf, pos, end))
        elif key == (7 << 3 | 1):
            self.explicit_bounds.append(_double(buf, pos, end))
        else:
            return _skip(buf, pos, key, end)
        return pos + 8


class WireSummaryPoint(_WirePoint):
    """A SummaryDataPoint; ``quantile_values`` as (quantile, value) pairs."""

    ATTRIBUTES: ClassVar[int] = 7
    FLAGS: ClassVar[int] = 8

    def __init__(self, buf: bytes, start: int, end: int) -> None:
        self.count = 0
        self.sum = 0.0
        self.quantile_values: list[tuple[float, float]] = []
        super().__init__(buf, start, end)

    def _field(self, buf: bytes, pos: int, key: int, end: int) -> int:
        if key == (4 << 3 | 1):
            self.count = _fixed64(buf, pos, end)
        elif key == (5 << 3 | 1):
            self.sum = _double(buf, pos, end)
        elif key == (6 << 3 | 2):
            start, stop = _field_end(buf, pos, end)
            self.quantile_values.append(_quantile(buf, start, stop))
            return stop
        else:
            return _skip(buf, pos, key, end)
        return pos + 8


def _quantile(buf: bytes, start: int, end: int) -> tuple[float, float]:
    quantile = value = 0.0
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == (1 << 3 | 1):
            quantile = _double(buf, pos, end)
            pos += 8
        elif key == (2 << 3 | 1):
            value = _double(buf, pos, end)
            pos += 8
        else:
            pos = _skip(buf, pos, key, end)
    return quantile, value


def resources(payload: bytes) -> list[WireResource]:
    """The ResourceMetrics of a ``MetricsData`` payload."""
    found: list[WireResource] = []
    end = len(payload)
    pos = 0
    while pos < end:
        key, pos = read_varint(payload, pos)
        if key != (1 << 3 | 2):
            pos = _skip(payload, pos, key, end)
            continue
        start, pos = _field_end(payload, pos, end)
        found.append(_resource(payload, start, pos))
    return found


def _resource(buf: bytes, start: int, end: int) -> WireResource:
    attributes: list[bytes] = []
    metrics: list[WireMetric] = []
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos)
        if key == (1 << 3 | 2):  # resource
            field_start, pos = _field_end(buf, pos, end)
            at = field_start
            while at < pos:
                field = at
                inner, at = read_varint(buf, at)
                if inner == (1 << 3 | 2):
                    at = _field_end(buf, at, pos)[1]
                    attributes.append(buf[field:at])
                else:
                    at = _skip(buf, at, inner, pos)
        elif key == (2 << 3 | 2):  # scope_metrics
            field_start, pos = _field_end(buf, pos, end)
            at = field_start
            while at < pos:
                inner, at = read_varint(buf, at)
                if inner == (2 << 3 | 2):
                    metric_start, at = _field_end(buf, at, pos)
                    metrics.append(WireMetric(buf, metric_start, at))
                else:
                    at = _skip(buf, at, inner, pos)
        else:
            pos = _skip(buf, pos, key, end)
    return WireResource(b"".join(attributes), metrics)


def key_values(raw: bytes) -> list[tuple[str, bytes]]:
    """KeyValue fields as a data point or a resource holds them (each with its tag and
    length, as the walk keeps them): (key, the AnyValue's bytes)."""
    pairs: list[tuple[str, bytes]] = []
    end = len(raw)
    pos = 0
    while pos < end:
        key, pos = read_varint(raw, pos)
        start, pos = _field_end(raw, pos, end)
        if key & 7 != 2:
            raise ValueError("an attribute is not a message")
        name = ""
        value = b""
        at = start
        while at < pos:
            inner, at = read_varint(raw, at)
            if inner & 7 != 2:
                at = _skip(raw, at, inner, pos)
                continue
            field_start, at = _field_end(raw, at, pos)
            if inner >> 3 == 1:
                name = _text(raw, field_start, at)
            elif inner >> 3 == 2:
                value = raw[field_start:at]
        pairs.append((name, value))
    return pairs


def any_value_text(raw: bytes) -> str | None:
    """An AnyValue's scalar rendered as the OpenTelemetry Collector's ``AsString`` renders
    it (string, bool, int, double; empty when unset); None for the other kinds (arrays,
    key-value lists, bytes), which the caller renders from the decoded message."""
    text = ""
    pos = 0
    end = len(raw)
    while pos < end:
        key, pos = read_varint(raw, pos)
        number = key >> 3
        wire_type = key & 7
        if number == 1 and wire_type == 2:
            start, pos = _field_end(raw, pos, end)
            text = _text(raw, start, pos)
        elif number == 2 and wire_type == 0:
            value, pos = read_varint(raw, pos)
            text = "true" if value else "false"
        elif number == 3 and wire_type == 0:
            value, pos = read_varint(raw, pos)
            if value >= 1 << 63:
                value -= 1 << 64
            text = str(value)
        elif number == 4 and wire_type == 1:
            text = repr(_double(raw, pos, end))
            pos += 8
        elif number in (5, 6, 7):
            return None
        else:
            pos = _skip(raw, pos, key, end)
    return text
