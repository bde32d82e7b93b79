"""The writer's segment files: the active one recovered at open (or reopened), the next one
created at a roll, the old one sealed; and what a failed write or fsync drops.

Every method is called with the log's lock held (log.py).

A roll is two steps (appender.py calls them in order): :meth:`Segments.start_next` gives back
the old segment's reserved blocks, stamps its mtime and creates the next segment (when that
fails, the old one stays active); :meth:`Segments.seal` then makes the old one durable (an
fsync under plain ``fsync="always"``, else the next sync round) and closes it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from exporters.landing.active import ActiveSegment
from exporters.landing.durability import fsync_directory
from exporters.landing.errors import LandingError
from exporters.landing.format import SEGMENT_HEADER_BYTES
from exporters.landing.health import PROBE_FILE_NAME, DiskHealth
from exporters.landing.layout import TEMP_SUFFIX, SegmentInfo
from exporters.landing.preallocate import SPARE_FILE_NAME, BlockReservations
from exporters.landing.sync import SyncRounds

__all__ = ["Segments"]

_log = logging.getLogger("exporters.landing")


class Segments:
    """Opens, creates and seals the segments of one landing directory.

    ``durable``: the fsync policy is not ``never``. ``fsync_inline``: plain ``always``
    (fsync at the write, and at a roll); otherwise sealed segments and new names are left
    to the next sync round (sync.py). ``counters``: the log's, shared."""

    def __init__(
        self,
        directory: Path,
        reservations: BlockReservations,
        rounds: SyncRounds,
        health: DiskHealth,
        counters: dict[str, int],
        *,
        durable: bool,
        fsync_inline: bool,
        max_record_bytes: int,
        time_ns: Callable[[], int],
    ) -> None:
        self.directory = directory
        self._reservations = reservations
        self._rounds = rounds
        self._health = health
        self._counters = counters
        self._durable = durable
        self._fsync_inline = fsync_inline
        self._max_record_bytes = max_record_bytes
        self._time_ns = time_ns

    def open_active(self) -> tuple[ActiveSegment, int]:
        """Recovers the newest segment (active.py), after removing what an interrupted run
        left: segments whose creation was interrupted, a probe file, a spare. Returns it
        and its last record's appended time (now, when it has none)."""
        for name in os.listdir(self.directory):
            if name.endswith(TEMP_SUFFIX) and not name.startswith("."):
                # A segment whose creation was interrupted: it never held a record.
                os.unlink(self.directory / name)
        # A probe interrupted by a crash (a restart, or a reopen after a failed fsync).
        (self.directory / PROBE_FILE_NAME).unlink(missing_ok=True)
        if self._reservations.spare is None:
            (self.directory / SPARE_FILE_NAME).unlink(missing_ok=True)
        recovered = ActiveSegment.recover(
            self.directory,
            max_record_bytes=self._max_record_bytes,
            fsync=self._durable,
            fsync_new=self._fsync_inline,
        )
        if recovered.created and not self._fsync_inline:
            if self._durable:
                self._rounds.directory_dirty = True
        self._counters["recovered_truncated_bytes"] += recovered.truncated_bytes
        self._counters["recovered_corrupt_regions"] += recovered.corrupt_regions
        last_append_ns = (
            self._time_ns()
            if recovered.last_append_ns is None
            else recovered.last_append_ns
        )
        return recovered.segment, last_append_ns

    def start_next(self, old: ActiveSegment, last_append_ns: int) -> ActiveSegment:
        """The first half of a roll (``old``'s records all written): the segment after
        ``old``. Raises LandingError when it cannot be created; ``old`` stays the active
        one then."""
        old.release_reserved()
        # A sealed segment's mtime is its last record's appended time: retention compares
        # it with now_ms, so an injected clock and a restart agree with what was written.
        os.utime(old.fd, ns=(last_append_ns, last_append_ns))
        try:
            segment = self._create(old.next_offset)
        except OSError as error:
            # No room for a new segment: keep writing the old one once there is.
            failure = f"rolling {old.path.name} failed: {error}"
            self.write_failed(failure, SEGMENT_HEADER_BYTES)
            raise LandingError(failure) from error
        self._counters["segments_rolled"] += 1
        return segment

    def seal(self, old: ActiveSegment) -> None:
        """The second half of a roll: ``old`` durable (now, or at the next sync round) and
        closed."""
        try:
            if self._fsync_inline:
                # Its data is synced; this persists the mtime.
                try:
                    os.fsync(old.fd)
                except OSError as error:
                    self.fsync_failed(error)
                    raise
                self._counters["fsyncs"] += 1
            else:
                self._rounds.sealed(old.base_offset)  # the next sync round fsyncs it
        finally:
            os.close(old.fd)

    def delete(self, doomed: Sequence[SegmentInfo]) -> None:
        """Deletes sealed segments (the ones retention chose, retention.py), then makes
        their names' removal durable."""
        for segment in doomed:
            try:
                os.unlink(segment.path)
            except FileNotFoundError:
                continue
            self._counters["segments_deleted"] += 1
            _log.info(
                "landing log %s: retention deleted segment %s (%d bytes)",
                self.directory,
                segment.path.name,
                segment.size_bytes,
            )
        if doomed and self._durable:
            fsync_directory(self.directory)

    def _create(self, base_offset: int) -> ActiveSegment:
        segment = ActiveSegment.create(
            self.directory,
            base_offset,
            spare=self._reservations.take_spare_locked(),
            fsync=self._fsync_inline,
        )
        if self._fsync_inline:
            self._counters["fsyncs"] += 1
        elif self._durable:
            self._rounds.directory_dirty = True
        return segment

    def write_failed(self, reason: str, attempted_bytes: int) -> None:
        """A write (or a segment's creation) failed: the log cannot write (health.py)."""
        self._reservations.drop_spare_locked()  # its blocks are the records' now
        self._health.write_failed(reason, attempted_bytes)

    def fsync_failed(self, error: OSError) -> None:
        """An fsync failed: the log is broken until reopened (health.py)."""
        self._reservations.drop_spare_locked()
        self._health.fsync_failed(error)
