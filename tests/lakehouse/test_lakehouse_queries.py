"""The analyst queries of docs/lakehouse.md, run as written against real ingested data,
and the `ktc sql` output formats."""

from __future__ import annotations

import datetime
import io
import json
import re
from pathlib import Path

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.lakehouse.cli.options import parse_duration_s
from exporters.lakehouse.cli.output import write_rows
from exporters.lakehouse.cli.sql import run_sql
from exporters.lakehouse.ingest import IngestJob
from tests.lakehouse.conftest import write_landing
from tests.lakehouse.lakehouse_otlp import make_context

DOCS = Path(__file__).resolve().parents[2] / "docs" / "lakehouse.md"
_QUERY_BLOCK = re.compile(r"```sql\n(-- query: (\S+)\n.*?)```", re.DOTALL)
MINUTE_NS = 60 * 10**9


def doc_queries() -> dict[str, str]:
    return {name: sql for sql, name in _QUERY_BLOCK.findall(DOCS.read_text())}


def _push(
    now_ns: int,
    *,
    latency_max: list[float],
    latency_avg: list[float],
    throttle_max: float,
) -> bytes:
    md = MetricsData()
    sm = md.resource_metrics.add().scope_metrics.add()
    for name, values in (
        ("org.apache.kafka.producer.node.request.latency.max", latency_max),
        ("org.apache.kafka.producer.node.request.latency.avg", latency_avg),
    ):
        metric = sm.metrics.add(name=name, unit="ms")
        for node, value in enumerate(values, start=1):
            p = metric.gauge.data_points.add(time_unix_nano=now_ns, as_double=value)
            p.attributes.add(key="node.id", value=AnyValue(string_value=str(node)))
    throttle = sm.metrics.add(
        name="org.apache.kafka.producer.produce.throttle.time.max"
    )
    throttle.gauge.data_points.add(time_unix_nano=now_ns, as_double=throttle_max)
    return md.SerializeToString()


def _fleet(now_ns: int) -> list:
    a = {
        "client_instance_id": "A" * 22,
        "client_id": "orders-producer",
        "client_software_version": "2.16.1-rdkafka-2.16.0",
        "push_interval_ms": 1000,
    }
    b = {
        "client_instance_id": "B" * 22,
        "client_id": "billing-producer",
        "client_software_version": "2.15.0-rdkafka-2.15.0",
        "push_interval_ms": 5000,
    }
    c = {
        "client_instance_id": "C" * 22,
        "client_id": "old-producer",
        "client_software_version": "2.15.0-rdkafka-2.15.0",
        "push_interval_ms": 5000,
    }
    pushes = []
    for i in range(5):  # A: every 10 minutes from 50 to 10 minutes ago, then terminates
        t = now_ns - (50 - 10 * i) * MINUTE_NS
        pushes.append(
            (
                make_context(**a, received_time_unix_nano=t, terminating=i == 4),
                _push(
                    t,
                    latency_max=[2 * i + 1, 2 * i + 2],
                    latency_avg=[i, i + 0.5],
                    throttle_max=5 * i,
                ),
            )
        )
    for i, minutes in enumerate(
        (30, 20)
    ):  # B: silent for 20 minutes, no terminating push
        t = now_ns - minutes * MINUTE_NS
        pushes.append(
            (
                make_context(**b, received_time_unix_nano=t),
                _push(
                    t,
                    latency_max=[100 + 200 * i, 200 + 200 * i],
                    latency_avg=[50 + i, 60 + i],
                    throttle_max=50 + 20 * i,
                ),
            )
        )
    t = now_ns - 180 * MINUTE_NS  # C: one push three hours ago
    pushes.append(
        (
            make_context(**c, received_time_unix_nano=t),
            _push(t, latency_max=[999, 999], latency_avg=[9, 9], throttle_max=1),
        )
    )
    return pushes


@pytest.fixture
def fleet_db(spark, lake_config, tmp_path):
    now_ns = (
        datetime.datetime.now(datetime.UTC).replace(microsecond=0).timestamp() * 10**9
    )
    write_landing(tmp_path / "node-1", _fleet(int(now_ns)))
    with IngestJob(lake_config, lambda: [tmp_path / "node-1"], spark=spark) as job:
        job.run_once()
    spark.catalog.setCurrentDatabase(lake_config.database)
    yield spark
    spark.catalog.setCurrentDatabase("default")


def _run(spark, sql: str) -> list[dict]:
    out = io.StringIO()
    run_sql(spark, sql, "json", out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_docs_hold_five_analyst_queries() -> None:
    assert list(doc_queries()) == [
        "p99-request-latency-by-version",
        "silent-clients",
        "top-throttled-producers",
        "fleet-by-version",
        "latest-latency-per-broker",
    ]


@pytest.mark.spark
def test_analyst_queries_from_the_docs(fleet_db) -> None:
    queries = doc_queries()
    spark = fleet_db

    p99 = _run(spark, queries["p99-request-latency-by-version"])
    # A: 1..10 -> 9 + 0.91 * (10 - 9); B: 100, 200, 300, 400 -> 300 + 0.97 * 100; C is
    # three hours old.  Spark's percentile() interpolates linearly, like numpy's default.
    assert [
        (r["client_software_version"], round(r["p99_latency_ms"], 6), r["points"])
        for r in p99
    ] == [
        ("2.15.0-rdkafka-2.15.0", 397.0, 4),
        ("2.16.1-rdkafka-2.16.0", 9.91, 10),
    ]

    silent = _run(spark, queries["silent-clients"])
    assert [r["client_id"] for r in silent] == ["old-producer", "billing-producer"]

    throttled = _run(spark, queries["top-throttled-producers"])
    assert [
        (r["client_id"], r["max_throttle_ms"], r["avg_throttle_ms"]) for r in throttled
    ] == [
        ("billing-producer", 70.0, 60.0),
        ("orders-producer", 20.0, 10.0),
        ("old-producer", 1.0, 1.0),
    ]

    fleet = _run(spark, queries["fleet-by-version"])
    assert [
        (r["client_software_version"], r["clients"], r["pushes"]) for r in fleet
    ] == [
        ("2.15.0-rdkafka-2.15.0", 2, 3),
        ("2.16.1-rdkafka-2.16.0", 1, 5),
    ]

    latest = _run(spark, queries["latest-latency-per-broker"])
    assert [(r["client_id"], r["broker"], r["latency_avg_ms"]) for r in latest] == [
        ("billing-producer", "1", 51.0),
        ("billing-producer", "2", 61.0),
        ("old-producer", "1", 9.0),
        ("old-producer", "2", 9.0),
        ("orders-producer", "1", 4.0),
        ("orders-producer", "2", 4.5),
    ]


def test_write_rows_formats() -> None:
    columns = ["name", "value", "attrs", "when"]
    rows = [
        ("a,b", 1.5, {"node.id": "1"}, datetime.datetime(2026, 11, 21, 12, 0, 1)),
        ("c", None, None, None),
    ]
    out = io.StringIO()
    write_rows(columns, rows, "json", out)
    assert out.getvalue().splitlines() == [
        '{"name": "a,b", "value": 1.5, "attrs": {"node.id": "1"}, "when": "2026-11-21T12:00:01"}',
        '{"name": "c", "value": null, "attrs": null, "when": null}',
    ]
    out = io.StringIO()
    write_rows(columns, rows, "csv", out)
    assert out.getvalue() == (
        'name,value,attrs,when\n"a,b",1.5,"{""node.id"": ""1""}",2026-11-21 12:00:01\nc,,,\n'
    )
    out = io.StringIO()
    write_rows(columns, rows, "table", out)
    assert out.getvalue().splitlines() == [
        "name  value  attrs             when",
        "----  -----  ----------------  -------------------",
        'a,b   1.5    {"node.id": "1"}  2026-11-21 12:00:01',
        "c     NULL   NULL              NULL",
        "(2 rows)",
    ]


@pytest.mark.parametrize(
    "text,seconds", [("10s", 10), ("500ms", 0.5), ("2m", 120), ("1h", 3600), ("7", 7)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


def test_sql_on_a_missing_lakehouse_is_a_clear_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from exporters.lakehouse.cli.sql import sql_command

    result = CliRunner().invoke(
        sql_command, ["SELECT 1", "--data-dir", str(tmp_path / "nowhere")]
    )
    assert result.exit_code == 1
    assert "no lakehouse at" in result.output and "ktc ingest" in result.output
