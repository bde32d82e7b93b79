"""Write-behind: export() stages, flush() writes. Nothing staged is in the log (or visible
to readers) before flush; a failed write is reported by the next flush, so no push staged
with it is acknowledged; rolls inside a batch keep every record in its own segment."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from conftest import telemetry_context

from exporters.landing import LandingError, LandingLog, LandingReader


def read_all(directory: Path) -> list[tuple[int, int, bytes]]:
    return [
        (r.offset, r.context.correlation_id, bytes(r.payload))
        for r in LandingReader(directory).read()
    ]


def test_staged_records_are_written_by_flush_only(tmp_path: Path) -> None:
    with LandingLog(tmp_path, write_behind=True, housekeeping=False) as log:
        for i in range(5):
            assert log.export(telemetry_context(i), b"p%d" % i).ok
        assert log.needs_flush and log.next_offset == 0
        assert read_all(tmp_path) == []
        log.flush()
        assert not log.needs_flush and log.next_offset == 5
        assert read_all(tmp_path) == [(i, i, b"p%d" % i) for i in range(5)]
        log.flush()  # nothing staged: nothing to do
        assert log.stats().records_appended == 5


def test_append_writes_what_was_staged_first(tmp_path: Path) -> None:
    with LandingLog(tmp_path, write_behind=True, housekeeping=False) as log:
        assert log.stage(telemetry_context(0), b"staged") == 0
        assert log.append(telemetry_context(1), b"appended") == 1
        assert not log.needs_flush
        assert read_all(tmp_path) == [(0, 0, b"staged"), (1, 1, b"appended")]


def test_rolls_inside_a_staged_batch_keep_records_in_their_segments(tmp_path: Path) -> None:
    with LandingLog(
        tmp_path, write_behind=True, housekeeping=False, segment_max_bytes=1500
    ) as log:
        for i in range(20):
            log.stage(telemetry_context(i), bytes([i]) * 300)
        log.flush()
        assert log.stats().segments_rolled >= 5
    assert read_all(tmp_path) == [(i, i, bytes([i]) * 300) for i in range(20)]
    reader = LandingReader(tmp_path)
    assert [s.sealed for s in reader.segments()][:-1] == [True] * (len(reader.segments()) - 1)


def test_close_writes_staged_records(tmp_path: Path) -> None:
    log = LandingLog(tmp_path, write_behind=True, housekeeping=False)
    log.stage(telemetry_context(7), b"last")
    log.close()
    assert read_all(tmp_path) == [(0, 7, b"last")]


def _failing_writev(fd: int, buffers: object) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failed_flush_raises_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LandingLog(tmp_path, write_behind=True, housekeeping=False) as log:
        for i in range(3):
            log.stage(telemetry_context(i), b"lost")
        with monkeypatch.context() as patch:
            patch.setattr(os, "writev", _failing_writev)
            with pytest.raises(LandingError, match="No space left"):
                log.flush()
        assert log.next_offset == 0 and not log.needs_flush
        assert log.stats().export_failures == 3
        # The disk has room again: later pushes take the offsets the failed ones had.
        log.stage(telemetry_context(10), b"kept")
        log.flush()
    assert read_all(tmp_path) == [(0, 10, b"kept")]


def test_a_write_failing_inside_stage_fails_the_next_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second record does not fit the segment: staging it rolls, which writes the
    # first. That write fails: the first push was answered "ok" in the same batch, so the
    # flush before the batch's answers must fail too, and so must anything staged after.
    with LandingLog(
        tmp_path, write_behind=True, housekeeping=False, segment_max_bytes=800
    ) as log:
        log.stage(telemetry_context(0), b"a" * 300)
        with monkeypatch.context() as patch:
            patch.setattr(os, "writev", _failing_writev)
            result = log.export(telemetry_context(1), b"b" * 300)
        assert not result.ok and "No space left" in (result.error or "")
        log.stage(telemetry_context(2), b"c" * 10)  # same batch, after the failure
        assert log.needs_flush
        with pytest.raises(LandingError):
            log.flush()
        assert not log.needs_flush
        log.stage(telemetry_context(3), b"d")
        log.flush()  # the next batch is fine
    assert read_all(tmp_path) == [(0, 3, b"d")]
