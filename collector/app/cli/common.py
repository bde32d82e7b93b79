"""What every ``ktc`` command shares: exit codes, the one-line error, the config loader and
the ``--data-dir`` option of the commands that work on a data directory."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from collector.app.config import CollectorConfig, ConfigError, load_config

__all__ = [
    "CONFIG_ERROR_EXIT",
    "DATA_DIR",
    "config_store",
    "fail_config",
    "kafka_error_exit",
    "load",
    "setup_logging",
]

# A configuration error exits like click's own usage errors; a refused change (a Kafka error
# code) exits 1.
CONFIG_ERROR_EXIT = 2

DATA_DIR = click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default="data",
    show_default=True,
    envvar="KTC_DATA_DIR",
    help="The collector's data directory (its config store).",
)


def fail_config(message: str) -> NoReturn:
    click.echo(f"ktc: configuration error: {message}", err=True)
    sys.exit(CONFIG_ERROR_EXIT)


def kafka_error_exit(exc: Exception) -> NoReturn:
    """One line naming the Kafka error code the exception carries (when it carries one);
    a failure of the CLI's table (a broken store file: exit 2) as the table says."""
    from collector.app.cli.errors import describe

    failure = describe(exc)
    if failure is not None:
        click.echo(f"ktc: {failure.message}", err=True)
        sys.exit(failure.exit_code)
    code = getattr(exc, "error_code", None)
    name = getattr(code, "name", code)
    click.echo(f"ktc: {name}: {exc}" if name is not None else f"ktc: {exc}", err=True)
    sys.exit(1)


def load(config_file: str | None, overrides: dict[str, object]) -> CollectorConfig:
    """The config file plus ``KTC_*`` environment plus ``overrides`` (dotted key -> value;
    None = not given); an invalid one exits 2 naming the key."""
    try:
        return load_config(config_file, overrides=overrides)
    except ConfigError as exc:
        fail_config(str(exc))


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def config_store(data_dir: str) -> Any:
    """The config store (subscriptions and quotas) of a data directory."""
    from subscriptions.store import ConfigStore

    return ConfigStore(Path(data_dir))
