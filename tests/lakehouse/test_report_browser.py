"""`ktc report` (a real process) rendered in a real headless Chromium (Debian's, driven by
Playwright): no console error, no request but the file itself, every chart drawn and not
blank, and every table equal to what `ktc sql` returns for the query shown under it; count
axes tick at whole numbers, the produce latency is one that measured something, the push
rate's bucket width is stated.

The data: the captured pushes of real clients the insight views are tested on
(tests/lakehouse/insight_capture.py: librdkafka producer, consumer and admin client, the
Java producer and consumer, throttled by quotas, one client SIGKILLed), moved in time to
end ten minutes ago; and, for the applications chart, four pushes shaped as a Kafka Streams
4.4.0 process's admin client and thread consumer push them (tests/collector/streams_payloads.py:
the state metrics, REBALANCING then RUNNING).

KTC_REPORT_SCREENSHOT=docs/images/report.png also writes the page's screenshot there (the
one in docs/insights.md).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from exporters.lakehouse.cli.sql import run_sql
from exporters.lakehouse.ingest import IngestJob
from exporters.lakehouse.report import CHARTS
from proto.streams_states import CLIENT_STATE_METRIC, THREAD_STATE_METRIC
from subscriptions.kafka_uuid import kafka_uuid_to_str
from tests.collector.streams_payloads import gauge, payload, point
from tests.lakehouse.conftest import SPARK_TEST_CONF, write_landing
from tests.lakehouse.insight_capture import load_captured

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> None:
    if CHROMIUM.exists():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is missing in CI: `make chromium` installs it")
    pytest.skip(f"{CHROMIUM} is missing (`make chromium` installs it with apt)")


def _recent(pushes: list, *, last_ago_s: int) -> list:
    """The captured pushes moved in time, gaps kept, so the last arrived ``last_ago_s``
    before now: inside the report's window, the SIGKILLed client long stale."""
    now_ns = int(datetime.datetime.now(datetime.UTC).timestamp()) * 10**9
    shift = (
        now_ns - last_ago_s * 10**9 - max(c.received_time_unix_nano for c, _ in pushes)
    )
    return [
        (
            dataclasses.replace(
                c, received_time_unix_nano=c.received_time_unix_nano + shift
            ),
            p,
        )
        for c, p in pushes
    ]


def _streams_pushes(pushes: list) -> list:
    """A Streams process's state pushes, timed like the last captured Java push: its admin
    client REBALANCING then RUNNING, one thread's consumer STARTING then RUNNING."""
    java = [c for c, _ in pushes if c.client_software_name == "apache-kafka-java"][-1]
    process = "0f5bd7c4-2b8e-4a3c-9d1e-7a6b5c4d3e2f"
    prefix = f"wordcount-{process}"
    made = []
    for n, (client_state, thread_state) in enumerate(((1, 1), (2, 4))):
        at = java.received_time_unix_nano - (1 - n) * 30 * 10**9
        for suffix, instance, metric in (
            ("admin", kafka_uuid_to_str(uuid.UUID(int=0x5A)), gauge(CLIENT_STATE_METRIC, point(
                client_state, at, process_id=process, application_id="wordcount"))),
            ("StreamThread-1-consumer", kafka_uuid_to_str(uuid.UUID(int=0x5B)), gauge(
                THREAD_STATE_METRIC, point(thread_state, at, process_id=process,
                                           thread_id=f"{prefix}-StreamThread-1"))),
        ):  # fmt: skip
            context = dataclasses.replace(
                java,
                client_id=f"{prefix}-{suffix}",
                client_instance_id=instance,
                received_time_unix_nano=at,
            )
            made.append((context, payload([metric], {"group_id": "wordcount"})))
    return made


@pytest.fixture
def reported(spark, lake_config, tmp_path):
    """(html path, Spark on the reported database)."""
    landing = tmp_path / "landing" / "node-1"
    pushes = _recent(load_captured(), last_ago_s=600)
    write_landing(landing, pushes + _streams_pushes(pushes))
    with IngestJob(lake_config, lambda: [landing], spark=spark) as job:
        job.run_once()
    out = tmp_path / "report.html"
    conf = [
        arg
        for key, value in SPARK_TEST_CONF.items()
        for arg in ("--conf", f"{key}={value}")
    ]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "collector.app.cli",
            "report",
            "--lake-dir",
            str(lake_config.lake_dir),
            "--database",
            lake_config.database,
            "--master",
            "local[1]",
            *conf,
            "--since",
            "90m",
            "--out",
            str(out),
        ],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        result.stderr.strip() == f"wrote {out} ({len(CHARTS)} charts, 0 without data)"
    )
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
    from playwright.sync_api import ConsoleMessage, sync_playwright

    html_path, spark = reported
    document = html_path.as_uri()
    requests: list[str] = []
    console_errors: list[str] = []
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            context.on("request", lambda request: requests.append(request.url))
            page = context.new_page()

            def console_error(message: ConsoleMessage) -> None:
                if message.type == "error":
                    console_errors.append(message.text)

            page.on("console", console_error)
            page.on("pageerror", lambda exc: console_errors.append(str(exc)))
            page.goto(document, wait_until="load")
            sections = page.locator("section.report-section")
            assert sections.evaluate_all("s => s.map(e => e.id)") == [
                c.key for c in CHARTS
            ]
            for spec in CHARTS:
                section = page.locator(f"section#{spec.key}")
                chart = section.locator("figure.chart svg")
                assert chart.count() == 1, f"{spec.key}: no chart drawn"
                box = chart.bounding_box()
                assert box and box["width"] > 100 and box["height"] > 50, (
                    spec.key,
                    box,
                )
                assert chart.is_visible(), spec.key
                assert not _single_colour(chart.screenshot()), (
                    f"{spec.key}: the chart is blank"
                )
                cells = section.locator("table.numbers").evaluate(
                    "t => [...t.rows].map(r => [...r.cells].map(c => c.textContent))"
                )
                sql = section.locator("pre.sql").text_content()
                assert sql is not None, spec.key
                expected = _ktc_sql_cells(spark, sql)
                assert len(expected) > 1, f"{spec.key}: the query returns no row"
                assert cells == expected, spec.key
                ticks = chart.locator(
                    f'g[id^="{spec.key}-{"x" if spec.kind == "barh" else "y"}tick_"] text'
                ).all_text_contents()
                assert ticks, f"{spec.key}: no value-axis tick labels"
                if spec.counts:  # whole instances, whole records: no tick at 0.2
                    assert all(re.fullmatch(r"\d+", t) for t in ticks), (
                        spec.key,
                        ticks,
                    )
            # The latency that measured something: an idle librdkafka producer's
            # request.latency.avg is 0, its node.request.latency.avg is not.
            latency_sql = page.locator("section#produce-latency pre.sql").text_content()
            assert latency_sql is not None
            header, *rows = _ktc_sql_cells(spark, latency_sql)
            latency = header.index("request_latency_avg_ms")
            assert rows and all(float(row[latency]) > 0 for row in rows), rows
            # The push rate's bucket width is stated (a 90 min window: 1-minute buckets).
            assert page.locator("section#push-rate p.buckets").text_content() == (
                "One bar per 1-minute bucket (60 s): the pushes received in it divided "
                "by 60."
            )
            screenshot = os.environ.get("KTC_REPORT_SCREENSHOT")
            if screenshot:
                page.screenshot(path=str(REPO / screenshot), full_page=True)
        finally:
            context.close()
    assert console_errors == []
    assert requests == [document]


def test_an_empty_lake_reports_no_data(spark, lake_config) -> None:
    """Every query runs on empty tables and views; each chart is a no-data panel."""
    from exporters.lakehouse.catalog import ensure_catalog
    from exporters.lakehouse.report import (
        ReportWindow,
        collect_report,
        parse_since,
        render_report,
    )

    ensure_catalog(spark, lake_config.database)
    window = ReportWindow(
        datetime.datetime.now(datetime.UTC).replace(microsecond=0), parse_since("7d")
    )
    results = collect_report(spark, lake_config.database, window)
    assert [(r.spec.key, r.rows) for r in results] == [(c.key, ()) for c in CHARTS]
    page = render_report(results, window, lake_config.database)
    assert page.count("No data: the query returned no rows") == len(CHARTS)
    assert "<svg" not in page
