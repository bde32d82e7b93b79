"""What the lakehouse commands share beyond their options: progress lines on stderr,
Spark sessions, and Spark's errors as one line."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import click

from exporters.lakehouse.session import LakehouseConfig, LakeLibsMissing, open_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "first_line",
    "open_reader",
    "open_spark",
    "progress",
    "quiet_query_context_logs",
]


def progress(line: str) -> None:
    """A progress line on stderr (what a long Spark command is doing)."""
    click.echo(line, err=True)


def open_spark(config: LakehouseConfig, app_name: str) -> SparkSession:
    """A Spark session on the lakehouse; missing jars are a one-line error."""
    try:
        return open_session(config, app_name)
    except LakeLibsMissing as exc:
        raise click.ClickException(str(exc)) from None


def open_reader(config: LakehouseConfig) -> SparkSession:
    """A Spark session for queries, with the lakehouse namespace as the current one."""
    spark = open_spark(config, "ktc-sql")
    spark.catalog.setCurrentDatabase(config.database)
    return spark


def quiet_query_context_logs() -> None:
    """pyspark logs a failed query once more, as JSON on stderr, before raising it: the
    command's one line says it already."""
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def first_line(exc: Exception) -> str:
    """What Spark says is wrong, without its hints, logical plan or JVM stack trace."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0].strip() if lines else type(exc).__name__
