"""The topic ingest's offset decisions at the edges, without a JVM: a retention gap, a
recreated topic (or a truncated log), the batch bound (plan.partition_bounds through
TopicIngestSource.bounds), and the fence's check of a table's positions at commit
(plan.moved_positions).  test_topic_fencing.py runs the same edges against a real
broker."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporters.lakehouse.commits import SourceRange
from exporters.lakehouse.plan import (
    OffsetsReset,
    PartitionBounds,
    moved_positions,
    partition_bounds,
    plan_batch,
)
from exporters.lakehouse.session import LakehouseConfig
from exporters.lakehouse.topic_ingest import TopicIngestSource, TopicOffsetsReset
from exporters.lakehouse.topic_source import PartitionOffsets, TopicSource, source_name


def test_a_first_batch_starts_at_the_earliest_offset_and_is_bounded() -> None:
    assert partition_bounds(None, 0, 87, 20_000) == PartitionBounds(0, 87)
    assert partition_bounds(None, 30, 87, 20) == PartitionBounds(30, 50)


def test_a_batch_starts_at_the_position_and_stops_at_the_bound() -> None:
    assert partition_bounds(40, 0, 87, 20) == PartitionBounds(40, 60)
    assert partition_bounds(80, 0, 87, 20) == PartitionBounds(80, 87)
    assert partition_bounds(87, 0, 87, 20) == PartitionBounds(87, 87)  # nothing new


def test_records_deleted_before_they_were_ingested_are_a_counted_gap() -> None:
    bounds = partition_bounds(40, 55, 90, 20)
    assert bounds == PartitionBounds(55, 75, (40, 55))
    assert bounds.lost_records == 15
    # every record gone, the position included: the gap ends at the end
    assert partition_bounds(40, 90, 90, 20) == PartitionBounds(90, 90, (40, 90))


def test_a_partition_ending_before_the_position_is_an_offsets_reset() -> None:
    """The topic deleted and created again with fewer records than were ingested, or
    its log truncated: its offsets name other records."""
    with pytest.raises(
        OffsetsReset, match="ends at offset 12, but the tables hold it up to 40"
    ):
        partition_bounds(40, 0, 12, 20)
    with pytest.raises(OffsetsReset):
        partition_bounds(1, 0, 0, 20)  # recreated, empty


@given(
    position=st.none() | st.integers(0, 200),
    earliest=st.integers(0, 200),
    span=st.integers(0, 200),
    max_records=st.integers(1, 50),
)
def test_every_batch_is_inside_the_partition_and_bounded(
    position: int | None, earliest: int, span: int, max_records: int
) -> None:
    latest = earliest + span
    try:
        bounds = partition_bounds(position, earliest, latest, max_records)
    except OffsetsReset:
        assert position is not None and position > latest
        return
    assert earliest <= bounds.from_offset <= bounds.to_offset <= latest
    assert bounds.to_offset - bounds.from_offset == min(
        max_records, latest - bounds.from_offset
    )
    if position is not None:
        # every offset from the position on is read or counted lost, none twice
        assert bounds.from_offset == max(position, earliest)
        assert bounds.lost == ((position, earliest) if position < earliest else None)


def _source() -> TopicIngestSource:
    """The topic as the ingest reads it; only its planning is called (no Spark)."""
    return TopicIngestSource(
        LakehouseConfig(Path("/nonexistent")), TopicSource("127.0.0.1:1", "landing")
    )


def _committed(**ends: int) -> dict[str, dict[str, int]]:
    return {"pushes": {source_name("landing", int(p[1:])): e for p, e in ends.items()}}


def test_the_source_bounds_each_partition_and_logs_a_gap(caplog) -> None:
    offsets = [
        PartitionOffsets(0, 0, 100),
        PartitionOffsets(1, 25, 30),
        PartitionOffsets(2, 0, 0),
    ]
    with caplog.at_level(logging.ERROR):
        ranges = _source().bounds(_committed(p0=10, p1=5), offsets, 20)
    assert [(r.name, r.from_offset, r.to_offset) for r in ranges] == [
        ("kafka:landing:0", 10, 30),
        ("kafka:landing:1", 25, 30),
        ("kafka:landing:2", 0, 0),
    ]
    (gap,) = caplog.messages
    assert gap == (
        "kafka:landing:1: offsets 5-25 (20 records) were deleted by the topic's "
        "retention before they were ingested; ingesting from 25"
    )


def test_the_source_refuses_a_recreated_topic_in_one_line() -> None:
    with pytest.raises(TopicOffsetsReset) as refused:
        _source().bounds(_committed(p0=87), [PartitionOffsets(0, 0, 9)], 20)
    assert str(refused.value) == (
        "landing partition 0 ends at offset 9, but the tables hold it up to 87: the "
        "topic was created again (or its log truncated); ingest it into another "
        "--database"
    )


def test_a_commit_is_fenced_by_the_positions_its_append_starts_from() -> None:
    """Two ingests planned ``[10, 30)`` of partition 0 from the same positions; the
    first committed metrics_gauge up to 30.  The second's gauge append would start at 10
    again: moved.  A position the append does not cover (partition 1, empty in its
    batch) may move: the append is still right."""
    ranges = [
        SourceRange("kafka:t:0", "t", 10, 30),
        SourceRange("kafka:t:1", "t", 7, 7),
    ]
    planned = {"kafka:t:0": 10, "kafka:t:1": 7}
    plan = plan_batch(ranges, {"metrics_gauge": planned, "pushes": planned})
    gauge = plan.tables["metrics_gauge"]
    assert moved_positions(planned, planned, gauge) == {}
    assert moved_positions(planned, {**planned, "kafka:t:1": 9}, gauge) == {}
    assert moved_positions(planned, {**planned, "kafka:t:0": 30}, gauge) == {
        "kafka:t:0": (10, 30)
    }
    # A table that held nothing of the partition when planned, and does now.
    fresh = plan_batch(ranges, {"metrics_gauge": {}, "pushes": {}})
    assert moved_positions({}, {"kafka:t:0": 30}, fresh.tables["metrics_gauge"]) == {
        "kafka:t:0": (0, 30)
    }
