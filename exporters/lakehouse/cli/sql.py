"""``ktc sql QUERY``: one statement against the lakehouse, its result on stdout.

The DuckDB fast path (``exporters.lakehouse.fastpath``, no JVM) runs what it can;
Spark SQL runs the rest."""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING, TextIO

import click

from exporters.lakehouse.cli.common import (
    first_line,
    open_reader,
    progress,
    quiet_query_context_logs,
)
from exporters.lakehouse.cli.options import LakeOptions, lake_options
from exporters.lakehouse.cli.output import FORMATS, write_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["ENGINES", "run_sql", "sql_command"]

ENGINES = ("auto", "duckdb", "spark")


def run_sql(spark: SparkSession, query: str, fmt: str, out: TextIO) -> int:
    """Run one statement on Spark and write its result; returns the number of rows."""
    df = spark.sql(query)
    rows = df.collect()
    write_rows(df.columns, rows, fmt, out)
    return len(rows)


@click.command("sql")
@click.argument("query")
@lake_options
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
def sql_command(query: str, lake: LakeOptions, fmt: str, engine: str) -> None:
    """Run a SQL statement against the lakehouse (current namespace: ktc).

    Only results go to stdout; e.g. ktc sql "SELECT * FROM clients" --format json
    """
    config = lake.existing()
    if engine in ("auto", "duckdb"):
        from exporters.lakehouse.fastpath import FastPathUnsupported, run_fast

        try:
            columns, rows = run_fast(config, query)
        except FastPathUnsupported as exc:
            if engine == "duckdb":
                raise click.ClickException(
                    f"--engine duckdb: {first_line(exc)}"
                ) from None
        else:
            buffer = io.StringIO()
            write_rows(columns, rows, fmt, buffer)
            sys.stdout.write(buffer.getvalue())
            return
    from pyspark.errors import PySparkException

    if sys.stderr.isatty():
        progress("ktc sql: starting Spark...")
    spark = open_reader(config)
    quiet_query_context_logs()
    try:
        buffer = io.StringIO()
        run_sql(spark, query, fmt, buffer)
    except PySparkException as exc:
        raise click.ClickException(first_line(exc)) from None
    finally:
        spark.stop()
    sys.stdout.write(buffer.getvalue())
