"""``ktc lake compact|retention|expire|remove-orphans|snapshots``: lakehouse
maintenance (the actions themselves: ``exporters.lakehouse.maintenance``)."""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from clock import SYSTEM_CLOCK
from exporters.lakehouse.cli.common import open_spark, progress
from exporters.lakehouse.cli.options import LakeOptions, lake_options, parse_duration_s
from exporters.lakehouse.session import LakehouseConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["lake_group"]

Action = Callable[["SparkSession", LakehouseConfig], dict[str, Any]]


@click.group("lake")
def lake_group() -> None:
    """Lakehouse maintenance: compaction, retention, snapshot expiry, orphan files.

    Each is one Iceberg commit per table, safe beside running ingests and readers.
    """


def _maintain(lake: LakeOptions, app_name: str, action: Action) -> None:
    """Run ``action`` on a Spark session of the lakehouse; print its report as JSON."""
    config = lake.existing()
    if sys.stderr.isatty():
        progress(f"ktc lake: starting Spark ({config.master})...")
    spark = open_spark(config, app_name)
    try:
        report = action(spark, config)
    finally:
        spark.stop()
    click.echo(json.dumps(report, sort_keys=True))


def _now_ms() -> int:
    return SYSTEM_CLOCK.time_ns() // 1_000_000


@lake_group.command("compact")
@lake_options
@click.option(
    "--closed-after",
    default="1h",
    show_default=True,
    help="Only files of rows received at least this long ago are rewritten.",
)
def compact_command(lake: LakeOptions, closed_after: str) -> None:
    """Rewrite the ingest's small files into large ones (Iceberg rewriteDataFiles)."""
    from exporters.lakehouse.maintenance import compact

    seconds = parse_duration_s(closed_after)
    _maintain(
        lake,
        "ktc-lake-compact",
        lambda spark, config: compact(
            spark, config, now_unix_ns=SYSTEM_CLOCK.time_ns(), closed_after_s=seconds
        ),
    )


@lake_group.command("retention")
@lake_options
@click.option(
    "--days",
    type=click.IntRange(min=1),
    required=True,
    help="Keep this many days (by receive date, UTC); delete older ones.",
)
def retention_command(lake: LakeOptions, days: int) -> None:
    """Delete the days received more than N days ago (whole files, a metadata commit)."""
    from exporters.lakehouse.maintenance import apply_retention

    today = datetime.datetime.fromtimestamp(
        SYSTEM_CLOCK.time_ns() / 1e9, datetime.UTC
    ).date()
    _maintain(
        lake,
        "ktc-lake-retention",
        lambda spark, config: apply_retention(spark, config, days=days, today=today),
    )


@lake_group.command("expire")
@lake_options
@click.option(
    "--older-than",
    default="1h",
    show_default=True,
    help="Expire snapshots older than this (the time travel window).",
)
@click.option(
    "--retain-last", type=click.IntRange(min=1), default=10, show_default=True
)
def expire_command(lake: LakeOptions, older_than: str, retain_last: int) -> None:
    """Expire old snapshots and the files only they reference (bounds metadata growth)."""
    from exporters.lakehouse.maintenance import expire_snapshots

    seconds = parse_duration_s(older_than)
    _maintain(
        lake,
        "ktc-lake-expire",
        lambda spark, config: expire_snapshots(
            spark,
            config,
            now_unix_ms=_now_ms(),
            expire_after_s=seconds,
            retain_last=retain_last,
        ),
    )


@lake_group.command("remove-orphans")
@lake_options
@click.option(
    "--older-than",
    default="24h",
    show_default=True,
    help="Only files older than this (a running ingest's uncommitted files are younger).",
)
def remove_orphans_command(lake: LakeOptions, older_than: str) -> None:
    """Delete files under the tables that no snapshot references (a killed writer's)."""
    from exporters.lakehouse.maintenance import remove_orphan_files

    seconds = parse_duration_s(older_than)
    _maintain(
        lake,
        "ktc-lake-remove-orphans",
        lambda spark, config: remove_orphan_files(
            spark, config, now_unix_ms=_now_ms(), orphan_after_s=seconds
        ),
    )


@lake_group.command("snapshots")
@lake_options
@click.option("--table", default="pushes", show_default=True)
def snapshots_command(lake: LakeOptions, table: str) -> None:
    """A table's snapshots with the landing ranges each holds (no JVM: pyiceberg)."""
    from pyiceberg.catalog import load_catalog

    config = lake.existing()
    catalog = load_catalog("lake", **config.pyiceberg_properties())
    for snapshot in catalog.load_table((lake.database, table)).snapshots():
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
