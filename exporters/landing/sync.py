"""Sync rounds: making appended records durable with as few fsyncs as possible.

A round fsyncs whatever holds offsets below its target: sealed segments not synced yet
(opened by path: an fsync flushes the file, whichever descriptor asks), the active segment
(through a dup, so a concurrent roll cannot close it under the round) and the directory
(new and deleted segment names). One round at a time, under the rounds' own lock, while
appends go on under the log's: that is what makes group commit. A round that finds its
target covered by an earlier one does nothing. Lock order: the rounds' lock before the
log's, never the other way round.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from exporters.landing.durability import fsync_directory
from exporters.landing.layout import list_segments

__all__ = ["SyncPlan", "SyncRounds"]


class SyncPlan:
    """One round's work, taken under the log's lock and done outside it."""

    __slots__ = (
        "active_base",
        "active_fd",
        "covered",
        "directory_dirty",
        "sealed_from",
    )

    def __init__(
        self,
        covered: int,
        sealed_from: int | None,
        active_base: int,
        active_fd: int | None,
        directory_dirty: bool,
    ) -> None:
        self.covered = (
            covered  # every offset below it is durable when the round is done
        )
        self.sealed_from = sealed_from
        self.active_base = active_base
        self.active_fd = active_fd  # a dup, closed by run()
        self.directory_dirty = directory_dirty

    def run(self, directory: Path) -> int:
        """The fsyncs; how many files were fsynced. Raises OSError when one fails."""
        fsyncs = 0
        try:
            if self.sealed_from is not None:
                fsyncs += _fsync_segments(directory, self.sealed_from, self.active_base)
            if self.active_fd is not None:
                os.fsync(self.active_fd)
                fsyncs += 1
            if self.directory_dirty:
                fsync_directory(directory)
        finally:
            if self.active_fd is not None:
                os.close(self.active_fd)
        return fsyncs


class SyncRounds:
    """What is not durable yet. Its fields are guarded by the log's lock; ``lock`` lets one
    round run at a time."""

    __slots__ = ("directory_dirty", "durable_offset", "lock", "unsynced_sealed_base")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.durable_offset = 0  # every offset below this is fsynced
        # Base offset of the oldest sealed segment not fsynced yet; the next round fsyncs
        # it and every later sealed one by path.
        self.unsynced_sealed_base: int | None = None
        self.directory_dirty = False

    def sealed(self, base_offset: int) -> None:
        """A segment was sealed without an fsync: the next round fsyncs it."""
        if self.unsynced_sealed_base is None:
            self.unsynced_sealed_base = base_offset

    def plan(
        self, target: int, next_offset: int, active_base: int, active_fd: int
    ) -> SyncPlan | None:
        """The round that makes every offset below ``target`` durable, or None when an
        earlier round did. Clears what it takes on."""
        if (
            self.durable_offset >= target
            and self.unsynced_sealed_base is None
            and not self.directory_dirty
        ):
            return None
        sealed_from, self.unsynced_sealed_base = self.unsynced_sealed_base, None
        directory_dirty, self.directory_dirty = self.directory_dirty, False
        # A new segment's header must be durable before its name is.
        needs_active = next_offset > self.durable_offset or directory_dirty
        return SyncPlan(
            next_offset,
            sealed_from,
            active_base,
            os.dup(active_fd) if needs_active else None,
            directory_dirty,
        )

    def done(self, plan: SyncPlan) -> None:
        self.durable_offset = max(self.durable_offset, plan.covered)


def _fsync_segments(directory: Path, from_base: int, below_base: int) -> int:
    """fsyncs the segment files with base offsets in [from_base, below_base) by path.
    Returns how many."""
    synced = 0
    for segment in list_segments(directory):
        if from_base <= segment.base_offset < below_base:
            try:
                fd = os.open(segment.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # retention deleted it meanwhile
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            synced += 1
    return synced
