"""The conformance view behind ``GET /v1/clients/conformance`` (docs/conformance.md): every
client library the collector holds instances of, graded against KIP-714 from what its
pushes carried.  One row per (``client_software_name``, ``client_software_version``).

Pure functions over the manager's instances (``ClientMetricsInstance``): what the push
path records on them is a bounded sample (``SHAPE_SAMPLE_EVERY`` in client_metrics.py):
bits of the required metrics, roles and temporalities seen, counts, and a few gaps.  A
request reads every cached instance once (at most ``cache.max.size``, 16,384 by default),
on the event loop like a ``/metrics`` scrape.

``flags`` come from two tables: :data:`KNOWN_QUIRKS` (a library and the versions a quirk is
known for, with its evidence) and :data:`OBSERVED_FLAGS` (what the data shows, for any
library, so an unknown one with the same bug is flagged too).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from collector.telemetry.client_metrics import DELTA_TEMPORALITY, ClientMetricsInstance
from collector.telemetry.push_shape import (
    REQUIRED_CONSUMER_METRICS,
    REQUIRED_METRIC_BITS,
    REQUIRED_PRODUCER_METRICS,
    ROLE_CONSUMER,
    ROLE_PRODUCER,
    TEMPORALITY_BITS,
)
from proto.errors import Errors

__all__ = [
    "FIELDS",
    "KNOWN_QUIRKS",
    "OBSERVED_FLAGS",
    "Quirk",
    "conformance",
    "conformance_rows",
]

# Every field of a row, in order (the CSV's header).
FIELDS: Final = (
    "client_software_name",
    "client_software_version",
    "role",
    "instances",
    "pushes",
    "empty_pushes",
    "shapes_read",
    "metrics_per_push",
    "required_sent",
    "required_lacking",
    "temporality_asked",
    "temporalities_used",
    "terminating_pushes",
    "push_intervals_ms",
    "gaps_sampled",
    "interval_kept",
    "errors",
    "series_capped",
    "flags",
)

_REQUIRED_BY_ROLE: Final = (
    ("producer", ROLE_PRODUCER, REQUIRED_PRODUCER_METRICS),
    ("consumer", ROLE_CONSUMER, REQUIRED_CONSUMER_METRICS),
)
# When no push showed a role (an empty push, a subscription without its prefixes): the
# client id's word, as Java (producer-1, consumer-<group>-1) and Streams
# (...-StreamThread-1-producer, ...-restore-consumer) name their clients.
_CLIENT_ID_ROLES: Final = (
    (re.compile(r"(?:^|[-_.])producer(?:$|[-_.])"), ROLE_PRODUCER),
    (re.compile(r"(?:^|[-_.])consumer(?:$|[-_.])"), ROLE_CONSUMER),
)
# A library keeps the interval if its median gap is at most this many intervals (the gate
# refuses faster pushes, so a gap is at least one interval but for the first).
INTERVAL_KEPT_UP_TO: Final = 1.5
# Gaps sampled before the interval is judged.
GAPS_TO_JUDGE: Final = 3


@dataclass(frozen=True, slots=True)
class Quirk:
    """A known quirk of a client library: the versions it is known for (inclusive; None:
    open), what it does, and the evidence."""

    flag: str
    library: str  # "kgo", "librdkafka" (its wrappers too), "apache-kafka-java"
    first: tuple[int, ...] | None
    last: tuple[int, ...] | None
    summary: str
    evidence: str

    def applies(self, software_name: str, software_version: str) -> bool:
        version = _library_version(self.library, software_name, software_version)
        if version is None:
            return False
        if self.first is not None and version < self.first:
            return False
        return self.last is None or version <= self.last

    def to_json(self) -> dict[str, Any]:
        return {
            "library": self.library,
            "versions": _versions_text(self.first, self.last),
            "summary": self.summary,
            "evidence": self.evidence,
        }


KNOWN_QUIRKS: Final = (
    Quirk(
        "kgo-wildcard-as-a-name",
        "kgo",
        (1, 19, 0),
        (1, 22, 3),
        'reads only KIP-714\'s [""] as every metric and takes Kafka\'s ["*"] for a '
        "name: under a * subscription every push is empty "
        '(subscriptions.wildcard.as.empty.prefix.for answers it [""])',
        "franz-go pkg/kgo/metrics_714.go buildNameFilter; measured with 1.22.3: "
        "tests/gateway/test_gateway_franz_go.py",
    ),
    Quirk(
        "kgo-skips-required-metrics",
        "kgo",
        (1, 19, 0),
        (1, 22, 3),
        "never records producer record.queue.time.{avg,max}, consumer "
        "fetch.manager.fetch.latency.{avg,max} or coordinator.assigned.partitions, and "
        "drops a gauge whose value is 0 (produce.throttle.time when never throttled)",
        "franz-go pkg/kgo/metrics_714.go (its 'We skip' list, appendGauge); measured "
        "with 1.22.3: tests/gateway/test_gateway_franz_go.py",
    ),
    Quirk(
        "kgo-interval-floor-1s",
        "kgo",
        (1, 19, 0),
        (1, 22, 3),
        "pushes at most once a second whatever the subscription's interval.ms",
        "franz-go pkg/kgo/metrics_714.go pushMetrics: max(PushIntervalMillis, 1 s)",
    ),
    Quirk(
        "librdkafka-null-metrics",
        "librdkafka",
        (2, 5, 0),
        (2, 10, 0),
        "sends a null Metrics field when none of its metrics matches the subscription; "
        "Kafka closes the connection (the request does not parse) and the client "
        "reconnects",
        "librdkafka #5106, fixed in 2.10.1 by #4912 (not measured here)",
    ),
    Quirk(
        "java-ignores-telemetry-max-bytes",
        "apache-kafka-java",
        (3, 7, 0),
        None,
        "does not bound its payload by the answer's TelemetryMaxBytes: a payload over "
        "it is refused with TELEMETRY_TOO_LARGE push after push",
        "apache/kafka PR #23452 (open; not measured here)",
    ),
)


def _empty_pushes(row: Mapping[str, Any]) -> bool:
    return bool(row["empty_pushes"])


def _required_lacking(row: Mapping[str, Any]) -> bool:
    return bool(row["shapes_read"] and row["required_lacking"])


def _temporality_not_asked(row: Mapping[str, Any]) -> bool:
    asked = "delta" if DELTA_TEMPORALITY else "cumulative"
    return any(used != asked for used in row["temporalities_used"])


def _series_capped(row: Mapping[str, Any]) -> bool:
    return bool(row["series_capped"])


def _interval_not_kept(row: Mapping[str, Any]) -> bool:
    kept = row["interval_kept"]
    return (
        row["gaps_sampled"] >= GAPS_TO_JUDGE
        and kept is not None
        and kept > INTERVAL_KEPT_UP_TO
    )


# flag -> (what the data shows, its test on a row); for every library.
OBSERVED_FLAGS: Final[dict[str, tuple[str, Callable[[Mapping[str, Any]], bool]]]] = {
    "empty-pushes": (
        "accepted pushes held no metric while the subscription requested some",
        _empty_pushes,
    ),
    "required-metrics-lacking": (
        "the sampled pushes lack KIP-714 metrics required of the role",
        _required_lacking,
    ),
    "temporality-not-asked": (
        "sums or histograms with a temporality other than the one the Get answer asked",
        _temporality_not_asked,
    ),
    "series-capped": (
        "instances whose series on /metrics/clients reached "
        "prometheus.clients.max.series.per.instance (their new series refused)",
        _series_capped,
    ),
    "interval-not-kept": (
        f"the median gap between accepted pushes is over {INTERVAL_KEPT_UP_TO} intervals",
        _interval_not_kept,
    ),
}


def conformance(
    instances: Iterable[ClientMetricsInstance], capped_ids: Collection[str] = ()
) -> dict[str, Any]:
    """The endpoint's answer: the rows and the quirks their flags name; ``capped_ids``:
    the instances ``/metrics/clients`` holds at their series cap."""
    rows = conformance_rows(instances, frozenset(capped_ids))
    named = {flag for row in rows for flag in row["flags"]}
    quirks: dict[str, Any] = {}
    for quirk in KNOWN_QUIRKS:
        if quirk.flag in named:
            quirks[quirk.flag] = quirk.to_json()
    for flag, (summary, _) in OBSERVED_FLAGS.items():
        if flag in named:
            quirks[flag] = {"library": None, "summary": summary, "evidence": "observed"}
    return {"libraries": rows, "quirks": quirks}


def conformance_rows(
    instances: Iterable[ClientMetricsInstance], capped_ids: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """One row per (client_software_name, client_software_version), sorted by them."""
    groups: dict[tuple[str, str], list[ClientMetricsInstance]] = {}
    for instance in instances:
        metadata = instance.metadata
        key = (
            metadata.client_software_name or "",
            metadata.client_software_version or "",
        )
        groups.setdefault(key, []).append(instance)
    return [
        _row(name, version, groups[name, version], capped_ids)
        for name, version in sorted(groups)
    ]


def _row(
    name: str,
    version: str,
    instances: list[ClientMetricsInstance],
    capped_ids: frozenset[str],
) -> dict[str, Any]:
    roles = 0
    required_asked = 0
    required_seen = 0
    temporalities = 0
    gaps: list[int] = []
    errors: dict[int, int] = {}
    for instance in instances:
        instance_roles = instance.roles_seen or _client_id_role(
            instance.metadata.client_id
        )
        roles |= instance_roles
        required_asked |= _required_asked(instance_roles, instance.metrics)
        required_seen |= instance.required_seen
        temporalities |= instance.temporalities_seen
        gaps.extend(instance.push_gaps or ())
        for code, count in (instance.errors or {}).items():
            errors[code] = errors.get(code, 0) + count
    required = [
        metric
        for _, bit, names in _REQUIRED_BY_ROLE
        if roles & bit
        for metric in names
        if required_asked & REQUIRED_METRIC_BITS[metric.encode()]
    ]
    sent = [m for m in required if required_seen & REQUIRED_METRIC_BITS[m.encode()]]
    read = sum(i.shapes_read for i in instances)
    metrics = sum(i.metrics_read for i in instances)
    row: dict[str, Any] = {
        "client_software_name": name,
        "client_software_version": version,
        "role": "+".join(role for role, bit, _ in _REQUIRED_BY_ROLE if roles & bit),
        "instances": len(instances),
        "pushes": sum(i.pushes_accepted for i in instances),
        "empty_pushes": sum(i.empty_pushes for i in instances),
        "shapes_read": read,
        "metrics_per_push": round(metrics / read, 1) if read else None,
        "required_sent": sent,
        "required_lacking": [m for m in required if m not in sent],
        "temporality_asked": "delta" if DELTA_TEMPORALITY else "cumulative",
        "temporalities_used": [
            t for t, bit in TEMPORALITY_BITS.items() if temporalities & bit
        ],
        "terminating_pushes": sum(i.terminating_pushes for i in instances),
        "push_intervals_ms": sorted({i.push_interval_ms for i in instances}),
        "gaps_sampled": len(gaps),
        "interval_kept": round(statistics.median(gaps) / 1000, 2) if gaps else None,
        "errors": {_error_name(c): n for c, n in sorted(errors.items())},
        "series_capped": sum(i.instance_id_str in capped_ids for i in instances),
    }
    flags = [q.flag for q in KNOWN_QUIRKS if q.applies(name, version)]
    flags.extend(flag for flag, (_, shows) in OBSERVED_FLAGS.items() if shows(row))
    row["flags"] = flags
    return row


def _required_asked(roles: int, requested: tuple[str, ...]) -> int:
    """The bits of the required metrics of ``roles`` that the subscription asked for (a
    client is not graded on metrics nobody asked of it)."""
    asked = 0
    for _, bit, names in _REQUIRED_BY_ROLE:
        if roles & bit:
            for metric in names:
                if _asked(metric, requested):
                    asked |= REQUIRED_METRIC_BITS[metric.encode()]
    return asked


def _asked(metric: str, requested: tuple[str, ...]) -> bool:
    # Kafka's "*" (ALL_SUBSCRIBED_METRICS) or prefixes ("" among them: every name).
    return requested == ("*",) or any(metric.startswith(p) for p in requested)


def _client_id_role(client_id: str | None) -> int:
    roles = 0
    for pattern, bit in _CLIENT_ID_ROLES:
        if client_id and pattern.search(client_id.lower()):
            roles |= bit
    return roles


_VERSION: Final = re.compile(r"v?(\d+(?:\.\d+)*)")
# confluent-kafka-python/-go/-dotnet report their own name and version and librdkafka's
# after it: 2.16.1-rdkafka-2.16.0 (tests/integration/test_real_clients.py).
_RDKAFKA_SUFFIX: Final = re.compile(r"-rdkafka-v?(\d+(?:\.\d+)*)")


def _library_version(
    library: str, software_name: str, software_version: str
) -> tuple[int, ...] | None:
    """The version of ``library`` a client reports (None: not that library, or no
    version one can compare)."""
    if library == "librdkafka":
        suffix = _RDKAFKA_SUFFIX.search(software_version)
        if suffix is not None:
            return _numbers(suffix.group(1))
        if software_name != "librdkafka":
            return None
    elif software_name != library:
        return None
    match = _VERSION.match(software_version)
    return _numbers(match.group(1)) if match is not None else None


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _versions_text(first: tuple[int, ...] | None, last: tuple[int, ...] | None) -> str:
    low = ".".join(map(str, first)) if first is not None else None
    high = ".".join(map(str, last)) if last is not None else None
    if low and high:
        return f"{low} to {high}"
    if high:
        return f"up to {high} (the last one checked)"
    return f"{low} and later" if low else "every version"


def _error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return str(code)
