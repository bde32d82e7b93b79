"""LandingLog: the append-only, segmented, crash-safe log every accepted push goes to.

One writer per directory (an flock on ``.lock`` enforces it). ``append`` encodes the record
(45-byte head, context JSON, payload; see format.py) and hands the three parts to a single
``os.writev`` on an ``O_APPEND`` descriptor: once it returns, the bytes are the kernel's, so
a push acknowledged after ``append`` survives the process being killed. What survives a
power failure depends on the fsync policy (durability.py).

The log is this class over one module per job:

| job                                                | module            |
|----------------------------------------------------|-------------------|
| the active segment: created, recovered at open     | active.py         |
| the batch of encoded records and its ``writev``    | writer.py         |
| sync rounds: what is not durable yet, group commit | sync.py           |
| disk health: unwritable, broken, probes            | health.py         |
| blocks reserved ahead, the spare segment           | preallocate.py    |
| housekeeping: the tick thread, the spare maker     | housekeeping.py   |
| retention: which sealed segments go                | retention.py      |

Rolling (Kafka's segment.bytes / segment.ms): before an append, the active segment is sealed
when the record would take it past ``segment_max_bytes`` or its first record is
``segment_max_age_ms`` old; ``maybe_roll`` does the age check for an idle log. A segment
never holds zero records when sealed, so base offsets strictly increase.

Write-behind (``write_behind=True``, what the collector uses): ``export`` only stages the
record (context and payload, not encoded yet); the owner calls ``flush`` before it
acknowledges, and ``flush`` encodes every staged record into the batch and hands the batch
to the kernel in one ``writev``. The collector flushes once per socket read, just before
writing that read's responses, so one system call covers every push of the read, and
"acknowledged means in the log" still holds. A failed flush raises: none of the staged
records is in the log and none may be acknowledged.

Locks: ``_lock`` guards the state of every part and is held for a write; a sync round holds
the rounds' lock (sync.py) and takes ``_lock`` only to plan and to finish, so appends go on
during an fsync. Order: the rounds' lock before ``_lock``.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from clock import SYSTEM_CLOCK, Clock
from exporters.base import ExportResult
from exporters.context import TelemetryContext
from exporters.landing.active import ActiveSegment
from exporters.landing.durability import FsyncPolicy, fsync_directory
from exporters.landing.errors import (
    LandingError,
    LandingLogClosed,
    LandingLogLocked,
    RecordRejected,
    RecordTooLarge,
    UnlandedRecords,
)
from exporters.landing.format import (
    RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES,
    ContextEncodingError,
    encode_context,
    encode_record_head,
)
from exporters.landing.health import PROBE_FILE_NAME, DiskHealth
from exporters.landing.housekeeping import Housekeeper
from exporters.landing.layout import TEMP_SUFFIX, SegmentInfo, list_segments
from exporters.landing.options import LandingOptions
from exporters.landing.positions import committed_offsets
from exporters.landing.preallocate import SPARE_FILE_NAME, BlockReservations
from exporters.landing.retention import RetentionPolicy, segments_to_delete
from exporters.landing.sync import SyncRounds
from exporters.landing.writer import MAX_RECORDS_PER_WRITEV, EncodedBatch, write_batch

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
_LOCK_FILE_NAME: Final = ".lock"


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

        self._lock = threading.Lock()
        self._closed = False  # close() started: no more appends
        self._descriptors_closed = False
        self._batch = EncodedBatch()
        self._health = DiskHealth(self.directory)
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

        self._last_append_ns = 0  # the last record's appended time (a sealed mtime)

        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = self._acquire_directory_lock()
        active: ActiveSegment | None = None
        try:
            active = self._open_active_segment()
            if housekeeping:  # a serving log: its appends should not allocate blocks
                reserved = self._reservations.reserve_rest(active.fd, active.size)
                active.reserved = active.reserved or reserved
            if self._policy is not FsyncPolicy.NEVER:
                # What a previous run left in the page cache becomes durable too.
                os.fsync(active.fd)
                self._rounds.durable_offset = active.next_offset
        except BaseException:
            if active is not None:
                os.close(active.fd)
            os.close(self._lock_fd)
            raise
        self._active = active

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
            elif len(payload) <= self._max_record_bytes and not self._closed:
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
            self._check_writable()
            offset = self._add_to_batch_locked(context_json, payload, self._time_ns())
            self._write_batch_locked()
            if self._fsync_inline:
                self._fsync_active_locked()
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
            self._check_writable()
            now_ns = self._time_ns()
            offsets = [
                self._add_to_batch_locked(context_json, payload, now_ns)
                for context_json, payload in encoded
            ]
            self._write_batch_locked()
            if self._fsync_inline:
                self._fsync_active_locked()
        return offsets

    def stage(self, context: TelemetryContext, payload: bytes) -> None:
        """Stages one record for the next ``flush``. The record is not in the log, and
        readers do not see it, until ``flush`` returns: nothing may be acknowledged before
        that. Call from one thread (the owner's); ``flush`` encodes and writes."""
        if len(payload) > self._max_record_bytes:
            raise RecordTooLarge(
                f"record of {len(payload)} bytes exceeds max_record_bytes {self._max_record_bytes}"
            )
        if self._closed:
            with self._lock:
                self._check_open()
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
                self._check_open()
            return staged
        self._staged = []
        max_record_bytes = self._max_record_bytes
        with self._lock:
            try:
                self._check_writable()
                # One clock read per flush: a record's append time is when its batch is
                # handed to the kernel (the records of one socket read share it), not
                # when it was staged microseconds earlier.
                now_ns = self._time_ns()
                # This runs once per event-loop turn that carried pushes: encode and check
                # every context first, then add them to the batch in one tight loop when
                # they fit the active segment (the usual case), else one by one with rolls.
                contexts = [encode_context(context) for context, _ in staged]
                batch_bytes = RECORD_HEADER_BYTES * len(staged)
                # (A plain zip, lengths equal by construction: mypyc compiles it to a
                # native loop, zip(strict=True) to a generic iterator.)
                for context_json, (_, payload) in zip(contexts, staged):  # noqa: B905
                    size = len(context_json) + len(payload)
                    if size > max_record_bytes:
                        self._check_record_size(context_json, payload)  # raises
                    batch_bytes += size
                if self._fits_active_locked(batch_bytes, now_ns):
                    self._add_fitting_to_batch_locked(contexts, staged, now_ns)
                else:
                    for context_json, (_, payload) in zip(contexts, staged):  # noqa: B905
                        self._add_to_batch_locked(context_json, payload, now_ns)
                self._write_batch_locked()
                if self._fsync_inline:
                    self._fsync_active_locked()
                return staged
            # (One name per exception type: mypyc gives a name one type per function.)
            except ContextEncodingError as encoding_error:
                self._batch.take()
                failure = LandingError(str(encoding_error))
            except LandingError as landing_error:
                self._batch.take()
                failure = landing_error
            except (
                OSError
            ) as fsync_error:  # the fsync failed: the records are not durable
                self._batch.take()
                failure = LandingError(f"fsync failed: {fsync_error}")
        self._note_export_failure(failure, len(staged))
        raise UnlandedRecords(str(failure), staged) from failure

    # ------------------------------------------------------------------ durability

    def sync(self) -> None:
        """Returns once everything appended before the call is fsynced (with new and
        deleted segment names), whatever the policy. Safe from any thread while appends go
        on; concurrent calls share fsyncs, and a call finds nothing to do when an earlier
        round already covered it. This is the group-commit half of ``group_commit=True``."""
        with self._lock:
            self._check_open()
            target = self._active.next_offset
        self._sync_round(target)

    @property
    def durable_offset(self) -> int:
        """Every offset below this is fsynced (under ``never`` only what sync() covered)."""
        with self._lock:
            return self._rounds.durable_offset

    def _sync_round(self, target_offset: int) -> None:
        """One sync round (sync.py) making every offset below ``target_offset`` durable."""
        rounds = self._rounds
        with rounds.lock:
            with self._lock:
                if self._descriptors_closed:
                    raise LandingLogClosed(f"landing log {self.directory} is closed")
                if self._health.broken is not None:
                    raise LandingError(
                        f"landing log {self.directory} is unusable: {self._health.broken}"
                    )
                active = self._active
                plan = rounds.plan(
                    target_offset, active.next_offset, active.base_offset, active.fd
                )
            if plan is None:
                return
            try:
                fsyncs = plan.run(self.directory)
            except OSError as error:
                with self._lock:
                    self._fsync_failed_locked(error)
                raise
            with self._lock:
                rounds.done(plan)
                self._counters["fsyncs"] += fsyncs

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
        """While the log cannot write, tries whether it can again; True when it can.

        | state                                   | probe                                     |
        |-----------------------------------------|-------------------------------------------|
        | writable                                | nothing                                   |
        | a write failed, its bytes were cut off  | writes, fsyncs and removes ``.probe``, as large as the failed write |
        | an fsync or the cut-off failed (broken) | reopens the active segment as a restart does: scan, truncate a torn tail, fsync |

        The housekeeping thread calls it every tick while the log cannot write, so
        readiness comes back once space does, with no push needed to find out."""
        health = self._health
        with self._rounds.lock:
            with self._lock:
                self._check_open()
                if health.unwritable is None:
                    return True
                failures = health.write_failures
                if health.broken is not None:
                    try:
                        self._reopen_locked()
                    except (OSError, LandingError) as error:
                        _log.debug(
                            "landing log %s: reopen failed: %s", self.directory, error
                        )
                        return False
                    health.broken = None
                    health.unwritable = None
                    _log.warning(
                        "landing log %s: reopened, writing again", self.directory
                    )
                    return True
                size = health.probe_bytes
            try:
                health.write_probe_file(size, self._policy is not FsyncPolicy.NEVER)
            except OSError as error:
                _log.debug("landing log %s: probe failed: %s", self.directory, error)
                return False
            with self._lock:
                if health.write_failures != failures:
                    return False  # a write failed while probing: that answer is newer
                health.unwritable = None
        _log.warning(
            "landing log %s: %d bytes fit again, writing again", self.directory, size
        )
        return True

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Stops the housekeeping threads, fsyncs (unless the policy is ``never``),
        releases the directory. Idempotent."""
        if self._staged and not self._closed and self._health.broken is None:
            try:
                self.flush()  # staged, never acknowledged: keep them
            except LandingError as error:
                _log.error(
                    "landing log %s: staged records lost at close: %s",
                    self.directory,
                    error,
                )
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._reservations.closed = True
        if self._housekeeper is not None:
            self._housekeeper.stop()
        try:
            if self._policy is not FsyncPolicy.NEVER and self._health.broken is None:
                self._sync_round(self._active.next_offset)
        finally:
            with self._rounds.lock, self._lock:
                if self._health.broken is None:
                    self._active.release_reserved()
                self._reservations.drop_spare_locked()
                os.close(self._active.fd)
                os.close(self._lock_fd)
                self._descriptors_closed = True

    def __enter__(self) -> LandingLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ rolling, retention

    def maybe_roll(self, now_ms: int) -> bool:
        """Seals the active segment if its first record is ``segment_max_age_ms`` old at
        ``now_ms``; True when it rolled."""
        with self._lock:
            self._check_writable()
            active = self._active
            if active.records and active.aged(
                now_ms * _NS_PER_MS, self._segment_max_age_ns
            ):
                self._roll_locked()
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
            self._check_open()
            if min_committed_offset is None and self._retention.respect_consumers:
                min_committed_offset = self._lowest_consumer_position()
            doomed = segments_to_delete(
                list_segments(self.directory),
                self._retention,
                now_ms,
                min_committed_offset,
            )
            for segment in doomed:
                try:
                    os.unlink(segment.path)
                except FileNotFoundError:
                    continue
                self._counters["segments_deleted"] += 1
                _log.info(
                    "landing log %s: retention deleted segment %s (%d bytes)",
                    self.directory,
                    segment.path.name,
                    segment.size_bytes,
                )
            if doomed and self._policy is not FsyncPolicy.NEVER:
                fsync_directory(self.directory)
            return doomed

    # ------------------------------------------------------------------ introspection

    @property
    def next_offset(self) -> int:
        with self._lock:
            return self._active.next_offset

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
            active = self._active
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

    # ------------------------------------------------------------------ internals: the batch

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

    def _check_open(self) -> None:
        if self._closed:
            raise LandingLogClosed(f"landing log {self.directory} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        broken = self._health.broken
        if broken is not None:
            raise LandingError(
                f"landing log {self.directory} is unusable until reopened: {broken}"
            )

    def _add_to_batch_locked(
        self, context_json: bytes, payload: bytes, now_ns: int
    ) -> int:
        """Encodes one record behind the batch and returns its offset. Rolls first when
        the record would not fit (or the segment is old), writing the batch: a record's
        head carries the sync marker of the segment it goes to."""
        active = self._active
        batch = self._batch
        record_bytes = RECORD_HEADER_BYTES + len(context_json) + len(payload)
        if (active.records or batch.records) and (
            active.size + batch.byte_count + record_bytes > self._segment_max_bytes
            or (active.records > 0 and active.aged(now_ns, self._segment_max_age_ns))
        ):
            self._roll_locked()
            active = self._active
        offset = active.next_offset + batch.records
        head = encode_record_head(
            active.sync_marker, offset, now_ns, context_json, payload
        )
        if batch.add(head, context_json, payload, now_ns):
            self._write_batch_locked()
        return offset

    def _fits_active_locked(self, batch_bytes: int, now_ns: int) -> bool:
        """Whether ``batch_bytes`` more go to the active segment with no roll before any
        of them (what _add_to_batch_locked decides record by record)."""
        active = self._active
        if active.records > 0 and active.aged(now_ns, self._segment_max_age_ns):
            return False
        return (
            active.size + self._batch.byte_count + batch_bytes
            <= self._segment_max_bytes
        )

    def _add_fitting_to_batch_locked(
        self,
        contexts: list[bytes],
        staged: list[tuple[TelemetryContext, bytes]],
        now_ns: int,
    ) -> None:
        """_add_to_batch_locked for records known to fit the active segment: no roll test
        per record, one tight loop (the batch is written each time it is full)."""
        batch = self._batch
        marker = self._active.sync_marker
        offset = self._active.next_offset + batch.records
        if not batch.records:
            batch.first_ns = now_ns
        buffers = batch.buffers
        count = batch.records
        added_bytes = 0
        for context_json, (_, payload) in zip(contexts, staged):  # noqa: B905
            head = encode_record_head(marker, offset, now_ns, context_json, payload)
            buffers += (head, context_json, payload)
            added_bytes += RECORD_HEADER_BYTES + len(context_json) + len(payload)
            offset += 1
            count += 1
            if count == MAX_RECORDS_PER_WRITEV:
                batch.records = count
                batch.byte_count += added_bytes
                batch.last_ns = now_ns
                self._write_batch_locked()
                buffers = batch.buffers
                count = added_bytes = 0
                batch.first_ns = now_ns
        batch.records = count
        batch.byte_count += added_bytes
        batch.last_ns = now_ns

    def _write_batch_locked(self) -> None:
        """One writev of the batch. On failure nothing of it is in the log (a partial
        write is cut off) and the batch is dropped."""
        batch = self._batch
        records = batch.records
        if not records:
            return
        total_bytes = batch.byte_count
        first_ns = batch.first_ns
        last_ns = batch.last_ns
        buffers = batch.take()
        active = self._active
        try:
            write_batch(active.fd, buffers, total_bytes)
        except OSError as error:
            active.reserved = False  # the cut gives back what was reserved past the end
            self._health.cut_back(active.fd, active.size, error)
            failure = f"write to {active.path.name} failed: {error}"
            self._write_failed_locked(failure, total_bytes)
            raise LandingError(failure) from error
        self._health.unwritable = None  # a broken log never gets here (_check_writable)
        if active.records == 0:
            active.first_append_ns = first_ns
        active.records += records
        active.size += total_bytes
        active.next_offset += records
        self._last_append_ns = last_ns
        counters = self._counters
        counters["records_appended"] += records
        counters["bytes_appended"] += total_bytes

    def _write_failed_locked(self, reason: str, attempted_bytes: int) -> None:
        self._reservations.drop_spare_locked()  # its blocks are the records' now
        self._health.write_failed(reason, attempted_bytes)

    def _fsync_failed_locked(self, error: OSError) -> None:
        self._reservations.drop_spare_locked()
        self._health.fsync_failed(error)

    def _fsync_active_locked(self) -> None:
        try:
            os.fsync(self._active.fd)
        except OSError as error:
            self._fsync_failed_locked(error)
            raise
        self._counters["fsyncs"] += 1
        self._rounds.durable_offset = self._active.next_offset

    # ------------------------------------------------------------------ internals: segments

    def _roll_locked(self) -> None:
        self._write_batch_locked()  # the batch belongs to the segment being sealed
        old = self._active
        old.release_reserved()
        # A sealed segment's mtime is its last record's appended time: retention compares
        # it with now_ms, so an injected clock and a restart agree with what was written.
        os.utime(old.fd, ns=(self._last_append_ns, self._last_append_ns))
        try:
            self._active = self._create_segment_locked(old.next_offset)
        except OSError as error:
            # No room for a new segment: keep writing the old one once there is.
            failure = f"rolling {old.path.name} failed: {error}"
            self._write_failed_locked(failure, SEGMENT_HEADER_BYTES)
            raise LandingError(failure) from error
        self._counters["segments_rolled"] += 1
        try:
            if self._fsync_inline:
                # Its data is synced; this persists the mtime.
                try:
                    os.fsync(old.fd)
                except OSError as error:
                    self._fsync_failed_locked(error)
                    raise
                self._counters["fsyncs"] += 1
            else:
                self._rounds.sealed(old.base_offset)  # the next sync round fsyncs it
        finally:
            os.close(old.fd)

    def _create_segment_locked(self, base_offset: int) -> ActiveSegment:
        segment = ActiveSegment.create(
            self.directory,
            base_offset,
            spare=self._reservations.take_spare_locked(),
            fsync=self._fsync_inline,
        )
        if self._fsync_inline:
            self._counters["fsyncs"] += 1
        elif self._policy is not FsyncPolicy.NEVER:
            self._rounds.directory_dirty = True
        return segment

    def _open_active_segment(self) -> ActiveSegment:
        """Recovers the newest segment (active.py), after removing what an interrupted run
        left: segments whose creation was interrupted, a probe file, a spare."""
        for name in os.listdir(self.directory):
            if name.endswith(TEMP_SUFFIX) and not name.startswith("."):
                # A segment whose creation was interrupted: it never held a record.
                os.unlink(self.directory / name)
        # A probe interrupted by a crash (a restart, or a reopen after a failed fsync).
        (self.directory / PROBE_FILE_NAME).unlink(missing_ok=True)
        if self._reservations.spare is None:
            (self.directory / SPARE_FILE_NAME).unlink(missing_ok=True)
        recovered = ActiveSegment.recover(
            self.directory,
            max_record_bytes=self._max_record_bytes,
            fsync=self._policy is not FsyncPolicy.NEVER,
            fsync_new=self._fsync_inline,
        )
        if recovered.created and not self._fsync_inline:
            if self._policy is not FsyncPolicy.NEVER:
                self._rounds.directory_dirty = True
        self._counters["recovered_truncated_bytes"] += recovered.truncated_bytes
        self._counters["recovered_corrupt_regions"] += recovered.corrupt_regions
        self._last_append_ns = (
            self._time_ns()
            if recovered.last_append_ns is None
            else recovered.last_append_ns
        )
        return recovered.segment

    def _reopen_locked(self) -> None:
        """What a restart does to the active segment: scan it, cut a torn tail, fsync it.
        Holds both locks (no sync round may use the old descriptor meanwhile)."""
        old = self._active
        segment = self._open_active_segment()
        try:
            if self._policy is not FsyncPolicy.NEVER:
                os.fsync(segment.fd)
        except BaseException:
            os.close(segment.fd)
            raise
        self._active = segment
        os.close(old.fd)
        self._batch.take()
        if self._policy is not FsyncPolicy.NEVER:
            self._rounds.durable_offset = segment.next_offset

    def _acquire_directory_lock(self) -> int:
        fd = os.open(
            self.directory / _LOCK_FILE_NAME,
            os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
            0o644,
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LandingLogLocked(
                    f"landing directory {self.directory} is already open for writing "
                    "(another collector process with the same node.id?)"
                ) from error
            raise
        return fd

    def _lowest_consumer_position(self) -> int | None:
        positions = committed_offsets(self.directory)
        for name in self._required_consumers:
            positions.setdefault(name, 0)
        return min(positions.values()) if positions else None


def _limit_or_none(limit: int | None) -> int | None:
    return None if limit is None or limit < 0 else limit
