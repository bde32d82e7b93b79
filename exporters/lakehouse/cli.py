"""``ktc ingest``, ``ktc sql``, ``ktc report``, ``ktc thriftserver``, ``ktc lake compact|retention``.

The collector's ``ktc`` group adds these commands; ``python -m exporters.lakehouse``
runs them standalone.  Spark is imported only when a command runs.
"""

from __future__ import annotations

import contextlib
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
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click

from exporters.lakehouse.ingest import (
    BatchResult,
    IngestJob,
    IngestSettings,
    landing_dirs_under,
)
from exporters.lakehouse.journal import LakehouseBusy, WriterLock
from exporters.lakehouse.schema import DEFAULT_DATABASE
from exporters.lakehouse.session import (
    LakehouseConfig,
    derby_in_use,
    open_session,
    spark_conf,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
            help="Lakehouse directory (warehouse, metastore_db, _ingest), if not "
            "<data-dir>/lakehouse; may be on shared storage.",
        ),
        click.option(
            "--database",
            default=DEFAULT_DATABASE,
            show_default=True,
            help="Database holding the tables and views.",
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
            help="Spark setting, repeatable; e.g. an external metastore "
            "(spark.hadoop.javax.jdo.option.ConnectionURL=...).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _config(
    data_dir: Path,
    lake_dir: Path | None,
    database: str,
    master: str,
    conf: Sequence[str],
) -> LakehouseConfig:
    return LakehouseConfig(
        lake_dir=lake_dir or data_dir / "lakehouse",
        database=database,
        master=master,
        extra_conf=_parse_conf(conf),
    )


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
    "--compact-interval",
    default="1h",
    show_default=True,
    help="Streaming: compact closed hours this often, between batches.",
)
@click.option(
    "--retention-days",
    type=click.IntRange(min=1),
    default=None,
    help="Streaming: also drop partitions older than this many days.",
)
def ingest_command(
    data_dir: Path,
    lake_dir: Path | None,
    database: str,
    master: str,
    conf: Sequence[str],
    landing_dirs: Sequence[Path],
    once: bool,
    trigger_interval: str,
    max_records_per_batch: int,
    compact_interval: str,
    retention_days: int | None,
) -> None:
    """Ingest the landing logs into the lakehouse tables, exactly once."""
    from exporters.lakehouse.maintenance import run_maintenance

    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(
        logging.WARNING
    )  # one INFO line per gateway call
    config = _config(data_dir, lake_dir, database, master, conf)
    settings = IngestSettings(
        max_records_per_source=max_records_per_batch,
        trigger_interval_s=parse_duration_s(trigger_interval),
        maintenance_interval_s=parse_duration_s(compact_interval),
        retention_days=retention_days,
    )
    dirs = (
        (lambda: list(landing_dirs)) if landing_dirs else landing_dirs_under(data_dir)
    )
    job = IngestJob(
        config,
        dirs,
        settings,
        maintenance=lambda spark: run_maintenance(
            spark, config, retention_days=retention_days
        ),
    )
    try:
        job.start()
    except LakehouseBusy as exc:
        raise click.ClickException(f"{exc}: is another `ktc ingest` running?") from None
    try:
        if once:
            results = job.run_once()
            for result in results:
                _print_batch(result)
            if not results:  # say so: an empty stdout alone reads like a hang or a bug
                click.echo("ktc ingest: nothing new in the landing logs", err=True)
            return
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())  # finish the batch, then exit
        job.run_forever(stop, on_batch=_print_batch)
    finally:
        job.close()


def _print_batch(result: BatchResult) -> None:
    click.echo(
        json.dumps(
            {
                "batch_id": result.batch_id,
                "records": result.records,
                "rows": result.rows,
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
    """Run one statement and write its result; returns the number of rows."""
    df = spark.sql(query)
    rows = df.collect()
    write_rows(df.columns, rows, fmt, out)
    return len(rows)


def open_reader(config: LakehouseConfig, catalog: str) -> SparkSession:
    """A session for queries, on the metastore or (``files``) straight on the warehouse.

    ``auto`` uses the metastore unless it is embedded Derby booted by another JVM (a
    running ``ktc ingest``): then the tables are registered over the warehouse files
    in an in-memory catalog, which sees every partition the ingest has moved in place.
    """
    from exporters.lakehouse.catalog import ensure_catalog, register_file_tables

    if catalog == "auto":
        catalog = "files" if derby_in_use(config) else "metastore"
    if catalog == "files":
        spark = open_session(config, "ktc-sql", hive=False)
        register_file_tables(spark, config.database, config.table_location)
    else:
        spark = open_session(config, "ktc-sql")
        ensure_catalog(spark, config.database)
    spark.catalog.setCurrentDatabase(config.database)
    return spark


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
    "--catalog",
    type=click.Choice(["auto", "metastore", "files"]),
    default="auto",
    show_default=True,
    help="Where table definitions come from (files: read the warehouse directly).",
)
def sql_command(
    query: str,
    data_dir: Path,
    lake_dir: Path | None,
    database: str,
    master: str,
    conf: Sequence[str],
    fmt: str,
    catalog: str,
) -> None:
    """Run a Spark SQL statement against the lakehouse (current database: ktc).

    Only results go to stdout; e.g. ktc sql "SELECT * FROM clients" --format json
    """
    from pyspark.errors import PySparkException

    config = _config(data_dir, lake_dir, database, master, conf)
    if config.uses_embedded_derby and not config.metastore_dir.exists():
        raise click.ClickException(
            f"no lakehouse at {config.lake_dir} (run `ktc ingest` first, or pass --data-dir)"
        )
    spark = open_reader(config, catalog)
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
@click.option(
    "--catalog",
    type=click.Choice(["auto", "metastore", "files"]),
    default="auto",
    show_default=True,
    help="Where table definitions come from (files: read the warehouse directly).",
)
def report_command(
    data_dir: Path,
    lake_dir: Path | None,
    database: str,
    master: str,
    conf: Sequence[str],
    since: datetime.timedelta,
    out: Path,
    catalog: str,
) -> None:
    """Write a self-contained HTML report of the clients: software and versions, push rate,
    produce latency, consumer lag, throttling, stale clients; each chart with its numbers.

    e.g. ktc report --data-dir data --since 7d --out report.html
    """
    from pyspark.errors import PySparkException

    from exporters.lakehouse.report import ReportWindow, collect_report, render_report

    config = _config(data_dir, lake_dir, database, master, conf)
    if config.uses_embedded_derby and not config.metastore_dir.exists():
        raise click.ClickException(
            f"no lakehouse at {config.lake_dir} (run `ktc ingest` first, or pass --data-dir)"
        )
    window = ReportWindow(
        end=datetime.datetime.now(datetime.UTC).replace(microsecond=0), since=since
    )
    spark = open_reader(config, catalog)
    _quiet_query_context_logs()
    try:
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
    """spark-submit of the Spark Thrift server (HiveServer2 protocol) on our catalog."""
    argv = [
        str(spark_home() / "bin" / "spark-submit"),
        "--class",
        THRIFT_SERVER_CLASS,
        "--name",
        "ktc-thriftserver",
    ]
    for key, value in spark_conf(config).items():
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
    database: str,
    master: str,
    conf: Sequence[str],
    port: int,
    bind_host: str,
) -> None:
    """Serve the lakehouse over JDBC/ODBC (beeline -u jdbc:hive2://HOST:PORT/ktc)."""
    from exporters.lakehouse.jvm_stderr import run_relaying_stderr
    from exporters.lakehouse.session import _write_log_config

    config = _config(data_dir, lake_dir, database, master, conf)
    if derby_in_use(config):
        raise click.ClickException(
            f"the embedded Derby metastore {config.metastore_dir} is in use by another process "
            "(a running `ktc ingest`?). Embedded Derby serves one JVM: stop it, or give both an "
            "external metastore with --conf spark.hadoop.javax.jdo.option.ConnectionURL=..."
        )
    config.lake_dir.mkdir(parents=True, exist_ok=True)
    _write_log_config(config)
    argv = thriftserver_argv(config, port, bind_host)
    click.echo(
        f"Spark Thrift server: jdbc:hive2://{bind_host}:{port}/{database}", err=True
    )
    env = dict(os.environ, SPARK_HOME=str(spark_home()))
    sys.exit(run_relaying_stderr(argv, env))


# ---------------------------------------------------------------------------- maintenance


@click.group("lake")
def lake_group() -> None:
    """Lakehouse maintenance: compaction and retention."""


@contextlib.contextmanager
def _writer_lock(config: LakehouseConfig) -> Iterator[None]:
    lock = WriterLock(config.state_dir)
    try:
        lock.acquire()
    except LakehouseBusy as exc:
        raise click.ClickException(
            f"{exc}: a running `ktc ingest` compacts between its batches "
            "(--compact-interval, --retention-days); stop it to run this by hand"
        ) from None
    try:
        yield
    finally:
        lock.release()


@lake_group.command("compact")
@_lake_options
@click.option(
    "--closed-after",
    default="1h",
    show_default=True,
    help="Only hours that ended at least this long ago are compacted.",
)
def compact_command(
    data_dir: Path,
    lake_dir: Path | None,
    database: str,
    master: str,
    conf: Sequence[str],
    closed_after: str,
) -> None:
    """Rewrite the small files of each closed (dt, hour) into one partition, losing nothing."""
    from exporters.lakehouse.catalog import ensure_catalog
    from exporters.lakehouse.maintenance import compact

    config = _config(data_dir, lake_dir, database, master, conf)
    with _writer_lock(config):
        spark = open_session(config, "ktc-lake-compact")
        ensure_catalog(spark, config.database)
        report = compact(
            spark,
            config,
            now_unix_ns=time.time_ns(),
            closed_after_ns=int(parse_duration_s(closed_after) * 1e9),
        )
        click.echo(json.dumps(report.to_json(), sort_keys=True))


@lake_group.command("retention")
@_lake_options
@click.option(
    "--days",
    type=click.IntRange(min=1),
    required=True,
    help="Keep this many days (by receive date, UTC); drop older partitions.",
)
def retention_command(
    data_dir: Path,
    lake_dir: Path | None,
    database: str,
    master: str,
    conf: Sequence[str],
    days: int,
) -> None:
    """Drop partitions older than N days."""
    from exporters.lakehouse.catalog import ensure_catalog
    from exporters.lakehouse.maintenance import apply_retention

    config = _config(data_dir, lake_dir, database, master, conf)
    with _writer_lock(config):
        spark = open_session(config, "ktc-lake-retention")
        ensure_catalog(spark, config.database)
        report = apply_retention(
            spark, config, days=days, today=datetime.datetime.now(datetime.UTC).date()
        )
        click.echo(json.dumps(report.to_json(), sort_keys=True))


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
