"""One client instance's latest points, folded push by push the way the OpenTelemetry
Collector's Prometheus exporter accumulates them (``prometheusexporter/accumulator.go``,
``lastValueAccumulator``), so ``/metrics/clients`` shows the values that exporter shows for
the same pushes.  Clients push with delta temporality (the Get answer asks for it, as
Kafka's does), so sums and histograms are turned back into running totals here.

| OTLP point | kept as | a newer point |
|---|---|---|
| gauge | gauge | replaces it (an older timestamp is ignored) |
| sum, monotonic, cumulative | counter (``_total``) | replaces it |
| sum, monotonic, delta | counter (``_total``) | is added when it starts where the kept one ended, else replaces it |
| sum, not monotonic, cumulative | gauge | replaces it |
| sum, not monotonic, delta; unspecified temporality | dropped | |
| histogram, cumulative | histogram | replaces it |
| histogram, delta | histogram | is added (buckets, count, sum) when it starts where the kept one ended; one that starts later replaces it (a restart); one that starts earlier is dropped |
| summary | summary | replaces it |
| exponential histogram | dropped (the exporter drops it too) | |
| any point flagged "no recorded value" | its series is removed | |

The pushes are read by metrics_wire.py's walk of their bytes.  A point is keyed by its
family name (``naming.metric_name``) and its attributes as rendered labels, so the budget
and the exposition need no second pass over attributes; a series' labels are rendered
once, from the raw bytes of its resource's and its own attributes (``point_labels``), and
looked up by those bytes at every later push.

Two bounds the exporter does not have, so one client cannot take the page from the fleet:

| bound | rule |
|---|---|
| series per instance (``max_samples``) | a new series is admitted while the instance holds fewer than ``max_samples`` samples; past that its points are refused and counted, and the instance carries one more series, ``ktc_client_series_refused_total`` (its refused points so far) |
| expiry (``expire``) | a series no push refreshed for the expiry is removed, as the exporter's ``metric_expiration`` removes it; each point keeps the collector's time (``now_ms``) of the fold that last set it |

One addition the exporter does not make: Kafka Streams pushes its client and thread states
as gauges holding the enum's ordinal (KIP-1091; ``proto/streams_states.py``).  Beside that
gauge, kept as the exporter keeps it, each such point makes one series per state name in
``STATE_FAMILIES`` (kube-state-metrics' way with an enum): label ``state``, 1 for the state
the ordinal names, 0 for the others (all 0 for an ordinal the table does not have).  They
are admitted together or not at all (counted against ``max_samples`` like any series), set
by the same push and expire with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

from collector.telemetry.prometheus.metrics_wire import (
    WireHistogramPoint,
    WireMetric,
    WireNumberPoint,
    WireSummaryPoint,
    any_value_text,
    key_values,
)
from collector.telemetry.prometheus.naming import MetricType, label_name, metric_name
from proto.streams_states import (
    CLIENT_STATE_METRIC,
    KAFKA_STREAMS_STATES,
    STREAM_THREAD_STATES,
    THREAD_STATE_METRIC,
    state_name,
)

__all__ = [
    "IDENTITY_LABELS",
    "REFUSED_FAMILY",
    "REFUSED_HELP",
    "STATE_FAMILIES",
    "FamilyMeta",
    "HistogramPoint",
    "InstancePoints",
    "NumberPoint",
    "Point",
    "SeriesKey",
    "SummaryPoint",
    "attribute_labels",
    "escape_label_value",
    "point_labels",
    "resource_labels",
    "samples_of",
]

# The identity labels every series of an instance can carry, in exposition order.
IDENTITY_LABELS: tuple[str, ...] = (
    "client_id",
    "client_instance_id",
    "client_software_name",
    "client_software_version",
    "principal",
    "listener",
    "upstream_cluster_id",
    "upstream_node_id",
)
_IDENTITY = frozenset(IDENTITY_LABELS)

# The series that flags an instance refused series for want of room (a counter: the points
# refused so far); a client's own metric of that name is dropped, so it cannot fake one.
REFUSED_FAMILY = "ktc_client_series_refused_total"
REFUSED_HELP = (
    "Points of new series this client instance pushed and /metrics/clients refused "
    "(prometheus.clients.max.series.per.instance)"
)
_REFUSED_KEY = (REFUSED_FAMILY, "")

# The ordinal state gauges of Kafka Streams -> (the family of their named series, its help,
# the state names by ordinal).  A ``ktc_`` name: the collector derives these series, no
# client pushes them (a client's own metric of that name is dropped, as the flag's is); and
# a name of its own rather than a ``state`` label on the ordinal's family, so that family
# stays the one the OpenTelemetry Collector's exporter shows (docs/prometheus.md).
STATE_FAMILIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    CLIENT_STATE_METRIC: (
        "ktc_stream_client_state",
        "The Kafka Streams client's state (KafkaStreams.State): 1 for the state "
        "org.apache.kafka.stream.client.state names, 0 for the others",
        KAFKA_STREAMS_STATES,
    ),
    THREAD_STATE_METRIC: (
        "ktc_stream_thread_state",
        "The stream thread's state (StreamThread.State): 1 for the state "
        "org.apache.kafka.stream.thread.thread.state names, 0 for the others",
        STREAM_THREAD_STATES,
    ),
}
_DERIVED_FAMILIES = frozenset(
    {REFUSED_FAMILY, *(family for family, _, _ in STATE_FAMILIES.values())}
)

# A data point as the wire walk reads it.
_Wire = TypeVar("_Wire", WireNumberPoint, WireHistogramPoint, WireSummaryPoint)

_NO_RECORDED_VALUE = 1  # DataPointFlags.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK
_DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
_CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


class NumberPoint:
    __slots__ = ("start_ns", "time_ns", "type", "updated_ms", "value")

    def __init__(
        self, metric_type: MetricType, value: float, start_ns: int, time_ns: int
    ) -> None:
        self.type = metric_type  # GAUGE or COUNTER
        self.value = value
        self.start_ns = start_ns
        self.time_ns = time_ns
        self.updated_ms = 0  # the collector's clock when a push last set it


class HistogramPoint:
    __slots__ = (
        "bounds",
        "count",
        "counts",
        "start_ns",
        "sum",
        "time_ns",
        "updated_ms",
    )

    def __init__(
        self,
        bounds: tuple[float, ...],
        counts: list[int],
        count: int,
        total: float,
        start_ns: int,
        time_ns: int,
    ) -> None:
        self.bounds = bounds
        self.counts = counts
        self.count = count
        self.sum = total
        self.start_ns = start_ns
        self.time_ns = time_ns
        self.updated_ms = 0


class SummaryPoint:
    __slots__ = ("count", "quantiles", "sum", "time_ns", "updated_ms")

    def __init__(
        self,
        quantiles: tuple[tuple[float, float], ...],
        count: int,
        total: float,
        time_ns: int,
    ) -> None:
        self.quantiles = quantiles
        self.count = count
        self.sum = total
        self.time_ns = time_ns
        self.updated_ms = 0


Point = NumberPoint | HistogramPoint | SummaryPoint
# (family name, the point's attribute labels rendered: 'a="x",b="y"', sorted by name)
SeriesKey = tuple[str, str]


class FamilyMeta:
    """A family's type and help, as first seen."""

    __slots__ = ("help", "type")

    def __init__(self, metric_type: MetricType, help_text: str) -> None:
        self.type = metric_type
        self.help = help_text


def samples_of(point: Point) -> int:
    """Exposition lines (Prometheus series) one point makes."""
    if isinstance(point, NumberPoint):
        return 1
    if isinstance(point, HistogramPoint):
        return len(set(point.bounds)) + 3  # buckets, +Inf, _sum, _count
    return len(point.quantiles) + 2


def escape_label_value(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


class InstancePoints:
    """What one client instance pushed last, folded (only the folding thread touches it)."""

    __slots__ = (
        "identity",
        "instance_id",
        "instance_uuid",
        "last_push_ns",
        "now_ms",
        "oldest_ms",
        "points",
        "refused",
        "resource",
        "resource_raw",
        "samples",
    )

    def __init__(self, instance_id: str, instance_uuid: object) -> None:
        self.instance_id = instance_id
        self.instance_uuid = instance_uuid  # for the manager's liveness check
        # label name -> value, for the labels in IDENTITY_LABELS this instance has.
        self.identity: dict[str, str] = {}
        self.last_push_ns = 0
        self.points: dict[SeriesKey, Point] = {}
        self.samples = 0  # sum of samples_of over points
        self.refused = 0  # points of new series refused (no room), ever
        # The labels of the resource being folded (its attributes, as a point's), and
        # their raw bytes (the key of its points' rendered labels).
        self.resource: dict[str, str] = {}
        self.resource_raw = b""
        self.now_ms = 0  # the collector's clock of the fold under way
        # No point was set before this (so expire() skips the instance until it is due).
        self.oldest_ms: int | None = None

    def fold(
        self,
        metrics: Iterable[WireMetric],
        families: dict[str, FamilyMeta],
        names: dict[tuple[str, str, MetricType], str],
        max_samples: int,
        resource_raw: bytes,
        now_ms: int,
    ) -> None:
        """Fold one resource's metrics in (already filtered by the metric-name allowlist);
        ``resource_raw``: its attributes' bytes (``WireResource.attributes``);
        ``max_samples``: the samples this instance may hold before its new series are
        refused (one more is its refused-series flag); ``now_ms``: the collector's clock
        (expiry)."""
        self.resource = resource_labels(resource_raw)
        self.resource_raw = resource_raw
        self.now_ms = now_ms
        if self.oldest_ms is None:
            self.oldest_ms = now_ms
        refused = self.refused
        for metric in metrics:
            kind = metric.kind
            if kind == "gauge" or kind == "sum":
                numbers = metric.number_points()  # (sets the sum's temporality)
                metric_type = MetricType.GAUGE
                delta = False
                if kind == "sum":
                    temporality = metric.temporality
                    if temporality not in (_DELTA, _CUMULATIVE):
                        continue
                    if temporality == _DELTA and not metric.is_monotonic:
                        continue
                    if metric.is_monotonic:
                        metric_type = MetricType.COUNTER
                    delta = temporality == _DELTA
                family = self._family(metric, metric_type, families, names)
                if family:
                    self._fold_numbers(family, numbers, metric_type, delta, max_samples)
                named = STATE_FAMILIES.get(metric.name) if kind == "gauge" else None
                if named is not None:
                    self._fold_states(numbers, named, families, max_samples)
            elif kind == "histogram":
                family = self._family(metric, MetricType.HISTOGRAM, families, names)
                if family:
                    self._fold_histograms(family, metric, max_samples)
            elif kind == "summary":
                family = self._family(metric, MetricType.SUMMARY, families, names)
                if family:
                    self._fold_summaries(family, metric, max_samples)
            # exponential_histogram and unset data: dropped, as the exporter does
        if self.refused != refused:
            self._flag(families)

    def _flag(self, families: dict[str, FamilyMeta]) -> None:
        """The refused-series flag, set to the refusals so far (outside ``max_samples``:
        the caller leaves one sample of room for it)."""
        flag = self.points.get(_REFUSED_KEY)
        if not isinstance(flag, NumberPoint):
            flag = NumberPoint(MetricType.COUNTER, 0.0, 0, 0)
            self.points[_REFUSED_KEY] = flag
            self.samples += 1
            if REFUSED_FAMILY not in families:
                families[REFUSED_FAMILY] = FamilyMeta(MetricType.COUNTER, REFUSED_HELP)
        flag.value = float(self.refused)
        flag.updated_ms = self.now_ms

    @property
    def flagged(self) -> bool:
        """This instance holds the refused-series flag."""
        return _REFUSED_KEY in self.points

    def expire(self, now_ms: int, expiry_ms: int) -> int:
        """Remove the points no fold set for more than ``expiry_ms`` (the exporter's
        ``metric_expiration``); returns the samples they made.  An instance none of whose points can be
        due yet is not walked: ``oldest_ms`` is at most its oldest point's time."""
        oldest = self.oldest_ms
        if oldest is None or now_ms - oldest <= expiry_ms:
            return 0
        horizon = now_ms - expiry_ms
        points = self.points
        gone = [key for key, point in points.items() if point.updated_ms < horizon]
        removed = 0
        for key in gone:
            removed += samples_of(points.pop(key))
        self.samples -= removed
        self.oldest_ms = min(
            (point.updated_ms for point in points.values()), default=now_ms
        )
        return removed

    def _family(
        self,
        metric: WireMetric,
        metric_type: MetricType,
        families: dict[str, FamilyMeta],
        names: dict[tuple[str, str, MetricType], str],
    ) -> str:
        key = (metric.name, metric.unit, metric_type)
        family = names.get(key)
        if family is None:
            if len(names) >= _MAX_NAMES:
                names.clear()  # a bound against clients inventing names
            family = metric_name(metric.name, metric.unit, metric_type)
            if family in _DERIVED_FAMILIES:
                family = ""  # the collector's series, not the client's to set
            names[key] = family
        if family and family not in families:
            families[family] = FamilyMeta(metric_type, metric.description)
        return family

    def _put(self, key: SeriesKey, point: Point, max_samples: int) -> bool:
        previous = self.points.get(key)
        added = samples_of(point) - (samples_of(previous) if previous else 0)
        if added > 0 and self.samples + added > max_samples:
            # No room: a new series, or a histogram or summary grown past the room (the
            # kept point stays until a push that fits, or expiry).
            self.refused += 1
            return False
        point.updated_ms = self.now_ms
        self.points[key] = point
        self.samples += added
        return True

    def _keyed(
        self, family: str, data_points: list[_Wire]
    ) -> Iterator[tuple[SeriesKey, _Wire]]:
        """Each of a metric's points with its series' key, up to the first flagged "no
        recorded value": that one's series is removed, and the metric's later points are
        not read, as the exporter does."""
        resource_raw = self.resource_raw
        for point in data_points:
            key = (family, point_labels(resource_raw, point.attributes))
            if point.flags & _NO_RECORDED_VALUE:
                self._drop(key)
                return
            yield key, point

    def _drop(self, key: SeriesKey) -> None:
        previous = self.points.pop(key, None)
        if previous is not None:
            self.samples -= samples_of(previous)

    def _fold_numbers(
        self,
        family: str,
        data_points: list[WireNumberPoint],
        metric_type: MetricType,
        delta: bool,
        max_samples: int,
    ) -> None:
        points = self.points
        for key, point in self._keyed(family, data_points):
            # as_double or as_int, whichever is set: the unset one reads as 0.
            value = point.as_double or float(point.as_int)
            time_ns = point.time_unix_nano
            previous = points.get(key)
            if previous is None:
                if self.samples < max_samples:  # a new series, if the instance has room
                    new = points[key] = NumberPoint(
                        metric_type, value, point.start_time_unix_nano, time_ns
                    )
                    new.updated_ms = self.now_ms
                    self.samples += 1
                else:
                    self.refused += 1
                continue
            if (
                not isinstance(previous, NumberPoint)
                or previous.type is not metric_type
            ):
                self._drop(key)  # same name, another kind: the newer one replaces it
                self._put(
                    key,
                    NumberPoint(
                        metric_type, value, point.start_time_unix_nano, time_ns
                    ),
                    max_samples,
                )
                continue
            if time_ns < previous.time_ns:
                continue  # only the latest timestamp is kept
            if delta and point.start_time_unix_nano == previous.time_ns:
                previous.value += value
            else:
                previous.value = value
                previous.start_ns = point.start_time_unix_nano
            previous.time_ns = time_ns
            previous.updated_ms = self.now_ms

    def _fold_states(
        self,
        data_points: list[WireNumberPoint],
        named: tuple[str, str, tuple[str, ...]],
        families: dict[str, FamilyMeta],
        max_samples: int,
    ) -> None:
        """The named series of a Streams state gauge's points (``STATE_FAMILIES``)."""
        family, help_text, states = named
        if family not in families:
            families[family] = FamilyMeta(MetricType.GAUGE, help_text)
        points = self.points
        for point in data_points:
            pairs = {**self.resource, **attribute_labels(point.attributes)}
            if "state" in pairs:  # the label is ours: a pushed one is kept aside
                pairs["exported_state"] = pairs.pop("state")
            keys = [(family, _rendered({**pairs, "state": name})) for name in states]
            if point.flags & _NO_RECORDED_VALUE:
                for key in keys:
                    self._drop(key)
                return  # as _fold_numbers: the rest of this metric's points too
            current = state_name(states, point.as_double or float(point.as_int))
            time_ns = point.time_unix_nano
            first = points.get(keys[0])
            if first is None and self.samples + len(keys) > max_samples:
                self.refused += 1  # every state's series, or none
                continue
            if isinstance(first, NumberPoint) and time_ns < first.time_ns:
                continue  # only the latest timestamp is kept
            for key, name in zip(keys, states, strict=True):
                value = 1.0 if name == current else 0.0
                kept = points.get(key)
                if isinstance(kept, NumberPoint):
                    kept.value = value
                    kept.time_ns = time_ns
                    kept.updated_ms = self.now_ms
                else:
                    self._put(
                        key,
                        NumberPoint(
                            MetricType.GAUGE, value, point.start_time_unix_nano, time_ns
                        ),
                        max_samples,
                    )

    def _fold_histograms(
        self, family: str, metric: WireMetric, max_samples: int
    ) -> None:
        for key, point in self._keyed(family, metric.histogram_points()):
            new = HistogramPoint(
                tuple(point.explicit_bounds),
                list(point.bucket_counts),
                point.count,
                point.sum,
                point.start_time_unix_nano,
                point.time_unix_nano,
            )
            previous = self.points.get(key)
            if isinstance(previous, HistogramPoint):
                temporality = metric.temporality
                if temporality == _DELTA:
                    if new.start_ns != previous.time_ns:
                        if new.start_ns <= previous.time_ns:
                            continue  # misaligned: dropped
                        # starts later: a restart, the new point replaces the kept one
                    else:
                        new = _added(previous, new)
                elif temporality == _CUMULATIVE:
                    if new.time_ns < previous.time_ns:
                        continue
                else:
                    continue  # unsupported temporality
            self._put(key, new, max_samples)

    def _fold_summaries(
        self, family: str, metric: WireMetric, max_samples: int
    ) -> None:
        for key, point in self._keyed(family, metric.summary_points()):
            previous = self.points.get(key)
            if (
                isinstance(previous, SummaryPoint)
                and point.time_unix_nano < previous.time_ns
            ):
                continue
            quantiles = dict(point.quantile_values)
            self._put(
                key,
                SummaryPoint(
                    tuple(sorted(quantiles.items())),
                    point.count,
                    point.sum,
                    point.time_unix_nano,
                ),
                max_samples,
            )


# Distinct (name, unit, type) translations remembered at most.
_MAX_NAMES = 10_000


def _added(previous: HistogramPoint, new: HistogramPoint) -> HistogramPoint:
    """accumulateHistogramValues: the sum of two contiguous deltas (the newer point's
    buckets alone when the bounds differ), starting where the previous one started."""
    older, newer = (
        (new, previous) if new.time_ns < previous.time_ns else (previous, new)
    )
    if older.bounds == newer.bounds and len(older.counts) == len(newer.counts):
        counts = [a + b for a, b in zip(newer.counts, older.counts, strict=True)]
        count, total = newer.count + older.count, newer.sum + older.sum
    else:
        counts, count, total = list(newer.counts), newer.count, newer.sum
    return HistogramPoint(
        newer.bounds, counts, count, total, previous.start_ns, newer.time_ns
    )


# Rendered labels remembered at most (then forgotten all at once, as ``_MAX_NAMES``): a
# series' labels are rendered at its first push and found by their bytes at the next ones.
_MAX_RENDERED = 65_536
_RENDERED: dict[tuple[bytes, bytes], str] = {}
_RESOURCES: dict[bytes, dict[str, str]] = {}


def point_labels(resource_raw: bytes, attributes_raw: bytes) -> str:
    """A point's labels, rendered and sorted (``_rendered``): its resource's, then its own
    (which win), as the exporter's ``resource_to_telemetry_conversion`` merges them; from
    the raw bytes of both (``WireResource.attributes``, a wire point's ``attributes``)."""
    if not attributes_raw and not resource_raw:
        return ""
    key = (resource_raw, attributes_raw)
    rendered = _RENDERED.get(key)
    if rendered is None:
        if len(_RENDERED) >= _MAX_RENDERED:
            _RENDERED.clear()
        pairs = attribute_labels(attributes_raw)
        if resource_raw:
            pairs = {**resource_labels(resource_raw), **pairs}
        rendered = _RENDERED[key] = _rendered(pairs)
    return rendered


def resource_labels(resource_raw: bytes) -> dict[str, str]:
    """A resource's attributes as labels (``attribute_labels``), remembered by their
    bytes (the caller does not change the dictionary)."""
    if not resource_raw:
        return _NO_LABELS
    labels = _RESOURCES.get(resource_raw)
    if labels is None:
        if len(_RESOURCES) >= _MAX_RENDERED:
            _RESOURCES.clear()
        labels = _RESOURCES[resource_raw] = attribute_labels(resource_raw)
    return labels


_NO_LABELS: dict[str, str] = {}


def attribute_labels(attributes_raw: bytes) -> dict[str, str]:
    """Attributes (their KeyValue fields' bytes) as Prometheus labels (name -> value); an
    attribute whose label would clash with an identity label is renamed
    ``exported_<label>`` (Prometheus's own rule for a target label that clashes); ``le``,
    ``quantile`` and ``__...`` are left out."""
    pairs: dict[str, str] = {}
    for key, value in key_values(attributes_raw):
        name = label_name(key)
        if not name or name == "le" or name == "quantile" or name.startswith("__"):
            continue
        if name in _IDENTITY:
            name = "exported_" + name
        text = any_value_text(value)
        pairs[name] = _any_value(AnyValue.FromString(value)) if text is None else text
    return pairs


def _rendered(pairs: dict[str, str]) -> str:
    """Labels as a point's key holds them: 'a="x",b="y"', sorted by name."""
    if not pairs:
        return ""
    return ",".join(
        f'{name}="{escape_label_value(value)}"' for name, value in sorted(pairs.items())
    )


def _any_value(value: AnyValue) -> str:
    """An AnyValue decoded (the kinds ``any_value_text`` leaves to the message: arrays,
    key-value lists, bytes) as the exporter's ``AsString`` renders it."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "int_value":
        return str(value.int_value)
    if kind == "double_value":
        return repr(value.double_value)
    if kind is None:
        return ""
    return str(getattr(value, kind))
