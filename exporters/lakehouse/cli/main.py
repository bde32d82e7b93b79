"""``python -m exporters.lakehouse``: the lakehouse commands (:data:`registry.COMMANDS`)
without the collector's CLI."""

from __future__ import annotations

import click

from exporters.lakehouse.cli.registry import COMMANDS, load_command

__all__ = ["main"]


@click.group()
def main() -> None:
    """Lakehouse commands (also available under `ktc`)."""


for _name in COMMANDS:
    main.add_command(load_command(_name))
