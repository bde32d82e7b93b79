"""``ktc report``: a self-contained HTML page of the clients, from the lakehouse
(the charts and their queries: ``exporters.lakehouse.report``)."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

import click

from clock import SYSTEM_CLOCK
from exporters.lakehouse.cli.common import (
    first_line,
    open_reader,
    progress,
    quiet_query_context_logs,
)
from exporters.lakehouse.cli.options import LakeOptions, lake_options

__all__ = ["report_command"]


def _since(
    ctx: click.Context, param: click.Parameter, value: str
) -> datetime.timedelta:
    from exporters.lakehouse.report import parse_since

    try:
        return parse_since(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("report")
@lake_options
@click.option(
    "--since",
    default="24h",
    show_default=True,
    callback=_since,
    help="The window: pushes received in the last 90m, 24h, 7d, 2w...",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("report.html"),
    show_default=True,
    help="The HTML file to write (self-contained).",
)
def report_command(lake: LakeOptions, since: datetime.timedelta, out: Path) -> None:
    """Write a self-contained HTML report of the clients: software and versions, push rate,
    produce latency, consumer lag, throttling, stale clients; each chart with its numbers.

    e.g. ktc report --data-dir data --since 7d --out report.html
    """
    from pyspark.errors import PySparkException

    from exporters.lakehouse.report import ReportWindow, collect_report, render_report

    config = lake.existing()
    window = ReportWindow(
        end=datetime.datetime.fromtimestamp(
            SYSTEM_CLOCK.time_ns() / 1e9, datetime.UTC
        ).replace(microsecond=0),
        since=since,
    )
    if sys.stderr.isatty():  # a terminal: what the seconds before the page are spent on
        progress("ktc report: starting Spark...")
    spark = open_reader(config)
    quiet_query_context_logs()
    try:
        if sys.stderr.isatty():
            progress("ktc report: running the report's queries...")
        results = collect_report(spark, lake.database, window)
    except PySparkException as exc:
        raise click.ClickException(first_line(exc)) from None
    finally:
        spark.stop()
    page = render_report(results, window, lake.database)
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(f".{out.name}.tmp")
    temporary.write_text(page, encoding="utf-8")
    temporary.replace(out)
    empty = sum(1 for r in results if not r.rows)
    click.echo(f"wrote {out} ({len(results)} charts, {empty} without data)", err=True)
