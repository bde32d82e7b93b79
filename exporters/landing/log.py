"""LandingLog: the append-only, segmented, crash-safe log every accepted push goes to.

One writer per directory (an flock on ``.lock`` enforces it). ``append`` encodes the record
(45-byte head, context JSON, payload; see format.py) and hands the three parts to a single
``os.writev`` on an ``O_APPEND`` descriptor: once it returns, the bytes are the kernel's, so
a push acknowledged after ``append`` survives the process being killed. What survives a
power failure depends on the fsync policy (durability.py).

The log is this class over one module per job:

| job                                                    | module            |
|--------------------------------------------------------|-------------------|
| opening: the parts made, the active segment recovered  | opening.py        |
| the lock; closed, broken: may the log write            | gate.py           |
| records into the active segment, batched; the roll     | appender.py       |
| the batch of encoded records and its ``writev``        | writer.py         |
| segment files: recovered, created, sealed, deleted     | segments.py       |
| the active segment: created, recovered at open         | active.py         |
| the durability loop: sync rounds run, probes           | syncer.py         |
| sync rounds: what is not durable yet, group commit     | sync.py           |
| disk health: unwritable, broken, probes                | health.py         |
| blocks reserved ahead, the spare segment               | preallocate.py    |
| housekeeping: the tick thread, the spare maker         | housekeeping.py   |
| retention: which sealed segments go                    | retention.py      |
| write-behind: records staged, encoded at the flush     | staging.py        |

Rolling (Kafka's segment.bytes / segment.ms) happens as records are added (appender.py);
``maybe_roll`` does the age check for an idle log.

Write-behind (``write_behind=True``, what the collector uses; staging.py): ``export`` only
stages the record, and the owner calls ``flush`` before it acknowledges; one ``writev``
covers every push of a socket read. A failed flush raises: none of the staged records may
be acknowledged.

Locks: the gate's lock (``_lock``) guards the state of every part and is held for a write;
a sync round holds the rounds' lock (sync.py) and takes ``_lock`` only to plan and to
finish, so appends go on during an fsync (syncer.py). Order: the rounds' lock before
``_lock``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from clock import SYSTEM_CLOCK, Clock
from exporters.base import ExportResult
from exporters.context import TelemetryContext
from exporters.landing.durability import FsyncPolicy
from exporters.landing.errors import (
    LandingError,
    LandingLogClosed,
    LandingLogLocked,
    RecordRejected,
    RecordTooLarge,
    UnlandedRecords,
)
from exporters.landing.format import ContextEncodingError, encode_context
from exporters.landing.housekeeping import Housekeeper
from exporters.landing.layout import SegmentInfo, list_segments
from exporters.landing.opening import open_parts, retention_policy, start_housekeeping
from exporters.landing.options import LandingOptions
from exporters.landing.positions import lowest_committed_offset
from exporters.landing.retention import segments_to_delete

__all__ = [
    "LandingError",
    "LandingLog",
    "LandingLogClosed",
    "LandingLogLocked",
    "LandingStats",
    "RecordRejected",
    "RecordTooLarge",
    "UnlandedRecords",
]

_NS_PER_MS: Final = 1_000_000
_EXPORTED: Final = ExportResult.success()


@dataclasses.dataclass(frozen=True, slots=True)
class LandingStats:
    next_offset: int
    active_base_offset: int
    active_size_bytes: int
    records_appended: int  # by this LandingLog since open
    bytes_appended: int
    segments_rolled: int
    segments_deleted: int
    fsyncs: int
    recovered_truncated_bytes: int  # torn tail removed when opening
    recovered_corrupt_regions: int  # damage kept in the active segment when opening
    export_failures: int  # records refused (export() failures and failed flushes)
    write_failures: int  # writes, fsyncs and rolls that failed since open


class LandingLog:
    """The durable landing log of one collector node (an Exporter).

    ``options`` (:class:`~exporters.landing.options.LandingOptions`) say how it rolls,
    syncs, retains and writes. ``clock`` stamps records (its wall clock) and paces the
    housekeeping. ``housekeeping`` starts its threads (housekeeping.py). Tests pass
    ``housekeeping=False`` and drive ``maybe_roll`` / ``apply_retention`` with their own
    ``now_ms``.
    """

    def __init__(
        self,
        directory: Path,
        options: LandingOptions | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        housekeeping: bool = True,
    ) -> None:
        if options is None:
            options = LandingOptions()
        self.options = options
        self.directory = Path(directory)
        self._segment_max_age_ns = options.segment_max_age_ms * _NS_PER_MS
        self._policy = FsyncPolicy.parse(options.fsync)
        # fsync inside append (and at a roll) only for plain "always"; with group commit the
        # owner calls sync(), typically from a worker thread, before acknowledging.
        self._fsync_inline = (
            self._policy is FsyncPolicy.ALWAYS and not options.group_commit
        )
        self._retention = retention_policy(options)
        self._required_consumers = tuple(options.retention_required_consumers)
        self._max_record_bytes = options.max_record_bytes
        self._clock = clock
        # The wall clock's bound method, read once (called for every flush and append).
        self._time_ns: Callable[[], int] = clock.time_ns
        self._write_behind = options.write_behind

        parts = open_parts(
            self.directory,
            options,
            durable=self._policy is not FsyncPolicy.NEVER,
            fsync_inline=self._fsync_inline,
            reserve=housekeeping,
            time_ns=self._time_ns,
            monotonic=clock.monotonic,
        )
        self._health = parts.health
        self._gate = parts.gate
        self._lock = parts.gate.lock
        self._rounds = parts.rounds
        self._reservations = parts.reservations
        self._segments = parts.segments
        self._appender = parts.appender
        self._syncer = parts.syncer
        self._staging = parts.staging
        self._counters = parts.counters
        self._parts = parts

        self._housekeeper: Housekeeper | None = None
        if housekeeping:
            self._housekeeper = start_housekeeping(
                self,
                self._reservations,
                options,
                self._policy,
                clock,
                self.directory.name,
            )

    # ------------------------------------------------------------------ appending

    def export(self, context: TelemetryContext, payload: bytes) -> ExportResult:
        """Exporter protocol: success only once the record is in the log (write-behind: once
        it is staged; the owner's ``flush`` then decides, before anything is acknowledged)."""
        try:
            if self._write_behind:
                self._staging.stage(context, payload)
            else:
                self.append(context, payload)
        except RecordRejected as rejected:
            self._staging.note_failure(rejected)
            return ExportResult.failure(f"landing log: {rejected}")
        except (LandingError, OSError) as error:
            # Storage trouble (or shutting down): the client may push again later.
            self._staging.note_failure(error)
            return ExportResult.unavailable(f"landing log: {error}")
        return _EXPORTED

    def append(self, context: TelemetryContext, payload: bytes) -> int:
        """Appends one record and returns its offset. Under ``fsync="always"`` it is on disk
        when this returns; otherwise it is with the kernel (survives a process kill).
        Records staged before are written first, in order."""
        if self._staging.records:
            self._staging.flush()
        context_json = self._encode_context(context)
        self._check_record_size(context_json, payload)
        with self._lock:
            self._gate.check_writable()
            appender = self._appender
            offset = appender.add(context_json, payload, self._time_ns())
            appender.write_batch()
            if self._fsync_inline:
                appender.fsync_active()
        return offset

    def append_many(self, items: Iterable[tuple[TelemetryContext, bytes]]) -> list[int]:
        """Group commit: appends a batch with as few writev calls as possible and, under
        ``fsync="always"``, one fsync for the whole batch. Sizes are checked before anything
        is written. If writing fails part-way, the records before the failure stay in the
        log (they may be delivered although the caller reports an error: at least once)."""
        if self._staging.records:
            self._staging.flush()
        encoded = [
            (self._encode_context(context), payload) for context, payload in items
        ]
        for context_json, payload in encoded:
            self._check_record_size(context_json, payload)
        if not encoded:
            return []
        with self._lock:
            self._gate.check_writable()
            now_ns = self._time_ns()
            appender = self._appender
            offsets = [
                appender.add(context_json, payload, now_ns)
                for context_json, payload in encoded
            ]
            appender.write_batch()
            if self._fsync_inline:
                appender.fsync_active()
        return offsets

    def stage(self, context: TelemetryContext, payload: bytes) -> None:
        """Stages one record for the next ``flush``. The record is not in the log, and
        readers do not see it, until ``flush`` returns: nothing may be acknowledged before
        that. Call from one thread (the owner's); ``flush`` encodes and writes."""
        self._staging.stage(context, payload)

    @property
    def needs_flush(self) -> bool:
        """Whether records are staged (cheap: asked before every batch of responses)."""
        return bool(self._staging.records)

    @property
    def needs_flush_now(self) -> bool:
        """Whether ``write_behind_max_records`` or more records are staged: the owner
        should flush before staging more, not at its next regular point.  (The collector
        flushes once per event-loop turn; a turn that reads from many connections would
        otherwise hold every answer until its last read is handled.)"""
        staging = self._staging
        return len(staging.records) >= staging.max_records

    @property
    def write_behind_max_records(self) -> int:
        """How many staged records the owner lets wait for its flush."""
        return self._staging.max_records

    def flush(self) -> list[tuple[TelemetryContext, bytes]]:
        """Encodes and hands every staged record to the kernel (one ``writev`` per up to 300
        records; under ``fsync="always"`` also fsyncs) and returns them. Raises
        ``UnlandedRecords`` (a ``LandingError``) naming them when they are not all in the
        log: then acknowledge none of them (those before the failure may be in the log:
        delivered at least once, like ``append_many``)."""
        return self._staging.flush()

    # ------------------------------------------------------------------ durability

    def sync(self) -> None:
        """Returns once everything appended before the call is fsynced (with new and
        deleted segment names), whatever the policy. Safe from any thread while appends go
        on; concurrent calls share fsyncs, and a call finds nothing to do when an earlier
        round already covered it. This is the group-commit half of ``group_commit=True``."""
        self._syncer.sync()

    @property
    def durable_offset(self) -> int:
        """Every offset below this is fsynced (under ``never`` only what sync() covered)."""
        with self._lock:
            return self._rounds.durable_offset

    # ------------------------------------------------------------------ disk health

    @property
    def unwritable_reason(self) -> str | None:
        """Why the last write failed (disk full, I/O error, fsync failed), or None when the
        log writes: set by a failed write, cleared by the next one that succeeds or by a
        successful ``probe``. The collector's readiness check."""
        return self._health.unwritable

    def is_broken(self) -> bool:
        """Whether appends are refused until the active segment is reopened (``probe``)."""
        return self._health.broken is not None

    def probe(self) -> bool:
        """While the log cannot write, tries whether it can again; True when it can
        (syncer.py: a write that failed is retried as a probe file, a broken log reopens
        its active segment as a restart does).

        The housekeeping thread calls it every tick while the log cannot write, so
        readiness comes back once space does, with no push needed to find out."""
        return self._syncer.probe()

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Stops the housekeeping threads, fsyncs (unless the policy is ``never``),
        releases the directory. Idempotent."""
        self._staging.flush_at_close()  # staged, never acknowledged: keep them
        with self._lock:
            if self._gate.closed:
                return
            self._gate.closed = True
            self._reservations.closed = True
        if self._housekeeper is not None:
            self._housekeeper.stop()
        try:
            if self._policy is not FsyncPolicy.NEVER and self._health.broken is None:
                self._syncer.run_round(self._appender.active.next_offset)
        finally:
            self._parts.release()

    def __enter__(self) -> LandingLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ rolling, retention

    def maybe_roll(self, now_ms: int) -> bool:
        """Seals the active segment if its first record is ``segment_max_age_ms`` old at
        ``now_ms``; True when it rolled."""
        with self._lock:
            self._gate.check_writable()
            active = self._appender.active
            if active.records and active.aged(
                now_ms * _NS_PER_MS, self._segment_max_age_ns
            ):
                self._appender.roll()
                return True
            return False

    def apply_retention(
        self, now_ms: int, min_committed_offset: int | None = None
    ) -> list[SegmentInfo]:
        """Deletes the sealed segments retention allows (retention.py) and returns them.

        ``min_committed_offset``: no segment holding an offset at or above it is deleted
        (with ``retention_respect_consumers``). When None, it is the lowest position
        committed under ``consumers/`` (a consumer named in ``retention_required_consumers``
        that never committed counts as 0); with no consumers at all nothing protects."""
        with self._lock:
            self._gate.check_open()
            if min_committed_offset is None and self._retention.respect_consumers:
                min_committed_offset = lowest_committed_offset(
                    self.directory, self._required_consumers
                )
            doomed = segments_to_delete(
                list_segments(self.directory),
                self._retention,
                now_ms,
                min_committed_offset,
            )
            self._segments.delete(doomed)
            return doomed

    # ------------------------------------------------------------------ introspection

    @property
    def next_offset(self) -> int:
        with self._lock:
            return self._appender.active.next_offset

    @property
    def fsync_policy(self) -> FsyncPolicy:
        return self._policy

    @property
    def has_spare(self) -> bool:
        """Whether a segment's blocks are reserved for the next roll (preallocate.py)."""
        with self._lock:
            return self._reservations.spare is not None

    def stats(self) -> LandingStats:
        with self._lock:
            active = self._appender.active
            return LandingStats(
                next_offset=active.next_offset,
                active_base_offset=active.base_offset,
                active_size_bytes=active.size,
                export_failures=self._health.export_failures,
                write_failures=self._health.write_failures,
                **self._counters,
            )

    def __repr__(self) -> str:
        return f"LandingLog({str(self.directory)!r}, fsync={self._policy.value!r})"

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _encode_context(context: TelemetryContext) -> bytes:
        try:
            return encode_context(context)
        except ContextEncodingError as error:
            raise RecordRejected(str(error)) from error

    def _check_record_size(self, context_json: bytes, payload: bytes) -> None:
        size = len(context_json) + len(payload)
        if size > self._max_record_bytes:
            raise RecordTooLarge(
                f"record of {size} bytes exceeds max_record_bytes {self._max_record_bytes}"
            )
