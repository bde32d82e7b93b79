"""fsync policies, group commit, one writer per directory, and failing writes that lose
nothing already accepted."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from clock.testing import FakeClock
from exporters.context import TelemetryContext
from exporters.landing import (
    FsyncPolicy,
    LandingLog,
    LandingLogClosed,
    LandingLogLocked,
    LandingOptions,
    LandingReader,
    RecordTooLarge,
)
from tests.waiting import eventually_sync

MakeContext = Callable[..., TelemetryContext]
REPO_ROOT = Path(__file__).resolve().parents[2]


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """For a background thread's work (not a time window)."""
    eventually_sync(condition, timeout_s=timeout_s, what="the housekeeper's work")


def test_always_fsyncs_before_append_returns(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path, LandingOptions(fsync="always"), housekeeping=False
    ) as log:
        before = log.stats().fsyncs
        log.append(make_context(0), b"a")
        log.append(make_context(1), b"b")
        assert log.stats().fsyncs == before + 2


def test_append_many_is_one_group_commit(
    tmp_path: Path, make_context: MakeContext
) -> None:
    items = [(make_context(i), f"p{i}".encode()) for i in range(700)]  # > one writev
    with LandingLog(
        tmp_path, LandingOptions(fsync="always"), housekeeping=False
    ) as log:
        before = log.stats().fsyncs
        assert log.append_many(items) == list(range(700))
        assert log.stats().fsyncs == before + 1
        assert log.append_many([]) == []
    assert [(r.context, r.payload) for r in LandingReader(tmp_path).read(0)] == items


def test_append_many_rolls_inside_a_batch(
    tmp_path: Path, make_context: MakeContext
) -> None:
    items = [(make_context(i), b"z" * 200) for i in range(40)]
    with LandingLog(
        tmp_path,
        LandingOptions(segment_max_bytes=4000, fsync="always"),
        housekeeping=False,
    ) as log:
        log.append_many(items)
        rolled = log.stats().segments_rolled
    segments = LandingReader(tmp_path).segments()
    assert rolled == len(segments) - 1 > 3
    assert all(s.size_bytes <= 4000 for s in segments)
    assert [r.offset for r in LandingReader(tmp_path).read(0)] == list(range(40))


def test_append_many_checks_every_size_before_writing(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path, LandingOptions(max_record_bytes=1000), housekeeping=False
    ) as log:
        with pytest.raises(RecordTooLarge):
            log.append_many([(make_context(0), b"ok"), (make_context(1), b"x" * 1000)])
        assert log.next_offset == 0


def test_never_leaves_syncing_to_the_kernel(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path,
        LandingOptions(fsync="never", segment_max_bytes=2000),
        housekeeping=False,
    ) as log:
        for i in range(20):
            log.append(make_context(i), b"n" * 100)
        assert log.stats().segments_rolled > 0
        assert log.stats().fsyncs == 0
        log.sync()  # explicit sync works under every policy
        assert log.stats().fsyncs >= 1


def test_interval_fsyncs_in_the_background(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path,
        LandingOptions(fsync="interval", fsync_interval_ms=10, segment_max_bytes=2000),
    ) as log:
        assert log.fsync_policy is FsyncPolicy.INTERVAL
        for i in range(20):
            log.append(make_context(i), b"i" * 100)
        assert log.stats().segments_rolled > 0
        # The active segment and every sealed one handed over at a roll get synced.
        wait_until(lambda: log.stats().fsyncs >= log.stats().segments_rolled + 1)


def test_housekeeping_rolls_an_idle_aged_segment(
    tmp_path: Path, make_context: MakeContext
) -> None:
    clock = FakeClock()
    options = LandingOptions(fsync_interval_ms=10, segment_max_age_ms=1000)
    with LandingLog(tmp_path, options, clock=clock) as log:
        log.append(make_context(0), b"a")
        clock.advance(
            1000
        )  # the housekeeper's wait ends, and the segment is a second old
        wait_until(lambda: log.stats().segments_rolled == 1)
    assert [s.sealed for s in LandingReader(tmp_path).segments()] == [True, False]


def test_one_writer_per_directory(tmp_path: Path, make_context: MakeContext) -> None:
    first = LandingLog(tmp_path, housekeeping=False)
    with pytest.raises(LandingLogLocked, match="already open for writing"):
        LandingLog(tmp_path, housekeeping=False)
    first.close()
    with LandingLog(tmp_path, housekeeping=False) as second:
        second.append(make_context(0), b"x")


def test_a_closed_log_refuses_and_reports_through_export(
    tmp_path: Path, make_context: MakeContext
) -> None:
    log = LandingLog(tmp_path)
    log.close()
    log.close()  # idempotent
    with pytest.raises(LandingLogClosed):
        log.append(make_context(0), b"x")
    result = log.export(make_context(0), b"x")
    assert not result.ok and "closed" in (result.error or "")


def test_an_oversized_record_is_refused_with_a_clear_error(
    tmp_path: Path, make_context: MakeContext
) -> None:
    options = LandingOptions(
        max_record_bytes=4096, write_behind=False
    )  # export() appends
    with LandingLog(tmp_path, options, housekeeping=False) as log:
        result = log.export(make_context(0), b"x" * 4096)
        assert not result.ok and "exceeds max_record_bytes 4096" in (result.error or "")
        assert log.next_offset == 0
        assert log.stats().export_failures == 1


def test_invalid_options_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fsync policy 'sometimes'"):
        LandingLog(tmp_path, LandingOptions(fsync="sometimes"))
    with pytest.raises(ValueError, match="segment_max_bytes"):
        LandingLog(tmp_path, LandingOptions(segment_max_bytes=10))


FULL_DISK_WRITER = textwrap.dedent(
    """
    import resource, signal, sys
    from pathlib import Path
    from exporters.context import TelemetryContext
    from exporters.landing import LandingLog, LandingOptions

    # A file size limit makes writes fail part-way (EFBIG), as a full disk would.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
    log = LandingLog(Path(sys.argv[1]), LandingOptions(write_behind=False), housekeeping=False)
    context = TelemetryContext("AAAAAAAAAAAAAAAAAAAAAA", None, "librdkafka", "2.16.0",
        "127.0.0.1", 1, "PLAINTEXT", "PLAINTEXT", "User:ANONYMOUS", 1000, False, 0, 1, "c", 1, 0)
    for i in range(100):
        result = log.export(context, bytes([i]) * 3000)
        print(i, result.ok, result.error, flush=True)
    log.close()
    """
)


def test_a_failing_write_loses_nothing_accepted(tmp_path: Path) -> None:
    output = subprocess.run(
        [sys.executable, "-c", FULL_DISK_WRITER, str(tmp_path)],
        capture_output=True,
        check=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    ).stdout.splitlines()
    accepted = [int(line.split()[0]) for line in output if line.split()[1] == "True"]
    refused = [line for line in output if line.split()[1] == "False"]
    assert accepted and refused
    assert "File too large" in refused[0]
    records = list(LandingReader(tmp_path).read(0))
    # The record that hit the limit was cut back off: no torn record, nothing missing.
    assert [r.offset for r in records] == list(range(len(accepted)))
    assert [r.payload for r in records] == [bytes([i]) * 3000 for i in accepted]
    with LandingLog(tmp_path, housekeeping=False) as log:
        assert log.stats().recovered_truncated_bytes == 0
        assert log.next_offset == len(accepted)


def test_group_commit_leaves_the_fsync_to_sync(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path,
        LandingOptions(fsync="always", group_commit=True, segment_max_bytes=2000),
        housekeeping=False,
    ) as log:
        assert log.durable_offset == 0
        before = log.stats().fsyncs
        for i in range(10):
            log.append(make_context(i), b"g" * 100)
        assert log.stats().segments_rolled >= 2
        assert log.stats().fsyncs == before  # nothing fsynced on the append path
        assert log.durable_offset == 0
        log.sync()
        assert log.durable_offset == 10
        # The sealed segments and the active one each got one fsync.
        assert log.stats().fsyncs == before + log.stats().segments_rolled + 1
        after = log.stats().fsyncs
        log.sync()  # already covered: no fsync
        assert log.stats().fsyncs == after


def test_group_commit_only_with_always(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="group_commit"):
        LandingLog(tmp_path, LandingOptions(fsync="interval", group_commit=True))


def test_sync_from_another_thread_while_appending(
    tmp_path: Path, make_context: MakeContext
) -> None:
    """Group commit as the collector uses it: the event loop appends, a worker thread
    fsyncs; every sync() returns with at least what was appended before it durable."""
    import threading

    log = LandingLog(
        tmp_path,
        LandingOptions(fsync="always", group_commit=True, segment_max_bytes=20_000),
        housekeeping=False,
    )
    stop = threading.Event()
    violations: list[tuple[int, int]] = []

    def syncer() -> None:
        while not stop.is_set():
            target = log.next_offset
            log.sync()
            if log.durable_offset < target:
                violations.append((target, log.durable_offset))

    worker = threading.Thread(target=syncer)
    worker.start()
    try:
        for i in range(2000):
            log.append(make_context(i % 10), b"c" * 200)
    finally:
        stop.set()
        worker.join()
    log.sync()
    assert log.durable_offset == 2000
    assert violations == []
    assert log.stats().fsyncs < 2000 + log.stats().segments_rolled  # fsyncs were shared
    log.close()
    assert [r.offset for r in LandingReader(tmp_path).read(0)] == list(range(2000))


def test_sync_under_never_covers_sealed_segments_too(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with LandingLog(
        tmp_path,
        LandingOptions(fsync="never", segment_max_bytes=2000),
        housekeeping=False,
    ) as log:
        for i in range(10):
            log.append(make_context(i), b"n" * 100)
        rolled = log.stats().segments_rolled
        log.sync()
        assert log.stats().fsyncs == rolled + 1
        assert log.durable_offset == 10
