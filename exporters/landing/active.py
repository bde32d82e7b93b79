"""The active segment: the one file appends go to, what is known about it, and how it comes
to be: created (its header written under a temporary name, then renamed, so a ``.log`` file
always starts with a whole header) or recovered at open.

Recovery scans the newest segment record by record: a torn tail (a partial record or a bad
CRC with no valid record after it) is truncated, and offsets continue after the last good
record. Damage followed by good records is kept (readers skip it) and counted, never
truncated: truncating would throw away acknowledged pushes. A newest segment whose header
cannot be read is left in place and a new one started above any offset it can hold.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
from pathlib import Path

from exporters.landing.durability import fsync_directory
from exporters.landing.errors import LandingError
from exporters.landing.format import (
    RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES,
    SegmentHeader,
    SegmentHeaderError,
    decode_segment_header,
    encode_segment_header,
    new_sync_marker,
)
from exporters.landing.layout import (
    TEMP_SUFFIX,
    SegmentInfo,
    list_segments,
    segment_path,
)
from exporters.landing.scan import (
    CorruptRegion,
    ScannedRecord,
    Tail,
    open_for_scan,
    scan_records,
)

__all__ = ["ActiveSegment", "Recovered"]

_log = logging.getLogger("exporters.landing")


@dataclasses.dataclass(slots=True, eq=False)
class ActiveSegment:
    """The open segment: its descriptor (``O_APPEND``), sync marker, size and records.

    ``reserved``: the file may hold disk blocks reserved past its end (preallocate.py),
    given back when it is sealed or closed."""

    fd: int
    path: Path
    base_offset: int
    sync_marker: bytes
    size: int
    # The offset the next record gets (after damage kept in the middle, more than
    # base_offset + records).
    next_offset: int
    records: int = 0
    first_append_ns: int = 0
    reserved: bool = False

    def aged(self, now_ns: int, max_age_ns: int) -> bool:
        """Whether its first record is ``max_age_ns`` old (Kafka's segment.ms)."""
        return now_ns - self.first_append_ns >= max_age_ns

    def release_reserved(self) -> None:
        """Gives back the blocks reserved past its end (sealing or closing it)."""
        if self.reserved:
            self.reserved = False
            try:
                os.ftruncate(self.fd, self.size)
            except OSError as error:  # they stay allocated: space, not data, is lost
                _log.warning(
                    "landing log %s: reserved blocks not released: %s",
                    self.path.parent,
                    error,
                )

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, *, spare: Path | None, fsync: bool
    ) -> ActiveSegment:
        """A new segment at ``base_offset``: header written under a temporary name, fsynced
        when ``fsync`` (with the directory), renamed. ``spare``: an empty file with blocks
        reserved (preallocate.py) to rename into place instead of a new file. Raises
        OSError when the disk refuses (nothing is left behind)."""
        final_path = segment_path(directory, base_offset)
        if final_path.exists():
            raise LandingError(f"segment {final_path.name} already exists")
        temp_path = final_path.with_name(final_path.name + TEMP_SUFFIX)
        marker = new_sync_marker()
        header = encode_segment_header(SegmentHeader(base_offset, marker))
        reserved = False
        if spare is not None:
            try:
                os.rename(spare, temp_path)
                reserved = True
            except OSError:
                pass
        # The spare is empty and its blocks are reserved: no O_TRUNC, which would free them.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        fd = os.open(temp_path, flags if reserved else flags | os.O_TRUNC, 0o644)
        try:
            if os.write(fd, header) != len(header):
                raise OSError(
                    errno.ENOSPC, f"short write of segment header {temp_path.name}"
                )
            if fsync:
                os.fsync(fd)
            # Otherwise the next sync round fsyncs the new file before its directory entry.
            os.rename(temp_path, final_path)
        except BaseException:
            os.close(fd)
            temp_path.unlink(missing_ok=True)  # a full disk: give back what it took
            raise
        if fsync:
            fsync_directory(directory)
        return cls(
            fd,
            final_path,
            base_offset,
            marker,
            len(header),
            next_offset=base_offset,
            reserved=reserved,
        )

    @classmethod
    def recover(
        cls, directory: Path, *, max_record_bytes: int, fsync: bool, fsync_new: bool
    ) -> Recovered:
        """The newest segment, reopened for appends as described above, or a new one
        (``fsync_new``: as ``create``'s ``fsync``) when there is none or its header is
        damaged; ``fsync``: fsync a truncated tail."""
        segments = list_segments(directory)
        if not segments:
            return Recovered(
                cls.create(directory, 0, spare=None, fsync=fsync_new), True
            )
        newest = segments[-1]
        with open_for_scan(newest.path) as file:
            try:
                header = decode_segment_header(file.read(SEGMENT_HEADER_BYTES))
                if header.base_offset != newest.base_offset:
                    raise SegmentHeaderError(
                        f"header says base offset {header.base_offset}, name says "
                        f"{newest.base_offset}"
                    )
            except SegmentHeaderError as error:
                fresh = _abandon_damaged(directory, newest, error, fsync_new)
                return Recovered(fresh, True)
            items = scan_records(
                file,
                sync_marker=header.sync_marker,
                start_position=SEGMENT_HEADER_BYTES,
                previous_offset=newest.base_offset - 1,
                file_size=os.fstat(file.fileno()).st_size,
                max_record_bytes=max_record_bytes,
            )
            next_offset = newest.base_offset
            records = 0
            first_append_ns = 0
            last_append_ns: int | None = None
            corrupt_regions = 0
            tail: Tail | None = None
            for item in items:
                if isinstance(item, ScannedRecord):
                    if records == 0:
                        first_append_ns = item.appended_time_unix_nano
                    records += 1
                    last_append_ns = item.appended_time_unix_nano
                    next_offset = item.offset + 1
                elif isinstance(item, CorruptRegion):
                    corrupt_regions += 1
                    _log.warning(
                        "landing log %s: segment %s damaged at bytes %d..%d (%s); "
                        "keeping the valid records after it",
                        directory,
                        newest.path.name,
                        item.position,
                        item.end_position,
                        item.reason,
                    )
                else:
                    tail = item
        assert tail is not None  # scan_records always ends with a Tail
        fd = os.open(newest.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        truncated_bytes = 0
        if not tail.clean:
            truncated_bytes = tail.file_size - tail.position
            _log.warning(
                "landing log %s: truncating a torn tail of %d bytes in %s at byte %d (%s)",
                directory,
                truncated_bytes,
                newest.path.name,
                tail.position,
                tail.reason,
            )
            try:
                os.ftruncate(fd, tail.position)
                if fsync:
                    os.fsync(fd)
            except BaseException:
                os.close(fd)
                raise
        segment = cls(
            fd,
            newest.path,
            newest.base_offset,
            header.sync_marker,
            tail.position,
            next_offset=next_offset,
            records=records,
            first_append_ns=first_append_ns,
            reserved=True,  # a crash may have left blocks reserved past its end
        )
        return Recovered(
            segment,
            False,
            truncated_bytes=truncated_bytes,
            corrupt_regions=corrupt_regions,
            last_append_ns=last_append_ns,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Recovered:
    """What opening found: the segment to append to (``created``: a new one) and what
    recovery did to the newest one."""

    segment: ActiveSegment
    created: bool
    truncated_bytes: int = 0
    corrupt_regions: int = 0
    last_append_ns: int | None = None  # its last record's, when it has any


def _abandon_damaged(
    directory: Path, newest: SegmentInfo, error: SegmentHeaderError, fsync: bool
) -> ActiveSegment:
    """The newest segment's header is unreadable, so its records cannot be found. It is
    left in place (sealed; readers report it) and writing continues in a new segment
    whose base offset is certainly above any offset it holds: a record takes at least
    RECORD_HEADER_BYTES, so it has fewer than size / 45 + 1 of them."""
    fresh_base = newest.base_offset + newest.size_bytes // RECORD_HEADER_BYTES + 1
    _log.error(
        "landing log %s: newest segment %s has a damaged header (%s); continuing at "
        "offset %d in a new segment",
        directory,
        newest.path.name,
        error,
        fresh_base,
    )
    return ActiveSegment.create(directory, fresh_base, spare=None, fsync=fsync)
