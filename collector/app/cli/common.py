"""What every ``ktc`` command shares: exit codes, the one-line error, the config loader and
the ``--data-dir`` option of the commands that work on a data directory, with the check
that the directory's node keeps that state there (:func:`kept_here`)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
from click.decorators import FC

from collector.app.config import CollectorConfig, ConfigError, load_config

__all__ = [
    "CONFIG_ERROR_EXIT",
    "DATA_DIR",
    "config_store",
    "data_dir_option",
    "fail_config",
    "kafka_error_exit",
    "kept_here",
    "load",
    "setup_logging",
]

# A configuration error exits like click's own usage errors; a refused change (a Kafka error
# code) exits 1.
CONFIG_ERROR_EXIT = 2


def data_dir_option(help: str) -> Callable[[FC], FC]:
    """``--data-dir`` (``KTC_DATA_DIR``), its help naming what the command keeps there."""
    return click.option(
        "--data-dir",
        type=click.Path(file_okay=False),
        default="data",
        show_default=True,
        envvar="KTC_DATA_DIR",
        help=help,
    )


DATA_DIR = data_dir_option("The collector's data directory (its config store).")


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


# A kind of state (parts/data_dir.STATE_KINDS) -> what the refusal calls it, and the command
# that manages it at the cluster ({} is the cluster's bootstrap servers).
_AT_THE_CLUSTER = {
    "subscriptions": ("subscriptions", "--bootstrap-server {}"),
    "quotas": ("client quotas", "kafka-configs.sh --bootstrap-server {}"),
    "users": (
        "SCRAM users",
        "kafka-configs.sh --bootstrap-server {} --entity-type users",
    ),
    "acls": ("ACLs", "kafka-acls.sh --bootstrap-server {}"),
}


def kept_here(kind: str, data_dir: str) -> None:
    """Raise :class:`~collector.app.cli.errors.KeptInCluster` (exit 3, one line naming the
    cluster and ``--bootstrap-server``) when the node of ``data_dir`` recorded that it keeps
    ``kind`` in a Kafka cluster, before anything in the directory is read or written.  A
    directory no node recorded anything in keeps everything itself (as before nodes
    recorded it)."""
    from collector.app.cli.errors import KeptInCluster
    from collector.app.parts.data_dir import read_state_locations

    locations = read_state_locations(Path(data_dir))
    cluster = None if locations is None else locations.cluster_of(kind)
    if cluster is None:
        return
    noun, command = _AT_THE_CLUSTER[kind]
    raise KeptInCluster(
        f"the node of data directory {data_dir} keeps its {noun} in the cluster "
        f"({cluster}); use {command.format(cluster)}"
    )
