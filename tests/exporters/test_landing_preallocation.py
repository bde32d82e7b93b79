"""Disk blocks reserved before the appends (exporters/landing/preallocate.py): the active
segment's rest at open, a spare segment the housekeeper reserves and a roll takes, and
what is reserved past a segment's end given back when it is sealed or the log closes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from clock.testing import FakeClock
from exporters.context import TelemetryContext
from exporters.landing import LandingLog, LandingOptions
from exporters.landing.layout import list_segments
from exporters.landing.preallocate import SPARE_FILE_NAME, reserve
from tests.waiting import eventually_sync

MakeContext = Callable[..., TelemetryContext]
SEGMENT = 1024 * 1024
BLOCK = 4096


def allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


@pytest.fixture
def reserving_filesystem(tmp_path: Path) -> Path:
    probe = tmp_path / "probe"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if reserve(fd, 0, BLOCK) is None:
            pytest.skip(f"{tmp_path}'s file system cannot reserve blocks (fallocate)")
    finally:
        os.close(fd)
        probe.unlink()
    return tmp_path / "log"


def test_appends_go_into_blocks_reserved_before_them(
    reserving_filesystem: Path, make_context: MakeContext
) -> None:
    directory = reserving_filesystem
    clock = FakeClock()
    options = LandingOptions(segment_max_bytes=SEGMENT, fsync_interval_ms=10)
    with LandingLog(directory, options, clock=clock) as log:
        first = list_segments(directory)[0].path
        # At open: the active segment's rest is reserved, its size is its header's.
        assert allocated(first) >= SEGMENT - BLOCK
        assert os.stat(first).st_size < BLOCK

        # The spare maker reserves a whole segment in an empty file, with no clock tick.
        spare = directory / SPARE_FILE_NAME
        eventually_sync(lambda: log.has_spare, timeout_s=10, what="a spare segment")
        assert allocated(spare) >= SEGMENT
        assert os.stat(spare).st_size == 0

        # The roll takes the spare: the new segment's blocks are reserved already.
        payload = b"p" * 4000
        count = 0
        while len(list_segments(directory)) < 2:
            log.append(make_context(count), payload)
            count += 1
        sealed, active = (segment.path for segment in list_segments(directory))
        assert allocated(active) >= SEGMENT - BLOCK
        # The sealed segment keeps only the blocks its records fill.
        assert allocated(sealed) <= os.stat(sealed).st_size + BLOCK
        # And the next spare is made at once, not at the next housekeeping tick.
        eventually_sync(
            lambda: log.has_spare, timeout_s=10, what="the next spare segment"
        )
        assert len(clock.waits_s) <= 1  # the housekeeper never woke from its first wait
        active_size = os.stat(active).st_size

    # Closing gives back the active segment's reserved rest and removes the spare.
    assert allocated(active) <= active_size + BLOCK
    assert not spare.exists()
    assert [p.name for p in directory.iterdir() if p.name.startswith(".spare")] == []
