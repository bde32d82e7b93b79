"""The insight views: which clients exist, how healthy producers and consumers are, which
are throttled and which went silent.

They are ordinary views over the ``clients`` and ``metrics`` views (catalog.py creates
them with the others), so they see whatever ingest has written, and ``ktc sql``, the
Thrift server and ``ktc report`` read them alike.

Each health column is one rule of a table below: the metric names that feed it, in order
of preference, and how the points are combined.  Both librdkafka and the Java client send
the KIP-714 names (``org.apache.kafka.producer.request.latency.avg`` ...), as gauges in
milliseconds with no OTLP unit; where one client sends a name the other lacks, the column
lists both and takes the first the instance sent in that hour with a value other than 0,
else 0 (librdkafka before 2.6 only had the per-broker ``node.request.latency``, and a
producer that sent no produce request reports ``request.latency.avg`` 0).  Points that are NaN or infinite are left
out: the Java client reports NaN for an average or maximum with no sample in its window.

``stale_clients`` compares each instance's last push with a ``now``: the view uses
``current_timestamp()``; :func:`stale_clients_sql` takes any other instant, which is how
the tests and a report for a past moment ask the same question.
"""

from __future__ import annotations

import dataclasses
import datetime

__all__ = [
    "CONSUMER_HEALTH_COLUMNS",
    "INSIGHT_VIEW_NAMES",
    "PRODUCER_HEALTH_COLUMNS",
    "STALE_FACTOR",
    "STALE_GRACE_MS",
    "THROTTLE_METRICS",
    "HealthColumn",
    "insight_view_sqls",
    "stale_clients_sql",
    "timestamp_sql",
]

INSIGHT_VIEW_NAMES: tuple[str, ...] = (
    "client_inventory",
    "producer_health",
    "consumer_health",
    "throttled_clients",
    "stale_clients",
)

# An instance is stale once its last push is older than STALE_FACTOR x its push interval
# plus STALE_GRACE_MS.  KIP-714 clients push every interval with up to +-50 % jitter on the
# first push, so 1.5 intervals is the longest regular gap; the grace covers the network, a
# busy collector and ingest delay (``ktc ingest`` triggers every 10 s by default).
STALE_FACTOR = 1.5
STALE_GRACE_MS = 30_000

_PRODUCER = "org.apache.kafka.producer."
_CONSUMER = "org.apache.kafka.consumer."


@dataclasses.dataclass(frozen=True, slots=True)
class HealthColumn:
    """One health column: ``combine`` (avg or max) of the points of the first metric name
    in ``metrics`` that the instance sent in the hour and that is not 0 (else 0)."""

    name: str
    combine: str  # "avg" | "max"
    metrics: tuple[str, ...]


PRODUCER_HEALTH_COLUMNS: tuple[HealthColumn, ...] = (
    HealthColumn(
        "request_latency_avg_ms",
        "avg",
        (_PRODUCER + "request.latency.avg", _PRODUCER + "node.request.latency.avg"),
    ),
    HealthColumn(
        "request_latency_max_ms",
        "max",
        (_PRODUCER + "request.latency.max", _PRODUCER + "node.request.latency.max"),
    ),
    HealthColumn("record_error_rate", "avg", (_PRODUCER + "record.error.rate",)),
    HealthColumn(
        "record_queue_time_avg_ms", "avg", (_PRODUCER + "record.queue.time.avg",)
    ),
    HealthColumn(
        "record_queue_time_max_ms", "max", (_PRODUCER + "record.queue.time.max",)
    ),
    HealthColumn(
        "throttle_time_avg_ms", "avg", (_PRODUCER + "produce.throttle.time.avg",)
    ),
    HealthColumn(
        "throttle_time_max_ms", "max", (_PRODUCER + "produce.throttle.time.max",)
    ),
)

CONSUMER_HEALTH_COLUMNS: tuple[HealthColumn, ...] = (
    HealthColumn(
        "fetch_latency_avg_ms", "avg", (_CONSUMER + "fetch.manager.fetch.latency.avg",)
    ),
    HealthColumn(
        "fetch_latency_max_ms", "max", (_CONSUMER + "fetch.manager.fetch.latency.max",)
    ),
    # The Java client sends it per partition (topic, partition attributes) and for the
    # client as a whole (no attributes): the maximum over all is the client's worst lag.
    HealthColumn(
        "records_lag_max", "max", (_CONSUMER + "fetch.manager.records.lag.max",)
    ),
    HealthColumn(
        "commit_latency_avg_ms", "avg", (_CONSUMER + "coordinator.commit.latency.avg",)
    ),
    HealthColumn(
        "commit_latency_max_ms", "max", (_CONSUMER + "coordinator.commit.latency.max",)
    ),
    HealthColumn(
        "throttle_time_avg_ms",
        "avg",
        (_CONSUMER + "fetch.manager.fetch.throttle.time.avg",),
    ),
    HealthColumn(
        "throttle_time_max_ms",
        "max",
        (_CONSUMER + "fetch.manager.fetch.throttle.time.max",),
    ),
)

# Throttle time metrics, (average, maximum) per role: a push throttles an instance when
# any of them is above 0.
THROTTLE_METRICS: dict[str, tuple[str, str]] = {
    "producer": (
        _PRODUCER + "produce.throttle.time.avg",
        _PRODUCER + "produce.throttle.time.max",
    ),
    "consumer": (
        _CONSUMER + "fetch.manager.fetch.throttle.time.avg",
        _CONSUMER + "fetch.manager.fetch.throttle.time.max",
    ),
}

# What identifies the instance in every insight view, as of its latest push.
_IDENTITY = (
    "client_id",
    "client_software_name",
    "client_software_version",
    "principal",
)

_USABLE_VALUE = (
    "value IS NOT NULL AND NOT isnan(value) AND abs(value) != double('Infinity')"
)


def _q(database: str, name: str) -> str:
    return f"`{database}`.`{name}`"


def _quoted(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _identity_latest() -> str:
    return ",\n  ".join(
        f"max_by(`{c}`, received_time_unix_nano) AS `{c}`" for c in _IDENTITY
    )


def client_inventory_sql(database: str) -> str:
    return (
        f"CREATE OR REPLACE VIEW {_q(database, 'client_inventory')} AS\n"
        "SELECT client_instance_id, client_id, client_software_name, client_software_version,\n"
        "  principal, listener, client_source_address, first_push, last_push, push_count,\n"
        "  push_interval_ms, terminated\n"
        f"FROM {_q(database, 'clients')}"
    )


def _health_sql(database: str, view: str, columns: tuple[HealthColumn, ...]) -> str:
    names = sorted({m for c in columns for m in c.metrics})
    selected = []
    for column in columns:
        per_metric = [
            f"{column.combine}(CASE WHEN metric_name = '{m}' THEN value END)"
            for m in column.metrics
        ]
        # The first metric that measured something: an idle librdkafka producer (or its
        # admin client) sends request.latency.avg = 0, having sent no produce request,
        # beside a node.request.latency.avg that did measure its requests.
        measured = [f"NULLIF({e}, 0)" for e in per_metric]
        expression = (
            per_metric[0]
            if len(per_metric) == 1
            else f"COALESCE({', '.join(measured + per_metric)})"
        )
        selected.append(f"CAST({expression} AS DOUBLE) AS `{column.name}`")
    return (
        f"CREATE OR REPLACE VIEW {_q(database, view)} AS\n"
        f"SELECT client_instance_id,\n  {_identity_latest()},\n"
        "  date_trunc('HOUR', received_time) AS hour_start,\n"
        "  count(DISTINCT landing_node, landing_offset) AS pushes,\n  "
        + ",\n  ".join(selected)
        + f"\nFROM {_q(database, 'metrics')}\n"
        f"WHERE metric_name IN ({_quoted(names)}) AND {_USABLE_VALUE}\n"
        "GROUP BY client_instance_id, date_trunc('HOUR', received_time)"
    )


def throttled_clients_sql(database: str) -> str:
    averages = [avg for avg, _ in THROTTLE_METRICS.values()]
    maxima = [mx for _, mx in THROTTLE_METRICS.values()]
    return (
        f"CREATE OR REPLACE VIEW {_q(database, 'throttled_clients')} AS\n"
        f"SELECT client_instance_id,\n  {_identity_latest()},\n"
        "  count(DISTINCT landing_node, landing_offset) AS throttled_pushes,\n"
        "  min(received_time) AS first_throttled,\n"
        "  max(received_time) AS last_throttled,\n"
        f"  CAST(avg(CASE WHEN metric_name IN ({_quoted(averages)}) THEN value END) AS DOUBLE)"
        " AS throttle_time_avg_ms,\n"
        f"  CAST(max(CASE WHEN metric_name IN ({_quoted(maxima)}) THEN value END) AS DOUBLE)"
        " AS throttle_time_max_ms\n"
        f"FROM {_q(database, 'metrics')}\n"
        f"WHERE metric_name IN ({_quoted(averages + maxima)}) AND {_USABLE_VALUE} AND value > 0\n"
        "GROUP BY client_instance_id"
    )


def timestamp_sql(instant: datetime.datetime) -> str:
    """A Spark SQL TIMESTAMP for an aware datetime, exact to the microsecond."""
    micros = round(instant.timestamp() * 1_000_000)
    return f"timestamp_micros({micros})"


def stale_clients_sql(
    database: str, *, now: str = "current_timestamp()", grace_ms: int = STALE_GRACE_MS
) -> str:
    """The SELECT behind ``stale_clients`` with ``now`` (a SQL expression: see
    :func:`timestamp_sql`) and the grace as parameters."""
    return (
        "SELECT client_instance_id, client_id, client_software_name, client_software_version,\n"
        "  principal, push_interval_ms, last_push, stale_since,\n"
        "  CAST((unix_micros(now) - unix_micros(last_push)) / 1e6 AS DOUBLE) AS silent_seconds\n"
        "FROM (\n"
        "  SELECT *,\n"
        f"    timestamp_micros(unix_micros(last_push) + CAST({STALE_FACTOR * 1000} * push_interval_ms"
        f" AS BIGINT) + {int(grace_ms) * 1000}) AS stale_since,\n"
        f"    {now} AS now\n"
        f"  FROM {_q(database, 'clients')}\n"
        ")\n"
        "WHERE NOT terminated AND push_interval_ms IS NOT NULL AND now > stale_since"
    )


def insight_view_sqls(database: str) -> tuple[str, ...]:
    """CREATE OR REPLACE VIEW for every insight view, in dependency order."""
    return (
        client_inventory_sql(database),
        _health_sql(database, "producer_health", PRODUCER_HEALTH_COLUMNS),
        _health_sql(database, "consumer_health", CONSUMER_HEALTH_COLUMNS),
        throttled_clients_sql(database),
        f"CREATE OR REPLACE VIEW {_q(database, 'stale_clients')} AS\n"
        + stale_clients_sql(database),
    )
