"""The log's lock and what it says about the log as a whole: closed (no more appends),
its descriptors closed (no more sync rounds), broken (no writes until reopened,
health.py). Every part of the log asks here before it writes."""

from __future__ import annotations

import threading
from pathlib import Path

from exporters.landing.errors import LandingError, LandingLogClosed
from exporters.landing.health import DiskHealth

__all__ = ["Gate"]


class Gate:
    """``lock`` guards the state of every part of the log and is held for a write; the
    flags are read and set under it (``closed`` is also read without it, on the push
    path, and checked again under it before anything is written)."""

    def __init__(self, directory: Path, health: DiskHealth) -> None:
        self.lock = threading.Lock()
        self.closed = False  # close() started: no more appends
        self.descriptors_closed = False  # close() finished: no more sync rounds
        self.directory = directory
        self._health = health

    def check_open(self) -> None:
        if self.closed:
            raise LandingLogClosed(f"landing log {self.directory} is closed")

    def check_writable(self) -> None:
        self.check_open()
        broken = self._health.broken
        if broken is not None:
            raise LandingError(
                f"landing log {self.directory} is unusable until reopened: {broken}"
            )

    def check_syncable(self) -> None:
        """What a sync round needs: the descriptors open and the log not broken."""
        if self.descriptors_closed:
            raise LandingLogClosed(f"landing log {self.directory} is closed")
        broken = self._health.broken
        if broken is not None:
            raise LandingError(f"landing log {self.directory} is unusable: {broken}")
