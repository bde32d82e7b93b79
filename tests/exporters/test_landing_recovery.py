"""Damage: torn tails are truncated on open, damage inside a segment is skipped and
counted, absurd lengths are not allocated, and bytes inside a payload never pose as a record."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporters.context import TelemetryContext
from exporters.landing import LandingLog, LandingOptions, LandingReader
from exporters.landing.format import (
    RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES,
    SegmentHeader,
    decode_segment_header,
    encode_context,
    encode_record_head,
    encode_segment_header,
)
from exporters.landing.layout import segment_path
from exporters.landing.scan import ScannedRecord, open_for_scan, scan_records

MakeContext = Callable[..., TelemetryContext]


def write_records(
    directory: Path, make_context: MakeContext, count: int, **options: Any
) -> None:
    with LandingLog(directory, LandingOptions(**options), housekeeping=False) as log:
        for i in range(count):
            log.append(make_context(i), payload_for(i))


def payload_for(offset: int) -> bytes:
    return f"payload-{offset}-".encode() * (1 + offset % 7)


def record_spans(path: Path) -> list[tuple[int, int]]:
    """(start, end) byte positions of the valid records of a segment file."""
    with open_for_scan(path) as file:
        header = decode_segment_header(file.read(SEGMENT_HEADER_BYTES))
        return [
            (item.position, item.end_position)
            for item in scan_records(
                file,
                sync_marker=header.sync_marker,
                start_position=SEGMENT_HEADER_BYTES,
                previous_offset=header.base_offset - 1,
                file_size=path.stat().st_size,
                max_record_bytes=1 << 20,
            )
            if isinstance(item, ScannedRecord)
        ]


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        value = file.read(1)[0]
        file.seek(position)
        file.write(bytes([value ^ 0xFF]))


def assert_intact(directory: Path, offsets: list[int]) -> None:
    records = list(LandingReader(directory).read(0))
    assert [r.offset for r in records] == offsets
    for record in records:
        assert record.payload == payload_for(record.offset)


@pytest.mark.parametrize("keep_bytes", [1, 16, 17, 44, 45, 60, -1])
def test_a_partial_last_record_is_truncated_on_open(
    tmp_path: Path, make_context: MakeContext, keep_bytes: int
) -> None:
    write_records(tmp_path, make_context, 10)
    path = segment_path(tmp_path, 0)
    start, end = record_spans(path)[-1]
    cut = end - 1 if keep_bytes == -1 else start + keep_bytes
    os.truncate(path, cut)
    # Readers stop quietly before the torn record (a writer might still be writing it).
    reader = LandingReader(tmp_path)
    assert_intact(tmp_path, list(range(9)))
    assert reader.end_offset() == 9 and reader.corrupt_regions_skipped == 0
    with LandingLog(tmp_path, housekeeping=False) as log:
        assert log.stats().recovered_truncated_bytes == cut - start
        assert path.stat().st_size == start
        assert log.next_offset == 9
        log.append(make_context(9), payload_for(9))
    assert_intact(tmp_path, list(range(10)))


def test_garbage_after_the_last_record_is_truncated(
    tmp_path: Path, make_context: MakeContext
) -> None:
    write_records(tmp_path, make_context, 5)
    path = segment_path(tmp_path, 0)
    size = path.stat().st_size
    with open(path, "ab") as file:
        file.write(os.urandom(3000))
    with LandingLog(tmp_path, housekeeping=False) as log:
        assert path.stat().st_size == size
        assert log.append(make_context(5), payload_for(5)) == 5
    assert_intact(tmp_path, list(range(6)))


def test_a_bad_crc_in_the_last_record_is_a_torn_tail(
    tmp_path: Path, make_context: MakeContext
) -> None:
    write_records(tmp_path, make_context, 5)
    path = segment_path(tmp_path, 0)
    start, end = record_spans(path)[-1]
    flip_byte(path, end - 3)
    with LandingLog(tmp_path, housekeeping=False) as log:
        assert log.next_offset == 4
        assert path.stat().st_size == start


def test_damage_inside_a_sealed_segment_is_skipped_logged_and_counted(
    tmp_path: Path, make_context: MakeContext, caplog: pytest.LogCaptureFixture
) -> None:
    write_records(tmp_path, make_context, 30, segment_max_bytes=4000)
    sealed = LandingReader(tmp_path).segments()[1]
    assert sealed.sealed
    spans = record_spans(sealed.path)
    flip_byte(
        sealed.path, spans[1][0] + 30
    )  # inside the crc-covered part of the 2nd record
    damaged_offset = sealed.base_offset + 1
    reader = LandingReader(tmp_path)
    with caplog.at_level(logging.WARNING, logger="exporters.landing"):
        offsets = [r.offset for r in reader.read(0)]
    assert offsets == [o for o in range(30) if o != damaged_offset]
    assert reader.corrupt_regions_skipped == 1
    assert f"damage in segment {sealed.path.name} at byte {spans[1][0]}" in caplog.text
    assert "crc mismatch" in caplog.text
    # Reading again reports nothing new; reading from the damaged offset goes to the next.
    list(reader.read(0))
    assert reader.corrupt_regions_skipped == 1
    assert next(reader.read(damaged_offset)).offset == damaged_offset + 1


def test_damage_inside_the_active_segment_keeps_the_records_after_it(
    tmp_path: Path, make_context: MakeContext
) -> None:
    write_records(tmp_path, make_context, 10)
    path = segment_path(tmp_path, 0)
    start, _ = record_spans(path)[3]
    flip_byte(path, start)  # the sync marker of offset 3
    with LandingLog(tmp_path, housekeeping=False) as log:
        assert log.stats().recovered_corrupt_regions == 1
        assert log.stats().recovered_truncated_bytes == 0
        assert log.next_offset == 10
        log.append(make_context(10), payload_for(10))
    assert_intact(tmp_path, [o for o in range(11) if o != 3])


def test_a_huge_length_field_is_damage_not_an_allocation(
    tmp_path: Path, make_context: MakeContext
) -> None:
    write_records(tmp_path, make_context, 6, segment_max_bytes=2000)
    sealed = LandingReader(tmp_path).segments()[0]
    start, _ = record_spans(sealed.path)[0]
    with open(sealed.path, "r+b") as file:
        file.seek(start + 17)  # the length field
        file.write(b"\xff\xff\xff\xf0")
    reader = LandingReader(tmp_path)
    offsets = [r.offset for r in reader.read(0)]
    assert 0 not in offsets and offsets == sorted(offsets) and offsets[-1] == 5
    assert reader.corrupt_regions_skipped == 1


def test_a_segment_with_a_damaged_header_is_skipped(
    tmp_path: Path, make_context: MakeContext
) -> None:
    write_records(tmp_path, make_context, 12, segment_max_bytes=2000)
    segments = LandingReader(tmp_path).segments()
    flip_byte(segments[1].path, 20)  # inside the sync marker: the header crc fails
    reader = LandingReader(tmp_path)
    lost = set(range(segments[1].base_offset, segments[2].base_offset))
    assert [r.offset for r in reader.read(0)] == [o for o in range(12) if o not in lost]
    assert reader.corrupt_regions_skipped == 1


def test_a_damaged_active_header_moves_writing_to_a_safe_new_segment(
    tmp_path: Path, make_context: MakeContext
) -> None:
    write_records(tmp_path, make_context, 4)
    path = segment_path(tmp_path, 0)
    flip_byte(path, 0)
    with LandingLog(tmp_path, housekeeping=False) as log:
        offset = log.append(make_context(99), b"after")
    # 4 records cannot have used more offsets than size / 45 + 1.
    assert offset == path.stat().st_size // RECORD_HEADER_BYTES + 1
    assert [r.offset for r in LandingReader(tmp_path).read(0)] == [offset]


def test_a_record_hidden_in_a_payload_is_never_taken_for_a_real_one(
    tmp_path: Path, make_context: MakeContext
) -> None:
    """A client controls its payload bytes. Even a complete, CRC-valid record of another
    segment (another sync marker) inside a payload must not surface when the record that
    carries it is torn: resynchronisation needs this segment's secret marker."""
    forged_marker = b"\x01" * 16
    forged_context = encode_context(make_context(666, client_id="impostor"))
    forged_payload = b"forged"
    forged = (
        encode_record_head(forged_marker, 5, 0, forged_context, forged_payload)
        + forged_context
        + forged_payload
    )
    carrier = encode_segment_header(SegmentHeader(0, forged_marker)) + forged * 3
    with LandingLog(tmp_path, housekeeping=False) as log:
        for i in range(5):
            log.append(make_context(i), payload_for(i))
        log.append(make_context(5), carrier)
    path = segment_path(tmp_path, 0)
    os.truncate(path, path.stat().st_size - 1)  # tear the carrier
    assert_intact(tmp_path, list(range(5)))
    with LandingLog(tmp_path, housekeeping=False) as log:
        assert log.next_offset == 5
    assert_intact(tmp_path, list(range(5)))


def test_stale_temporary_segment_is_removed(
    tmp_path: Path, make_context: MakeContext
) -> None:
    write_records(tmp_path, make_context, 2)
    stale = tmp_path / "00000000000000000002.log.tmp"
    stale.write_bytes(b"KTC")
    with LandingLog(tmp_path, housekeeping=False) as log:
        assert log.next_offset == 2
    assert not stale.exists()


def test_a_torn_tail_inside_a_sealed_segment_is_reported_and_skipped(
    tmp_path: Path, make_context: MakeContext
) -> None:
    """Power loss under fsync=never/interval can leave a sealed segment short."""
    write_records(tmp_path, make_context, 20, segment_max_bytes=3000)
    sealed = LandingReader(tmp_path).segments()[0]
    _, end = record_spans(sealed.path)[-1]
    os.truncate(sealed.path, end - 5)
    reader = LandingReader(tmp_path)
    last_of_first = sealed.next_base_offset - 1 if sealed.next_base_offset else -1
    assert [r.offset for r in reader.read(0)] == [
        o for o in range(20) if o != last_of_first
    ]
    assert reader.corrupt_regions_skipped == 1


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_random_damage_never_raises_and_never_invents_records(
    tmp_path_factory: pytest.TempPathFactory,
    make_context: MakeContext,
    data: st.DataObject,
) -> None:
    """Whatever bytes are overwritten or cut, a reader returns a subset of what was written,
    each record intact, in order; and a writer reopens and carries on."""
    directory = tmp_path_factory.mktemp("damage")
    write_records(directory, make_context, 25, segment_max_bytes=6000)
    segments = LandingReader(directory).segments()
    for _ in range(data.draw(st.integers(1, 4), label="damages")):
        victim = data.draw(st.sampled_from(segments), label="segment")
        size = victim.path.stat().st_size
        if size == 0:
            continue
        position = data.draw(st.integers(0, size - 1), label="position")
        if data.draw(st.booleans(), label="truncate"):
            os.truncate(victim.path, position)
        else:
            junk = data.draw(st.binary(min_size=1, max_size=64), label="junk")
            with open(victim.path, "r+b") as file:
                file.seek(position)
                file.write(junk)
    records = list(LandingReader(directory).read(0))
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))
    for record in records:
        assert 0 <= record.offset < 25
        assert record.payload == payload_for(record.offset)
        assert record.context == make_context(record.offset)
    with LandingLog(directory, housekeeping=False) as log:
        new_offset = log.append(make_context(99), b"after damage")
    assert new_offset > max(offsets, default=-1)
    (after,) = LandingReader(directory).read(new_offset)
    assert after.payload == b"after damage"
