"""Walking a segment file record by record, and finding the way again after damage.

Shared by the writer's recovery and by readers. A scan never raises on bad bytes: it
reports what it saw as one of three items.

- ``ScannedRecord``: a complete record whose CRC matches and whose offset is above the
  previous one.
- ``CorruptRegion``: bad bytes followed, later in the file, by a valid record (found by
  searching for the segment's sync marker). Readers skip it; the writer keeps the good
  records after it.
- ``Tail``: the end of the valid data. ``clean`` when it is exactly the end of the file;
  otherwise the bytes after it are a torn or damaged tail that no valid record follows: a
  write the process died in, or one still in flight when a reader tails the active segment.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import BinaryIO, Final

import crc32c

from exporters.landing.format import (
    RECORD_FIXED_BODY,
    RECORD_HEADER_BYTES,
    RECORD_MAGIC_V1,
    RECORD_PREFIX,
)

__all__ = [
    "CorruptRegion",
    "ScanItem",
    "ScannedRecord",
    "Tail",
    "open_for_scan",
    "scan_records",
]

_SEARCH_CHUNK_BYTES: Final = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class ScannedRecord:
    position: int
    end_position: int
    offset: int
    appended_time_unix_nano: int
    context_json: bytes
    payload: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class CorruptRegion:
    position: int
    end_position: int  # where the next valid record starts
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class Tail:
    position: int  # end of the valid data: the writer truncates here
    file_size: int
    reason: str  # why the bytes after position are not a record ("" when clean)

    @property
    def clean(self) -> bool:
        return self.position == self.file_size


ScanItem = ScannedRecord | CorruptRegion | Tail


class _Invalid(Exception):
    """Internal: the bytes at a position are not a valid record (message says why)."""


def scan_records(
    file: BinaryIO,
    *,
    sync_marker: bytes,
    start_position: int,
    previous_offset: int,
    file_size: int,
    max_record_bytes: int,
) -> Iterator[ScanItem]:
    """Yield the items between ``start_position`` and ``file_size`` (a snapshot: bytes a
    concurrent writer adds later are left for the next scan). ``previous_offset`` is the
    offset of the record before ``start_position`` (base_offset - 1 at the segment start);
    every record must be above it. The last item is always a ``Tail``."""
    position = start_position
    while position < file_size:
        try:
            record = _read_record(
                file,
                position,
                file_size,
                sync_marker,
                previous_offset,
                max_record_bytes,
            )
        except _Invalid as invalid:
            found = _resync(
                file,
                position + 1,
                file_size,
                sync_marker,
                previous_offset,
                max_record_bytes,
            )
            if found is None:
                yield Tail(position, file_size, str(invalid))
                return
            yield CorruptRegion(position, found.position, str(invalid))
            record = found
        yield record
        previous_offset = record.offset
        position = record.end_position
    yield Tail(position, file_size, "")


def _read_record(
    file: BinaryIO,
    position: int,
    file_size: int,
    sync_marker: bytes,
    previous_offset: int,
    max_record_bytes: int,
) -> ScannedRecord:
    if file.tell() != position:
        file.seek(position)
    head = file.read(RECORD_HEADER_BYTES)
    if len(head) < RECORD_HEADER_BYTES or position + RECORD_HEADER_BYTES > file_size:
        raise _Invalid(f"incomplete record header at byte {position}")
    marker, magic, length, stored_crc = RECORD_PREFIX.unpack_from(head)
    if marker != sync_marker:
        raise _Invalid(f"no sync marker at byte {position}")
    if magic != RECORD_MAGIC_V1:
        raise _Invalid(f"unknown record magic {magic} at byte {position}")
    rest_bytes = length - RECORD_FIXED_BODY.size
    # The bound comes before any allocation: a damaged length field must not make us
    # read (or allocate) gigabytes.
    if rest_bytes < 0 or rest_bytes > max_record_bytes:
        raise _Invalid(f"record length {length} out of bounds at byte {position}")
    end_position = position + RECORD_PREFIX.size + length
    if end_position > file_size:
        raise _Invalid(f"incomplete record at byte {position}: needs {length} bytes")
    rest = file.read(rest_bytes)
    if len(rest) < rest_bytes:
        raise _Invalid(f"incomplete record at byte {position}")
    fixed = head[RECORD_PREFIX.size :]
    if crc32c.crc32c(rest, crc32c.crc32c(fixed)) != stored_crc:
        raise _Invalid(f"crc mismatch at byte {position}")
    offset, appended_time_unix_nano, context_len = RECORD_FIXED_BODY.unpack(fixed)
    if context_len > rest_bytes:
        raise _Invalid(f"context length {context_len} out of bounds at byte {position}")
    if offset <= previous_offset:
        raise _Invalid(
            f"offset {offset} not above {previous_offset} at byte {position}"
        )
    view = memoryview(rest)
    return ScannedRecord(
        position=position,
        end_position=end_position,
        offset=offset,
        appended_time_unix_nano=appended_time_unix_nano,
        context_json=bytes(view[:context_len]),
        payload=bytes(view[context_len:]),
    )


def _resync(
    file: BinaryIO,
    search_from: int,
    file_size: int,
    sync_marker: bytes,
    previous_offset: int,
    max_record_bytes: int,
) -> ScannedRecord | None:
    """The first valid record starting at or after ``search_from``, or None."""
    overlap = len(sync_marker) - 1
    chunk_start = search_from
    while chunk_start < file_size:
        file.seek(chunk_start)
        chunk = file.read(min(_SEARCH_CHUNK_BYTES, file_size - chunk_start))
        if not chunk:
            return None
        index = chunk.find(sync_marker)
        while index != -1:
            candidate = chunk_start + index
            try:
                return _read_record(
                    file,
                    candidate,
                    file_size,
                    sync_marker,
                    previous_offset,
                    max_record_bytes,
                )
            except _Invalid:
                index = chunk.find(sync_marker, index + 1)
        if chunk_start + len(chunk) >= file_size:
            return None
        # Step back so a marker split across two chunks is still found.
        chunk_start += max(len(chunk) - overlap, 1)
    return None


def open_for_scan(path: str | os.PathLike[str]) -> BinaryIO:
    # A large buffer turns the two small reads per record into one read per megabyte.
    return open(path, "rb", buffering=_SEARCH_CHUNK_BYTES)
