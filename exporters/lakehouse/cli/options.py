"""The options every lakehouse command shares (where the lakehouse is, how to run
Spark), declared once and parsed into one :class:`LakeOptions`.

A command takes them with :func:`lake_options`::

    @click.command("name")
    @lake_options
    @click.option("--own-option")
    def name_command(lake: LakeOptions, own_option: str) -> None:
        config = lake.existing()
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from exporters.lakehouse.schema import DEFAULT_DATABASE
from exporters.lakehouse.session import (
    CATALOG_NAME,
    LakehouseConfig,
    OldLayout,
    check_layout,
)

__all__ = ["LakeOptions", "lake_options", "parse_conf", "parse_duration_s"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_SECONDS_PER_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration_s(text: str) -> float:
    """``"10s"``, ``"500ms"``, ``"2m"``, ``"1h"`` or plain seconds -> seconds."""
    match = _DURATION.match(text)
    if not match:
        raise click.BadParameter(f"{text!r} is not a duration like 10s, 500ms, 2m")
    return float(match.group(1)) * _SECONDS_PER_UNIT[match.group(2)]


def parse_conf(pairs: Sequence[str]) -> dict[str, str]:
    """``--conf KEY=VALUE`` pairs -> a dict (a usage error names a malformed one)."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"--conf expects key=value, got {pair!r}")
        conf[key.strip()] = value
    return conf


@dataclasses.dataclass(frozen=True)
class LakeOptions:
    """The shared options as given.  A command turns them into a
    :class:`LakehouseConfig` (:meth:`config`, :meth:`existing`) where it checks them, so
    its own options' errors come in the order they always did."""

    data_dir: Path
    lake_dir: Path | None
    catalog_uri: str | None
    database: str
    master: str
    conf: tuple[str, ...]

    def config(self) -> LakehouseConfig:
        """The lakehouse these options name; a bad ``--conf`` is a usage error, an
        unknown catalog URI or an old layout a one-line error."""
        config = LakehouseConfig(
            lake_dir=self.lake_dir or self.data_dir / "lakehouse",
            database=self.database,
            master=self.master,
            extra_conf=parse_conf(self.conf),
            catalog_uri=self.catalog_uri,
        )
        try:
            _ = config.catalog_kind  # a URI of no known kind fails here, in one line
            check_layout(config)
        except (ValueError, OldLayout) as exc:
            raise click.ClickException(str(exc)) from None
        return config

    def existing(self) -> LakehouseConfig:
        """:meth:`config`, for a reader: its catalog must exist (readers never create
        one)."""
        config = self.config()
        if not config.exists():
            raise click.ClickException(
                f"no lakehouse at {config.lake_dir} (run `ktc ingest` first, "
                "or pass --data-dir)"
            )
        return config


_SHARED_OPTIONS = (
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
        help="Lakehouse directory (catalog.db, warehouse/), if not "
        "<data-dir>/lakehouse; may be on shared storage.",
    ),
    click.option(
        "--catalog",
        "catalog_uri",
        envvar="KTC_LAKE_CATALOG",
        metavar="URI",
        help="The Iceberg catalog: jdbc:sqlite:FILE (default <lake>/catalog.db), "
        "jdbc:postgresql://HOST:PORT/DB?user=U&password=P, or an http(s):// REST catalog.",
    ),
    click.option(
        "--database",
        default=DEFAULT_DATABASE,
        show_default=True,
        help="Iceberg namespace holding the tables and views.",
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
        help="Spark setting, repeatable; wins over the defaults "
        f"(e.g. spark.sql.catalog.{CATALOG_NAME}.warehouse=s3a://bucket/lake).",
    ),
)
_SHARED_NAMES = tuple(field.name for field in dataclasses.fields(LakeOptions))


def lake_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the shared options to a command (before its own, in ``--help``) and passes
    them to it as one :class:`LakeOptions`, the keyword argument ``lake``."""

    @functools.wraps(function)
    def command(**params: Any) -> Any:
        shared = {name: params.pop(name) for name in _SHARED_NAMES}
        shared["conf"] = tuple(shared["conf"])
        return function(lake=LakeOptions(**shared), **params)

    decorated: Callable[..., Any] = command
    for option in reversed(_SHARED_OPTIONS):
        decorated = option(decorated)
    return decorated
