"""`ktc report` (a real process) rendered in a real headless Chromium (Debian's, driven by
Playwright): no console error, no request but the file itself, every chart drawn and not
blank, and every table equal to what `ktc sql` returns for the query shown under it.

The data: real librdkafka producers through a real collector (one closes, one is left
silent), plus landed pushes made here for what a collector alone cannot provoke: a Java
consumer's lag, a throttled producer, a client gone silent 20 minutes ago.

KTC_REPORT_SCREENSHOT=docs/images/report.png also writes the page's screenshot there (the
one in docs/insights.md).
"""

from __future__ import annotations

import csv
import datetime
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SPARK_TEST_CONF, write_landing
from lakehouse_otlp import make_context
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.lakehouse.cli import run_sql
from exporters.lakehouse.ingest import IngestJob
from exporters.lakehouse.report import CHARTS
from subscriptions.store import ConfigStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from collector_harness import RunningCollector, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
MINUTE_NS = 60 * 10**9


def _chromium() -> None:
    if CHROMIUM.exists():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is missing in CI: `make chromium` installs it")
    pytest.skip(f"{CHROMIUM} is missing (`make chromium` installs it with apt)")


def _gauges(now_ns: int, values: dict[str, float]) -> bytes:
    md = MetricsData()
    sm = md.resource_metrics.add().scope_metrics.add()
    for name, value in values.items():
        point = sm.metrics.add(name=name).gauge.data_points.add(time_unix_nano=now_ns,
                                                                as_double=value)
        point.attributes.add(key="node.id", value=AnyValue(string_value="1"))
    return md.SerializeToString()


def _made_pushes(now_ns: int) -> list:
    java = {"client_software_name": "apache-kafka-java", "client_software_version": "4.4.0"}
    consumer = {**java, "client_instance_id": "J" * 22, "client_id": "report-consumer"}
    throttled = {**java, "client_instance_id": "T" * 22, "client_id": "report-throttled"}
    silent = {"client_instance_id": "S" * 22, "client_id": "report-gone-silent",
              "push_interval_ms": 30_000}
    pushes = []
    for i in range(3):
        t = now_ns - (30 - 10 * i) * MINUTE_NS
        pushes.append((make_context(**consumer, received_time_unix_nano=t), _gauges(t, {
            "org.apache.kafka.consumer.fetch.manager.records.lag.max": 1000.0 * (i + 1),
            "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg": 12.5,
        })))
        pushes.append((make_context(**throttled, received_time_unix_nano=t), _gauges(t, {
            "org.apache.kafka.producer.produce.throttle.time.max": 40.0 + 10 * i,
            "org.apache.kafka.producer.request.latency.avg": 80.0 + i,
        })))
    t = now_ns - 20 * MINUTE_NS
    pushes.append((make_context(**silent, received_time_unix_nano=t), _gauges(t, {
        "org.apache.kafka.producer.node.request.latency.avg": 3.0,
    })))
    return pushes


def _land_real_clients(data: Path) -> Path:
    """Two librdkafka producers push every 500 ms; one closes (its terminating push),
    the other is still running when the collector stops."""
    from confluent_kafka import Producer

    ConfigStore(data).alter_subscription(
        "everything", {"metrics": "org.apache.kafka.", "interval.ms": "500"}, []
    )
    with RunningCollector(data) as collector:
        producers = {cid: Producer({"bootstrap.servers": collector.bootstrap, "client.id": cid,
                                    "enable.metrics.push": True, "log_level": 3})
                     for cid in ("report-orders", "report-billing")}

        def pushes(cid: str) -> int:
            return sum(1 for r in collector.landed() if r.context.client_id == cid)

        wait_for(lambda: all(pushes(c) >= 3 for c in producers), timeout_s=30,
                 what="three pushes from each producer")
        producers.pop("report-orders").close()
        wait_for(lambda: any(r.context.terminating for r in collector.landed()), timeout_s=30,
                 what="the terminating push")
        directory = collector.landing_directory
    for producer in producers.values():
        producer.close()
    return directory


@pytest.fixture
def reported(spark, lake_config, tmp_path):
    """(html path, Spark on the reported database)."""
    real = _land_real_clients(tmp_path / "data")
    made = tmp_path / "made" / "node-2"
    now_ns = int(datetime.datetime.now(datetime.UTC).timestamp()) * 10**9
    write_landing(made, _made_pushes(now_ns))
    with IngestJob(lake_config, lambda: [real, made], spark=spark) as job:
        job.run_once()
    out = tmp_path / "report.html"
    conf = [arg for key, value in SPARK_TEST_CONF.items() for arg in ("--conf", f"{key}={value}")]
    result = subprocess.run(
        [sys.executable, "-m", "collector.app.cli", "report", "--lake-dir", str(lake_config.lake_dir),
         "--database", lake_config.database, "--master", "local[1]", *conf,
         "--since", "24h", "--out", str(out)],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True,
        timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.strip() == f"wrote {out} ({len(CHARTS)} charts, 0 without data)"
    spark.catalog.setCurrentDatabase(lake_config.database)
    yield out, spark
    spark.catalog.setCurrentDatabase("default")


def _ktc_sql_cells(spark, sql: str) -> list[list[str]]:
    """`ktc sql --format csv` of the query, as cells (the report prints NULL for null)."""
    out = io.StringIO()
    run_sql(spark, sql, "csv", out)
    header, *rows = csv.reader(io.StringIO(out.getvalue()))
    return [header] + [[cell if cell else "NULL" for cell in row] for row in rows]


def _single_colour(png: bytes) -> bool:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return image.convert("RGB").getcolors(maxcolors=1) is not None


def test_report_in_chromium(reported, tmp_path) -> None:
    _chromium()
    from playwright.sync_api import sync_playwright

    html_path, spark = reported
    document = html_path.as_uri()
    requests: list[str] = []
    console_errors: list[str] = []
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900},
        )
        try:
            context.on("request", lambda request: requests.append(request.url))
            page = context.new_page()
            page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
            page.on("pageerror", lambda exc: console_errors.append(str(exc)))
            page.goto(document, wait_until="load")
            sections = page.locator("section.report-section")
            assert sections.evaluate_all("s => s.map(e => e.id)") == [c.key for c in CHARTS]
            for spec in CHARTS:
                section = page.locator(f"section#{spec.key}")
                chart = section.locator("figure.chart svg")
                assert chart.count() == 1, f"{spec.key}: no chart drawn"
                box = chart.bounding_box()
                assert box and box["width"] > 100 and box["height"] > 50, (spec.key, box)
                assert chart.is_visible(), spec.key
                assert not _single_colour(chart.screenshot()), f"{spec.key}: the chart is blank"
                cells = section.locator("table.numbers").evaluate(
                    "t => [...t.rows].map(r => [...r.cells].map(c => c.textContent))")
                sql = section.locator("pre.sql").text_content()
                expected = _ktc_sql_cells(spark, sql)
                assert len(expected) > 1, f"{spec.key}: the query returns no row"
                assert cells == expected, spec.key
            screenshot = os.environ.get("KTC_REPORT_SCREENSHOT")
            if screenshot:
                page.screenshot(path=str(REPO / screenshot), full_page=True)
        finally:
            context.close()
    assert console_errors == []
    assert requests == [document]
