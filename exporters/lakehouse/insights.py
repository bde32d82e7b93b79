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

``applications`` is a Kafka Streams application as one thing: a row per process (from its
admin client's ``client.state``) and per stream thread (from the thread's main consumer's
``thread.state``), joined by the ``process_id`` both carry, states by name
(proto/streams_states.py: the pushes carry the enums' ordinals).

``stale_clients`` compares each instance's last push with a ``now``: the view uses
``current_timestamp()``; :func:`stale_clients_sql` takes any other instant, which is how
the tests and a report for a past moment ask the same question.
"""

from __future__ import annotations

import dataclasses
import datetime

from proto.streams_states import (
    CLIENT_STATE_METRIC,
    KAFKA_STREAMS_STATES,
    STREAM_THREAD_STATES,
    THREAD_STATE_METRIC,
)

__all__ = [
    "CONSUMER_HEALTH_COLUMNS",
    "INSIGHT_VIEW_NAMES",
    "PRODUCER_HEALTH_COLUMNS",
    "STALE_FACTOR",
    "STALE_GRACE_MS",
    "THROTTLE_METRICS",
    "HealthColumn",
    "applications_sql",
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
    "applications",
)

_ALIVE_THREADS = "org.apache.kafka.stream.alive.stream.threads"
_FAILED_THREADS = "org.apache.kafka.stream.failed.stream.threads"
# States in which a process or a thread is between assignments.
_REBALANCING_STATES = ("REBALANCING", "PARTITIONS_REVOKED", "PARTITIONS_ASSIGNED")

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


def _state_names(column: str, states: tuple[str, ...]) -> str:
    cases = " ".join(f"WHEN {i} THEN '{name}'" for i, name in enumerate(states))
    return f"CASE CAST({column} AS INT) {cases} END"


def applications_sql(database: str) -> str:
    """Kafka Streams applications: per process (``thread_id`` NULL) and per stream thread,
    the latest state by name and since when (the first point of the latest run of that
    state), the process's alive and failed thread counts, and the instance that said so."""
    metrics = _q(database, "metrics")
    state = (
        "CASE l.level WHEN 'process' THEN "
        + _state_names("l.state_value", KAFKA_STREAMS_STATES)
        + " ELSE "
        + _state_names("l.state_value", STREAM_THREAD_STATES)
        + " END"
    )
    same_series = "p.level = l.level AND p.process_id = l.process_id AND p.thread_key = l.thread_key"
    return (
        f"CREATE OR REPLACE VIEW {_q(database, 'applications')} AS\n"
        "WITH state_points AS (\n"
        f"  SELECT CASE WHEN metric_name = '{CLIENT_STATE_METRIC}' THEN 'process'"
        " ELSE 'thread' END AS level,\n"
        "    attributes['application_id'] AS application_id,\n"
        "    resource_attributes['group_id'] AS group_id,\n"
        "    attributes['process_id'] AS process_id,\n"
        "    COALESCE(attributes['thread_id'], '') AS thread_key,\n"
        "    value, time, client_instance_id, client_id\n"
        f"  FROM {metrics}\n"
        f"  WHERE metric_name IN ('{CLIENT_STATE_METRIC}', '{THREAD_STATE_METRIC}')\n"
        "    AND attributes['process_id'] IS NOT NULL AND value = value\n"
        "), latest AS (\n"
        "  SELECT level, process_id, thread_key,\n"
        "    max_by(value, time) AS state_value, max(time) AS last_seen,\n"
        "    max_by(client_instance_id, time) AS client_instance_id,\n"
        "    max_by(client_id, time) AS client_id,\n"
        "    max(application_id) AS application_id, max(group_id) AS group_id\n"
        "  FROM state_points GROUP BY level, process_id, thread_key\n"
        "), changed AS (\n"
        "  SELECT l.level, l.process_id, l.thread_key, max(p.time) AS changed_at\n"
        f"  FROM latest l JOIN state_points p ON {same_series}"
        " AND p.value <> l.state_value\n"
        "  GROUP BY l.level, l.process_id, l.thread_key\n"
        "), since AS (\n"
        # Every point after the last one in another state is in the latest state.
        "  SELECT l.level, l.process_id, l.thread_key, min(p.time) AS state_since\n"
        f"  FROM latest l JOIN state_points p ON {same_series}\n"
        "  LEFT JOIN changed c ON c.level = l.level AND c.process_id = l.process_id"
        " AND c.thread_key = l.thread_key\n"
        "  WHERE c.changed_at IS NULL OR p.time > c.changed_at\n"
        "  GROUP BY l.level, l.process_id, l.thread_key\n"
        "), threads AS (\n"
        "  SELECT client_instance_id,\n"
        f"    max_by(value, time) FILTER (WHERE metric_name = '{_ALIVE_THREADS}')"
        " AS alive_stream_threads,\n"
        "    CASE WHEN max(aggregation_temporality) FILTER (WHERE metric_name ="
        f" '{_FAILED_THREADS}') = 1\n"
        f"      THEN sum(value) FILTER (WHERE metric_name = '{_FAILED_THREADS}')\n"
        f"      ELSE max_by(value, time) FILTER (WHERE metric_name = '{_FAILED_THREADS}')"
        " END AS failed_stream_threads\n"
        f"  FROM {metrics}\n"
        f"  WHERE metric_name IN ('{_ALIVE_THREADS}', '{_FAILED_THREADS}')\n"
        "  GROUP BY client_instance_id\n"
        ")\n"
        "SELECT 'streams' AS kind,\n"
        "  COALESCE(l.application_id, process.application_id, l.group_id,"
        " process.group_id) AS application_id,\n"
        "  l.process_id, NULLIF(l.thread_key, '') AS thread_id,\n"
        f"  {state} AS state,\n"
        "  CAST(l.state_value AS INT) AS state_value, s.state_since, l.last_seen,\n"
        f"  {state} IN ({_quoted(_REBALANCING_STATES)}) AS rebalancing,\n"
        "  CAST(t.alive_stream_threads AS BIGINT) AS alive_stream_threads,\n"
        "  CAST(t.failed_stream_threads AS BIGINT) AS failed_stream_threads,\n"
        "  l.client_instance_id, l.client_id\n"
        "FROM latest l\n"
        "JOIN since s ON s.level = l.level AND s.process_id = l.process_id"
        " AND s.thread_key = l.thread_key\n"
        "LEFT JOIN latest process ON process.level = 'process'"
        " AND process.process_id = l.process_id\n"
        "LEFT JOIN threads t ON l.level = 'process'"
        " AND t.client_instance_id = l.client_instance_id"
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
        applications_sql(database),
    )
