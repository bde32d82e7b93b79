"""``ktc ingest``, ``ktc sql``, ``ktc report``, ``ktc thriftserver``, ``ktc lake ...``.

The collector's ``ktc`` group adds these commands; ``python -m exporters.lakehouse``
runs them standalone.  Spark is imported only when a command runs.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click

from clock import SYSTEM_CLOCK
from exporters.lakehouse.schema import DEFAULT_DATABASE
from exporters.lakehouse.session import (
    CATALOG_NAME,
    LakehouseConfig,
    LakeLibsMissing,
    OldLayout,
    check_layout,
    open_session,
    spark_conf,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from exporters.lakehouse.ingest import BatchResult

__all__ = [
    "FORMATS",
    "ingest_command",
    "lake_group",
    "main",
    "parse_duration_s",
    "report_command",
    "run_sql",
    "sql_command",
    "thriftserver_command",
    "write_rows",
]

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_SECONDS_PER_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration_s(text: str) -> float:
    """``"10s"``, ``"500ms"``, ``"2m"``, ``"1h"`` or plain seconds -> seconds."""
    match = _DURATION.match(text)
    if not match:
        raise click.BadParameter(f"{text!r} is not a duration like 10s, 500ms, 2m")
    return float(match.group(1)) * _SECONDS_PER_UNIT[match.group(2)]


def _parse_conf(pairs: Sequence[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"--conf expects key=value, got {pair!r}")
        conf[key.strip()] = value
    return conf


def _lake_options(function: Any) -> Any:
    """Options every lakehouse command shares: where it is and how to run Spark."""
    options = [
        click.option(
            "--data-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path("data"),
            show_default=True,
            envvar="KTC_DATA_DIR",
            help="The collector's data directory; the lakehouse is <data-dir>/lakehouse.",
        ),
        click.option(
            "--lake-dir",
            type=click.Path(file_okay=False, path_type=Path),
            envvar="KTC_LAKE_DIR",
            help="Lakehouse directory (catalog.db, warehouse/), if not "
            "<data-dir>/lakehouse; may be on shared storage.",
        ),
        click.option(
            "--catalog",
            "catalog_uri",
            envvar="KTC_LAKE_CATALOG",
            metavar="URI",
            help="The Iceberg catalog: jdbc:sqlite:FILE (default <lake>/catalog.db), "
            "jdbc:postgresql://HOST:PORT/DB?user=U&password=P, or an http(s):// REST catalog.",
        ),
        click.option(
            "--database",
            default=DEFAULT_DATABASE,
            show_default=True,
            help="Iceberg namespace holding the tables and views.",
        ),
        click.option(
            "--master",
            default="local[*]",
            show_default=True,
            help="Spark master URL, passed through.",
        ),
        click.option(
            "--conf",
            "conf",
            multiple=True,
            metavar="KEY=VALUE",
            help="Spark setting, repeatable; wins over the defaults "
            f"(e.g. spark.sql.catalog.{CATALOG_NAME}.warehouse=s3a://bucket/lake).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _config(
    data_dir: Path,
    lake_dir: Path | None,
    catalog_uri: str | None,
    database: str,
    master: str,
    conf: Sequence[str],
) -> LakehouseConfig:
    config = LakehouseConfig(
        lake_dir=lake_dir or data_dir / "lakehouse",
        database=database,
        master=master,
        extra_conf=_parse_conf(conf),
        catalog_uri=catalog_uri,
    )
    try:
        _ = config.catalog_kind  # a URI of no known kind fails here, in one line
        check_layout(config)
    except (ValueError, OldLayout) as exc:
        raise click.ClickException(str(exc)) from None
    return config


def _existing(config: LakehouseConfig) -> LakehouseConfig:
    """A config whose catalog exists (readers never create one)."""
    if not config.exists():
        raise click.ClickException(
            f"no lakehouse at {config.lake_dir} (run `ktc ingest` first, or pass --data-dir)"
        )
    return config


def _progress(line: str) -> None:
    """A progress line on stderr (what a long Spark command is doing)."""
    click.echo(line, err=True)


def _spark(config: LakehouseConfig, app_name: str) -> SparkSession:
    try:
        return open_session(config, app_name)
    except LakeLibsMissing as exc:
        raise click.ClickException(str(exc)) from None


# ---------------------------------------------------------------------------- ingest


@click.command("ingest")
@_lake_options
@click.option(
    "--landing-dir",
    "landing_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A landing directory to ingest (repeatable); default: every "
    "<data-dir>/landing/node-*, discovered before each batch.",
)
@click.option("--once", is_flag=True, help="Ingest what is there, then exit.")
@click.option(
    "--trigger-interval",
    default="10s",
    show_default=True,
    help="Streaming: start a batch this often (a push is queryable within "
    "about this plus one batch's time).",
)
@click.option(
    "--max-records-per-batch",
    type=click.IntRange(min=1),
    default=20_000,
    show_default=True,
    help="Landing records per directory in one batch.",
)
@click.option(
    "--maintenance-interval",
    "--compact-interval",
    "maintenance_interval",
    default="1h",
    show_default=True,
    help="Streaming: compact, apply retention and expire snapshots this often, between batches.",
)
@click.option(
    "--retention-days",
    type=click.IntRange(min=1),
    default=None,
    help="Streaming: also delete the days received more than this many days ago.",
)
@click.option(
    "--flatten-processes",
    type=click.IntRange(min=1),
    default=None,
    help="Processes that flatten a large batch, this one included; default: one per "
    "core the process may use (its CPU affinity and cgroup quota), at most four.",
)
def ingest_command(
    data_dir: Path,
    lake_dir: Path | None,
    catalog_uri: str | None,
    database: str,
    master: str,
    conf: Sequence[str],
    landing_dirs: Sequence[Path],
    once: bool,
    trigger_interval: str,
    max_records_per_batch: int,
    maintenance_interval: str,
    retention_days: int | None,
    flatten_processes: int | None,
) -> None:
    """Ingest the landing logs into the lakehouse's Iceberg tables, exactly once."""
    # Imported here: pyarrow, protobuf and the OTLP classes cost `ktc sql` a quarter second.
    from exporters.lakehouse.flatten_pool import default_processes
    from exporters.lakehouse.ingest import (
        IngestJob,
        IngestSettings,
        LandingDirBusy,
        landing_dirs_under,
    )
    from exporters.lakehouse.maintenance import MaintenanceSettings, run_maintenance

    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(
        logging.WARNING
    )  # one INFO line per gateway call
    config = _config(data_dir, lake_dir, catalog_uri, database, master, conf)
    settings = IngestSettings(
        max_records_per_source=max_records_per_batch,
        trigger_interval_s=parse_duration_s(trigger_interval),
        maintenance_interval_s=parse_duration_s(maintenance_interval),
        retention_days=retention_days,
        flatten_processes=flatten_processes or default_processes(),
    )
    dirs = (
        (lambda: list(landing_dirs)) if landing_dirs else landing_dirs_under(data_dir)
    )
    maintenance = MaintenanceSettings(retention_days=retention_days)
    job = IngestJob(
        config,
        dirs,
        settings,
        maintenance=lambda spark: run_maintenance(spark, config, maintenance),
    )
    if sys.stderr.isatty():  # a terminal: what the first seconds are spent on
        _progress(
            f"ktc ingest: starting Spark ({config.master}), catalog {config.catalog_kind}"
        )
    try:
        job.spark  # noqa: B018 - start the JVM here, so a missing jar is one line
    except LakeLibsMissing as exc:
        raise click.ClickException(str(exc)) from None
    try:
        job.start()
    except LandingDirBusy as exc:
        raise click.ClickException(str(exc)) from None
    try:
        if once:
            results = job.run_once()
            for result in results:
                _print_batch(result)
            if not results:  # say so: an empty stdout alone reads like a hang or a bug
                positions = job.positions.get("pushes", {})
                where = ", ".join(f"{n} at {o}" for n, o in sorted(positions.items()))
                _progress(
                    "ktc ingest: nothing new in the landing logs"
                    + (f" (committed: {where})" if where else "")
                )
            return
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())  # finish the batch, then exit
        _progress(
            f"ktc ingest: following the landing logs, a batch every {trigger_interval}"
        )
        job.run_forever(stop, on_batch=_print_batch)
    finally:
        job.close()


def _print_batch(result: BatchResult) -> None:
    ranges = ", ".join(f"{n} [{a}, {b})" for n, (a, b) in sorted(result.ranges.items()))
    _progress(
        f"ktc ingest: batch {result.batch}: {result.records} records ({ranges}), "
        f"{sum(result.rows.values())} rows in {result.seconds:.1f} s"
        + (" (completing a batch a killed ingest left)" if result.replayed else "")
    )
    click.echo(
        json.dumps(
            {
                "batch": result.batch,
                "records": result.records,
                "rows": result.rows,
                "ranges": {n: list(r) for n, r in result.ranges.items()},
                "replayed": result.replayed,
                "rejected": result.rejected,
            },
            sort_keys=True,
        ),
        nl=True,
    )
    sys.stdout.flush()


# ---------------------------------------------------------------------------- sql

FORMATS = ("table", "csv", "json")


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    raise TypeError(f"cannot encode {type(value).__name__}")


def _plain(value: Any) -> Any:
    """A Spark value as JSON-ready Python (Rows -> dicts, recursively)."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _text(value: Any, null: str) -> str:
    if value is None:
        return null
    if isinstance(value, (dict, list)) or hasattr(value, "asDict"):
        return json.dumps(_plain(value), default=_json_default, ensure_ascii=False)
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _json_line(columns: Sequence[str], row: Sequence[Any]) -> str:
    record = dict(zip(columns, (_plain(v) for v in row), strict=True))
    return json.dumps(record, default=_json_default, ensure_ascii=False) + "\n"


def write_rows(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str, out: TextIO
) -> None:
    """Render query results: ``table`` (aligned text), ``csv`` (RFC 4180, header row) or
    ``json`` (one object per line)."""
    if fmt == "json":
        out.writelines(_json_line(columns, row) for row in rows)
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_text(v, "") for v in row])
    elif fmt == "table":
        cells = [[_text(v, "NULL") for v in row] for row in rows]
        widths = [
            max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)
        ]
        out.write(
            "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()
            + "\n"
        )
        out.write("  ".join("-" * w for w in widths) + "\n")
        out.writelines(
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            + "\n"
            for r in cells
        )
        out.write(f"({len(cells)} row{'s' if len(cells) != 1 else ''})\n")
    else:
        raise ValueError(f"unknown format {fmt!r}")


def run_sql(spark: SparkSession, query: str, fmt: str, out: TextIO) -> int:
    """Run one statement on Spark and write its result; returns the number of rows."""
    df = spark.sql(query)
    rows = df.collect()
    write_rows(df.columns, rows, fmt, out)
    return len(rows)


def open_reader(config: LakehouseConfig) -> SparkSession:
    """A Spark session for queries, with the lakehouse namespace as the current one."""
    spark = _spark(config, "ktc-sql")
    spark.catalog.setCurrentDatabase(config.database)
    return spark


ENGINES = ("auto", "duckdb", "spark")


@click.command("sql")
@click.argument("query")
@_lake_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="table: aligned text; csv: with a header row; json: one object per line.",
)
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default="auto",
    show_default=True,
    help="duckdb: pyiceberg + DuckDB, no JVM (SELECTs over the tables and views it can "
    "run); spark: Spark SQL; auto: duckdb when it can run the statement, else spark.",
)
def sql_command(
    query: str,
    data_dir: Path,
    lake_dir: Path | None,
    catalog_uri: str | None,
    database: str,
    master: str,
    conf: Sequence[str],
    fmt: str,
    engine: str,
) -> None:
    """Run a SQL statement against the lakehouse (current namespace: ktc).

    Only results go to stdout; e.g. ktc sql "SELECT * FROM clients" --format json
    """
    config = _existing(_config(data_dir, lake_dir, catalog_uri, database, master, conf))
    if engine in ("auto", "duckdb"):
        from exporters.lakehouse.fastpath import FastPathUnsupported, run_fast

        try:
            columns, rows = run_fast(config, query)
        except FastPathUnsupported as exc:
            if engine == "duckdb":
                raise click.ClickException(
                    f"--engine duckdb: {_first_line(exc)}"
                ) from None
        else:
            buffer = io.StringIO()
            write_rows(columns, rows, fmt, buffer)
            sys.stdout.write(buffer.getvalue())
            return
    from pyspark.errors import PySparkException

    if sys.stderr.isatty():
        _progress("ktc sql: starting Spark...")
    spark = open_reader(config)
    _quiet_query_context_logs()
    try:
        buffer = io.StringIO()
        run_sql(spark, query, fmt, buffer)
    except PySparkException as exc:
        raise click.ClickException(_first_line(exc)) from None
    finally:
        spark.stop()
    sys.stdout.write(buffer.getvalue())


def _quiet_query_context_logs() -> None:
    """pyspark logs a failed query once more, as JSON on stderr, before raising it: the
    command's one line says it already."""
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _first_line(exc: Exception) -> str:
    """What Spark says is wrong, without its hints, logical plan or JVM stack trace."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0].strip() if lines else type(exc).__name__


# ---------------------------------------------------------------------------- report


def _since(
    ctx: click.Context, param: click.Parameter, value: str
) -> datetime.timedelta:
    from exporters.lakehouse.report import parse_since

    try:
        return parse_since(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("report")
@_lake_options
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
def report_command(
    data_dir: Path,
    lake_dir: Path | None,
    catalog_uri: str | None,
    database: str,
    master: str,
    conf: Sequence[str],
    since: datetime.timedelta,
    out: Path,
) -> None:
    """Write a self-contained HTML report of the clients: software and versions, push rate,
    produce latency, consumer lag, throttling, stale clients; each chart with its numbers.

    e.g. ktc report --data-dir data --since 7d --out report.html
    """
    from pyspark.errors import PySparkException

    from exporters.lakehouse.report import ReportWindow, collect_report, render_report

    config = _existing(_config(data_dir, lake_dir, catalog_uri, database, master, conf))
    window = ReportWindow(
        end=datetime.datetime.fromtimestamp(
            SYSTEM_CLOCK.time_ns() / 1e9, datetime.UTC
        ).replace(microsecond=0),
        since=since,
    )
    if sys.stderr.isatty():  # a terminal: what the seconds before the page are spent on
        _progress("ktc report: starting Spark...")
    spark = open_reader(config)
    _quiet_query_context_logs()
    try:
        if sys.stderr.isatty():
            _progress("ktc report: running the report's queries...")
        results = collect_report(spark, database, window)
    except PySparkException as exc:
        raise click.ClickException(_first_line(exc)) from None
    finally:
        spark.stop()
    page = render_report(results, window, database)
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(f".{out.name}.tmp")
    temporary.write_text(page, encoding="utf-8")
    temporary.replace(out)
    empty = sum(1 for r in results if not r.rows)
    click.echo(f"wrote {out} ({len(results)} charts, {empty} without data)", err=True)


# ---------------------------------------------------------------------------- thrift server


def spark_home() -> Path:
    import pyspark

    return Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)


def thriftserver_argv(config: LakehouseConfig, port: int, bind_host: str) -> list[str]:
    """spark-submit of the Spark Thrift server (HiveServer2 protocol) on our catalog.

    The Thrift server always enables Hive support for Spark's session catalog, which
    the lakehouse never uses: its metastore is an in-memory Derby database of this
    JVM, so any number of Thrift servers run at once and nothing is written to disk."""
    conf = spark_conf(config)
    conf.pop("spark.sql.catalogImplementation")
    conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
        "jdbc:derby:memory:ktc_session_catalog;create=true"
    )
    conf["spark.driver.extraJavaOptions"] += " -Dderby.stream.error.file=/dev/null"
    argv = [
        str(spark_home() / "bin" / "spark-submit"),
        "--class",
        THRIFT_SERVER_CLASS,
        "--name",
        "ktc-thriftserver",
    ]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    argv += [
        "spark-internal",
        "--hiveconf",
        f"hive.server2.thrift.port={port}",
        "--hiveconf",
        f"hive.server2.thrift.bind.host={bind_host}",
    ]
    return argv


@click.command("thriftserver")
@_lake_options
@click.option("--port", type=click.IntRange(0, 65535), default=10000, show_default=True)
@click.option("--bind-host", default="127.0.0.1", show_default=True)
def thriftserver_command(
    data_dir: Path,
    lake_dir: Path | None,
    catalog_uri: str | None,
    database: str,
    master: str,
    conf: Sequence[str],
    port: int,
    bind_host: str,
) -> None:
    """Serve the lakehouse over JDBC/ODBC (beeline -u jdbc:hive2://HOST:PORT/ktc), beside
    running ingests."""
    from exporters.lakehouse.jvm_stderr import run_relaying_stderr
    from exporters.lakehouse.session import write_log_config

    config = _existing(_config(data_dir, lake_dir, catalog_uri, database, master, conf))
    write_log_config(config)
    try:
        argv = thriftserver_argv(config, port, bind_host)
    except LakeLibsMissing as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"Spark Thrift server: jdbc:hive2://{bind_host}:{port}/{database}", err=True
    )
    env = dict(os.environ, SPARK_HOME=str(spark_home()))
    sys.exit(run_relaying_stderr(argv, env))


# ---------------------------------------------------------------------------- maintenance


@click.group("lake")
def lake_group() -> None:
    """Lakehouse maintenance: compaction, retention, snapshot expiry, orphan files.

    Each is one Iceberg commit per table, safe beside running ingests and readers.
    """


def _maintenance(
    app_name: str,
    data_dir: Path,
    lake_dir: Path | None,
    catalog_uri: str | None,
    database: str,
    master: str,
    conf: Sequence[str],
    action: Callable[[SparkSession, LakehouseConfig], dict[str, Any]],
) -> None:
    config = _existing(_config(data_dir, lake_dir, catalog_uri, database, master, conf))
    if sys.stderr.isatty():
        _progress(f"ktc lake: starting Spark ({config.master})...")
    spark = _spark(config, app_name)
    try:
        report = action(spark, config)
    finally:
        spark.stop()
    click.echo(json.dumps(report, sort_keys=True))


@lake_group.command("compact")
@_lake_options
@click.option(
    "--closed-after",
    default="1h",
    show_default=True,
    help="Only files of rows received at least this long ago are rewritten.",
)
def compact_command(closed_after: str, **options: Any) -> None:
    """Rewrite the ingest's small files into large ones (Iceberg rewriteDataFiles)."""
    from exporters.lakehouse.maintenance import compact

    seconds = parse_duration_s(closed_after)
    _maintenance(
        "ktc-lake-compact",
        **options,
        action=lambda spark, config: compact(
            spark, config, now_unix_ns=SYSTEM_CLOCK.time_ns(), closed_after_s=seconds
        ),
    )


@lake_group.command("retention")
@_lake_options
@click.option(
    "--days",
    type=click.IntRange(min=1),
    required=True,
    help="Keep this many days (by receive date, UTC); delete older ones.",
)
def retention_command(days: int, **options: Any) -> None:
    """Delete the days received more than N days ago (whole files, a metadata commit)."""
    from exporters.lakehouse.maintenance import apply_retention

    today = datetime.datetime.fromtimestamp(
        SYSTEM_CLOCK.time_ns() / 1e9, datetime.UTC
    ).date()
    _maintenance(
        "ktc-lake-retention",
        **options,
        action=lambda spark, config: apply_retention(
            spark, config, days=days, today=today
        ),
    )


@lake_group.command("expire")
@_lake_options
@click.option(
    "--older-than",
    default="1h",
    show_default=True,
    help="Expire snapshots older than this (the time travel window).",
)
@click.option(
    "--retain-last", type=click.IntRange(min=1), default=10, show_default=True
)
def expire_command(older_than: str, retain_last: int, **options: Any) -> None:
    """Expire old snapshots and the files only they reference (bounds metadata growth)."""
    from exporters.lakehouse.maintenance import expire_snapshots

    seconds = parse_duration_s(older_than)
    _maintenance(
        "ktc-lake-expire",
        **options,
        action=lambda spark, config: expire_snapshots(
            spark,
            config,
            now_unix_ms=SYSTEM_CLOCK.time_ns() // 1_000_000,
            expire_after_s=seconds,
            retain_last=retain_last,
        ),
    )


@lake_group.command("remove-orphans")
@_lake_options
@click.option(
    "--older-than",
    default="24h",
    show_default=True,
    help="Only files older than this (a running ingest's uncommitted files are younger).",
)
def remove_orphans_command(older_than: str, **options: Any) -> None:
    """Delete files under the tables that no snapshot references (a killed writer's)."""
    from exporters.lakehouse.maintenance import remove_orphan_files

    seconds = parse_duration_s(older_than)
    _maintenance(
        "ktc-lake-remove-orphans",
        **options,
        action=lambda spark, config: remove_orphan_files(
            spark,
            config,
            now_unix_ms=SYSTEM_CLOCK.time_ns() // 1_000_000,
            orphan_after_s=seconds,
        ),
    )


@lake_group.command("snapshots")
@_lake_options
@click.option("--table", default="pushes", show_default=True)
def snapshots_command(
    table: str,
    data_dir: Path,
    lake_dir: Path | None,
    catalog_uri: str | None,
    database: str,
    master: str,
    conf: Sequence[str],
) -> None:
    """A table's snapshots with the landing ranges each holds (no JVM: pyiceberg)."""
    from pyiceberg.catalog import load_catalog

    config = _existing(_config(data_dir, lake_dir, catalog_uri, database, master, conf))
    catalog = load_catalog("lake", **config.pyiceberg_properties())
    for snapshot in catalog.load_table((database, table)).snapshots():
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        click.echo(
            json.dumps(
                {
                    "snapshot_id": snapshot.snapshot_id,
                    "timestamp_ms": snapshot.timestamp_ms,
                    "operation": snapshot.summary.operation.value
                    if snapshot.summary
                    else None,
                    "ktc": {k: v for k, v in summary.items() if k.startswith("ktc.")},
                },
                sort_keys=True,
            )
        )


@click.group()
def main() -> None:
    """Lakehouse commands (also available under `ktc`)."""


for _command in (
    ingest_command,
    sql_command,
    report_command,
    thriftserver_command,
    lake_group,
):
    main.add_command(_command)
