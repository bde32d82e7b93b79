"""`ktc report` without Spark: --since parsing, the page from given rows, the no-data panel."""

from __future__ import annotations

import datetime
import re

import click
import pytest
from click.testing import CliRunner

from exporters.lakehouse.cli.report import report_command
from exporters.lakehouse.report import (
    CHARTS,
    ChartResult,
    ReportWindow,
    parse_since,
    render_report,
)

END = datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90m", 5400),
        ("24h", 86_400),
        ("7d", 604_800),
        ("2w", 1_209_600),
        (" 1h ", 3600),
    ],
)
def test_since_parses_durations(text: str, seconds: int) -> None:
    assert parse_since(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "24", "1.5h", "0h", "-1d", "1y", "h", "24 hours"])
def test_since_refuses_other_text(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration like 90m, 24h, 7d or 2w"):
        parse_since(text)


def test_the_command_names_a_bad_since(tmp_path) -> None:
    result = CliRunner().invoke(
        report_command, ["--data-dir", str(tmp_path), "--since", "1y"]
    )
    assert result.exit_code == click.UsageError.exit_code
    assert (
        "Invalid value for '--since': '1y' is not a duration like 90m, 24h, 7d"
        in result.output
    )


@pytest.mark.parametrize(
    ("since", "bucket"), [("90m", 60), ("24h", 900), ("7d", 3 * 3600)]
)
def test_push_rate_buckets_fit_the_window(since: str, bucket: int) -> None:
    window = ReportWindow(END, parse_since(since))
    assert window.bucket_seconds == bucket
    assert window.since.total_seconds() / bucket <= 120


def _results(rows_by_key: dict[str, list[tuple]]) -> list[ChartResult]:
    window = ReportWindow(END, parse_since("24h"))
    columns = {
        "software": (
            "client_software_name",
            "client_software_version",
            "instances",
            "pushes",
        ),
        "push-rate": ("bucket_start", "pushes", "pushes_per_s"),
        "applications": (
            "application_id",
            "process_or_thread",
            "state",
            "alive_stream_threads",
            "failed_stream_threads",
            "state_since",
            "seconds_in_state",
        ),
        "stale": (
            "client_id",
            "client_instance_id",
            "client_software_name",
            "client_software_version",
            "last_push",
            "push_interval_ms",
            "silent_seconds",
        ),
    }
    return [
        ChartResult(
            spec,
            spec.sql("ktc", window),
            columns.get(
                spec.key,
                ("client_id", "client_instance_id", spec.value, "avg", "points"),
            ),
            tuple(rows_by_key.get(spec.key, ())),
        )
        for spec in CHARTS
    ]


def _sections(page: str) -> dict[str, str]:
    return dict(
        re.findall(
            r'<section class="report-section" id="([^"]+)".*?>(.*?)</section>',
            page,
            re.DOTALL,
        )
    )


def test_empty_data_renders_a_no_data_panel_per_chart() -> None:
    page = render_report(_results({}), ReportWindow(END, parse_since("24h")), "ktc")
    sections = _sections(page)
    assert list(sections) == [c.key for c in CHARTS]
    for body in sections.values():
        assert "No data" in body and "<svg" not in body and "<table" not in body
        assert '<pre class="sql">SELECT' in body  # the query is still shown


def test_a_page_with_rows_is_self_contained() -> None:
    t0 = datetime.datetime(2026, 11, 21, 11, 0)
    page = render_report(
        _results(
            {
                "software": [
                    ("librdkafka", "2.16.0", 2, 10),
                    ("apache-kafka-java", "4.4.0", 1, 3),
                ],
                "push-rate": [
                    (t0, 6, 0.0067),
                    (t0 + datetime.timedelta(minutes=15), 7, 0.0078),
                ],
                "throttled": [("orders", "A" * 22, 70.0, 60.0, 2)],
                "applications": [
                    ("wordcount", "p-1", "RUNNING", 2, 0, t0, 3600.0),
                    (
                        "wordcount",
                        "p-1-StreamThread-1",
                        "RUNNING",
                        None,
                        None,
                        t0,
                        60.0,
                    ),
                ],
            }
        ),
        ReportWindow(END, parse_since("24h")),
        "ktc",
    )
    sections = _sections(page)
    for key in ("software", "push-rate", "throttled", "applications"):
        assert "<svg" in sections[key] and '<table class="numbers">' in sections[key]
    assert (
        "<td>librdkafka</td><td>2.16.0</td><td>2</td><td>10</td>"
        in sections["software"]
    )
    assert (
        "<td>2026-11-21 11:00:00</td><td>6</td><td>0.0067</td>" in sections["push-rate"]
    )
    assert (
        "<td>wordcount</td><td>p-1-StreamThread-1</td><td>RUNNING</td><td>NULL</td>"
        in sections["applications"]
    )
    assert "No data" in sections["stale"]
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), (
        "an id used twice: the charts' references would cross"
    )
    # Nothing to fetch: no script, no stylesheet or image link, no url(); the only
    # addresses are XML namespace names.
    assert not re.search(r"<script|<link|<img|<iframe|url\((?!#)|@import", page)
    assert set(re.findall(r'(?:href|src)="([^"#][^"]*)"', page)) == set()
    assert set(re.findall(r"https?://[^\"' )<]+", page)) == {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }


@pytest.mark.parametrize(
    ("since", "shown"),
    [
        ("90m", "last 90m"),
        ("60m", "last 60m"),
        ("1h", "last 60m"),
        ("24h", "last 24h"),
        ("48h", "last 2d"),
        ("7d", "last 7d"),
        ("14d", "last 2w"),
    ],
)
def test_the_page_names_its_window(since: str, shown: str) -> None:
    page = render_report(_results({}), ReportWindow(END, parse_since(since)), "ktc")
    assert f"UTC ({shown})." in page
