"""The lakehouse commands, listed once: each name and the module (and attribute) of
this package that defines it.

The collector's ``ktc`` group and ``python -m exporters.lakehouse`` both derive their
lists from :data:`COMMANDS`.  Importing this module loads click only, so ``ktc --help``
can list the commands where the lakehouse extra is not installed.
"""

from __future__ import annotations

import importlib

import click

__all__ = ["COMMANDS", "load_command"]

COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("ingest", "ingest_command"),
    "sql": ("sql", "sql_command"),
    "report": ("report", "report_command"),
    "thriftserver": ("thriftserver", "thriftserver_command"),
    "lake": ("lake", "lake_group"),
}


def load_command(name: str) -> click.Command:
    """The command ``name`` (a key of :data:`COMMANDS`), importing its module."""
    module, attribute = COMMANDS[name]
    package = __name__.rpartition(".")[0]
    command: click.Command = getattr(
        importlib.import_module(f"{package}.{module}"), attribute
    )
    return command
