"""LandingReader: reads the landing log from any offset, while a writer appends.

Any number of readers, in any process, next to the one writer; they take no lock. A read
stops quietly at the end of the valid data of the newest segment: a record still being
written, or a torn tail the next writer will truncate. Damage inside a segment is skipped
(the reader searches for the segment's sync marker to find the next record), logged once
per place and counted; it never raises.

One LandingReader per thread (it caches what it learnt about segments, unlocked).

Reading from an offset does not rescan a segment from its start each time: the reader
remembers, per segment, where its valid data ends and one record position per
``_INDEX_INTERVAL_BYTES``, so a consumer tailing the log reads only new bytes.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from exporters.context import TelemetryContext
from exporters.landing.format import (
    DEFAULT_MAX_RECORD_BYTES,
    SEGMENT_HEADER_BYTES,
    SegmentHeaderError,
    decode_context,
    decode_segment_header,
)
from exporters.landing.layout import SegmentInfo, list_segments
from exporters.landing.scan import (
    CorruptRegion,
    ScanItem,
    ScannedRecord,
    open_for_scan,
    scan_records,
)

__all__ = ["LandingReader", "LandingRecord"]

_log = logging.getLogger("exporters.landing")

_INDEX_INTERVAL_BYTES: Final = 1024 * 1024
_HEADER_DAMAGE: Final = -1  # key of a damaged segment header in _SegmentState.reported


@dataclasses.dataclass(frozen=True, slots=True)
class LandingRecord:
    offset: int
    context: TelemetryContext
    payload: bytes  # the decompressed OTLP MetricsData protobuf
    appended_time_unix_nano: int


@dataclasses.dataclass(slots=True)
class _SegmentState:
    """What this reader learnt about one segment file (identified by inode)."""

    inode: tuple[int, int]
    base_offset: int
    sync_marker: bytes | None  # None: the header is damaged
    # (offset, position) of some valid records, ascending: where to start a read.
    index_offsets: list[int] = dataclasses.field(default_factory=list)
    index_positions: list[int] = dataclasses.field(default_factory=list)
    # End of the valid data seen so far and the offset that comes after it.
    valid_end_position: int = SEGMENT_HEADER_BYTES
    valid_end_next_offset: int = 0
    reported: set[int] = dataclasses.field(default_factory=set)

    def start_for(self, from_offset: int) -> tuple[int, int]:
        """(position, previous offset) to scan from to reach ``from_offset``."""
        if from_offset >= self.valid_end_next_offset:
            return self.valid_end_position, self.valid_end_next_offset - 1
        slot = bisect.bisect_right(self.index_offsets, from_offset) - 1
        if slot < 0:
            return SEGMENT_HEADER_BYTES, self.base_offset - 1
        return self.index_positions[slot], self.index_offsets[slot] - 1

    def note(self, record: ScannedRecord) -> None:
        if (
            not self.index_positions
            or record.position - self.index_positions[-1] >= _INDEX_INTERVAL_BYTES
        ):
            self.index_offsets.append(record.offset)
            self.index_positions.append(record.position)
        if record.end_position > self.valid_end_position:
            self.valid_end_position = record.end_position
            self.valid_end_next_offset = record.offset + 1


class LandingReader:
    def __init__(
        self, directory: Path, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    ):
        self.directory = Path(directory)
        self._max_record_bytes = max_record_bytes
        self._states: dict[int, _SegmentState] = {}
        self._damaged_places = 0

    @property
    def corrupt_regions_skipped(self) -> int:
        """Places with damage this reader skipped (each counted once)."""
        return self._damaged_places

    def segments(self) -> list[SegmentInfo]:
        return list_segments(self.directory)

    def read(
        self,
        from_offset: int = 0,
        max_records: int | None = None,
        max_bytes: int | None = None,
    ) -> Iterator[LandingRecord]:
        """Records with offset >= ``from_offset`` in offset order, up to ``max_records``
        and ``max_bytes`` (payload bytes; the first record is returned even if
        larger, as Kafka's fetch does, so a consumer always progresses)."""
        if max_records is not None and max_records <= 0:
            return
        segments = self._current_segments()
        first = 0
        for index, segment in enumerate(segments):
            if segment.base_offset <= from_offset:
                first = index
        records = 0
        total_bytes = 0
        for segment in segments[first:]:
            if (
                segment.next_base_offset is not None
                and segment.next_base_offset <= from_offset
            ):
                continue
            for record in self._read_segment(segment, from_offset):
                size = len(record.payload)
                if (
                    max_bytes is not None
                    and records > 0
                    and total_bytes + size > max_bytes
                ):
                    return
                yield record
                records += 1
                total_bytes += size
                if max_records is not None and records >= max_records:
                    return

    def end_offset(self) -> int:
        """The next offset the writer will use, as far as the bytes on disk show."""
        segments = self._current_segments()
        if not segments:
            return 0
        newest = segments[-1]
        with self._open(newest) as opened:
            if opened is None:
                return newest.base_offset
            _, state, _ = opened
            for _item in self._scan(opened, state.valid_end_next_offset):
                pass  # the scan notes each record's end in the state
            return state.valid_end_next_offset

    # ------------------------------------------------------------------ internals

    def _current_segments(self) -> list[SegmentInfo]:
        segments = list_segments(self.directory)
        live = {segment.base_offset for segment in segments}
        for base in [base for base in self._states if base not in live]:
            del self._states[base]  # deleted by retention
        return segments

    def _read_segment(
        self, segment: SegmentInfo, from_offset: int
    ) -> Iterator[LandingRecord]:
        with self._open(segment) as opened:
            if opened is None:
                return
            _, state, _ = opened
            for item in self._scan(opened, from_offset):
                if isinstance(item, ScannedRecord):
                    if item.offset < from_offset:
                        continue
                    try:
                        context = decode_context(item.context_json)
                    except (ValueError, TypeError) as error:
                        self._report(
                            state,
                            segment,
                            item.position,
                            f"unreadable context of offset {item.offset}: {error}",
                        )
                        continue
                    yield LandingRecord(
                        item.offset, context, item.payload, item.appended_time_unix_nano
                    )
                elif isinstance(item, CorruptRegion):
                    self._report(
                        state,
                        segment,
                        item.position,
                        f"{item.reason}; skipped to byte {item.end_position}",
                    )
                elif not item.clean and segment.sealed:
                    # The newest segment may have a record in flight; a sealed one is done.
                    self._report(
                        state,
                        segment,
                        item.position,
                        f"{item.reason}; {item.file_size - item.position} bytes "
                        "unreadable at the end of a sealed segment",
                    )

    def _scan(
        self, opened: tuple[BinaryIO, _SegmentState, int], from_offset: int
    ) -> Iterator[ScanItem]:
        """An opened segment's items from the last record its state knows before
        ``from_offset``, each record noted in the state; none when its header is damaged
        (no sync marker to scan by: the state stays at the segment's base offset)."""
        file, state, file_size = opened
        if state.sync_marker is None:
            return
        position, previous = state.start_for(from_offset)
        for item in scan_records(
            file,
            sync_marker=state.sync_marker,
            start_position=position,
            previous_offset=previous,
            file_size=file_size,
            max_record_bytes=self._max_record_bytes,
        ):
            if isinstance(item, ScannedRecord):
                state.note(item)
            yield item

    def _open(self, segment: SegmentInfo) -> _OpenSegment:
        return _OpenSegment(self, segment)

    def _state_for(self, segment: SegmentInfo, file: BinaryIO) -> _SegmentState:
        stat = os.fstat(file.fileno())
        inode = (stat.st_dev, stat.st_ino)
        state = self._states.get(segment.base_offset)
        if state is not None and state.inode == inode:
            return state
        state = _SegmentState(
            inode, segment.base_offset, None, valid_end_next_offset=segment.base_offset
        )
        file.seek(0)
        try:
            header = decode_segment_header(file.read(SEGMENT_HEADER_BYTES))
            if header.base_offset != segment.base_offset:
                raise SegmentHeaderError(
                    f"header base offset {header.base_offset} does not match the file name"
                )
            state.sync_marker = header.sync_marker
        except SegmentHeaderError as error:
            self._report(state, segment, _HEADER_DAMAGE, f"segment skipped: {error}")
        self._states[segment.base_offset] = state
        return state

    def _report(
        self, state: _SegmentState, segment: SegmentInfo, position: int, what: str
    ) -> None:
        if position in state.reported:
            return
        state.reported.add(position)
        self._damaged_places += 1
        where = "header" if position == _HEADER_DAMAGE else f"byte {position}"
        _log.warning(
            "landing log %s: damage in segment %s at %s: %s",
            self.directory,
            segment.path.name,
            where,
            what,
        )


class _OpenSegment:
    """Context manager: (file, state, file size at open) or None if retention deleted it."""

    def __init__(self, reader: LandingReader, segment: SegmentInfo) -> None:
        self._reader = reader
        self._segment = segment
        self._file: BinaryIO | None = None

    def __enter__(self) -> tuple[BinaryIO, _SegmentState, int] | None:
        try:
            self._file = open_for_scan(self._segment.path)
        except FileNotFoundError:
            return None
        state = self._reader._state_for(self._segment, self._file)
        return self._file, state, os.fstat(self._file.fileno()).st_size

    def __exit__(self, *exc_info: object) -> None:
        if self._file is not None:
            self._file.close()
