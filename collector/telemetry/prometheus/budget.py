"""The series budget of ``/metrics/clients`` (``prometheus.clients.max.series``): which
instances are shown one by one, which are folded into an aggregate, and what is left out.

| step | rule |
|---|---|
| 1 | every instance's series (samples: a histogram counts its buckets, ``_sum`` and ``_count``) fit: each instance is shown with its own identity labels |
| 2 | otherwise instances are taken most recently pushed first while they fit in nine tenths of the budget; from the first one that does not, every older one overflows |
| 3 | overflowed instances are folded into one aggregate per (``client_id``, ``client_software_name``, ``client_software_version``), labelled ``client_instance_id="overflow"`` |
| 4 | aggregates are added, most recently pushed first, while they fit in the whole budget; the rest are left out (``ktc_prometheus_clients_series_dropped``) |

An aggregate adds counters, histograms (bucket by bucket, when the bounds agree) and a
summary's count and sum; it shows the largest value of a gauge and of a summary's quantile
(the worst latency of the group, not a meaningless sum).  Instances whose identity labels
are the same once the label allowlist is applied (``client_instance_id`` not allowed) are
folded the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from collector.telemetry.prometheus.naming import MetricType
from collector.telemetry.prometheus.points import (
    IDENTITY_LABELS,
    HistogramPoint,
    InstancePoints,
    NumberPoint,
    Point,
    SeriesKey,
    SummaryPoint,
    escape_label_value,
    samples_of,
)

__all__ = ["OVERFLOW_INSTANCE_ID", "OVERFLOW_KEY_LABELS", "Selection", "select"]

OVERFLOW_INSTANCE_ID = "overflow"
# The labels an overflow aggregate keeps (those of them the allowlist allows).
OVERFLOW_KEY_LABELS = (
    "client_id",
    "client_software_name",
    "client_software_version",
)
# Share of the budget instances shown one by one may take once some overflow.
_INDIVIDUAL_SHARE = 0.9


class Selection:
    """What one scrape shows: (identity labels, points) groups, and the counts."""

    __slots__ = ("dropped_samples", "groups", "overflow_instances", "samples")

    def __init__(self) -> None:
        self.groups: list[tuple[str, Mapping[SeriesKey, Point]]] = []
        self.samples = 0
        self.overflow_instances = 0
        self.dropped_samples = 0


def identity_labels(identity: Mapping[str, str], allowed: Sequence[str]) -> str:
    """The identity as rendered labels, in IDENTITY_LABELS order, allowed ones only."""
    return ",".join(
        f'{name}="{escape_label_value(identity[name])}"'
        for name in allowed
        if name in identity
    )


def select(
    recent_first: Iterable[InstancePoints],
    total_samples: int,
    max_series: int,
    allowed: Sequence[str],
) -> Selection:
    """``recent_first``: the instances, most recently pushed first; ``allowed``: the
    identity labels to show, in IDENTITY_LABELS order."""
    selection = Selection()
    unique = "client_instance_id" in allowed
    room = (
        max_series
        if total_samples <= max_series
        else int(max_series * _INDIVIDUAL_SHARE)
    )
    shown: dict[str, list[InstancePoints]] = {}
    overflow: dict[str, list[InstancePoints]] = {}
    overflowing = False
    used = 0
    overflow_allowed = [name for name in allowed if name in OVERFLOW_KEY_LABELS]
    for instance in recent_first:
        if not instance.points:
            continue
        if not overflowing and used + instance.samples <= room:
            used += instance.samples
            shown.setdefault(identity_labels(instance.identity, allowed), []).append(
                instance
            )
            continue
        overflowing = True
        selection.overflow_instances += 1
        key = identity_labels(instance.identity, overflow_allowed)
        if unique:
            marker = f'client_instance_id="{OVERFLOW_INSTANCE_ID}"'
            key = f"{key},{marker}" if key else marker
        overflow.setdefault(key, []).append(instance)
    # Sorted so the exposition's identity labels stay in IDENTITY_LABELS order.
    for identity, members in shown.items():
        points = members[0].points if len(members) == 1 else merged(members)
        selection.groups.append((identity, points))
    selection.samples = used
    for identity, members in overflow.items():
        if identity in shown:  # the allowlist made them one identity: fold them in
            points = merged([*shown[identity], *members])
            index = next(i for i, g in enumerate(selection.groups) if g[0] == identity)
            before = sum(samples_of(p) for p in selection.groups[index][1].values())
            after = sum(samples_of(p) for p in points.values())
            if selection.samples - before + after <= max_series:
                selection.groups[index] = (identity, points)
                selection.samples += after - before
            else:
                selection.dropped_samples += sum(m.samples for m in members)
            continue
        points = merged(members)
        count = sum(samples_of(p) for p in points.values())
        if selection.samples + count <= max_series:
            selection.groups.append((identity, points))
            selection.samples += count
        else:
            selection.dropped_samples += count
    return selection


def merged(members: Sequence[InstancePoints]) -> dict[SeriesKey, Point]:
    """The members' points added up (gauges and quantiles: the largest)."""
    result: dict[SeriesKey, Point] = {}
    for member in members:
        for key, point in member.points.items():
            kept = result.get(key)
            if kept is None:
                result[key] = _copy(point)
            elif isinstance(kept, NumberPoint) and isinstance(point, NumberPoint):
                if kept.type is not point.type:
                    continue
                if kept.type is MetricType.COUNTER:
                    kept.value += point.value
                else:
                    kept.value = max(kept.value, point.value)
            elif isinstance(kept, HistogramPoint) and isinstance(point, HistogramPoint):
                if kept.bounds == point.bounds and len(kept.counts) == len(
                    point.counts
                ):
                    kept.counts = [
                        a + b for a, b in zip(kept.counts, point.counts, strict=True)
                    ]
                    kept.count += point.count
                    kept.sum += point.sum
            elif isinstance(kept, SummaryPoint) and isinstance(point, SummaryPoint):
                quantiles = dict(kept.quantiles)
                for quantile, value in point.quantiles:
                    quantiles[quantile] = max(quantiles.get(quantile, value), value)
                kept.quantiles = tuple(sorted(quantiles.items()))
                kept.count += point.count
                kept.sum += point.sum
    return result


def _copy(point: Point) -> Point:
    if isinstance(point, NumberPoint):
        return NumberPoint(point.type, point.value, point.start_ns, point.time_ns)
    if isinstance(point, HistogramPoint):
        return HistogramPoint(
            point.bounds,
            list(point.counts),
            point.count,
            point.sum,
            point.start_ns,
            point.time_ns,
        )
    return SummaryPoint(point.quantiles, point.count, point.sum, point.time_ns)


assert set(OVERFLOW_KEY_LABELS) <= set(IDENTITY_LABELS)
