"""Series as the Prometheus text format (0.0.4) or OpenMetrics 1.0.0.

Numbers are written as the Go client library writes them (``strconv.FormatFloat(f, 'g',
-1, 64)``: ``1``, ``0.5``, ``1e+06``, ``+Inf``), in both formats, so a histogram's ``le``
and a summary's ``quantile`` label have the same value here as on the OpenTelemetry
Collector's Prometheus exporter, and Prometheus (which keeps ``le`` as a string) stores
the same series from either.

| family type | text format | OpenMetrics |
|---|---|---|
| counter | ``# TYPE x_total counter``, ``x_total`` | ``# TYPE x counter``, ``x_total`` |
| gauge | ``x`` | ``x`` |
| histogram | ``x_bucket{le=...}`` (cumulative, ``+Inf`` = count), ``x_sum``, ``x_count`` | the same |
| summary | ``x{quantile=...}``, ``x_sum``, ``x_count`` | the same |
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal

from collector.telemetry.prometheus.naming import MetricType
from collector.telemetry.prometheus.points import (
    FamilyMeta,
    HistogramPoint,
    NumberPoint,
    Point,
    SeriesKey,
    SummaryPoint,
)

__all__ = [
    "OPENMETRICS_CONTENT_TYPE",
    "TEXT_CONTENT_TYPE",
    "Rendered",
    "go_float",
    "render",
]

TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"

# Which point class each family type takes (a point of another class is a type conflict).
_POINT_CLASS: Mapping[MetricType, type] = {
    MetricType.GAUGE: NumberPoint,
    MetricType.COUNTER: NumberPoint,
    MetricType.HISTOGRAM: HistogramPoint,
    MetricType.SUMMARY: SummaryPoint,
}


def go_float(value: float) -> str:
    """``strconv.FormatFloat(value, 'g', -1, 64)``: the shortest digits that read back as
    ``value``, exponent form when the exponent is below -4 or at least 6 (Go's choice for
    the shortest precision)."""
    if 1e-4 <= abs(value) < 1e6:
        # Python's repr is Go's shortest form in this range; an integer has no ".0".
        return str(int(value)) if value.is_integer() else repr(value)
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    decimal_exponent = len(digits) + exponent - 1
    prefix = "-" if sign else ""
    if decimal_exponent < -4 or decimal_exponent >= 6:
        return prefix + _exponent_form(text, decimal_exponent)
    if decimal_exponent >= 0:
        whole = text[: decimal_exponent + 1].ljust(decimal_exponent + 1, "0")
        fraction = text[decimal_exponent + 1 :]
        return prefix + whole + ("." + fraction if fraction else "")
    return prefix + "0." + "0" * (-decimal_exponent - 1) + text


def _exponent_form(digits: str, exponent: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    sign = "-" if exponent < 0 else "+"
    return f"{mantissa}e{sign}{abs(exponent):02d}"


class Rendered:
    """One exposition: its bytes and what went into it."""

    __slots__ = ("body", "samples", "type_conflicts")

    def __init__(self, body: bytes, samples: int, type_conflicts: int) -> None:
        self.body = body
        self.samples = samples
        self.type_conflicts = type_conflicts


def render(
    groups: Iterable[tuple[str, Mapping[SeriesKey, Point]]],
    families: Mapping[str, FamilyMeta],
    open_metrics: bool,
) -> Rendered:
    """``groups``: (identity labels rendered, that identity's points) each."""
    lines_by_family: dict[str, list[str]] = {}
    samples = conflicts = 0
    for identity, points in groups:
        for (family, attributes), point in points.items():
            meta = families.get(family)
            if (
                meta is None
                or type(point) is not _POINT_CLASS[meta.type]
                or (isinstance(point, NumberPoint) and point.type is not meta.type)
            ):
                conflicts += 1
                continue
            if identity and attributes:
                labels = identity + "," + attributes
            else:
                labels = identity or attributes
            lines = lines_by_family.get(family)
            if lines is None:
                lines = lines_by_family[family] = []
            if isinstance(point, NumberPoint):
                lines.append(
                    f"{family}{{{labels}}} {go_float(point.value)}\n"
                    if labels
                    else f"{family} {go_float(point.value)}\n"
                )
                samples += 1
            elif isinstance(point, HistogramPoint):
                samples += _histogram(lines, family, labels, point)
            else:
                samples += _summary(lines, family, labels, point)
    out: list[str] = []
    for family, lines in lines_by_family.items():
        meta = families[family]
        name = family
        if open_metrics and meta.type is MetricType.COUNTER:
            name = family.removesuffix("_total")
            if name in lines_by_family:
                conflicts += len(lines)
                continue  # the counter's OpenMetrics name is another family's
        if meta.help:
            out.append(f"# HELP {name} {_escape_help(meta.help)}\n")
        out.append(f"# TYPE {name} {meta.type.value}\n")
        out.extend(lines)
    if open_metrics:
        out.append("# EOF\n")
    return Rendered("".join(out).encode(), samples, conflicts)


def _histogram(
    lines: list[str], family: str, labels: str, point: HistogramPoint
) -> int:
    """The exporter's convertDoubleHistogram: each distinct bound once (its first index),
    ascending, with the running count; the last bucket count is only in ``+Inf``."""
    first_index: dict[float, int] = {}
    for index, bound in enumerate(point.bounds):
        first_index.setdefault(bound, index)
    prefix = f"{family}_bucket{{{labels}," if labels else f"{family}_bucket{{"
    running = 0
    counts = point.counts
    for bound in sorted(first_index):
        index = first_index[bound]
        running += counts[index] if index < len(counts) else 0
        lines.append(f'{prefix}le="{go_float(bound)}"}} {running}\n')
    lines.append(f'{prefix}le="+Inf"}} {point.count}\n')
    suffix = f"{{{labels}}}" if labels else ""
    lines.append(f"{family}_sum{suffix} {go_float(point.sum)}\n")
    lines.append(f"{family}_count{suffix} {point.count}\n")
    return len(first_index) + 3


def _summary(lines: list[str], family: str, labels: str, point: SummaryPoint) -> int:
    prefix = f"{family}{{{labels}," if labels else f"{family}{{"
    for quantile, value in point.quantiles:
        lines.append(f'{prefix}quantile="{go_float(quantile)}"}} {go_float(value)}\n')
    suffix = f"{{{labels}}}" if labels else ""
    lines.append(f"{family}_sum{suffix} {go_float(point.sum)}\n")
    lines.append(f"{family}_count{suffix} {point.count}\n")
    return len(point.quantiles) + 2


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")
