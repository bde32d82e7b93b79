"""``ktc landing dump``: the landing log as JSON lines."""

from __future__ import annotations

import json
from pathlib import Path

import click

from collector.app.cli.common import DATA_DIR

__all__ = ["landing"]


@click.group()
def landing() -> None:
    """Inspect the landing log."""


@landing.command("dump")
@DATA_DIR
@click.option("--from-offset", type=int, default=0, show_default=True)
@click.option(
    "--node-id", type=int, help="Only this node's log (default: every node's)."
)
def landing_dump(data_dir: str, from_offset: int, node_id: int | None) -> None:
    """Print landed pushes as JSON lines: offset, context, decoded metrics."""
    from exporters.landing.dump import dump_records
    from exporters.landing.layout import landing_directory, node_directories

    if node_id is not None:
        directories = [landing_directory(Path(data_dir), node_id)]
    else:
        directories = node_directories(Path(data_dir))
    for record in dump_records(directories, from_offset=from_offset):
        click.echo(json.dumps(record, separators=(",", ":")))
