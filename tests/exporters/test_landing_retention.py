"""Retention: whole sealed segments go by age or total size, oldest first, never the
active one, never one holding offsets a consumer has not committed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from clock.testing import FakeClock
from exporters.context import TelemetryContext
from exporters.landing import (
    ConsumerPositions,
    LandingLog,
    LandingOptions,
    LandingReader,
    PositionsError,
)
from exporters.landing.layout import SegmentInfo
from exporters.landing.retention import RetentionPolicy, segments_to_delete

MakeContext = Callable[..., TelemetryContext]
MS = 1_000_000  # ns per ms
NOW_MS = 1_763_700_000_000


def segment(
    base: int, next_base: int | None, size: int, last_append_ms: int
) -> SegmentInfo:
    return SegmentInfo(
        base_offset=base,
        path=Path(f"{base:020d}.log"),
        sealed=next_base is not None,
        size_bytes=size,
        modified_time_unix_nano=last_append_ms * MS,
        next_base_offset=next_base,
    )


LOG = [
    segment(0, 10, 40, NOW_MS - 5000),
    segment(10, 20, 40, NOW_MS - 3000),
    segment(20, 30, 40, NOW_MS - 1000),
    segment(30, None, 30, NOW_MS - 10),
]

# (retention_ms, retention_bytes, respect, min_committed, deleted bases)
CASES = [
    (None, None, True, None, []),
    (4000, None, True, None, [0]),
    (2000, None, True, None, [0, 10]),
    (0, None, True, None, [0, 10, 20]),  # never the active segment
    (None, 100, True, None, [0]),  # the worked example in retention.py: 150 -> 110
    (None, 30, True, None, [0, 10, 20]),
    (None, 0, True, None, [0, 10, 20]),
    (0, None, True, 10, [0]),  # offsets 10.. not committed: segment 10 stays
    (0, None, True, 9, []),  # offset 9 not committed: segment 0 stays
    (0, None, True, 30, [0, 10, 20]),
    (0, None, False, 0, [0, 10, 20]),  # respect_consumers off
    (4000, 0, True, 20, [0, 10]),
]


@pytest.mark.parametrize(
    ("retention_ms", "retention_bytes", "respect", "floor", "deleted"), CASES
)
def test_which_segments_retention_deletes(
    retention_ms: int | None,
    retention_bytes: int | None,
    respect: bool,
    floor: int | None,
    deleted: list[int],
) -> None:
    policy = RetentionPolicy(retention_ms, retention_bytes, respect)
    doomed = segments_to_delete(LOG, policy, NOW_MS, floor)
    assert [s.base_offset for s in doomed] == deleted


def test_retention_is_a_prefix_only() -> None:
    """A young segment stops the walk even if an older-looking one follows it."""
    log = [segment(0, 10, 40, NOW_MS), segment(10, 20, 40, NOW_MS - 9000), LOG[-1]]
    assert segments_to_delete(log, RetentionPolicy(1000, None), NOW_MS, None) == []


def fill(
    log: LandingLog, clock: FakeClock, make_context: MakeContext, segments: int
) -> None:
    """One record per segment, a minute apart."""
    for i in range(segments):
        log.append(make_context(i), b"x" * 100)
        clock.advance(60_000)
        log.maybe_roll(clock.time_ns() // MS)


def test_retention_on_a_real_log_respects_committed_consumers(
    tmp_path: Path, make_context: MakeContext
) -> None:
    clock = FakeClock(wall_ns=NOW_MS * MS)
    with LandingLog(
        tmp_path, LandingOptions(retention_ms=150_000), clock=clock, housekeeping=False
    ) as log:
        fill(log, clock, make_context, 6)  # segments 0..5 sealed, 6 active (empty)
        forwarder = ConsumerPositions(tmp_path, "otlp-forwarder")
        ingest = ConsumerPositions(tmp_path, "lakehouse-ingest")
        forwarder.commit(6)
        ingest.commit(2)
        now_ms = clock.time_ns() // MS
        # Segments 0..3 are older than 150 s, but the ingest has only done offsets 0 and 1.
        assert [s.base_offset for s in log.apply_retention(now_ms)] == [0, 1]
        ingest.commit(6)
        assert [s.base_offset for s in log.apply_retention(now_ms)] == [2, 3]
        assert log.apply_retention(now_ms) == []
        # An explicit floor overrides the files.
        assert [s.base_offset for s in log.apply_retention(now_ms + 10**9, 5)] == [4]
        assert log.stats().segments_deleted == 5
    reader = LandingReader(tmp_path)
    assert [s.base_offset for s in reader.segments()] == [5, 6]
    assert [r.offset for r in reader.read(0)] == [5]


def test_a_required_consumer_that_never_committed_protects_everything(
    tmp_path: Path, make_context: MakeContext
) -> None:
    clock = FakeClock(wall_ns=NOW_MS * MS)
    with LandingLog(
        tmp_path,
        LandingOptions(
            retention_ms=0, retention_required_consumers=("lakehouse-ingest",)
        ),
        clock=clock,
        housekeeping=False,
    ) as log:
        fill(log, clock, make_context, 3)
        ConsumerPositions(tmp_path, "otlp-forwarder").commit(3)
        assert log.apply_retention(clock.time_ns() // MS) == []
        ConsumerPositions(tmp_path, "lakehouse-ingest").commit(1)
        assert [s.base_offset for s in log.apply_retention(clock.time_ns() // MS)] == [
            0
        ]


def test_retention_by_bytes_on_a_real_log(
    tmp_path: Path, make_context: MakeContext
) -> None:
    clock = FakeClock(wall_ns=NOW_MS * MS)
    with LandingLog(
        tmp_path,
        LandingOptions(
            retention_ms=None, retention_bytes=1, retention_respect_consumers=False
        ),
        clock=clock,
        housekeeping=False,
    ) as log:
        fill(log, clock, make_context, 4)
        deleted = log.apply_retention(clock.time_ns() // MS)
    assert [s.base_offset for s in deleted] == [0, 1, 2, 3]
    assert [s.base_offset for s in LandingReader(tmp_path).segments()] == [4]


def test_a_reader_survives_segments_deleted_under_it(
    tmp_path: Path, make_context: MakeContext
) -> None:
    clock = FakeClock(wall_ns=NOW_MS * MS)
    with LandingLog(
        tmp_path,
        LandingOptions(retention_ms=0, retention_respect_consumers=False),
        clock=clock,
        housekeeping=False,
    ) as log:
        fill(log, clock, make_context, 5)
        reader = LandingReader(tmp_path)
        records = reader.read(0)
        assert next(records).offset == 0
        log.apply_retention(clock.time_ns() // MS)
        # Segment 0 was open (still readable); 1..4 vanished; the reader goes on quietly.
        assert [r.offset for r in records] == []
        log.append(make_context(5), b"y")
        assert [r.offset for r in reader.read(0)] == [5]


def test_a_damaged_positions_file_is_an_error_not_a_guess(tmp_path: Path) -> None:
    positions = ConsumerPositions(tmp_path, "otlp-forwarder")
    positions.commit(3)
    positions.path.write_text("{not json")
    with pytest.raises(PositionsError, match=r"otlp-forwarder\.json"):
        positions.load()
    with LandingLog(tmp_path, housekeeping=False) as log, pytest.raises(PositionsError):
        log.apply_retention(NOW_MS)


@pytest.mark.parametrize("name", ["", "../escape", "a/b", ".hidden", "x" * 200])
def test_consumer_names_cannot_escape_the_directory(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="consumer name"):
        ConsumerPositions(tmp_path, name)


def test_commit_leaves_no_temporary_files(tmp_path: Path) -> None:
    positions = ConsumerPositions(tmp_path, "lakehouse-ingest")
    for offset in range(5):
        positions.commit(offset)
    assert sorted(p.name for p in (tmp_path / "consumers").iterdir()) == [
        "lakehouse-ingest.json"
    ]
    with pytest.raises(ValueError):
        positions.commit(-1)
