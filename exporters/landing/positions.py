"""Committed read positions of the log's consumers, one small JSON file each.

``consumers/<name>.json`` holds the next offset the consumer will read: everything below it
is done. A commit writes a temporary file in the same directory, fsyncs it, renames it over
the old one and fsyncs the directory, so after a crash the file holds either the old or the
new position, never a mix.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from clock import SYSTEM_CLOCK, Clock
from exporters.landing.durability import fsync_directory

__all__ = [
    "CONSUMERS_DIRECTORY",
    "ConsumerPositions",
    "PositionsError",
    "committed_offsets",
]

CONSUMERS_DIRECTORY: Final = "consumers"
_CONSUMER_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_POSITION_FORMAT_VERSION: Final = 1


class PositionsError(ValueError):
    """A positions file exists but cannot be read: refusing to guess a position."""


class ConsumerPositions:
    """The committed position of one consumer (e.g. "otlp-forwarder", "lakehouse-ingest");
    ``clock`` stamps each commit (its wall clock)."""

    def __init__(
        self, directory: Path, consumer_name: str, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        if not _CONSUMER_NAME.match(consumer_name):
            raise ValueError(
                f"consumer name {consumer_name!r}: use letters, digits, '.', '_', '-' (max 128)"
            )
        self.consumer_name = consumer_name
        self._clock = clock
        self._directory = Path(directory) / CONSUMERS_DIRECTORY
        self.path = self._directory / f"{consumer_name}.json"

    def load(self) -> int:
        """The committed next offset, 0 when the consumer never committed."""
        return _read_position(self.path) or 0

    def commit(self, next_offset: int) -> None:
        if not _is_offset(next_offset):
            raise ValueError(
                f"next_offset must be a non-negative int, got {next_offset!r}"
            )
        self._directory.mkdir(parents=True, exist_ok=True)
        document = {
            "format": _POSITION_FORMAT_VERSION,
            "consumer": self.consumer_name,
            "next_offset": next_offset,
            "committed_time_unix_nano": self._clock.time_ns(),
        }
        fd, temp_name = tempfile.mkstemp(
            dir=self._directory, prefix=f".{self.consumer_name}.", suffix=".tmp"
        )
        try:
            with os.fdopen(fd, "wb") as temp:
                temp.write(json.dumps(document, separators=(",", ":")).encode())
                temp.flush()
                os.fsync(temp.fileno())
            os.replace(temp_name, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp_name)
            raise
        fsync_directory(self._directory)

    def __repr__(self) -> str:
        return f"ConsumerPositions({str(self._directory.parent)!r}, {self.consumer_name!r})"


def committed_offsets(directory: Path) -> dict[str, int]:
    """Every consumer's committed next offset in a landing directory."""
    consumers = Path(directory) / CONSUMERS_DIRECTORY
    try:
        names = sorted(os.listdir(consumers))
    except FileNotFoundError:
        return {}
    offsets: dict[str, int] = {}
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue  # temporary files of a commit in progress (or abandoned by a crash)
        position = _read_position(consumers / name)
        if position is not None:
            offsets[name[: -len(".json")]] = position
    return offsets


def lowest_committed_offset(directory: Path, required: Iterable[str]) -> int | None:
    """The lowest position committed in ``directory``, a consumer in ``required`` that
    never committed counting as 0; None with no consumers at all."""
    positions = committed_offsets(directory)
    for name in required:
        positions.setdefault(name, 0)
    return min(positions.values()) if positions else None


def _read_position(path: Path) -> int | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        document = json.loads(raw)
        next_offset = document["next_offset"]
    except (ValueError, TypeError, KeyError) as error:
        raise PositionsError(
            f"{path}: unreadable consumer position ({error})"
        ) from error
    if not _is_offset(next_offset):
        raise PositionsError(
            f"{path}: next_offset {next_offset!r} is not a non-negative int"
        )
    return next_offset


def _is_offset(value: object) -> bool:
    """A non-negative int (a bool is an int to Python, never an offset)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
