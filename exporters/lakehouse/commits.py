"""Exactly-once bookkeeping kept in the Iceberg tables themselves: snapshot summaries.

Every append the ingest commits to a table records, in that snapshot's summary, the
landing offsets it covers, one key per landing directory::

    ktc.landing.node-1 = 1200-1450          # offsets [1200, 1450) of landing/node-1

and every snapshot the lakehouse writes (appends, compactions, retention deletes)
carries the positions it knows, the end of everything committed so far per directory::

    ktc.position.node-1 = 1450

The table's committed position for a directory is the largest such end over the
table's snapshots: the append and its record are one atomic commit, so a restarted
ingest that reads them knows exactly which records each table holds, whatever moment
the previous process was killed at.  Snapshots expire (maintenance.py), so each
maintenance commit carries every directory's position forward, and snapshots are only
expired up to the newest one that holds each directory's position
(:func:`expire_horizon_ms`): a directory whose ingest stopped long ago keeps its
position in every later maintenance snapshot.

The keys are plain strings in the summary, readable by every Iceberg engine::

    SELECT committed_at, summary['ktc.landing.node-1'] FROM lake.ktc.pushes.snapshots
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

__all__ = [
    "POSITION_PREFIX",
    "RANGE_PREFIX",
    "SnapshotInfo",
    "SourceRange",
    "carried_properties",
    "committed_positions",
    "expire_horizon_ms",
    "range_properties",
]

RANGE_PREFIX = "ktc.landing."
POSITION_PREFIX = "ktc.position."


@dataclasses.dataclass(frozen=True, slots=True)
class SourceRange:
    """The records of one landing directory in a batch: offsets ``[from_offset, to_offset)``."""

    name: str  # the landing directory's name, e.g. "node-1"; rows carry it as landing_node
    directory: str
    from_offset: int
    to_offset: int

    @property
    def empty(self) -> bool:
        return self.to_offset <= self.from_offset


@dataclasses.dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """What matters here of one snapshot: when, and its summary."""

    snapshot_id: int
    committed_at_ms: int
    summary: Mapping[str, str]

    def positions(self) -> dict[str, int]:
        """The end offset per landing directory this snapshot holds (range or carried)."""
        ends: dict[str, int] = {}
        for key, value in self.summary.items():
            if key.startswith(RANGE_PREFIX):
                name, end = key[len(RANGE_PREFIX) :], int(value.rsplit("-", 1)[1])
            elif key.startswith(POSITION_PREFIX):
                name, end = key[len(POSITION_PREFIX) :], int(value)
            else:
                continue
            ends[name] = max(ends.get(name, 0), end)
        return ends


def committed_positions(snapshots: Iterable[SnapshotInfo]) -> dict[str, int]:
    """Per landing directory, the end of what the table has committed."""
    positions: dict[str, int] = {}
    for snapshot in snapshots:
        for name, end in snapshot.positions().items():
            positions[name] = max(positions.get(name, 0), end)
    return positions


def range_properties(ranges: Iterable[SourceRange]) -> dict[str, str]:
    """The summary keys of an append covering these ranges (empty ranges left out)."""
    return {
        f"{RANGE_PREFIX}{r.name}": f"{r.from_offset}-{r.to_offset}"
        for r in ranges
        if not r.empty
    }


def carried_properties(positions: Mapping[str, int]) -> dict[str, str]:
    """The summary keys that carry positions into a snapshot (maintenance commits)."""
    return {
        f"{POSITION_PREFIX}{name}": str(end) for name, end in sorted(positions.items())
    }


def expire_horizon_ms(snapshots: Iterable[SnapshotInfo]) -> int | None:
    """The newest commit time before which snapshots may expire without losing a
    position: the oldest, over landing directories, of the newest snapshot that holds
    the directory's committed position.  None if no snapshot holds any position."""
    snapshots = list(snapshots)
    positions = committed_positions(snapshots)
    newest_holding: dict[str, int] = {}
    for snapshot in snapshots:
        for name, end in snapshot.positions().items():
            if end == positions[name]:
                newest_holding[name] = max(
                    newest_holding.get(name, 0), snapshot.committed_at_ms
                )
    return min(newest_holding.values()) if newest_holding else None
