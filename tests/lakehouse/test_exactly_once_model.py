"""A model check of the lakehouse's exactly-once decisions, without a JVM.

The decisions are the production ones: where a batch starts, what each table gets and
what its snapshot summary records, the positions after a batch (exporters/lakehouse/
plan.py), what a maintenance commit carries and how far snapshots expire (plan.py,
with commits.py's summary keys and horizon), called through their modules so that the
mutation tests below can swap one for a broken variant.

What they act on is a model of Iceberg's snapshot semantics, not Iceberg: a table is a
list of snapshots (id, commit time, summary, the data files live in it, the files it
added and removed) and the files under its location.

=====================  =============================================================
Iceberg                in the model
=====================  =============================================================
append                 one snapshot: the writer's files (one per receive day) and its
                       summary, atomically
rewriteDataFiles       files of one day (at least 2) rewritten into one, written when
                       the action reads the table and committed later; the commit
                       fails when a file it replaces is no longer live
rewriteManifests       a snapshot with the same files
retention delete       a row filter on the receive day, applied to the table as it is
                       at commit (a retried commit re-applies it)
expireSnapshots        drops the snapshots committed before the cutoff except the
                       newest ``retain_last``, then the files no remaining snapshot
                       reaches
deleteOrphanFiles      deletes the files no snapshot reaches that are older than
                       ``orphan_after`` (a writer commits what it wrote sooner than that:
                       the model's clock never runs past it while a live writer holds
                       uncommitted files)
=====================  =============================================================

Two landing directories, written by two ingest writers, one directory each (as the
per-directory flock makes it), or by one writer owning both (``ktc ingest``'s default on
one machine); both write the same tables (see TABLES).  A writer plans a batch, writes
its files and commits the tables one at a time, the point tables in any order and
``pushes`` last (plan.WRITE_ORDER, as ingest.load does), then advances its positions and
the landing consumer position.  Any step may be followed by a kill: the writer loses its
positions and its batch (its files stay, orphans) and, restarted with another batch size,
reads the positions from the model tables' snapshots again.  A maintainer (``ktc lake``
or an ingest's maintenance) reads a table, then commits later, so appends interleave;
it may be killed too.  Time is a model clock.

After every step: no row is in a table twice; no table's position, nor the landing
consumer position, goes backwards; each table holds exactly the rows of its
directories' records before its position (less what retention deleted), and every table
holds every record of its own before the position a batch starts from; the consumer
position is never ahead of ``pushes``; every file a snapshot reaches exists; a
maintenance commit planned on any table now would carry every position, and an expiry
planned now would keep the newest snapshot holding each position; every maintenance
snapshot carries every position it read, and once one has committed on positions nobody
moved meanwhile, expiry is not held back before it.  Within steps: an expiry drops no
newest holder of a position, and a writer that finished a batch never believes a table
holds less of its directories than the table's snapshots say.  When the writers have
drained (teardown), every landed record not deleted by retention is in every table it
has rows for, once.

The tests at the end run the machine with one decision broken at a time and expect a
failure.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from exporters.lakehouse import commits, plan
from exporters.lakehouse.commits import SnapshotInfo, SourceRange

DIRECTORIES = ("node-1", "node-2")
# Records have points of two types: enough for point tables that commit apart and for
# one without rows in a batch (no append: plan.appends).  A table no record has rows in
# would only ever plan summaries it never appends, so the model leaves the other three
# out: TABLES, in the write order, are what the writers plan and commit.
POINT_TYPES = plan.POINT_TABLES[:2]
TABLES = tuple(name for name in plan.WRITE_ORDER if name in (*POINT_TYPES, plan.PUSHES))
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
ORPHAN_AFTER_MS = DAY_MS  # MaintenanceSettings.orphan_after_s
START_MS = 1_795_000_000_000
MAX_PENDING_MAINTENANCE = 2
# A writer's moves: its next step (the number picks which point table commits next when
# several may), or a kill (the number is the next process's batch size, in records).
WRITER_MOVES: tuple[tuple[str, int], ...] = (
    *(("step", pick) for pick in (0, 1, 0, 1, 0, 1, 0, 1)),
    ("kill", 1),
    ("kill", 3),
)
# Maintenance as ktc lake (or an ingest between batches) runs it, with its settings.
MAINTENANCE_ACTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("compaction", {"closed_after_ms": 0}),
    ("compaction", {"closed_after_ms": HOUR_MS}),
    ("rewrite manifests", {}),
    ("retention", {"days": 1}),
    ("retention", {"days": 2}),
    ("expiry", {"expire_after_s": 0.0, "retain_last": 1}),
    ("expiry", {"expire_after_s": 0.0, "retain_last": 2}),
    ("expiry", {"expire_after_s": 0.0, "retain_last": 0}),  # taken as 1
    ("expiry", {"expire_after_s": 3600.0, "retain_last": 1}),
    ("expiry", {"expire_after_s": 3600.0, "retain_last": 10}),
    ("remove orphans", {}),
)
DRAIN_BATCHES = 200

# A row's lineage: landing_node, landing_offset, the row's index among its record's.
Row = tuple[str, int, int]


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One landing record and what flattening makes of it."""

    node: str
    offset: int
    received_ms: int
    points: Mapping[str, int]  # point table -> rows there
    rejected: bool  # not OTLP: no row anywhere, listed in the pushes summary

    @property
    def day(self) -> int:
        return self.received_ms // DAY_MS

    def rows(self, table: str) -> list[Row]:
        if self.rejected:
            return []
        count = 1 if table == plan.PUSHES else self.points.get(table, 0)
        return [(self.node, self.offset, i) for i in range(count)]


@dataclasses.dataclass(frozen=True, slots=True)
class DataFile:
    file_id: int
    day: int
    received_from_ms: int
    rows: tuple[Row, ...]
    written_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    info: SnapshotInfo
    live: frozenset[int]  # the data files a reader of this snapshot reads
    added: frozenset[int]
    removed: frozenset[int]


def newest_holders(snapshots: Iterable[Snapshot]) -> dict[str, int]:
    """Per landing directory, when the newest snapshot holding its position (the largest
    end any snapshot holds) was committed: what expiry must keep."""
    ends: dict[str, int] = {}
    newest: dict[str, int] = {}
    for snapshot in snapshots:
        for name, end in snapshot.info.positions().items():
            if end > ends.get(name, -1):
                ends[name], newest[name] = end, snapshot.info.committed_at_ms
            elif end == ends[name]:
                newest[name] = max(newest[name], snapshot.info.committed_at_ms)
    return newest


class ModelTable:
    """One Iceberg table: its snapshots (the last is current) and its files."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._snapshots: list[Snapshot] = []
        self.disk: dict[int, DataFile] = {}
        self.retention_deleted: set[Row] = set()
        # Maintenance snapshots: id -> the positions the action read.
        self.carried_read: dict[int, dict[str, int]] = {}
        # Maintenance snapshots whose read positions were still the table's at commit.
        self.carried_current: set[int] = set()

        # What the invariants read after every step, computed once per change.
        self._positions: dict[str, int] | None = None
        self._rows: collections.Counter[Row] | None = None
        self._held: dict[str, set[Row]] | None = None

    @property
    def snapshots(self) -> list[Snapshot]:
        return self._snapshots

    @snapshots.setter
    def snapshots(self, snapshots: list[Snapshot]) -> None:
        self._snapshots = snapshots
        self._positions = self._rows = self._held = None

    def infos(self) -> list[SnapshotInfo]:
        return [s.info for s in self._snapshots]

    def positions(self) -> dict[str, int]:
        if self._positions is None:
            self._positions = commits.committed_positions(self.infos())
        return self._positions

    def live(self) -> frozenset[int]:
        return self._snapshots[-1].live if self._snapshots else frozenset()

    def live_rows(self) -> collections.Counter[Row]:
        if self._rows is None:
            self._rows = collections.Counter(
                row for file_id in self.live() for row in self.disk[file_id].rows
            )
        return self._rows

    def held(self, directory: str) -> set[Row]:
        """The rows of a landing directory's records this table holds."""
        if self._held is None:
            self._held = collections.defaultdict(set)
            for row in self.live_rows():
                self._held[row[0]].add(row)
        return self._held.get(directory, set())

    def reachable(self) -> set[int]:
        return {f for s in self.snapshots for f in s.live}

    def commit(
        self,
        snapshot_id: int,
        now_ms: int,
        summary: Mapping[str, str],
        added: Iterable[DataFile] = (),
        removed: frozenset[int] = frozenset(),
    ) -> Snapshot:
        added_ids = frozenset(f.file_id for f in added)
        snapshot = Snapshot(
            SnapshotInfo(snapshot_id, now_ms, dict(summary)),
            (self.live() - removed) | added_ids,
            added_ids,
            removed,
        )
        self.snapshots = [*self._snapshots, snapshot]
        return snapshot


@dataclasses.dataclass
class PendingBatch:
    planned: plan.BatchPlan
    files: dict[str, list[DataFile]]  # per table that appends: the files it wrote
    to_commit: list[str]  # tables not committed yet, in write order


@dataclasses.dataclass
class Writer:
    directories: tuple[str, ...]
    max_records: int
    alive: bool = True
    positions: dict[str, dict[str, int]] | None = None  # None: read them again
    batch: PendingBatch | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Compaction:
    table: str
    carried: Mapping[str, str]
    read: Mapping[str, int]
    replaced: frozenset[int]
    written: tuple[DataFile, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Retention:
    table: str
    carried: Mapping[str, str]
    read: Mapping[str, int]
    before_day: int


@dataclasses.dataclass(frozen=True, slots=True)
class Expiry:
    table: str
    expiry: plan.ExpiryPlan


Maintenance = Compaction | Retention | Expiry

# What flattening makes of a record: rows per point table, or rejected (not OTLP).
RECORD_SHAPES: tuple[tuple[dict[str, int], bool], ...] = (
    ({POINT_TYPES[0]: 1}, False),
    ({POINT_TYPES[1]: 2}, False),
    ({POINT_TYPES[0]: 2, POINT_TYPES[1]: 1}, False),
    ({}, False),  # a push without points: a pushes row only
    ({}, True),
)


class ExactlyOnceModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now_ms = START_MS
        self.ids = itertools.count(1)
        self.landed: dict[str, list[Record]] = {d: [] for d in DIRECTORIES}
        self.tables = {name: ModelTable(name) for name in TABLES}
        self.writers: list[Writer] = []
        self.consumer: dict[str, int] = {}  # landing consumer position per directory
        self.maintenance: list[Maintenance] = []
        self.seen_positions: dict[str, dict[str, int]] = {name: {} for name in TABLES}
        self.seen_consumer: dict[str, int] = {}
        self.rows_below: dict[tuple[str, str, int], set[Row]] = {}

    # ------------------------------------------------------------------ the clock

    def advance(self, ms: int) -> None:
        """Move the model clock, but never so far that a file a live process wrote and
        has yet to commit becomes older than ``orphan_after``."""
        pending = [
            f.written_ms
            for w in self.writers
            if w.alive and w.batch
            for files in w.batch.files.values()
            for f in files
        ] + [
            f.written_ms
            for m in self.maintenance
            if isinstance(m, Compaction)
            for f in m.written
        ]
        if pending:
            ms = min(ms, min(pending) + ORPHAN_AFTER_MS - self.now_ms)
        self.now_ms += max(0, ms)

    # ------------------------------------------------------------------ landing

    @initialize(
        one_writer=st.sampled_from([False, False, True]),
        max_records=st.integers(1, 3),
        landed=st.lists(
            st.tuples(st.sampled_from(DIRECTORIES), st.sampled_from(RECORD_SHAPES)),
            max_size=6,
        ),
    )
    def start(
        self,
        one_writer: bool,
        max_records: int,
        landed: list[tuple[str, tuple[dict[str, int], bool]]],
    ) -> None:
        """The writers, and what the landing logs hold when they start."""
        if one_writer:
            self.writers = [Writer(DIRECTORIES, max_records)]
        else:
            self.writers = [Writer((d,), max_records) for d in DIRECTORIES]
        for directory, shape in landed:
            self.land_record(directory, shape)

    @rule(directory=st.sampled_from(DIRECTORIES), shape=st.sampled_from(RECORD_SHAPES))
    def land(self, directory: str, shape: tuple[dict[str, int], bool]) -> None:
        self.land_record(directory, shape)

    def land_record(self, directory: str, shape: tuple[dict[str, int], bool]) -> None:
        points, rejected = shape
        records = self.landed[directory]
        records.append(Record(directory, len(records), self.now_ms, points, rejected))

    @rule(ms=st.sampled_from([1, HOUR_MS, DAY_MS]))
    def pass_time(self, ms: int) -> None:
        self.advance(ms)

    # ------------------------------------------------------------------ writers

    def read_positions(self, writer: Writer) -> dict[str, dict[str, int]]:
        """The one place a writer learns positions: the tables' snapshots."""
        if writer.positions is None:
            writer.positions = {
                name: table.positions() for name, table in self.tables.items()
            }
        return writer.positions

    def commit_consumer_positions(self, writer: Writer) -> None:
        committed = self.read_positions(writer)[plan.PUSHES]
        for name in writer.directories:
            if name in committed:
                self.consumer[name] = committed[name]

    def read_batch(self, writer: Writer) -> bool:
        """Plan a batch and write its files; False if there was nothing new."""
        committed = self.read_positions(writer)
        start = plan.batch_start(committed, writer.directories)
        ranges = []
        records: list[Record] = []
        for name in sorted(writer.directories):
            read = self.landed[name][start[name] : start[name] + writer.max_records]
            records += read
            ranges.append(SourceRange(name, name, start[name], start[name] + len(read)))
        if not records:
            self.commit_consumer_positions(writer)
            return False
        rejected = [
            {"source": r.node, "offset": r.offset, "error": "not OTLP"}
            for r in records
            if r.rejected
        ]
        planned = plan.plan_batch(ranges, committed, rejected)
        files: dict[str, list[DataFile]] = {}
        for name in planned.summaries:
            table_plan = planned.tables[name]
            rows = [
                (record, row)
                for record in records
                for row in record.rows(name)
                if table_plan.keeps(record.node, record.offset)
            ]
            if not plan.appends(name, len(rows)):
                continue
            by_day: dict[int, list[tuple[Record, Row]]] = collections.defaultdict(list)
            for record, row in rows:
                by_day[record.day].append((record, row))
            files[name] = [
                self.write_file(name, day_rows) for day_rows in by_day.values()
            ]
        writer.batch = PendingBatch(
            planned, files, [n for n in plan.WRITE_ORDER if n in files]
        )
        return True

    def write_file(self, table: str, rows: list[tuple[Record, Row]]) -> DataFile:
        data_file = DataFile(
            next(self.ids),
            rows[0][0].day,
            min(record.received_ms for record, _ in rows),
            tuple(row for _, row in rows),
            self.now_ms,
        )
        self.tables[table].disk[data_file.file_id] = data_file
        return data_file

    def commit_next_table(self, writer: Writer, pick: int) -> None:
        assert writer.batch is not None
        pending = writer.batch.to_commit
        point_tables = [n for n in pending if n != plan.PUSHES]
        # The point tables commit side by side (any order); pushes after all of them.
        name = point_tables[pick % len(point_tables)] if point_tables else plan.PUSHES
        pending.remove(name)
        summary = writer.batch.planned.summaries[name]
        self.tables[name].commit(
            next(self.ids), self.now_ms, summary, writer.batch.files[name]
        )
        if name == plan.PUSHES and "ktc.rejected" in summary:
            rejected = sum(
                r.rejected
                for source in writer.batch.planned.ranges
                for r in self.landed[source.name][source.from_offset : source.to_offset]
            )
            assert summary["ktc.rejected"] == str(rejected), "rejected miscounted"
        self.advance(1)

    def finish_batch(self, writer: Writer) -> None:
        assert writer.batch is not None and not writer.batch.to_commit
        writer.positions = writer.batch.planned.positions_after()
        writer.batch = None
        # A writer that believed a table holds less of its directories than the table's
        # snapshots say would append those records again.
        for name, table in self.tables.items():
            known = table.positions()
            for directory in writer.directories:
                assert writer.positions[name].get(directory, 0) >= known.get(
                    directory, 0
                ), f"the writer believes {name} holds less of {directory} than it does"
        self.commit_consumer_positions(writer)

    def move(self, writer: Writer, move: tuple[str, int]) -> None:
        """A writer's next step: start (a new process knows no positions), plan a batch,
        or commit one of its tables; or it is killed.  A batch whose tables are all
        committed is finished (positions advanced, consumer positions committed) at the
        writer's next step, before it plans the next: a kill in between is one after
        the commits and before the consumer positions."""
        what, argument = move
        if what == "kill":
            writer.alive, writer.positions, writer.batch = False, None, None
            writer.max_records = argument  # the next process's batch size
        elif not writer.alive:
            writer.alive = True
        elif writer.batch is None or not writer.batch.to_commit:
            if writer.batch is not None:
                self.finish_batch(writer)
            self.read_batch(writer)
        else:
            self.commit_next_table(writer, argument)

    # One rule per writer, so that writers take about a third of the steps.
    @rule(move=st.sampled_from(WRITER_MOVES))
    def first_writer(self, move: tuple[str, int]) -> None:
        self.move(self.writers[0], move)

    @rule(move=st.sampled_from(WRITER_MOVES))
    def second_writer(self, move: tuple[str, int]) -> None:
        self.move(self.writers[-1], move)

    # ------------------------------------------------------------------ maintenance

    @rule(action=st.sampled_from(MAINTENANCE_ACTIONS), table=st.sampled_from(TABLES))
    def start_maintenance(self, action: tuple[str, dict[str, Any]], table: str) -> None:
        """Read a table for a maintenance action (committed by a later step)."""
        kind, arguments = action
        if kind == "remove orphans":
            self.remove_orphan_files(self.tables[table])
        elif len(self.maintenance) < MAX_PENDING_MAINTENANCE:
            pending = getattr(self, f"plan_{kind.replace(' ', '_')}")(
                self.tables[table], **arguments
            )
            if pending is not None:
                self.maintenance.append(pending)

    def plan_compaction(
        self, model: ModelTable, closed_after_ms: int
    ) -> Compaction | None:
        by_day: dict[int, list[DataFile]] = collections.defaultdict(list)
        for file_id in sorted(model.live()):
            data_file = model.disk[file_id]
            if data_file.received_from_ms < self.now_ms - closed_after_ms:
                by_day[data_file.day].append(data_file)
        written: list[DataFile] = []
        for day_files in by_day.values():
            if len(day_files) < 2:  # min-input-files
                continue
            merged = DataFile(
                next(self.ids),
                day_files[0].day,
                min(f.received_from_ms for f in day_files),
                tuple(row for f in day_files for row in f.rows),
                self.now_ms,
            )
            model.disk[merged.file_id] = merged
            written.append(merged)
        if not written:
            return None  # rewriteDataFiles commits nothing
        replaced = frozenset(
            f.file_id for files in by_day.values() if len(files) > 1 for f in files
        )
        return self.carrying(
            Compaction, model, replaced=replaced, written=tuple(written)
        )

    def plan_rewrite_manifests(self, model: ModelTable) -> Compaction | None:
        return self.carrying(Compaction, model, replaced=frozenset(), written=())

    def plan_retention(self, model: ModelTable, days: int) -> Retention | None:
        before_day = self.now_ms // DAY_MS - days
        if not any(model.disk[f].day < before_day for f in model.live()):
            return None  # apply_retention skips a table without old files
        return self.carrying(Retention, model, before_day=before_day)

    def carrying(self, action: Callable[..., Any], model: ModelTable, **kw: Any) -> Any:
        """A maintenance action on what it read of the table: the summary production
        gives its commit, and the positions it read (commits.committed_positions)."""
        carried, read = self.check_carried(model)
        return action(model.name, carried, read, **kw)

    def plan_expiry(
        self, model: ModelTable, expire_after_s: float, retain_last: int
    ) -> Expiry:
        expiry = plan.plan_expiry(
            model.infos(),
            now_unix_ms=self.now_ms,
            expire_after_s=expire_after_s,
            retain_last=retain_last,
        )
        self.check_expiry(model, expiry)
        return Expiry(model.name, expiry)

    @rule(pick=st.sampled_from([0, 1, 0, 1, None]))
    def finish_maintenance(self, pick: int | None) -> None:
        """Commit one pending maintenance action, or (None) kill the maintainer: its
        rewritten files stay, orphans."""
        if pick is None:
            self.maintenance.clear()
        elif self.maintenance:
            self.commit_maintenance(self.maintenance.pop(pick % len(self.maintenance)))

    def commit_maintenance(self, action: Maintenance) -> None:
        model = self.tables[action.table]
        if isinstance(action, Expiry):
            self.expire(model, action.expiry)
            return
        if isinstance(action, Compaction):
            if not action.replaced <= model.live():
                return  # a replaced file went meanwhile: the rewrite fails
            added, removed = action.written, action.replaced
        else:
            added = ()
            removed = frozenset(
                f for f in model.live() if model.disk[f].day < action.before_day
            )
            model.retention_deleted.update(
                row for f in removed for row in model.disk[f].rows
            )
        current = model.positions() == action.read
        snapshot = model.commit(
            next(self.ids), self.now_ms, action.carried, added, removed
        )
        model.carried_read[snapshot.info.snapshot_id] = dict(action.read)
        if current:
            model.carried_current.add(snapshot.info.snapshot_id)
        self.advance(1)

    def expire(self, model: ModelTable, expiry: plan.ExpiryPlan) -> None:
        """Iceberg's expireSnapshots: the newest ``retain_last`` (the current one among
        them) stay, and every snapshot committed at or after the cutoff."""
        assert expiry.retain_last >= 1  # Iceberg refuses fewer
        newest = {s.info.snapshot_id for s in model.snapshots[-expiry.retain_last :]}
        kept = [
            s
            for s in model.snapshots
            if s.info.snapshot_id in newest
            or s.info.committed_at_ms >= expiry.older_than_ms
        ]
        expired = [s for s in model.snapshots if s not in kept]
        holders = newest_holders(model.snapshots)
        model.snapshots = kept
        assert newest_holders(kept) == holders, (
            f"{model.name}: expiry dropped the newest snapshot holding a position"
        )
        for file_id in {f for s in expired for f in s.live} - model.reachable():
            del model.disk[file_id]

    def remove_orphan_files(self, model: ModelTable) -> None:
        """Iceberg's deleteOrphanFiles: what no snapshot reaches, older than the delay."""
        reachable = model.reachable()
        for file_id, data_file in list(model.disk.items()):
            if (
                file_id not in reachable
                and data_file.written_ms < self.now_ms - ORPHAN_AFTER_MS
            ):
                del model.disk[file_id]

    # ------------------------------------------------------------------ invariants

    def records_below(self, name: str, table: str, end: int) -> set[Row]:
        """The rows of a directory's records before ``end`` (landed records never change)."""
        key = (name, table, min(end, len(self.landed[name])))
        if (rows := self.rows_below.get(key)) is None:
            rows = self.rows_below[key] = {
                row for record in self.landed[name][:end] for row in record.rows(table)
            }
        return rows

    @invariant()
    def no_row_twice(self) -> None:
        for table in self.tables.values():
            twice = [row for row, n in table.live_rows().items() if n > 1]
            assert not twice, f"{table.name} holds rows twice: {twice}"

    @invariant()
    def positions_never_go_backwards(self) -> None:
        for table in self.tables.values():
            seen = self.seen_positions[table.name]
            for name, end in table.positions().items():
                assert end >= seen.get(name, 0), (
                    f"{table.name}'s position of {name} went back from {seen[name]} to {end}"
                )
                seen[name] = end
            lost = set(seen) - set(table.positions())
            assert not lost, f"{table.name} lost its position of {lost}"
        for name, end in self.consumer.items():
            assert end >= self.seen_consumer.get(name, 0), "consumer position went back"
            self.seen_consumer[name] = end

    @invariant()
    def each_position_is_the_end_of_what_its_table_holds(self) -> None:
        for table in self.tables.values():
            positions = table.positions()
            for name in DIRECTORIES:
                expected = (
                    self.records_below(name, table.name, positions.get(name, 0))
                    - table.retention_deleted
                )
                held = table.held(name)
                assert held == expected, (
                    f"{table.name} at position {positions.get(name, 0)} of {name}: "
                    f"missing {sorted(expected - held)}, beyond {sorted(held - expected)}"
                )

    @invariant()
    def every_table_holds_what_is_before_the_batch_start(self) -> None:
        pushes = self.tables[plan.PUSHES].positions()
        for table in self.tables.values():
            for name in DIRECTORIES:
                below = (
                    self.records_below(name, table.name, pushes.get(name, 0))
                    - table.retention_deleted
                )
                missing = below - table.held(name)
                assert not missing, (
                    f"{table.name} misses {sorted(missing)}, before the pushes "
                    f"table's position {pushes.get(name, 0)} a batch of {name} starts at"
                )

    @invariant()
    def the_consumer_position_is_never_ahead_of_pushes(self) -> None:
        pushes = self.tables[plan.PUSHES].positions()
        for name, end in self.consumer.items():
            assert end <= pushes.get(name, 0), f"consumer position of {name} ahead"

    @invariant()
    def every_file_a_snapshot_reaches_exists(self) -> None:
        for table in self.tables.values():
            gone = table.reachable() - set(table.disk)
            assert not gone, f"{table.name}'s snapshots reach deleted files {gone}"

    @invariant()
    def maintenance_now_would_carry_every_position_and_expire_none(self) -> None:
        """The maintenance decisions, taken on every table as it is now: a commit
        carries every position, and the most eager expiry (``expire_after`` 0, the
        last snapshot kept) keeps the newest snapshot holding each position."""
        for table in self.tables.values():
            if not table.snapshots:
                continue
            self.check_carried(table)
            self.check_expiry(
                table,
                plan.plan_expiry(
                    table.infos(),
                    now_unix_ms=self.now_ms,
                    expire_after_s=0,
                    retain_last=1,
                ),
            )

    def check_carried(self, table: ModelTable) -> tuple[dict[str, str], dict[str, int]]:
        """What a maintenance commit on the table would carry, and the positions it
        read: the same."""
        infos = table.infos()
        carried = plan.maintenance_properties(infos)
        read = commits.committed_positions(infos)
        carries = SnapshotInfo(0, self.now_ms, carried).positions()
        assert carries == read, (
            f"{table.name}: a maintenance commit carries {carries}, it read {read}"
        )
        return carried, read

    def check_expiry(self, table: ModelTable, expiry: plan.ExpiryPlan) -> None:
        """An expiry planned now keeps the newest snapshot holding each position."""
        for name, committed_at in newest_holders(table.snapshots).items():
            assert expiry.older_than_ms <= committed_at, (
                f"{table.name}: expiry would drop the newest snapshot holding the "
                f"position of {name}"
            )

    @invariant()
    def maintenance_carries_every_position_it_read(self) -> None:
        for table in self.tables.values():
            horizon = commits.expire_horizon_ms(table.infos())
            for snapshot in table.snapshots:
                snapshot_id = snapshot.info.snapshot_id
                read = table.carried_read.get(snapshot_id)
                if read is None:
                    continue
                assert snapshot.info.positions() == read, (
                    f"{table.name}: a maintenance commit carries "
                    f"{snapshot.info.positions()}, it read {read}"
                )
                # What carrying is for: a directory whose ingest stopped no longer
                # holds expiry back before the maintenance snapshot.
                if snapshot_id in table.carried_current and read:
                    assert horizon is not None
                    assert horizon >= snapshot.info.committed_at_ms, (
                        f"{table.name}: expiry held back before maintenance snapshot "
                        f"{snapshot_id}"
                    )

    # ------------------------------------------------------------------ drained

    def teardown(self) -> None:
        """Every writer restarted and drained: every record in once."""
        self.maintenance.clear()
        for writer in self.writers:
            if not writer.alive:
                writer.alive = True
            if writer.batch:
                while writer.batch.to_commit:
                    self.commit_next_table(writer, 0)
                self.finish_batch(writer)
            for _ in range(DRAIN_BATCHES):
                if not self.read_batch(writer):
                    break
                while writer.batch and writer.batch.to_commit:
                    self.commit_next_table(writer, 0)
                self.finish_batch(writer)
            else:
                raise AssertionError("the writer never drained")
            self.check_every_invariant()
        for table in self.tables.values():
            rows = table.live_rows()
            for name, records in self.landed.items():
                expected = self.records_below(name, table.name, len(records))
                missing = expected - table.retention_deleted - set(rows)
                assert not missing, f"drained, {table.name} misses {sorted(missing)}"
        for name, records in self.landed.items():
            if records:
                assert self.consumer.get(name) == len(records), "consumer behind"

    def check_every_invariant(self) -> None:
        self.no_row_twice()
        self.positions_never_go_backwards()
        self.each_position_is_the_end_of_what_its_table_holds()
        self.every_table_holds_what_is_before_the_batch_start()
        self.the_consumer_position_is_never_ahead_of_pushes()
        self.every_file_a_snapshot_reaches_exists()
        self.maintenance_now_would_carry_every_position_and_expire_none()
        self.maintenance_carries_every_position_it_read()


# Interleavings (examples) of up to STEPS steps each: about 45 s of one core (Hypothesis
# itself costs about 0.5 ms a step); fewer, shorter interleavings rarely reach a
# compaction or a retention delete between a writer's read and its commits.
EXAMPLES = 2000
STEPS = 50


def _settings(examples: int, *, shrink: bool = True) -> settings:
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(
        max_examples=examples,
        stateful_step_count=STEPS,
        derandomize=True,
        database=None,
        deadline=None,
        phases=phases,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        verbosity=Verbosity.normal if shrink else Verbosity.quiet,
    )


@pytest.mark.timeout(900)  # a loaded 2-core machine stretches the 45 s of CPU
def test_the_exactly_once_decisions_hold_in_every_interleaving() -> None:
    run_state_machine_as_test(ExactlyOnceModel, settings=_settings(EXAMPLES))


# ---------------------------------------------------------------------- mutations


def _finds_a_failure(
    monkeypatch: pytest.MonkeyPatch, name: str, broken: Callable[..., Any], *said: str
) -> None:
    """The machine, with plan.<name> broken, fails one of the invariants that ``said``."""
    monkeypatch.setattr(plan, name, broken)
    with pytest.raises(AssertionError) as failure:
        run_state_machine_as_test(
            ExactlyOnceModel, settings=_settings(EXAMPLES, shrink=False)
        )
    assert any(words in str(failure.value) for words in said), failure.value


def test_a_maintenance_commit_that_drops_a_position_is_caught(monkeypatch) -> None:
    production = plan.maintenance_properties

    def drops_one(snapshots: Iterable[SnapshotInfo]) -> dict[str, str]:
        return dict(sorted(production(snapshots).items())[1:])

    _finds_a_failure(
        monkeypatch, "maintenance_properties", drops_one, "a maintenance commit carries"
    )


def test_an_expiry_horizon_one_snapshot_too_new_is_caught(monkeypatch) -> None:
    production = commits.expire_horizon_ms

    def one_too_new(snapshots: Iterable[SnapshotInfo]) -> int | None:
        snapshots = list(snapshots)
        horizon = production(snapshots)
        newer = [
            s.committed_at_ms for s in snapshots if s.committed_at_ms > (horizon or 0)
        ]
        return None if horizon is None else min(newer, default=horizon)

    _finds_a_failure(
        monkeypatch,
        "expire_horizon_ms",
        one_too_new,
        "the newest snapshot holding",
        "went back",
        "lost its position",
    )


def test_a_batch_started_at_the_most_advanced_table_is_caught(monkeypatch) -> None:
    def most_advanced(
        committed: Mapping[str, Mapping[str, int]], directories: Iterable[str]
    ) -> dict[str, int]:
        return {
            name: max(p.get(name, 0) for p in committed.values())
            for name in directories
        }

    _finds_a_failure(monkeypatch, "batch_start", most_advanced, "miss")


def test_a_replay_not_filtered_by_each_tables_position_is_caught(monkeypatch) -> None:
    def from_the_batch_start(
        ranges: Iterable[SourceRange], committed: Mapping[str, int]
    ) -> tuple[SourceRange, ...]:
        return tuple(ranges)

    _finds_a_failure(monkeypatch, "table_ranges", from_the_batch_start, "twice")


def test_a_restart_with_smaller_batches_keeps_what_a_table_holds() -> None:
    """One writer of both directories is killed after ``metrics_gauge`` committed a
    batch of five records of node-1; restarted with batches of two, its next batch
    reads node-1 from ``pushes``' position (0) and node-2's first records.  Gauge gets
    node-2's rows only, and the writer must still know that gauge holds node-1 up to 5,
    or its batch after would append node-1's records 2-4 to gauge again."""
    gauge = (plan.POINT_TABLES[0], 1)
    machine = ExactlyOnceModel()
    machine.start(True, 5, [("node-1", ({gauge[0]: 1}, False))] * 5)
    (writer,) = machine.writers
    for move in [("step", 0), ("step", 0), ("kill", 2), ("step", 0)]:
        machine.move(writer, move)  # plan, commit gauge, killed, restarted
    machine.land_record("node-2", ({gauge[0]: 1}, False))
    machine.land_record("node-2", ({gauge[0]: 1}, False))
    machine.move(writer, ("step", 0))  # plans node-1 [0, 2) and node-2 [0, 2)
    assert machine.tables[gauge[0]].positions() == {"node-1": 5}
    while writer.batch is not None:
        machine.move(writer, ("step", 0))
        machine.check_every_invariant()
    machine.teardown()
