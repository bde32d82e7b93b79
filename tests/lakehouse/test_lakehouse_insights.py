"""The insight views on pushes that real clients sent (tests/lakehouse/insight_capture.py:
librdkafka and the Java client, throttled by quotas, one client SIGKILLed), each compared
with what this file computes by hand from the raw OTLP points; and once with live clients:
a confluent-kafka client killed with SIGKILL is stale, a closed one is not."""

from __future__ import annotations

import datetime
import math
import os
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.context import TelemetryContext
from exporters.lakehouse.ingest import IngestJob
from exporters.lakehouse.insights import (
    STALE_FACTOR,
    STALE_GRACE_MS,
    HealthColumn,
    stale_clients_sql,
    timestamp_sql,
)
from exporters.lakehouse.session import LakehouseConfig
from tests.integration.collector_harness import RunningCollector, wait_for
from tests.lakehouse.conftest import SPARK_TEST_CONF, write_landing
from tests.lakehouse.insight_capture import (
    KILLED_CLIENT,
    RDKAFKA_PRODUCER,
    load_captured,
    pushes_of,
    sigkill,
    start_killed_client,
    subscribe_everything,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

HOUR_US = 3600 * 10**6
P, C = "org.apache.kafka.producer.", "org.apache.kafka.consumer."
# The columns as docs/insights.md specifies them, written out here (not imported from the
# code under test): (column, combine, metric names in order of preference).
PRODUCER_RULES = (
    HealthColumn(
        "request_latency_avg_ms",
        "avg",
        (P + "request.latency.avg", P + "node.request.latency.avg"),
    ),
    HealthColumn(
        "request_latency_max_ms",
        "max",
        (P + "request.latency.max", P + "node.request.latency.max"),
    ),
    HealthColumn("record_error_rate", "avg", (P + "record.error.rate",)),
    HealthColumn("record_queue_time_avg_ms", "avg", (P + "record.queue.time.avg",)),
    HealthColumn("record_queue_time_max_ms", "max", (P + "record.queue.time.max",)),
    HealthColumn("throttle_time_avg_ms", "avg", (P + "produce.throttle.time.avg",)),
    HealthColumn("throttle_time_max_ms", "max", (P + "produce.throttle.time.max",)),
)
CONSUMER_RULES = (
    HealthColumn(
        "fetch_latency_avg_ms", "avg", (C + "fetch.manager.fetch.latency.avg",)
    ),
    HealthColumn(
        "fetch_latency_max_ms", "max", (C + "fetch.manager.fetch.latency.max",)
    ),
    HealthColumn("records_lag_max", "max", (C + "fetch.manager.records.lag.max",)),
    HealthColumn(
        "commit_latency_avg_ms", "avg", (C + "coordinator.commit.latency.avg",)
    ),
    HealthColumn(
        "commit_latency_max_ms", "max", (C + "coordinator.commit.latency.max",)
    ),
    HealthColumn(
        "throttle_time_avg_ms", "avg", (C + "fetch.manager.fetch.throttle.time.avg",)
    ),
    HealthColumn(
        "throttle_time_max_ms", "max", (C + "fetch.manager.fetch.throttle.time.max",)
    ),
)
THROTTLE_AVERAGES = {
    P + "produce.throttle.time.avg",
    C + "fetch.manager.fetch.throttle.time.avg",
}
THROTTLE_MAXIMA = {
    P + "produce.throttle.time.max",
    C + "fetch.manager.fetch.throttle.time.max",
}
Push = tuple[
    TelemetryContext, int, list[tuple[str, float]]
]  # context, offset, (name, value)


def raw_points(pushes: Iterable[tuple[TelemetryContext, bytes]]) -> list[Push]:
    """Every number point of every push, as (metric name, value as double)."""
    out = []
    for offset, (context, payload) in enumerate(pushes):
        points = []
        for rm in MetricsData.FromString(payload).resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    kind = metric.WhichOneof("data")
                    assert kind in ("gauge", "sum"), (
                        f"{context.client_software_name} sent a {kind}"
                    )
                    for p in getattr(metric, kind).data_points:
                        value = (
                            p.as_double
                            if p.WhichOneof("value") == "as_double"
                            else float(p.as_int)
                        )
                        points.append((metric.name, value))
        out.append((context, offset, points))
    return out


def micros(context: TelemetryContext) -> int:
    return context.received_time_unix_nano // 1000


def usable(value: float) -> bool:
    return not math.isnan(value) and not math.isinf(value)


def identity(pushes: list[Push]) -> dict:
    latest = max(pushes, key=lambda p: p[0].received_time_unix_nano)[0]
    return {
        "client_id": latest.client_id,
        "client_software_name": latest.client_software_name,
        "client_software_version": latest.client_software_version,
        "principal": latest.principal,
    }


def by_instance(pushes: list[Push]) -> dict[str, list[Push]]:
    groups: dict[str, list[Push]] = defaultdict(list)
    for push in pushes:
        groups[push[0].client_instance_id].append(push)
    return groups


def expected_inventory(pushes: list[Push]) -> dict[str, dict]:
    out = {}
    for instance, group in by_instance(pushes).items():
        latest = max(group, key=lambda p: p[0].received_time_unix_nano)[0]
        out[instance] = {
            **identity(group),
            "first_push_us": min(micros(p[0]) for p in group),
            "last_push_us": max(micros(p[0]) for p in group),
            "push_count": len(group),
            "push_interval_ms": latest.push_interval_ms,
            "terminated": any(p[0].terminating for p in group),
        }
    return out


def expected_health(
    pushes: list[Push], columns: tuple[HealthColumn, ...]
) -> dict[tuple, dict]:
    names = {m for c in columns for m in c.metrics}
    hours: dict[tuple[str, int], list[Push]] = defaultdict(list)
    for push in pushes:
        if any(n in names and usable(v) for n, v in push[2]):
            hours[
                (push[0].client_instance_id, micros(push[0]) // HOUR_US * HOUR_US)
            ].append(push)
    out = {}
    for key, group in hours.items():
        row: dict = {**identity(group), "pushes": len(group)}
        for column in columns:
            combined = []
            for metric in column.metrics:
                values = [
                    v
                    for _, _, points in group
                    for n, v in points
                    if n == metric and usable(v)
                ]
                if values:
                    combined.append(
                        sum(values) / len(values)
                        if column.combine == "avg"
                        else max(values)
                    )
            # The first metric the instance sent that measured something (not 0) wins;
            # when every one it sent is 0, that 0.
            measured = [v for v in combined if v != 0]
            row[column.name] = (
                measured[0] if measured else combined[0] if combined else None
            )
        out[key] = row
    return out


def expected_throttled(pushes: list[Push]) -> dict[str, dict]:
    averages, maxima = THROTTLE_AVERAGES, THROTTLE_MAXIMA
    out = {}
    for instance, group in by_instance(pushes).items():
        throttled = [
            (
                p,
                [
                    (n, v)
                    for n, v in p[2]
                    if n in averages | maxima and usable(v) and v > 0
                ],
            )
            for p in group
        ]
        throttled = [(p, points) for p, points in throttled if points]
        if not throttled:
            continue
        avg_values = [v for _, points in throttled for n, v in points if n in averages]
        out[instance] = {
            **identity([p for p, _ in throttled]),
            "throttled_pushes": len(throttled),
            "first_throttled_us": min(micros(p[0]) for p, _ in throttled),
            "last_throttled_us": max(micros(p[0]) for p, _ in throttled),
            "throttle_time_avg_ms": sum(avg_values) / len(avg_values)
            if avg_values
            else None,
            "throttle_time_max_ms": max(
                (v for _, points in throttled for n, v in points if n in maxima),
                default=None,
            ),
        }
    return out


def expected_stale(
    pushes: list[Push], now_us: int, grace_ms: int = STALE_GRACE_MS
) -> dict[str, dict]:
    out = {}
    for instance, row in expected_inventory(pushes).items():
        stale_since = (
            row["last_push_us"]
            + int(STALE_FACTOR * 1000 * row["push_interval_ms"])
            + grace_ms * 1000
        )
        if not row["terminated"] and now_us > stale_since:
            out[instance] = {
                key: row[key]
                for key in (
                    "client_id",
                    "client_software_name",
                    "client_software_version",
                    "principal",
                    "push_interval_ms",
                    "last_push_us",
                )
            }
            out[instance]["stale_since_us"] = stale_since
            out[instance]["silent_seconds"] = (now_us - row["last_push_us"]) / 1e6
    return out


# Timestamps are compared as microseconds: no time zone between Spark and Python.
_MICROS = {
    "first_push",
    "last_push",
    "first_throttled",
    "last_throttled",
    "stale_since",
    "hour_start",
}


def query(spark, sql: str, key: Iterable[str]) -> dict:
    """Rows of a query keyed by the `key` columns, timestamps as `<name>_us`."""
    df = spark.sql(sql)
    select = [
        f"unix_micros(`{c}`) AS `{c}_us`" if c in _MICROS else f"`{c}`"
        for c in df.columns
    ]
    rows = [r.asDict() for r in df.selectExpr(*select).collect()]
    key = tuple(key)
    return {
        tuple(r.pop(k) for k in key) if len(key) > 1 else r.pop(key[0]): r for r in rows
    }


def assert_rows(got: dict, expected: dict) -> None:
    """Same keys and values; doubles equal to 1e-9 relative (Spark sums in another order)."""
    assert got.keys() == expected.keys()
    for key, row in expected.items():
        assert got[key].keys() >= row.keys(), key
        for column, value in row.items():
            actual = got[key][column]
            if isinstance(value, float) and actual is not None:
                assert math.isclose(actual, value, rel_tol=1e-9), (
                    key,
                    column,
                    actual,
                    value,
                )
            else:
                assert actual == value, (key, column, actual, value)


def ingest(spark, lake: Path, database: str, landing: Path) -> LakehouseConfig:
    config = LakehouseConfig(
        lake, database=database, master="local[1]", extra_conf=SPARK_TEST_CONF
    )
    with IngestJob(config, lambda: [landing], spark=spark) as job:
        job.run_once()
    return config


@pytest.fixture(scope="module")
def captured(spark_lake, tmp_path_factory) -> tuple[object, str, list[Push]]:
    """(spark, database, raw points): the captured pushes landed and ingested once."""
    spark, lake = spark_lake
    pushes = load_captured()
    landing = tmp_path_factory.mktemp("insights") / "node-1"
    write_landing(landing, pushes)
    ingest(spark, lake, "insights_captured", landing)
    return spark, "insights_captured", raw_points(pushes)


def test_the_captured_pushes_hold_what_the_views_need(captured) -> None:
    _, _, pushes = captured
    software = {p[0].client_software_name for p in pushes}
    assert software == {"confluent-kafka-python", "apache-kafka-java"}
    names = {(p[0].client_software_name, n) for p in pushes for n, _ in p[2]}
    for column in PRODUCER_RULES + CONSUMER_RULES:
        assert any((s, column.metrics[0]) in names for s in software), column
    # Both the preferred and the fallback latency are sent: the order of preference matters.
    latency = [(n, v) for p in pushes for n, v in p[2] if "request.latency.avg" in n]
    assert {n for n, _ in latency} >= set(PRODUCER_RULES[0].metrics)
    assert any(math.isnan(v) for p in pushes for _, v in p[2])  # Java's empty windows


def test_client_inventory(captured) -> None:
    spark, db, pushes = captured
    got = query(spark, f"SELECT * FROM `{db}`.client_inventory", ["client_instance_id"])
    expected = expected_inventory(pushes)
    assert_rows(got, expected)
    assert {r["client_software_name"] for r in got.values()} == {
        "confluent-kafka-python",
        "apache-kafka-java",
    }


@pytest.mark.parametrize(
    ("view", "columns"),
    [("producer_health", PRODUCER_RULES), ("consumer_health", CONSUMER_RULES)],
)
def test_health_views(captured, view: str, columns: tuple[HealthColumn, ...]) -> None:
    spark, db, pushes = captured
    got = query(
        spark, f"SELECT * FROM `{db}`.{view}", ["client_instance_id", "hour_start_us"]
    )
    expected = expected_health(pushes, columns)
    assert_rows(got, expected)
    software = {r["client_software_name"] for r in got.values()}
    assert software == {"confluent-kafka-python", "apache-kafka-java"}, view


def test_throttled_clients(captured) -> None:
    spark, db, pushes = captured
    got = query(
        spark, f"SELECT * FROM `{db}`.throttled_clients", ["client_instance_id"]
    )
    expected = expected_throttled(pushes)
    assert_rows(got, expected)
    clients = {r["client_id"] for r in got.values()}
    assert RDKAFKA_PRODUCER in clients and "insight-java" in clients


def test_stale_clients_at_an_injected_now(captured) -> None:
    spark, db, pushes = captured
    killed = [p for p in pushes if p[0].client_id == KILLED_CLIENT]
    threshold = (
        max(micros(p[0]) for p in killed)
        + int(STALE_FACTOR * 1000 * killed[0][0].push_interval_ms)
        + STALE_GRACE_MS * 1000
    )
    for now_us in (threshold, threshold + 1, threshold + 3600 * 10**6):
        now = datetime.datetime.fromtimestamp(now_us / 1e6, datetime.UTC)
        got = query(
            spark, stale_clients_sql(db, now=timestamp_sql(now)), ["client_instance_id"]
        )
        expected = expected_stale(pushes, now_us)
        assert_rows(got, expected)
    assert killed[0][0].client_instance_id not in expected_stale(pushes, threshold)
    assert killed[0][0].client_instance_id in expected_stale(pushes, threshold + 1)


def test_stale_clients_view_uses_the_clock(captured) -> None:
    spark, db, pushes = captured
    got = query(spark, f"SELECT * FROM `{db}`.stale_clients", ["client_instance_id"])
    # Captured long before now: every instance that did not terminate is stale.
    expected = {
        i for i, row in expected_inventory(pushes).items() if not row["terminated"]
    }
    assert got.keys() == expected
    assert KILLED_CLIENT in {r["client_id"] for r in got.values()}


def test_live_client_killed_with_sigkill_is_stale(spark_lake, tmp_path: Path) -> None:
    """Live librdkafka clients, 1 s interval: the SIGKILLed one is stale right after
    1.5 intervals + grace (an injected now), the one closed cleanly never is."""
    spark, lake = spark_lake
    from confluent_kafka import Producer

    data = tmp_path / "data"
    subscribe_everything(data)
    with RunningCollector(data) as collector:
        closed = Producer(
            {
                "bootstrap.servers": collector.bootstrap,
                "client.id": "live-closed",
                "enable.metrics.push": True,
                "log_level": 3,
            }
        )
        killed = start_killed_client(collector.bootstrap, "live-topic", "live-killed")
        try:
            wait_for(
                lambda: (
                    len(pushes_of(collector.landed(), "live-killed")) >= 2
                    and len(pushes_of(collector.landed(), "live-closed")) >= 2
                ),
                timeout_s=60,
                what="two pushes of each live client",
            )
        finally:
            sigkill(killed)
        closed.close()
        wait_for(
            lambda: any(
                r.context.terminating
                for r in pushes_of(collector.landed(), "live-closed")
            ),
            timeout_s=30,
            what="the closed client's terminating push",
        )
        landed = collector.landed()
        landing = collector.landing_directory
        ingest(spark, lake, "insights_live", landing)
    pushes = raw_points((r.context, bytes(r.payload)) for r in landed)
    last_us = max(micros(p[0]) for p in pushes)
    now_us = last_us + int(STALE_FACTOR * 1000 * 1000) + STALE_GRACE_MS * 1000 + 1
    now = datetime.datetime.fromtimestamp(now_us / 1e6, datetime.UTC)
    got = query(
        spark,
        stale_clients_sql("insights_live", now=timestamp_sql(now)),
        ["client_instance_id"],
    )
    assert {r["client_id"] for r in got.values()} == {"live-killed"}
    expected = expected_stale(pushes, now_us)
    assert_rows(got, expected)
    inventory = query(
        spark, "SELECT * FROM insights_live.client_inventory", ["client_instance_id"]
    )
    expected_rows = expected_inventory(pushes)
    assert_rows(inventory, expected_rows)


def test_the_documented_questions_run(captured) -> None:
    """Every SQL example of docs/insights.md's Insight views section runs on the views."""
    spark, db, _ = captured
    text = (Path(__file__).resolve().parents[2] / "docs" / "insights.md").read_text()
    section = text.split("## Insight views", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sql\n(.*?)```", section, re.DOTALL)
    assert len(blocks) >= 5
    spark.catalog.setCurrentDatabase(db)
    try:
        for sql in blocks:
            spark.sql(sql).collect()
        assert spark.sql(blocks[0]).count() == 2  # two software versions were captured
    finally:
        spark.catalog.setCurrentDatabase("default")


def _comparable(value: object) -> object:
    """A Spark or DuckDB value in one shape: rows as dicts, maps sorted, floats rounded."""
    if hasattr(value, "asDict"):
        value = value.asDict(recursive=True)
    if isinstance(value, dict):
        return tuple(sorted((k, _comparable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_comparable(v) for v in value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else round(value, 6)
    return value


def test_every_view_reads_the_same_on_the_fast_path(captured, spark_lake) -> None:
    """`ktc sql`'s fast path (pyiceberg + DuckDB) has every view, with Spark's rows."""
    from exporters.lakehouse.catalog import VIEW_NAMES
    from exporters.lakehouse.fastpath import run_fast

    spark, db, _ = captured
    config = LakehouseConfig(spark_lake[1], database=db)
    for view in VIEW_NAMES:
        if view == "stale_clients":
            continue  # compares with the current time, which moves between the two reads
        columns, rows = run_fast(config, f"SELECT * FROM {view}")
        frame = spark.table(config.table(view))
        assert columns == frame.columns, view
        fast = sorted(map(repr, (_comparable(r) for r in rows)))
        slow = sorted(map(repr, (_comparable(tuple(r)) for r in frame.collect())))
        assert fast == slow, view
        # No throttled client and no Kafka Streams application in the captured pushes.
        assert rows or view in ("throttled_clients", "applications"), view


# What `ktc sql` on the fast path must not import: Spark, the report's plotting, the
# collector's server, config and wire code, SQLAlchemy (the SQLite catalog is read with
# sqlite3).  Each was a measured part of its start (docs/lakehouse.md, Performance).
NOT_ON_THE_FAST_PATH = (
    "pyspark",
    "matplotlib",
    "grpc",
    "sqlalchemy",
    "google.protobuf",
    "opentelemetry",
    "collector.app.config",
    "collector.net",
    "exporters.lakehouse.ingest",
    "exporters.lakehouse.ingest_loop",
)


def test_ktc_sql_on_the_fast_path_imports_only_what_it_runs(
    captured, spark_lake
) -> None:
    """A `ktc sql` process answers as Spark does, loading neither Spark nor the modules of
    the commands it does not run."""
    spark, db, _ = captured
    lake = spark_lake[1]
    script = (
        "import atexit, sys\n"
        f"names = {NOT_ON_THE_FAST_PATH!r}\n"
        "atexit.register(lambda: print('imported:', [n for n in names if n in sys.modules],"
        " file=sys.stderr))\n"
        "from collector.app.cli import main\n"
        "main()\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "sql",
            "SELECT count(*) AS n FROM clients",
            "--engine",
            "duckdb",
            "--format",
            "csv",
            "--lake-dir",
            str(lake),
            "--database",
            db,
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    expected = spark.sql(f"SELECT count(*) AS n FROM lake.`{db}`.clients").first()[0]
    assert result.stdout.splitlines() == ["n", str(expected)]
    assert result.stderr.splitlines()[-1] == "imported: []"
