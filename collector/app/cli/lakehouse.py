"""The lakehouse commands (``ktc ingest|sql|report|thriftserver|lake``), listed and defined by
``exporters.lakehouse.cli`` (its ``registry``) when the lakehouse extra is installed; without
it, stand-ins that say how to install it, so ``ktc serve`` runs either way."""

from __future__ import annotations

import sys

import click

from exporters.lakehouse.cli.registry import COMMANDS, load_command

__all__ = ["LAKEHOUSE_COMMANDS", "lakehouse_command"]

# The lakehouse extra's commands (the registry imports click only) and what they need
# beyond the collector's dependencies.
LAKEHOUSE_COMMANDS = tuple(COMMANDS)
LAKEHOUSE_MODULES = ("pyspark", "pyarrow", "pyiceberg", "duckdb", "matplotlib")
LAKEHOUSE_INSTALL = "pip install 'kafka-telemetry-collector[lakehouse]'"


def _missing_modules(names: tuple[str, ...]) -> list[str]:
    """The modules of ``names`` that cannot be imported, found without importing them
    (pyspark's import alone costs a tenth of a second at every ``ktc`` start)."""
    import importlib.util

    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def _unavailable_command(name: str, message: str, exit_code: int) -> click.Command:
    """A stand-in for a command that cannot run here: whatever its arguments, it says
    why and exits with ``exit_code``."""

    def explain(args: tuple[str, ...]) -> None:
        click.echo(f"ktc {name}: {message}", err=True)
        sys.exit(exit_code)

    return click.Command(
        name,
        callback=explain,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        help=f"(unavailable: {message})",
        context_settings={"ignore_unknown_options": True, "help_option_names": []},
    )


def lakehouse_command(name: str) -> click.Command:
    """One of :data:`LAKEHOUSE_COMMANDS`, when the lakehouse extra is installed; without it,
    a command that says how to install it (exit 2, a usage error); when its code fails to
    import, a command that shows that error (exit 1)."""
    missing = _missing_modules(LAKEHOUSE_MODULES)
    if missing:
        from collector.app.cli.common import CONFIG_ERROR_EXIT

        message = f"needs the lakehouse extra ({', '.join(missing)} not installed): {LAKEHOUSE_INSTALL}"
        return _unavailable_command(name, message, CONFIG_ERROR_EXIT)
    try:
        return load_command(name)
    except Exception as exc:  # shown by the command instead
        message = f"the lakehouse cannot be loaded: {type(exc).__name__}: {exc}"
        return _unavailable_command(name, message, 1)
