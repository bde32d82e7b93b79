"""The exactly-once plan: what a batch appends to each table, and what maintenance carries.

Pure decisions, without Spark and without I/O.  ingest.py reads the landing logs and
the tables' snapshots, asks :func:`plan_batch` what to commit, and commits it;
maintenance.py asks :func:`maintenance_properties` and :func:`plan_expiry`.  The
summary keys themselves are commits.py's.

==========================  ==========================================================
decision                    rule
==========================  ==========================================================
where a batch starts        each landing directory at the ``pushes`` table's position
                            (:func:`batch_start`): ``pushes`` commits last, so every
                            record before it is in every table it has rows for
what a table gets           the rows at or past its own committed position for their
                            directory (:func:`table_ranges`): a table that committed
                            part of the batch before a kill gets only the rest
a table's summary           the ranges it gets (``ktc.landing.<dir>``) and every
                            position it then holds (``ktc.position.<dir>``); for
                            ``pushes`` also the rejected records; none (no append)
                            when the table already holds the whole batch
which tables append         every table with a summary and rows, and ``pushes``
                            whenever it has a summary, rows or not (:func:`appends`)
the order of the appends    the point tables (side by side, any order), then
                            ``pushes`` (:data:`WRITE_ORDER`)
the positions after it      per table with a summary, the positions the summary
                            holds (never less than the table had: a table ahead
                            of a shorter batch keeps its own); the others' unchanged
what maintenance carries    every position the table's snapshots hold when the
                            action reads them (:func:`maintenance_properties`)
what may expire             snapshots committed before ``now - expire_after`` and
                            before the newest snapshot holding each directory's
                            position, never the newest ``retain_last`` (at least 1)
                            (:func:`plan_expiry`)
a topic partition's range   from the ``pushes`` table's position, at most
                            ``max_records`` records, never past the partition's
                            end; a position before the partition's earliest offset
                            is a retention gap (the range lost, counted), one past
                            its end an offsets reset (an error)
                            (:func:`partition_bounds`)
what a commit checks        every position the table's append starts from is still
                            the table's at commit, or the batch is planned again
                            (:func:`moved_positions`)
==========================  ==========================================================

tests/lakehouse/test_exactly_once_model.py checks these decisions against a model of
Iceberg's snapshots over interleavings of two writers, kills and maintenance.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence

from exporters.lakehouse.commits import (
    SnapshotInfo,
    SourceRange,
    carried_properties,
    committed_positions,
    expire_horizon_ms,
    range_properties,
)
from exporters.lakehouse.schema import PUSHES_TABLE, TABLES

__all__ = [
    "MAX_REJECTED_LISTED",
    "POINT_TABLES",
    "PUSHES",
    "WRITE_ORDER",
    "BatchPlan",
    "ExpiryPlan",
    "OffsetsReset",
    "PartitionBounds",
    "TablePlan",
    "appends",
    "batch_start",
    "maintenance_properties",
    "moved_positions",
    "partition_bounds",
    "plan_batch",
    "plan_expiry",
    "table_ranges",
]

PUSHES = PUSHES_TABLE.name
POINT_TABLES = tuple(t.name for t in TABLES if t is not PUSHES_TABLE)
# The point tables first, pushes last: a restarted ingest reads from the pushes table's
# position, so every table must hold every record of its own before that position.
WRITE_ORDER = (*POINT_TABLES, PUSHES)
# Rejected records listed in a snapshot summary, at most (the count is always there).
MAX_REJECTED_LISTED = 20

# Table name -> landing directory -> the end of what the table has committed.
Positions = Mapping[str, Mapping[str, int]]


def batch_start(committed: Positions, directories: Iterable[str]) -> dict[str, int]:
    """Where the next batch reads each landing directory from: the ``pushes`` table's
    position (0 for a directory no snapshot mentions: it is read from its first record)."""
    read_from = committed.get(PUSHES, {})
    return {name: read_from.get(name, 0) for name in directories}


def table_ranges(
    ranges: Iterable[SourceRange], committed: Mapping[str, int]
) -> tuple[SourceRange, ...]:
    """The part of each range a table does not hold yet: from its committed position for
    the directory or the range's start, whichever is later (empty when it holds it all)."""
    return tuple(
        dataclasses.replace(r, from_offset=max(r.from_offset, committed.get(r.name, 0)))
        for r in ranges
    )


def appends(table: str, rows: int) -> bool:
    """Whether a table with a summary gets an append: when it has rows, and ``pushes``
    always (its range is where the next batch starts, even after a batch of rejected
    records only)."""
    return rows > 0 or table == PUSHES


@dataclasses.dataclass(frozen=True, slots=True)
class TablePlan:
    """One table's part of a batch."""

    name: str
    ranges: tuple[SourceRange, ...]  # what it gets, per directory (possibly empty)
    replayed: bool  # it already held part of the batch: the rows before are dropped
    summary: Mapping[str, str]  # its append's snapshot summary; empty: no append
    positions_after: Mapping[str, int]  # what it has committed once the append is in

    @property
    def keep_from(self) -> dict[str, int]:
        """Per landing directory, the first offset whose rows this table gets."""
        return {r.name: r.from_offset for r in self.ranges}

    def keeps(self, landing_node: str, landing_offset: int) -> bool:
        """Whether a row of the batch, by its lineage, goes into this table."""
        return landing_offset >= self.keep_from.get(landing_node, 0)


@dataclasses.dataclass(frozen=True, slots=True)
class BatchPlan:
    """What one batch commits, table by table."""

    ranges: tuple[SourceRange, ...]  # what the batch read, per landing directory
    tables: Mapping[str, TablePlan]

    @property
    def replayed(self) -> bool:
        """Some table already held part of the batch (the previous process was killed
        between two of its commits)."""
        return any(t.replayed for t in self.tables.values())

    @property
    def summaries(self) -> dict[str, Mapping[str, str]]:
        """The snapshot summary of each table that gets an append."""
        return {name: t.summary for name, t in self.tables.items() if t.summary}

    def positions_after(self) -> dict[str, dict[str, int]]:
        """Every table's committed positions once the batch is in."""
        return {name: dict(t.positions_after) for name, t in self.tables.items()}


def plan_batch(
    ranges: Sequence[SourceRange],
    committed: Positions,
    rejected: Sequence[Mapping[str, object]] = (),
) -> BatchPlan:
    """The plan of a batch that read ``ranges`` (from :func:`batch_start`), for tables
    that have committed ``committed`` (every table the batch writes), with ``rejected``
    the records that did not parse (``source``, ``offset``, ``error``)."""
    tables: dict[str, TablePlan] = {}
    for name, positions in committed.items():
        own = table_ranges(ranges, positions)
        replayed = any(
            positions.get(r.name, 0) > r.from_offset for r in ranges if not r.empty
        )
        recorded = range_properties(own)
        after = dict(positions)
        summary: dict[str, str] = {}
        if recorded:
            after |= {r.name: r.to_offset for r in own if not r.empty}
            summary = recorded | carried_properties(after)
            if name == PUSHES and rejected:
                summary["ktc.rejected"] = str(len(rejected))
                summary["ktc.rejected.first"] = json.dumps(
                    list(rejected[:MAX_REJECTED_LISTED])
                )
        tables[name] = TablePlan(name, own, replayed, summary, after)
    return BatchPlan(tuple(ranges), tables)


def maintenance_properties(snapshots: Iterable[SnapshotInfo]) -> dict[str, str]:
    """The summary keys a maintenance commit (compaction, rewrite of manifests, retention
    delete) carries: every position the table's snapshots hold when it reads them."""
    return carried_properties(committed_positions(snapshots))


@dataclasses.dataclass(frozen=True, slots=True)
class ExpiryPlan:
    """Iceberg's ``expireSnapshots`` arguments: it drops the snapshots committed before
    ``older_than_ms``, except the newest ``retain_last`` (the current one among them)."""

    older_than_ms: int
    retain_last: int


def plan_expiry(
    snapshots: Iterable[SnapshotInfo],
    *,
    now_unix_ms: int,
    expire_after_s: float,
    retain_last: int,
) -> ExpiryPlan:
    """Expire what is older than ``expire_after`` but never a snapshot a landing
    position survives in only (:func:`commits.expire_horizon_ms`)."""
    older_than = now_unix_ms - int(expire_after_s * 1000)
    horizon = expire_horizon_ms(snapshots)
    if horizon is not None:
        older_than = min(older_than, horizon)
    return ExpiryPlan(older_than, max(1, retain_last))


# ---------------------------------------------------------------- the topic's offsets


class OffsetsReset(ValueError):
    """A partition ends before the position the tables hold for it: its offsets no
    longer name the records ingested (the topic was deleted and created again, or its
    log was truncated)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionBounds:
    """One partition's range in a batch, and what retention deleted before it was read."""

    from_offset: int
    to_offset: int
    lost: tuple[int, int] | None = None  # [from, to) deleted before being ingested

    @property
    def lost_records(self) -> int:
        return self.lost[1] - self.lost[0] if self.lost else 0


def partition_bounds(
    position: int | None, earliest: int, latest: int, max_records: int
) -> PartitionBounds:
    """A partition's range of the next batch: from ``position`` (the ``pushes`` table's,
    None when no snapshot names the partition: from ``earliest``) to ``latest`` (the
    offset the next record produced gets) or ``max_records`` records, whichever is
    first.  A position before ``earliest`` is a retention gap: the batch starts at
    ``earliest`` and the range in between is lost (and counted); a position past
    ``latest`` raises :class:`OffsetsReset`.

    Worked numbers: position 40, the topic holding offsets [55, 90), batches of 20:
    ``[55, 75)``, lost ``[40, 55)`` (15 records); position 40, the topic holding
    [0, 12) (deleted and created again, 12 records since): OffsetsReset."""
    if position is not None and position > latest:
        raise OffsetsReset(
            f"ends at offset {latest}, but the tables hold it up to {position}"
        )
    start = earliest if position is None else position
    lost = None
    if start < earliest:
        lost, start = (start, earliest), earliest
    end = min(latest, start + max_records)
    return PartitionBounds(start, end, lost)


def moved_positions(
    planned: Mapping[str, int], current: Mapping[str, int], table: TablePlan
) -> dict[str, tuple[int, int]]:
    """The sources whose position in a table moved between the plan (``planned``) and
    the commit (``current``), among those the table's append covers: (planned, now)
    each.  Empty: the append starts where the table ends, and commits; otherwise another
    ingest committed those records meanwhile, and the batch is planned again."""
    return {
        r.name: (planned.get(r.name, 0), current.get(r.name, 0))
        for r in table.ranges
        if not r.empty and current.get(r.name, 0) != planned.get(r.name, 0)
    }
