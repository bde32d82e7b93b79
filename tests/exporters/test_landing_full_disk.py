"""The landing log on a full or failing disk, at the log's level: a write that fails part-way
is cut back to the last whole record (readers never see a torn one), the log says it
cannot write until a write or a probe succeeds, and a failed fsync or cut-off is repaired
by ``probe`` reopening the segment as a restart would. Failures are injected at the
system-call level (``os.writev``, ``os.write``, ``os.fsync``, ``os.ftruncate``)."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from exporters.context import TelemetryContext
from exporters.landing import LandingError, LandingLog, LandingOptions, LandingReader

MakeContext = Callable[..., TelemetryContext]

_real_writev = os.writev


def torn_writev(error: int) -> Callable[[int, list[bytes]], int]:
    """Writes the first half of what it is given, then fails as a full (or failing) disk
    does on the rest: the file ends in the middle of a record."""

    def writev(fd: int, buffers: list[bytes]) -> int:
        data = b"".join(buffers)
        written = os.write(fd, data[: len(data) // 2])
        assert written == len(data) // 2
        raise OSError(error, os.strerror(error))

    return writev


def landed(directory: Path) -> list[tuple[int, bytes]]:
    reader = LandingReader(directory)
    records = [(r.offset, r.payload) for r in reader.read(0)]
    assert reader.corrupt_regions_skipped == 0
    return records


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO])
def test_a_torn_write_is_cut_back_and_the_next_write_carries_on(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_context: MakeContext,
    error: int,
) -> None:
    with LandingLog(tmp_path, LandingOptions(fsync="never"), housekeeping=False) as log:
        log.stage(make_context(0), b"kept-0")
        log.flush()
        size = log.stats().active_size_bytes
        for i in range(1, 4):
            log.stage(make_context(i), b"lost" * 100)
        with monkeypatch.context() as patch:
            patch.setattr(os, "writev", torn_writev(error))
            with pytest.raises(LandingError, match=os.strerror(error)):
                log.flush()
        # Nothing of the batch stays: the file ends at the last whole record.
        assert log.stats().active_size_bytes == size
        assert os.path.getsize(LandingReader(tmp_path).segments()[-1].path) == size
        assert landed(tmp_path) == [(0, b"kept-0")]
        assert (
            log.unwritable_reason is not None
            and os.strerror(error) in log.unwritable_reason
        )
        stats = log.stats()
        assert (stats.write_failures, stats.export_failures) == (1, 3)

        # The next write tries the disk again; it works, so the log writes again.
        log.stage(make_context(4), b"kept-1")
        log.flush()
        assert log.unwritable_reason is None
    assert landed(tmp_path) == [(0, b"kept-0"), (1, b"kept-1")]


def test_a_probe_finds_the_room_again_without_a_push(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_context: MakeContext
) -> None:
    def no_space(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    with LandingLog(tmp_path, LandingOptions(fsync="never"), housekeeping=False) as log:
        log.stage(make_context(0), b"x" * 10_000)
        with monkeypatch.context() as patch:
            patch.setattr(os, "writev", torn_writev(errno.ENOSPC))
            with pytest.raises(LandingError):
                log.flush()
            patch.setattr(os, "write", no_space)
            assert log.probe() is False  # still full: still not writable
            assert log.unwritable_reason is not None
        assert log.probe() is True  # room again
        assert log.unwritable_reason is None
        assert not (tmp_path / ".probe").exists()
        log.stage(make_context(1), b"after")
        log.flush()
    assert landed(tmp_path) == [(0, b"after")]


def test_a_failed_fsync_refuses_until_a_probe_reopens_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_context: MakeContext
) -> None:
    def eio(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with LandingLog(
        tmp_path, LandingOptions(fsync="always"), housekeeping=False
    ) as log:
        log.stage(make_context(0), b"durable")
        log.flush()
        log.stage(make_context(1), b"not durable")
        with monkeypatch.context() as patch:
            patch.setattr(os, "fsync", eio)
            with pytest.raises(LandingError, match="fsync failed"):
                log.flush()
            # After a failed fsync a second one may lie (the kernel may have dropped the
            # pages): nothing is written, however healthy the disk looks, until a reopen.
            assert log.export(
                make_context(2), b"refused"
            ).ok  # staged; the flush decides
            with pytest.raises(LandingError, match="unusable"):
                log.flush()
            assert log.probe() is False  # the reopen's own fsync fails too
        assert log.probe() is True
        assert log.unwritable_reason is None
        log.stage(make_context(3), b"after")
        log.flush()
    # The record whose fsync failed was written and may be there (it was answered as
    # refused, so the client sends it again: at least once); nothing is torn.
    assert landed(tmp_path) == [(0, b"durable"), (1, b"not durable"), (2, b"after")]


def test_a_failed_cut_back_is_repaired_by_the_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_context: MakeContext
) -> None:
    def cannot_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with LandingLog(tmp_path, LandingOptions(fsync="never"), housekeeping=False) as log:
        log.stage(make_context(0), b"kept")
        log.flush()
        log.stage(make_context(1), b"torn" * 200)
        with monkeypatch.context() as patch:
            patch.setattr(os, "writev", torn_writev(errno.EIO))
            patch.setattr(os, "ftruncate", cannot_truncate)
            with pytest.raises(LandingError):
                log.flush()
        # The torn half-record is still at the end of the active segment; a reader stops
        # before it (the end of the newest segment may be a record being written).
        assert landed(tmp_path) == [(0, b"kept")]
        assert log.probe() is True  # reopened: the torn tail is cut as at a restart
        assert log.stats().recovered_truncated_bytes > 0
        log.stage(make_context(2), b"after")
        log.flush()
    assert landed(tmp_path) == [(0, b"kept"), (1, b"after")]


def test_export_without_write_behind_reports_a_full_disk_as_retriable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_context: MakeContext
) -> None:
    options = LandingOptions(write_behind=False, max_record_bytes=4096)
    with LandingLog(tmp_path, options, housekeeping=False) as log:
        with monkeypatch.context() as patch:
            patch.setattr(os, "writev", torn_writev(errno.ENOSPC))
            full = log.export(make_context(0), b"x")
        assert not full.ok and full.retriable  # the collector answers 89
        too_large = log.export(make_context(1), b"x" * 5000)
        assert not too_large.ok and not too_large.retriable  # never fits: 87
        assert log.export(make_context(2), b"y").ok
    assert landed(tmp_path) == [(0, b"y")]
