"""LandingLog: the append-only, segmented, crash-safe log every accepted push goes to.

One writer per directory (an flock on ``.lock`` enforces it). ``append`` encodes the record
(45-byte head, context JSON, payload; see format.py) and hands the three parts to a single
``os.writev`` on an ``O_APPEND`` descriptor: once it returns, the bytes are the kernel's, so
a push acknowledged after ``append`` survives the process being killed. What survives a
power failure depends on the fsync policy (durability.py).

The log is this class over one module per job:

| job                                                    | module            |
|--------------------------------------------------------|-------------------|
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

Rolling (Kafka's segment.bytes / segment.ms) happens as records are added (appender.py);
``maybe_roll`` does the age check for an idle log.

Write-behind (``write_behind=True``, what the collector uses): ``export`` only stages the
record (context and payload, not encoded yet); the owner calls ``flush`` before it
acknowledges, and ``flush`` encodes every staged record into the batch and hands the batch
to the kernel in one ``writev``. The collector flushes once per socket read, just before
writing that read's responses, so one system call covers every push of the read, and
"acknowledged means in the log" still holds. A failed flush raises: none of the staged
records is in the log and none may be acknowledged.

Locks: the gate's lock (``_lock``) guards the state of every part and is held for a write;
a sync round holds the rounds' lock (sync.py) and takes ``_lock`` only to plan and to
finish, so appends go on during an fsync (syncer.py). Order: the rounds' lock before
``_lock``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from clock import SYSTEM_CLOCK, Clock
from exporters.base import ExportResult
from exporters.context import TelemetryContext
from exporters.landing.active import ActiveSegment
from exporters.landing.appender import Appender
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
from exporters.landing.gate import Gate
from exporters.landing.health import DiskHealth
from exporters.landing.housekeeping import Housekeeper
from exporters.landing.layout import SegmentInfo, list_segments, lock_directory
from exporters.landing.options import LandingOptions
from exporters.landing.positions import committed_offsets
from exporters.landing.preallocate import BlockReservations
from exporters.landing.retention import RetentionPolicy, segments_to_delete
from exporters.landing.segments import Segments
from exporters.landing.sync import SyncRounds
from exporters.landing.syncer import Syncer

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

_log = logging.getLogger("exporters.landing")

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
        self._segment_max_bytes = options.segment_max_bytes
        self._segment_max_age_ns = options.segment_max_age_ms * _NS_PER_MS
        self._policy = FsyncPolicy.parse(options.fsync)
        # fsync inside append (and at a roll) only for plain "always"; with group commit the
        # owner calls sync(), typically from a worker thread, before acknowledging.
        self._fsync_inline = (
            self._policy is FsyncPolicy.ALWAYS and not options.group_commit
        )
        # None or a negative value (Kafka's -1) means no limit.
        self._retention = RetentionPolicy(
            retention_ms=_limit_or_none(options.retention_ms),
            retention_bytes=_limit_or_none(options.retention_bytes),
            respect_consumers=options.retention_respect_consumers,
        )
        self._required_consumers = tuple(options.retention_required_consumers)
        self._max_record_bytes = options.max_record_bytes
        self._clock = clock
        # The wall clock's bound method, read once (called for every flush and append).
        self._time_ns: Callable[[], int] = clock.time_ns
        self._write_behind = options.write_behind
        # How many staged records the owner lets wait for its flush (see needs_flush_now).
        self.write_behind_max_records = options.write_behind_max_records
        # Write-behind: (context, payload) handed to stage() and not encoded yet. flush()
        # encodes them in one loop (the code stays hot in the CPU's caches: about half the
        # cost of encoding each at stage time, on the push path) and writes them.
        self._staged: list[tuple[TelemetryContext, bytes]] = []

        self._health = DiskHealth(self.directory)
        self._gate = Gate(self.directory, self._health)
        self._lock = self._gate.lock
        self._rounds = SyncRounds()
        self._reservations = BlockReservations(
            self.directory, self._segment_max_bytes, self._lock
        )
        self._counters = {
            "records_appended": 0,
            "bytes_appended": 0,
            "segments_rolled": 0,
            "segments_deleted": 0,
            "fsyncs": 0,
            "recovered_truncated_bytes": 0,
            "recovered_corrupt_regions": 0,
        }

        durable = self._policy is not FsyncPolicy.NEVER
        self._segments = Segments(
            self.directory,
            self._reservations,
            self._rounds,
            self._health,
            self._counters,
            durable=durable,
            fsync_inline=self._fsync_inline,
            max_record_bytes=self._max_record_bytes,
            time_ns=self._time_ns,
        )

        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = lock_directory(self.directory)
        active: ActiveSegment | None = None
        try:
            active, last_append_ns = self._segments.open_active()
            if housekeeping:  # a serving log: its appends should not allocate blocks
                reserved = self._reservations.reserve_rest(active.fd, active.size)
                active.reserved = active.reserved or reserved
            if durable:
                # What a previous run left in the page cache becomes durable too.
                os.fsync(active.fd)
                self._rounds.durable_offset = active.next_offset
        except BaseException:
            if active is not None:
                os.close(active.fd)
            os.close(self._lock_fd)
            raise
        self._appender = Appender(
            self._segments,
            active,
            last_append_ns,
            self._health,
            self._rounds,
            self._counters,
            segment_max_bytes=self._segment_max_bytes,
            segment_max_age_ns=self._segment_max_age_ns,
            durable=durable,
        )
        self._syncer = Syncer(
            self._gate,
            self._rounds,
            self._appender,
            self._segments,
            self._health,
            self._counters,
            durable=durable,
        )

        self._housekeeper: Housekeeper | None = None
        if housekeeping:
            self._housekeeper = Housekeeper(
                self,
                self._reservations,
                clock,
                name=self.directory.name,
                period_ms=(
                    options.fsync_interval_ms
                    if self._policy is FsyncPolicy.INTERVAL
                    else min(options.fsync_interval_ms, 1000)
                ),
                interval_sync=self._policy is FsyncPolicy.INTERVAL,
                retention_check_interval_ms=options.retention_check_interval_ms,
            )
            self._housekeeper.start()

    # ------------------------------------------------------------------ appending

    def export(self, context: TelemetryContext, payload: bytes) -> ExportResult:
        """Exporter protocol: success only once the record is in the log (write-behind: once
        it is staged; the owner's ``flush`` then decides, before anything is acknowledged)."""
        try:
            if not self._write_behind:
                self.append(context, payload)
            elif len(payload) <= self._max_record_bytes and not self._gate.closed:
                # stage()'s checks, inlined (it runs once per accepted push); a log closed
                # meanwhile, or one that cannot write, is caught by flush(), under the lock.
                self._staged.append((context, payload))
            else:
                self.stage(context, payload)  # raises the right error
        except RecordRejected as rejected:
            self._note_export_failure(rejected)
            return ExportResult.failure(f"landing log: {rejected}")
        except (LandingError, OSError) as error:
            # Storage trouble (or shutting down): the client may push again later.
            self._note_export_failure(error)
            return ExportResult.unavailable(f"landing log: {error}")
        return _EXPORTED

    def _note_export_failure(self, error: Exception, records: int = 1) -> None:
        with self._lock:
            failures = self._health.export_failed(records, self._clock.monotonic())
        if failures is not None:
            _log.error(
                "landing log %s: append failed (%d so far): %s",
                self.directory,
                failures,
                error,
            )

    def append(self, context: TelemetryContext, payload: bytes) -> int:
        """Appends one record and returns its offset. Under ``fsync="always"`` it is on disk
        when this returns; otherwise it is with the kernel (survives a process kill).
        Records staged before are written first, in order."""
        if self._staged:
            self.flush()
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
        if self._staged:
            self.flush()
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
        if len(payload) > self._max_record_bytes:
            raise RecordTooLarge(
                f"record of {len(payload)} bytes exceeds max_record_bytes {self._max_record_bytes}"
            )
        if self._gate.closed:
            with self._lock:
                self._gate.check_open()
        # A log that cannot write still stages: the flush tries the disk again (or refuses
        # at once while a reopen is owed), so every refusal comes from one place.
        self._staged.append((context, payload))

    @property
    def needs_flush(self) -> bool:
        """Whether records are staged (cheap: asked before every batch of responses)."""
        return bool(self._staged)

    @property
    def needs_flush_now(self) -> bool:
        """Whether ``write_behind_max_records`` or more records are staged: the owner
        should flush before staging more, not at its next regular point.  (The collector
        flushes once per event-loop turn; a turn that reads from many connections would
        otherwise hold every answer until its last read is handled.)"""
        return len(self._staged) >= self.write_behind_max_records

    def flush(self) -> list[tuple[TelemetryContext, bytes]]:
        """Encodes and hands every staged record to the kernel (one ``writev`` per up to 300
        records; under ``fsync="always"`` also fsyncs) and returns them. Raises
        ``UnlandedRecords`` (a ``LandingError``) naming them when they are not all in the
        log: then acknowledge none of them (those before the failure may be in the log:
        delivered at least once, like ``append_many``)."""
        staged = self._staged
        if not staged:
            with self._lock:
                self._gate.check_open()
            return staged
        self._staged = []
        appender = self._appender
        with self._lock:
            try:
                self._gate.check_writable()
                # One clock read per flush: a record's append time is when its batch is
                # handed to the kernel (the records of one socket read share it), not
                # when it was staged microseconds earlier.
                appender.add_staged(staged, self._time_ns(), self._max_record_bytes)
                appender.write_batch()
                if self._fsync_inline:
                    appender.fsync_active()
                return staged
            # (One name per exception type: mypyc gives a name one type per function.)
            except ContextEncodingError as encoding_error:
                appender.drop_batch()
                failure = LandingError(str(encoding_error))
            except LandingError as landing_error:
                appender.drop_batch()
                failure = landing_error
            except (
                OSError
            ) as fsync_error:  # the fsync failed: the records are not durable
                appender.drop_batch()
                failure = LandingError(f"fsync failed: {fsync_error}")
        self._note_export_failure(failure, len(staged))
        raise UnlandedRecords(str(failure), staged) from failure

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
        if self._staged and not self._gate.closed and self._health.broken is None:
            try:
                self.flush()  # staged, never acknowledged: keep them
            except LandingError as error:
                _log.error(
                    "landing log %s: staged records lost at close: %s",
                    self.directory,
                    error,
                )
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
            with self._rounds.lock, self._lock:
                active = self._appender.active
                if self._health.broken is None:
                    active.release_reserved()
                self._reservations.drop_spare_locked()
                os.close(active.fd)
                os.close(self._lock_fd)
                self._gate.descriptors_closed = True

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
                min_committed_offset = self._lowest_consumer_position()
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

    def _lowest_consumer_position(self) -> int | None:
        positions = committed_offsets(self.directory)
        for name in self._required_consumers:
            positions.setdefault(name, 0)
        return min(positions.values()) if positions else None


def _limit_or_none(limit: int | None) -> int | None:
    return None if limit is None or limit < 0 else limit
