"""``ktc report``: one self-contained HTML page of charts over the lakehouse's insight views
(insights.py) and, for the push rate, the ``pushes`` table.

Each chart is drawn by matplotlib from the rows of one SQL query and rendered to inline
SVG (text as paths, so no font is fetched); the same rows are printed under it as a
table, and the query itself is shown, so every number can be checked with ``ktc sql``.
The page loads nothing: no script, no stylesheet, no image outside the file.
"""

from __future__ import annotations

import dataclasses
import datetime
import html
import io
import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from exporters.lakehouse.insights import stale_clients_sql, timestamp_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "CHARTS",
    "ChartResult",
    "ChartSpec",
    "ReportWindow",
    "cell_text",
    "collect_report",
    "parse_since",
    "render_report",
]

_SINCE = re.compile(r"^\s*(\d+)\s*(m|h|d|w)\s*$")
_SECONDS_PER_UNIT = {"m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_since(text: str) -> datetime.timedelta:
    """``"90m"``, ``"24h"``, ``"7d"``, ``"2w"`` -> a positive timedelta; else ValueError."""
    match = _SINCE.match(text)
    if not match or int(match.group(1)) == 0:
        raise ValueError(
            f"{text!r} is not a duration like 90m, 24h, 7d or 2w (a positive whole number "
            "of minutes, hours, days or weeks)"
        )
    return datetime.timedelta(
        seconds=int(match.group(1)) * _SECONDS_PER_UNIT[match.group(2)]
    )


# Push-rate buckets: the smallest of these that gives at most this many points.
_MAX_BUCKETS = 120
_BUCKET_SECONDS = (60, 300, 900, 3600, 3 * 3600, 6 * 3600, 86_400)


@dataclasses.dataclass(frozen=True)
class ReportWindow:
    """What the report covers: pushes received in ``[start, end)`` (UTC)."""

    end: datetime.datetime
    since: datetime.timedelta

    @property
    def start(self) -> datetime.datetime:
        return self.end - self.since

    @property
    def bucket_seconds(self) -> int:
        total = self.since.total_seconds()
        return next(
            (b for b in _BUCKET_SECONDS if total / b <= _MAX_BUCKETS),
            _BUCKET_SECONDS[-1],
        )

    def sql_range(self, column: str) -> str:
        """``column`` within the window, as SQL on UTC timestamps."""
        return (
            f"{column} >= TIMESTAMP '{_utc_text(self.start)}' "
            f"AND {column} < TIMESTAMP '{_utc_text(self.end)}'"
        )


def _utc_text(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).replace(tzinfo=None).isoformat(sep=" ")


# ---------------------------------------------------------------------------- the charts

_TOP = 15


@dataclasses.dataclass(frozen=True)
class ChartSpec:
    """One section of the report: its query and how its rows are drawn.

    ``kind`` is ``barh`` (``label`` columns joined as the bar's name, ``value`` its
    length) or ``time`` (``label`` is the bucket's start on a time axis, ``value`` the
    bar's height; the width of its buckets is stated under the chart).
    """

    key: str
    title: str
    question: str
    kind: str
    label: tuple[str, ...]
    value: str
    sql: Callable[[str, ReportWindow], str]
    counts: bool = False  # the value is a count: the value axis ticks at whole numbers


def _t(database: str, name: str) -> str:
    return f"`{database}`.`{name}`"


def _software_sql(db: str, w: ReportWindow) -> str:
    return (
        "SELECT client_software_name, client_software_version,\n"
        "  count(*) AS instances, sum(push_count) AS pushes\n"
        f"FROM {_t(db, 'client_inventory')}\nWHERE {w.sql_range('last_push')}\n"
        "GROUP BY client_software_name, client_software_version\n"
        "ORDER BY instances DESC, pushes DESC, client_software_name, client_software_version"
    )


def _push_rate_sql(db: str, w: ReportWindow) -> str:
    # The one chart on a table: no view keeps every push's time.
    b = w.bucket_seconds
    return (
        f"SELECT timestamp_seconds(floor(unix_timestamp(received_time) / {b}) * {b}) AS bucket_start,\n"
        f"  count(*) AS pushes, round(count(*) / {b}.0, 4) AS pushes_per_s\n"
        f"FROM {_t(db, 'pushes')}\nWHERE {w.sql_range('received_time')}\n"
        "GROUP BY 1\nORDER BY bucket_start"
    )


def _hours_in(w: ReportWindow) -> str:
    """The per-hour health rows of the hours the window touches."""
    return (
        f"hour_start >= date_trunc('HOUR', TIMESTAMP '{_utc_text(w.start)}') "
        f"AND hour_start < TIMESTAMP '{_utc_text(w.end)}'"
    )


def _worst_in_health_sql(
    db: str, w: ReportWindow, view: str, measures: tuple[tuple[str, str], ...]
) -> str:
    """The clients of a health view (a row per client and hour) worst by the first of
    ``measures`` over the window's hours; each measure ``(aggregate, column)`` is
    aggregated over the hours into a column of its name."""
    by = measures[0][1]
    columns = "".join(f"  round({agg}({c}), 3) AS {c},\n" for agg, c in measures)
    return (
        f"SELECT client_id, client_instance_id,\n{columns}  sum(pushes) AS pushes\n"
        f"FROM {_t(db, view)}\n"
        f"WHERE {_hours_in(w)} AND {by} IS NOT NULL\n"
        "GROUP BY client_id, client_instance_id\n"
        f"ORDER BY {by} DESC, client_id, client_instance_id\nLIMIT {_TOP}"
    )


def _produce_latency_sql(db: str, w: ReportWindow) -> str:
    return _worst_in_health_sql(
        db,
        w,
        "producer_health",
        (("avg", "request_latency_avg_ms"), ("max", "request_latency_max_ms")),
    )


def _consumer_lag_sql(db: str, w: ReportWindow) -> str:
    return _worst_in_health_sql(
        db,
        w,
        "consumer_health",
        (("max", "records_lag_max"), ("avg", "fetch_latency_avg_ms")),
    )


def _throttled_sql(db: str, w: ReportWindow) -> str:
    return (
        "SELECT client_id, client_instance_id, throttled_pushes,\n"
        "  round(throttle_time_avg_ms, 3) AS throttle_time_avg_ms,\n"
        "  round(throttle_time_max_ms, 3) AS throttle_time_max_ms, last_throttled\n"
        f"FROM {_t(db, 'throttled_clients')}\nWHERE {w.sql_range('last_throttled')}\n"
        f"ORDER BY throttle_time_max_ms DESC, client_id, client_instance_id\nLIMIT {_TOP}"
    )


def _stale_sql(db: str, w: ReportWindow) -> str:
    # stale_clients as of the window's end (the view itself asks at current_timestamp()),
    # so the query under the chart gives the same rows whenever it is run again.
    as_of_end = stale_clients_sql(db, now=timestamp_sql(w.end)).replace("\n", "\n  ")
    return (
        "SELECT client_id, client_instance_id, client_software_name, client_software_version,\n"
        "  last_push, push_interval_ms, round(silent_seconds, 1) AS silent_seconds\n"
        f"FROM (\n  {as_of_end}\n)\nWHERE {w.sql_range('last_push')}\n"
        f"ORDER BY silent_seconds DESC, client_id, client_instance_id\nLIMIT {_TOP}"
    )


def _applications_sql(db: str, w: ReportWindow) -> str:
    # Seconds in the current state as of the window's end: a process or thread that has
    # been rebalancing (or dead) for long stands out as a long bar.
    end = timestamp_sql(w.end)
    return (
        "SELECT application_id, COALESCE(thread_id, process_id) AS process_or_thread,"
        " state,\n"
        "  alive_stream_threads, failed_stream_threads, state_since,\n"
        f"  round(unix_timestamp({end}) - unix_timestamp(state_since), 1)"
        " AS seconds_in_state\n"
        f"FROM {_t(db, 'applications')}\nWHERE {w.sql_range('last_seen')}\n"
        "ORDER BY application_id, process_id, thread_id NULLS FIRST\n"
        f"LIMIT {_TOP}"
    )


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec(
        "software",
        "Clients by software and version",
        "Which client libraries and versions pushed in the window (client_inventory)?",
        "barh",
        ("client_software_name", "client_software_version"),
        "instances",
        _software_sql,
        counts=True,
    ),
    ChartSpec(
        "push-rate",
        "Push rate over time",
        "How many pushes per second reached the collector (pushes)?",
        "time",
        ("bucket_start",),
        "pushes_per_s",
        _push_rate_sql,
    ),
    ChartSpec(
        "produce-latency",
        "Top clients by produce latency",
        "Which producers wait longest for the brokers (producer_health, ms)?",
        "barh",
        ("client_id", "client_instance_id"),
        "request_latency_avg_ms",
        _produce_latency_sql,
    ),
    ChartSpec(
        "consumer-lag",
        "Top clients by consumer lag",
        "Which consumers are furthest behind (consumer_health, records)?",
        "barh",
        ("client_id", "client_instance_id"),
        "records_lag_max",
        _consumer_lag_sql,
        counts=True,
    ),
    ChartSpec(
        "throttled",
        "Throttled clients",
        "Which clients did the brokers throttle (throttled_clients, ms)?",
        "barh",
        ("client_id", "client_instance_id"),
        "throttle_time_max_ms",
        _throttled_sql,
    ),
    ChartSpec(
        "stale",
        "Stale clients",
        "Which clients went silent without a terminating push (stale_clients, seconds)?",
        "barh",
        ("client_id", "client_instance_id"),
        "silent_seconds",
        _stale_sql,
    ),
    ChartSpec(
        "applications",
        "Applications",
        "Which Kafka Streams processes and threads are in which state, and since when "
        "(applications, seconds in the state)?",
        "barh",
        ("application_id", "process_or_thread", "state"),
        "seconds_in_state",
        _applications_sql,
    ),
)


@dataclasses.dataclass(frozen=True)
class ChartResult:
    spec: ChartSpec
    sql: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    bucket_seconds: int = 0  # of a time chart


def collect_report(
    spark: SparkSession,
    database: str,
    window: ReportWindow,
    charts: Sequence[ChartSpec] = CHARTS,
) -> list[ChartResult]:
    """Run every chart's query once; the rows drawn are the rows tabled."""
    results = []
    for spec in charts:
        sql = spec.sql(database, window)
        df = spark.sql(sql)
        results.append(
            ChartResult(
                spec,
                sql,
                tuple(df.columns),
                tuple(tuple(row) for row in df.collect()),
                window.bucket_seconds,
            )
        )
    return results


# ---------------------------------------------------------------------------- rendering


def cell_text(value: Any) -> str:
    """A value as ``ktc sql --format table`` prints it."""
    if value is None:
        return "NULL"
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _label(row: dict[str, Any], columns: Sequence[str]) -> str:
    parts = [cell_text(row[c]) for c in columns]
    text = " ".join(parts)
    return text if len(text) <= 48 else text[:45] + "..."


def _figure_svg(result: ChartResult) -> str:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    spec = result.spec
    rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
    values = [
        float(r[spec.value]) if r[spec.value] is not None else math.nan for r in rows
    ]
    if spec.kind == "time":
        figure = Figure(figsize=(9, 3.2))
        axes = figure.subplots()
        times = [r[spec.label[0]] for r in rows]
        # One bar per bucket, as wide as the bucket (matplotlib's date unit is the day).
        width = result.bucket_seconds / 86_400 if result.bucket_seconds else 0.8
        axes.bar(times, values, width=width, align="edge", color="#2a6fb0")
        axes.set_ylabel(spec.value)
        axes.set_xlabel(f"UTC, {bucket_text(result.bucket_seconds)} buckets")
        value_axis: Axis = axes.yaxis
        figure.autofmt_xdate()
    else:
        height = 1.2 + 0.35 * len(rows)
        figure = Figure(figsize=(9, height))
        axes = figure.subplots()
        labels = [_label(r, spec.label) for r in rows]
        positions = list(range(len(rows)))
        axes.barh(positions, values, color="#2a6fb0")
        axes.set_yticks(positions, labels)
        axes.invert_yaxis()  # the first row on top
        axes.set_xlabel(spec.value)
        value_axis = axes.xaxis
        for y, v in zip(positions, values, strict=True):
            axes.annotate(
                f"{v:g}",
                (v, y),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
    if spec.counts:  # no tick at 0.2 instances
        value_axis.set_major_locator(MaxNLocator(integer=True))
    axes.grid(axis="x" if spec.kind == "barh" else "y", alpha=0.3)
    axes.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    out = io.StringIO()
    # Text stays text (not glyph outlines): a reader can select and search the labels.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        figure.savefig(out, format="svg", metadata={"Date": None})
    svg = out.getvalue()
    svg = svg[svg.index("<svg") :]  # drop the XML declaration and DOCTYPE
    svg = _SVG_METADATA.sub("", svg, count=1)  # RDF naming matplotlib: no use inline
    # Several figures share one document, where an id is global: each gets its own prefix.
    return _SVG_ID_REFERENCE.sub(lambda m: f"{m.group(1)}{spec.key}-", svg)


_SVG_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_SVG_ID_REFERENCE = re.compile(r'(\bid="|url\(#|href="#)')


_BUCKET_UNITS = (("day", 86_400), ("hour", 3600), ("minute", 60), ("second", 1))


def bucket_text(seconds: int) -> str:
    """A bucket width as words: 60 -> ``1-minute``, 900 -> ``15-minute``."""
    for unit, size in _BUCKET_UNITS:
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}-{unit}"
    return f"{seconds}-second"


def _table(result: ChartResult) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in result.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell_text(v))}</td>" for v in row) + "</tr>"
        for row in result.rows
    )
    return f'<table class="numbers"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _section(result: ChartResult) -> str:
    spec = result.spec
    if result.rows:
        chart = f'<figure class="chart">{_figure_svg(result)}</figure>'
        if spec.kind == "time":
            width = bucket_text(result.bucket_seconds)
            chart += (
                f'\n<p class="buckets">One bar per {width} bucket ({result.bucket_seconds} '
                f"s): the pushes received in it divided by {result.bucket_seconds}.</p>"
            )
        numbers = _table(result)
    else:
        chart = (
            '<div class="chart no-data">No data: the query returned no rows for this '
            "window.</div>"
        )
        numbers = ""
    return (
        f'<section class="report-section" id="{spec.key}" data-chart="{spec.key}">\n'
        f'<h2>{html.escape(spec.title)}</h2>\n<p class="question">{html.escape(spec.question)}</p>\n'
        f"{chart}\n{numbers}\n"
        f'<details><summary>Query</summary><pre class="sql">{html.escape(result.sql)}</pre></details>\n'
        "</section>"
    )


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #1d2430;
       background: #fff; padding: 0 1rem; }
header p { color: #52607a; margin: 0.2rem 0; }
.report-section { border-top: 1px solid #d8dee9; padding: 1rem 0 1.5rem; }
.question { color: #52607a; margin-top: -0.5rem; }
figure.chart { margin: 0; }
figure.chart svg { width: 100%; height: auto; max-width: 60rem; }
.no-data { padding: 2rem; border: 2px dashed #c3cad6; color: #52607a; background: #f6f8fb;
           text-align: center; font-size: 1.1rem; }
table.numbers { border-collapse: collapse; font-size: 0.85rem; margin-top: 0.6rem; }
table.numbers th, table.numbers td { border: 1px solid #d8dee9; padding: 0.2rem 0.6rem;
                                     text-align: left; font-variant-numeric: tabular-nums; }
table.numbers th { background: #eef2f7; }
pre.sql { background: #f6f8fb; padding: 0.6rem; overflow-x: auto; font-size: 0.8rem; }
"""


def render_report(
    results: Sequence[ChartResult], window: ReportWindow, database: str
) -> str:
    """The whole page: inline CSS and SVG, nothing to fetch."""
    sections = "\n".join(_section(r) for r in results)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>ktc client report</title>\n"
        f"<style>{_CSS}</style></head>\n<body>\n<header><h1>Kafka clients report</h1>\n"
        f"<p>Database <code>{html.escape(database)}</code>; pushes received from "
        f"{_utc_text(window.start)} to {_utc_text(window.end)} UTC "
        f"({html.escape(_since_text(window.since))}).</p>\n"
        "<p>Each chart is drawn from the table under it; the query behind both is under "
        "&ldquo;Query&rdquo; (run it with <code>ktc sql</code>).</p></header>\n"
        f"{sections}\n</body></html>\n"
    )


def _since_text(since: datetime.timedelta) -> str:
    # The largest unit that divides it, but never "1d" or "1w" (24h, 7d read better).
    seconds = int(since.total_seconds())
    for unit, size in (("w", 604_800), ("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds // size > 1:
            return f"last {seconds // size}{unit}"
    return f"last {seconds // 60}m" if seconds % 60 == 0 else f"last {seconds}s"
