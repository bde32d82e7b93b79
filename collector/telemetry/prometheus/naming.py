"""OTLP metric and attribute names as Prometheus names, by Prometheus's own OTLP translation
(``github.com/prometheus/otlptranslator``: ``MetricNamer{WithMetricSuffixes: true,
UTF8Allowed: false}`` and ``LabelNamer{}``), which is what the OpenTelemetry Collector's
Prometheus exporter prints for the same metric.

A metric name is cut into tokens at every character outside ``[a-zA-Z0-9:]`` (so runs of
dots, dashes and underscores become one ``_``), the unit's suffixes are appended unless a
token already says them, ``total`` ends a monotonic sum and ``ratio`` a gauge of unit
``"1"``; a name starting with a digit gets a leading ``_``.  A label replaces each
character outside ``[a-zA-Z0-9_]`` with ``_``; one starting with a digit gets ``key_``, one
starting with a single ``_`` gets ``key`` (the exporter's ``NormalizeLabel``).
"""

from __future__ import annotations

import re
from enum import Enum

__all__ = ["MetricType", "label_name", "metric_name"]


class MetricType(Enum):
    """The Prometheus type an OTLP metric becomes (otlptranslator's MetricType)."""

    GAUGE = "gauge"
    COUNTER = "counter"  # a monotonic sum
    HISTOGRAM = "histogram"
    SUMMARY = "summary"

    # Members are singletons compared by identity, so the identity hash serves as Enum's
    # own does (a hash of the name, a Python call): the fold hashes a type at every point.
    __hash__ = object.__hash__


# OTLP unit (UCUM case-sensitive) -> Prometheus unit word (otlptranslator's unitMap).
UNITS: dict[str, str] = {
    "d": "days",
    "h": "hours",
    "min": "minutes",
    "s": "seconds",
    "ms": "milliseconds",
    "us": "microseconds",
    "ns": "nanoseconds",
    "By": "bytes",
    "KiBy": "kibibytes",
    "MiBy": "mebibytes",
    "GiBy": "gibibytes",
    "TiBy": "tibibytes",
    "KBy": "kilobytes",
    "MBy": "megabytes",
    "GBy": "gigabytes",
    "TBy": "terabytes",
    "m": "meters",
    "V": "volts",
    "A": "amperes",
    "J": "joules",
    "W": "watts",
    "g": "grams",
    "Cel": "celsius",
    "Hz": "hertz",
    "1": "",
    "%": "percent",
}

# The unit after "/" -> its singular word (otlptranslator's perUnitMap): "By/s" -> per_second.
PER_UNITS: dict[str, str] = {
    "s": "second",
    "m": "minute",
    "h": "hour",
    "d": "day",
    "w": "week",
    "mo": "month",
    "y": "year",
}

_NOT_METRIC_CHAR = re.compile(r"[^a-zA-Z0-9:]+")
_NOT_LABEL_CHAR = re.compile(r"[^a-zA-Z0-9_]")
_UNDERSCORES = re.compile(r"__+")


def _unit_suffixes(unit: str) -> tuple[str, str]:
    """(main, per) unit words, each cleaned; "" where the unit says nothing (``{...}``
    annotations, empty)."""
    main_otel, slash, per_otel = unit.partition("/")
    main_otel = main_otel.strip()
    main = ""
    if main_otel and not any(c in main_otel for c in "{}"):
        main = UNITS.get(main_otel, main_otel)
    per = ""
    per_otel = per_otel.strip()
    if slash and per_otel and not any(c in per_otel for c in "{}"):
        per = "per_" + PER_UNITS.get(per_otel, per_otel)
    return _clean_unit(main), _clean_unit(per)


def _clean_unit(unit: str) -> str:
    cleaned = _UNDERSCORES.sub("_", re.sub(r"[^a-zA-Z0-9:]", "_", unit))
    return cleaned.removeprefix("_")


def metric_name(name: str, unit: str, metric_type: MetricType) -> str:
    """The Prometheus family name of an OTLP metric; "" when nothing valid is left."""
    tokens = [token for token in _NOT_METRIC_CHAR.split(name) if token]
    main, per = _unit_suffixes(unit)
    if main in tokens:
        main = ""
    if per == "per_":
        per = ""
    else:
        per = per.removesuffix("_")
        if per in tokens:
            per = ""
    if per:
        main = main.removesuffix("_")
    if main:
        tokens.append(main)
    if per:
        tokens.append(per)
    if metric_type is MetricType.COUNTER:
        tokens = [token for token in tokens if token != "total"] + ["total"]
    if unit == "1" and metric_type is MetricType.GAUGE:
        tokens = [token for token in tokens if token != "ratio"] + ["ratio"]
    result = "_".join(tokens)
    if result and result[0].isdigit():
        result = "_" + result
    if not result.strip("_"):
        return ""
    return result


def label_name(attribute: str) -> str:
    """The Prometheus label of an OTLP attribute key; "" when nothing valid is left."""
    if not attribute:
        return ""
    result = _NOT_LABEL_CHAR.sub("_", attribute)
    if result[0].isdigit():
        result = "key_" + result
    elif result[0] == "_" and not result.startswith("__"):
        result = "key" + result
    if not result.strip("_"):
        return ""
    return result
