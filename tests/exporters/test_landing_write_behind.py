"""Write-behind: export() stages, flush() writes. Nothing staged is in the log (or visible
to readers) before flush; a failed write is reported by the next flush, so no push staged
with it is acknowledged; rolls inside a batch keep every record in its own segment."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from exporters.context import TelemetryContext
from exporters.landing import LandingError, LandingLog, LandingOptions, LandingReader

MakeContext = Callable[..., TelemetryContext]


def read_all(directory: Path) -> list[tuple[int, int, bytes]]:
    return [
        (r.offset, r.context.correlation_id, bytes(r.payload))
        for r in LandingReader(directory).read()
    ]


def test_staged_records_are_written_by_flush_only(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path, LandingOptions(write_behind=True), housekeeping=False
    ) as log:
        for i in range(5):
            assert log.export(make_context(i), b"p%d" % i).ok
        assert log.needs_flush and log.next_offset == 0
        assert read_all(tmp_path) == []
        log.flush()
        assert not log.needs_flush and log.next_offset == 5
        assert read_all(tmp_path) == [(i, i, b"p%d" % i) for i in range(5)]
        log.flush()  # nothing staged: nothing to do
        assert log.stats().records_appended == 5


def test_append_writes_what_was_staged_first(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path, LandingOptions(write_behind=True), housekeeping=False
    ) as log:
        log.stage(make_context(0), b"staged")
        assert log.append(make_context(1), b"appended") == 1
        assert not log.needs_flush
        assert read_all(tmp_path) == [(0, 0, b"staged"), (1, 1, b"appended")]


def test_rolls_inside_a_staged_batch_keep_records_in_their_segments(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path,
        LandingOptions(write_behind=True, segment_max_bytes=1500),
        housekeeping=False,
    ) as log:
        for i in range(20):
            log.stage(make_context(i), bytes([i]) * 300)
        log.flush()
        assert log.stats().segments_rolled >= 5
    assert read_all(tmp_path) == [(i, i, bytes([i]) * 300) for i in range(20)]
    reader = LandingReader(tmp_path)
    assert [s.sealed for s in reader.segments()][:-1] == [True] * (
        len(reader.segments()) - 1
    )


def test_close_writes_staged_records(tmp_path: Path, make_context: MakeContext) -> None:
    log = LandingLog(tmp_path, LandingOptions(write_behind=True), housekeeping=False)
    log.stage(make_context(7), b"last")
    log.close()
    assert read_all(tmp_path) == [(0, 7, b"last")]


def _failing_writev(fd: int, buffers: object) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failed_flush_raises_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path, LandingOptions(write_behind=True), housekeeping=False
    ) as log:
        for i in range(3):
            log.stage(make_context(i), b"lost")
        with monkeypatch.context() as patch:
            patch.setattr(os, "writev", _failing_writev)
            with pytest.raises(LandingError, match="No space left"):
                log.flush()
        assert log.next_offset == 0 and not log.needs_flush
        assert log.stats().export_failures == 3
        # The disk has room again: later pushes take the offsets the failed ones had.
        log.stage(make_context(10), b"kept")
        log.flush()
    assert read_all(tmp_path) == [(0, 10, b"kept")]


def test_a_roll_failing_inside_flush_fails_the_whole_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_context: MakeContext
) -> None:
    # The second record does not fit the segment: flushing rolls, which first writes the
    # first record. That write fails: no record of the batch may be acknowledged.
    with LandingLog(
        tmp_path,
        LandingOptions(write_behind=True, segment_max_bytes=800),
        housekeeping=False,
    ) as log:
        log.stage(make_context(0), b"a" * 300)
        log.stage(make_context(1), b"b" * 300)
        log.stage(make_context(2), b"c" * 10)
        with monkeypatch.context() as patch:
            patch.setattr(os, "writev", _failing_writev)
            with pytest.raises(LandingError, match="No space left"):
                log.flush()
        assert not log.needs_flush and log.next_offset == 0
        log.stage(make_context(3), b"d")
        log.flush()  # the next batch is fine
    assert read_all(tmp_path) == [(0, 3, b"d")]


def test_an_oversized_payload_fails_its_own_export_only(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path,
        LandingOptions(write_behind=True, max_record_bytes=4096),
        housekeeping=False,
    ) as log:
        assert log.export(make_context(0), b"ok").ok
        result = log.export(make_context(1), b"x" * 5000)
        assert not result.ok and "exceeds max_record_bytes 4096" in (result.error or "")
        log.flush()
    assert read_all(tmp_path) == [(0, 0, b"ok")]


@pytest.mark.parametrize("records", [1, 299, 300, 301, 700])
def test_a_batch_larger_than_one_writev_lands_whole_and_checksummed(
    tmp_path: Path, make_context: MakeContext, records: int
) -> None:
    # The batch fits the segment, so flush stages it in its inlined loop (one writev per
    # 300 records); the reader checks every record's CRC and sync marker.
    with LandingLog(
        tmp_path, LandingOptions(write_behind=True), housekeeping=False
    ) as log:
        log.stage(
            make_context(10_000), b"staged before"
        )  # an earlier batch, already staged
        log.flush()
        for i in range(records):
            log.stage(make_context(i), b"r%d" % i)
        log.flush()
        assert log.next_offset == records + 1
        assert log.stats().segments_rolled == 0
    reader = LandingReader(tmp_path)
    landed = [
        (r.offset, r.context.correlation_id, bytes(r.payload)) for r in reader.read()
    ]
    assert landed == [(0, 10_000, b"staged before")] + [
        (i + 1, i, b"r%d" % i) for i in range(records)
    ]
    assert reader.corrupt_regions_skipped == 0


def test_the_flush_bound_counts_staged_records(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with pytest.raises(ValueError, match="write_behind_max_records"):
        LandingLog(
            tmp_path,
            LandingOptions(write_behind=True, write_behind_max_records=0),
            housekeeping=False,
        )
    with LandingLog(
        tmp_path,
        LandingOptions(write_behind=True, write_behind_max_records=3),
        housekeeping=False,
    ) as log:
        for i in range(3):
            assert not log.needs_flush_now
            assert log.export(make_context(i), b"p").ok
        assert log.needs_flush_now
        log.flush()
        assert not log.needs_flush and not log.needs_flush_now
