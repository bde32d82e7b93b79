"""Segments: rolling by size and by age (injected clock), reading from any offset, limits,
and a reader running while a writer appends."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from clock.testing import FakeClock
from exporters.context import TelemetryContext
from exporters.landing import LandingLog, LandingOptions, LandingReader
from exporters.landing.format import (
    RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES,
    encode_context,
)
from exporters.landing.layout import segment_path

MakeContext = Callable[..., TelemetryContext]
NS_PER_MS = 1_000_000


def record_size(context: TelemetryContext, payload: bytes) -> int:
    return RECORD_HEADER_BYTES + len(encode_context(context)) + len(payload)


def test_rolls_by_size_at_record_boundaries(
    tmp_path: Path, make_context: MakeContext
) -> None:
    context = make_context(0)
    payload = b"p" * 100
    size = record_size(context, payload)
    # Room for exactly three records after the header.
    segment_max_bytes = SEGMENT_HEADER_BYTES + 3 * size
    with LandingLog(
        tmp_path,
        LandingOptions(segment_max_bytes=segment_max_bytes),
        housekeeping=False,
    ) as log:
        for _ in range(10):
            log.append(context, payload)
        assert log.stats().segments_rolled == 3
    segments = LandingReader(tmp_path).segments()
    assert [s.base_offset for s in segments] == [0, 3, 6, 9]
    assert [s.sealed for s in segments] == [True, True, True, False]
    assert [s.next_base_offset for s in segments] == [3, 6, 9, None]
    assert all(s.size_bytes == segment_max_bytes for s in segments[:3])
    assert segments[0].path == segment_path(tmp_path, 0)
    assert segments[0].path.name == "00000000000000000000.log"


def test_a_record_larger_than_a_segment_gets_a_segment_of_its_own(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path, LandingOptions(segment_max_bytes=1000), housekeeping=False
    ) as log:
        log.append(make_context(0), b"small")
        log.append(make_context(1), b"x" * 5000)
        log.append(make_context(2), b"small")
    assert [s.base_offset for s in LandingReader(tmp_path).segments()] == [0, 1, 2]
    assert [len(r.payload) for r in LandingReader(tmp_path).read(0)] == [5, 5000, 5]


def test_rolls_by_age_with_an_injected_clock(
    tmp_path: Path, make_context: MakeContext
) -> None:
    clock = FakeClock(wall_ns=1_763_700_000_000 * NS_PER_MS)
    with LandingLog(
        tmp_path,
        LandingOptions(segment_max_age_ms=10_000),
        clock=clock,
        housekeeping=False,
    ) as log:
        assert not log.maybe_roll(
            clock.time_ns() // NS_PER_MS + 60_000
        )  # an empty segment never rolls
        log.append(make_context(0), b"a")
        clock.advance(9_999)
        assert not log.maybe_roll(clock.time_ns() // NS_PER_MS)
        log.append(make_context(1), b"b")  # still the same segment
        clock.advance(1)
        assert log.maybe_roll(
            clock.time_ns() // NS_PER_MS
        )  # first record is now 10 s old
        assert not log.maybe_roll(clock.time_ns() // NS_PER_MS)
        log.append(make_context(2), b"c")
        clock.advance(10_000)
        log.append(make_context(3), b"d")  # append itself rolls an aged segment
    segments = LandingReader(tmp_path).segments()
    assert [s.base_offset for s in segments] == [0, 2, 3]
    # A sealed segment's mtime is its last record's appended time (retention uses it).
    records = {r.offset: r for r in LandingReader(tmp_path).read(0)}
    assert segments[0].modified_time_unix_nano == records[1].appended_time_unix_nano
    assert records[3].appended_time_unix_nano == clock.time_ns()


def test_age_survives_a_restart(tmp_path: Path, make_context: MakeContext) -> None:
    clock = FakeClock(wall_ns=1_763_700_000_000 * NS_PER_MS)
    with LandingLog(tmp_path, clock=clock, housekeeping=False) as log:
        log.append(make_context(0), b"a")
    clock.advance(10_000)
    with LandingLog(tmp_path, clock=clock, housekeeping=False) as log:
        assert log.maybe_roll(clock.time_ns() // NS_PER_MS)


@pytest.mark.parametrize("from_offset", [0, 1, 7, 8, 9, 23, 29, 30, 31, 1000])
def test_reads_from_any_offset(
    tmp_path: Path, make_context: MakeContext, from_offset: int
) -> None:
    with LandingLog(
        tmp_path, LandingOptions(segment_max_bytes=2500), housekeeping=False
    ) as log:
        for i in range(30):
            log.append(make_context(i), i.to_bytes(4, "big") * (i + 1))
    assert len(LandingReader(tmp_path).segments()) > 5
    records = list(LandingReader(tmp_path).read(from_offset))
    assert [r.offset for r in records] == list(range(from_offset, 30))
    for record in records:
        assert record.payload == record.offset.to_bytes(4, "big") * (record.offset + 1)
        assert record.context == make_context(record.offset)


def test_max_records_and_max_bytes(tmp_path: Path, make_context: MakeContext) -> None:
    with LandingLog(
        tmp_path, LandingOptions(segment_max_bytes=2000), housekeeping=False
    ) as log:
        for i in range(20):
            log.append(make_context(i), b"x" * 100)
    reader = LandingReader(tmp_path)
    assert [r.offset for r in reader.read(3, max_records=4)] == [3, 4, 5, 6]
    assert [r.offset for r in reader.read(3, max_bytes=350)] == [3, 4, 5]
    # The first record comes back even when larger than max_bytes: consumers progress.
    assert [r.offset for r in reader.read(3, max_bytes=10)] == [3]
    assert list(reader.read(3, max_records=0)) == []


def test_reading_inside_a_large_segment_uses_the_sparse_index(
    tmp_path: Path, make_context: MakeContext
) -> None:
    payload = bytes(range(256)) * 256  # 64 KiB: 80 records make a 5 MiB segment
    with LandingLog(tmp_path, housekeeping=False) as log:
        for i in range(80):
            log.append(make_context(i), payload + i.to_bytes(2, "big"))
    reader = LandingReader(tmp_path)
    assert [r.offset for r in reader.read(0)] == list(range(80))
    for start in (79, 33, 0, 64, 65):
        first = next(reader.read(start))
        assert first.offset == start and first.payload[-2:] == start.to_bytes(2, "big")
    fresh = LandingReader(tmp_path)
    assert next(fresh.read(50)).offset == 50


def test_end_offset(tmp_path: Path, make_context: MakeContext) -> None:
    reader = LandingReader(tmp_path)
    assert reader.end_offset() == 0
    with LandingLog(
        tmp_path, LandingOptions(segment_max_bytes=1500), housekeeping=False
    ) as log:
        assert reader.end_offset() == 0
        for i in range(7):
            log.append(make_context(i), b"x" * 300)
            assert reader.end_offset() == i + 1


def test_reader_tails_a_writer_in_another_thread(
    tmp_path: Path, make_context: MakeContext
) -> None:
    """The reader polls while the writer appends and rolls: it sees every offset once, in
    order, intact, and never raises on a record caught half written."""
    total = 3000
    contexts = [make_context(i) for i in range(50)]
    log = LandingLog(
        tmp_path,
        LandingOptions(segment_max_bytes=64 * 1024, fsync="never"),
        housekeeping=False,
    )
    done = threading.Event()

    def write() -> None:
        try:
            for i in range(total):
                log.append(contexts[i % 50], i.to_bytes(4, "big") * (1 + i % 300))
        finally:
            done.set()

    writer = threading.Thread(target=write)
    writer.start()
    reader = LandingReader(tmp_path)
    seen: list[int] = []
    next_offset = 0
    while True:
        finished = done.is_set()
        for record in reader.read(next_offset, max_records=500):
            assert record.payload == record.offset.to_bytes(4, "big") * (
                1 + record.offset % 300
            )
            assert record.context == contexts[record.offset % 50]
            seen.append(record.offset)
            next_offset = record.offset + 1
        if finished and next_offset == total:
            break
        assert not (
            finished and next_offset < total and reader.end_offset() == next_offset
        )
    writer.join()
    log.close()
    assert seen == list(range(total))
    assert reader.corrupt_regions_skipped == 0
    assert len(reader.segments()) > 10
