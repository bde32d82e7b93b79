"""LandingLog: the append-only, segmented, crash-safe log every accepted push goes to.

One writer per directory (an flock on ``.lock`` enforces it). ``append`` encodes the record
(45-byte head, context JSON, payload; see format.py) and hands the three parts to a single
``os.writev`` on an ``O_APPEND`` descriptor: once it returns, the bytes are the kernel's, so
a push acknowledged after ``append`` survives the process being killed. What survives a
power failure depends on the fsync policy (durability.py).

On open the newest segment is recovered: scanned record by record, a torn tail (a partial
record or a bad CRC with no valid record after it) is truncated, and offsets continue after
the last good record. Damage followed by good records is kept (readers skip it) and
counted, never truncated: truncating would throw away acknowledged pushes.

Rolling (Kafka's segment.bytes / segment.ms): before an append, the active segment is sealed
when the record would take it past ``segment_max_bytes`` or its first record is
``segment_max_age_ms`` old; ``maybe_roll`` does the age check for an idle log. A segment
never holds zero records when sealed, so base offsets strictly increase.

Write-behind (``write_behind=True``, what the collector uses): ``export`` only queues the
record; the owner calls ``flush`` before it acknowledges, and ``flush`` encodes every queued
record and hands them to the kernel in one ``writev``.  The collector flushes once per socket
read, just before writing that read's responses, so one system call covers every push of
the read, and "acknowledged means in the log" still holds.  A failed flush raises: none of
the staged records is in the log and none may be acknowledged.

A full or failing disk (docs/landing-log.md, "Full or failing disk"): a failed write is cut
back to the last whole record, so the log stays readable, and the log reports itself
unwritable (``unwritable_reason``) until a write succeeds again.  Writes keep being tried:
the next flush tries with its own records, and ``probe`` (the housekeeping thread, every
tick while unwritable) writes and removes a scratch file of the failed write's size, or,
after a failed fsync or a failed truncate, reopens the active segment exactly as a restart
would.  Nothing here needs a restart to accept pushes again.
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
from exporters.landing.durability import FsyncPolicy, fsync_directory
from exporters.landing.format import (
    RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES,
    ContextEncodingError,
    SegmentHeader,
    SegmentHeaderError,
    decode_segment_header,
    encode_context,
    encode_record_head,
    encode_segment_header,
    new_sync_marker,
)
from exporters.landing.layout import (
    TEMP_SUFFIX,
    SegmentInfo,
    list_segments,
    segment_path,
)
from exporters.landing.options import LandingOptions
from exporters.landing.positions import committed_offsets
from exporters.landing.preallocate import SPARE_FILE_NAME, reserve, spare_room_left
from exporters.landing.retention import RetentionPolicy, segments_to_delete
from exporters.landing.scan import (
    CorruptRegion,
    ScannedRecord,
    Tail,
    open_for_scan,
    scan_records,
)

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
# writev takes at most IOV_MAX (1024 on Linux) buffers; a record uses three.
_MAX_RECORDS_PER_WRITEV: Final = 300
_EXPORTED: Final = ExportResult.success()
_LOCK_FILE_NAME: Final = ".lock"
# The scratch file ``probe`` writes and removes (a dot name: no reader or lister sees it).
_PROBE_FILE_NAME: Final = ".probe"
_PROBE_MIN_BYTES: Final = 4096
_PROBE_MAX_BYTES: Final = 8 << 20
_PROBE_CHUNK: Final = bytes(64 << 10)


class LandingError(Exception):
    """The log could not take a record; nothing acknowledged before is affected."""


class LandingLogLocked(LandingError):
    """Another process (or LandingLog) already writes this directory."""


class LandingLogClosed(LandingError):
    pass


class RecordRejected(LandingError):
    """This record can never be taken (too large, context not encodable), unlike a write
    that failed and may succeed later."""


class RecordTooLarge(RecordRejected):
    pass


class UnlandedRecords(LandingError):
    """A flush failed: none of ``records`` (context, payload) may be acknowledged (the
    collector answers their pushes 89; their contexts name connection and correlation id)."""

    def __init__(
        self, message: str, records: list[tuple[TelemetryContext, bytes]]
    ) -> None:
        super().__init__(message)
        self.records = records


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
    housekeeping. ``housekeeping`` starts a daemon thread that, every
    ``fsync_interval_ms`` (1 s when the policy is not ``interval``), fsyncs under the
    ``interval`` policy, rolls an aged idle segment and, every
    ``retention_check_interval_ms``, applies retention. Tests pass ``housekeeping=False``
    and drive ``maybe_roll`` / ``apply_retention`` with their own ``now_ms``.
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
        segment_max_bytes = options.segment_max_bytes
        segment_max_age_ms = options.segment_max_age_ms
        fsync = options.fsync
        fsync_interval_ms = options.fsync_interval_ms
        retention_ms = options.retention_ms
        retention_bytes = options.retention_bytes
        retention_respect_consumers = options.retention_respect_consumers
        retention_required_consumers = options.retention_required_consumers
        retention_check_interval_ms = options.retention_check_interval_ms
        max_record_bytes = options.max_record_bytes
        group_commit = options.group_commit
        write_behind = options.write_behind
        write_behind_max_records = options.write_behind_max_records
        self.options = options
        self.directory = Path(directory)
        self._segment_max_bytes = segment_max_bytes
        self._segment_max_age_ns = segment_max_age_ms * _NS_PER_MS
        self._policy = FsyncPolicy.parse(fsync)
        # fsync inside append (and at a roll) only for plain "always"; with group commit the
        # owner calls sync(), typically from a worker thread, before acknowledging.
        self._fsync_inline = self._policy is FsyncPolicy.ALWAYS and not group_commit
        self._fsync_interval_ms = fsync_interval_ms
        # None or a negative value (Kafka's -1) means no limit.
        self._retention = RetentionPolicy(
            retention_ms=_limit_or_none(retention_ms),
            retention_bytes=_limit_or_none(retention_bytes),
            respect_consumers=retention_respect_consumers,
        )
        self._required_consumers = tuple(retention_required_consumers)
        self._retention_check_interval_ms = retention_check_interval_ms
        self._max_record_bytes = max_record_bytes
        self._clock = clock
        # The wall clock's bound method, read once (called for every flush and append).
        self._time_ns: Callable[[], int] = clock.time_ns
        self._write_behind = write_behind
        # How many staged records the owner lets wait for its flush (see needs_flush_now).
        self.write_behind_max_records = write_behind_max_records
        # Records encoded but not written yet (head, context, payload per record), with the
        # appended times of the first and last; written by _write_staged_locked.
        self._staged: list[bytes] = []
        self._staged_bytes = 0
        self._staged_records = 0
        self._staged_first_ns = 0
        self._staged_last_ns = 0
        # Write-behind: (context, payload) handed to stage() and not encoded
        # yet. flush() encodes them in one loop (the code stays hot in the CPU's caches:
        # about half the cost of encoding each at stage time, on the push path) and writes.
        self._pending: list[tuple[TelemetryContext, bytes]] = []

        # _lock guards every field below and is held for a write. A sync round (sync(), the
        # interval housekeeper, close) holds _fsync_lock instead while it fsyncs dup'ed
        # descriptors, so appends go on during an fsync: that is what makes group commit.
        # Order: _fsync_lock before _lock, never the other way round.
        self._lock = threading.Lock()
        self._fsync_lock = threading.Lock()
        self._closed = False  # close() started: no more appends
        self._descriptors_closed = False
        self._broken: str | None = None  # a failed write could not be undone
        # Why the last write failed; None once a write (or a probe) succeeds. Readiness.
        self._unwritable: str | None = None
        # How many bytes probe() writes: the size of the write that failed.
        self._probe_bytes = _PROBE_MIN_BYTES
        # Base offset of the oldest sealed segment not fsynced yet (policies that do not
        # fsync inline); the next sync round fsyncs it and every later sealed one by path.
        self._unsynced_sealed_base: int | None = None
        self._durable_offset = 0  # every offset below this is fsynced
        self._directory_dirty = False
        # Disk blocks reserved for the appends (preallocate.py): the active segment's, and
        # a spare file the housekeeper reserves a whole segment in, which the next roll
        # renames into place.  _reserve_ahead: False where fallocate is not supported.
        # _reserved: the active segment may hold blocks past its end.
        self._reserve_ahead = True
        self._reserved = False
        self._spare: Path | None = None
        # Set when a spare is wanted (at start, after a roll took it, at a housekeeping tick
        # without one); the spare maker thread, its only preparer, waits for it.
        self._spare_wanted = threading.Event()
        self._counters = {
            "records_appended": 0,
            "bytes_appended": 0,
            "segments_rolled": 0,
            "segments_deleted": 0,
            "fsyncs": 0,
            "recovered_truncated_bytes": 0,
            "recovered_corrupt_regions": 0,
            "export_failures": 0,
            "write_failures": 0,
        }
        self._last_failure_log_s = -1e9

        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = self._acquire_directory_lock()
        try:
            self._fd = -1
            self._open_active_segment()
            if housekeeping:  # a serving log: its appends should not allocate blocks
                self._reserve_active_locked()
            if self._policy is not FsyncPolicy.NEVER:
                # What a previous run left in the page cache becomes durable too.
                os.fsync(self._fd)
                self._durable_offset = self._next_offset
        except BaseException:
            if self._fd >= 0:
                os.close(self._fd)
            os.close(self._lock_fd)
            raise

        self._stop = threading.Event()
        self._housekeeper: threading.Thread | None = None
        if housekeeping:
            self._housekeeper = threading.Thread(
                target=self._housekeeping_loop,
                name=f"landing-housekeeper:{self.directory.name}",
                daemon=True,
            )
            self._housekeeper.start()
        self._spare_maker: threading.Thread | None = None
        if housekeeping:
            # Its own thread: a roll can come sooner than the next tick (at 60,000 pushes/s
            # a 64 MiB segment lasts about 2 s), and the tick may be in an fsync meanwhile.
            self._spare_maker = threading.Thread(
                target=self._spare_maker_loop,
                name=f"landing-spare:{self.directory.name}",
                daemon=True,
            )
            self._spare_wanted.set()
            self._spare_maker.start()

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
                self._pending.append((context, payload))
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
        # A full disk fails every push: count each, log at most one line per second.
        with self._lock:
            self._counters["export_failures"] += records
            now = self._clock.monotonic()
            if now - self._last_failure_log_s < 1.0:
                return
            self._last_failure_log_s = now
            failures = self._counters["export_failures"]
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
        if self._pending:
            self.flush()
        context_json = self._encode_context(context)
        self._check_record_size(context_json, payload)
        with self._lock:
            self._check_writable()
            offset = self._stage_locked(context_json, payload, self._time_ns())
            self._write_staged_locked()
            if self._fsync_inline:
                self._fsync_active_locked()
        return offset

    def append_many(self, items: Iterable[tuple[TelemetryContext, bytes]]) -> list[int]:
        """Group commit: appends a batch with as few writev calls as possible and, under
        ``fsync="always"``, one fsync for the whole batch. Sizes are checked before anything
        is written. If writing fails part-way, the records before the failure stay in the
        log (they may be delivered although the caller reports an error: at least once)."""
        if self._pending:
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
                self._stage_locked(context_json, payload, now_ns)
                for context_json, payload in encoded
            ]
            self._write_staged_locked()
            if self._fsync_inline:
                self._fsync_active_locked()
        return offsets

    def stage(self, context: TelemetryContext, payload: bytes) -> None:
        """Queues one record for the next ``flush``. The record is not in the log, and
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
        self._pending.append((context, payload))

    @property
    def needs_flush(self) -> bool:
        """Whether records are staged (cheap: asked before every batch of responses)."""
        return bool(self._pending)

    @property
    def needs_flush_now(self) -> bool:
        """Whether ``write_behind_max_records`` or more records are staged: the owner
        should flush before staging more, not at its next regular point.  (The collector
        flushes once per event-loop turn; a turn that reads from many connections would
        otherwise hold every answer until its last read is handled.)"""
        return len(self._pending) >= self.write_behind_max_records

    def flush(self) -> list[tuple[TelemetryContext, bytes]]:
        """Encodes and hands every staged record to the kernel (one ``writev`` per up to 300
        records; under ``fsync="always"`` also fsyncs) and returns them. Raises
        ``UnlandedRecords`` (a ``LandingError``) naming them when they are not all in the
        log: then acknowledge none of them (those before the failure may be in the log:
        delivered at least once, like ``append_many``)."""
        pending = self._pending
        if not pending:
            with self._lock:
                self._check_open()
            return pending
        self._pending = []
        max_record_bytes = self._max_record_bytes
        with self._lock:
            try:
                self._check_writable()
                # One clock read per flush: a record's append time is when its batch is
                # handed to the kernel (the records of one socket read share it), not
                # when it was staged microseconds earlier.
                now_ns = self._time_ns()
                # This runs once per event-loop turn that carried pushes: encode and check
                # every context first, then stage the batch in one tight loop when it fits
                # the active segment (the usual case), else record by record with rolls.
                contexts = [encode_context(context) for context, _ in pending]
                batch_bytes = RECORD_HEADER_BYTES * len(pending)
                for context_json, (_, payload) in zip(contexts, pending):
                    size = len(context_json) + len(payload)
                    if size > max_record_bytes:
                        self._check_record_size(context_json, payload)  # raises
                    batch_bytes += size
                if self._batch_fits_locked(batch_bytes, now_ns):
                    self._stage_batch_locked(contexts, pending, now_ns)
                else:
                    for context_json, (_, payload) in zip(contexts, pending):
                        self._stage_locked(context_json, payload, now_ns)
                self._write_staged_locked()
                if self._fsync_inline:
                    self._fsync_active_locked()
                return pending
            # (One name per exception type: mypyc gives a name one type per function.)
            except ContextEncodingError as encoding_error:
                self._discard_staged_locked()
                failure = LandingError(str(encoding_error))
            except LandingError as landing_error:
                self._discard_staged_locked()
                failure = landing_error
            except (
                OSError
            ) as fsync_error:  # the fsync failed: the records are not durable
                self._discard_staged_locked()
                failure = LandingError(f"fsync failed: {fsync_error}")
        self._note_export_failure(failure, len(pending))
        raise UnlandedRecords(str(failure), pending) from failure

    def sync(self) -> None:
        """Returns once everything appended before the call is fsynced (with new and
        deleted segment names), whatever the policy. Safe from any thread while appends go
        on; concurrent calls share fsyncs, and a call finds nothing to do when an earlier
        round already covered it. This is the group-commit half of ``group_commit=True``."""
        with self._lock:
            self._check_open()
            target = self._next_offset
        self._sync_round(target)

    @property
    def durable_offset(self) -> int:
        """Every offset below this is fsynced (under ``never`` only what sync() covered)."""
        with self._lock:
            return self._durable_offset

    @property
    def unwritable_reason(self) -> str | None:
        """Why the last write failed (disk full, I/O error, fsync failed), or None when the
        log writes: set by a failed write, cleared by the next one that succeeds or by a
        successful ``probe``. The collector's readiness check."""
        return self._unwritable

    def probe(self) -> bool:
        """While the log cannot write, tries whether it can again; True when it can.

        | state                                   | probe                                     |
        |-----------------------------------------|-------------------------------------------|
        | writable                                | nothing                                   |
        | a write failed, its bytes were cut off  | writes, fsyncs and removes ``.probe``, as large as the failed write |
        | an fsync or the cut-off failed (broken) | reopens the active segment as a restart does: scan, truncate a torn tail, fsync |

        The housekeeping thread calls it every tick while the log cannot write, so
        readiness comes back once space does, with no push needed to find out."""
        with self._fsync_lock:
            with self._lock:
                self._check_open()
                if self._unwritable is None:
                    return True
                failures = self._counters["write_failures"]
                if self._broken is not None:
                    try:
                        self._reopen_locked()
                    except (OSError, LandingError) as error:
                        _log.debug(
                            "landing log %s: reopen failed: %s", self.directory, error
                        )
                        return False
                    self._broken = None
                    self._unwritable = None
                    _log.warning(
                        "landing log %s: reopened, writing again", self.directory
                    )
                    return True
                size = self._probe_bytes
            try:
                self._write_probe_file(size)
            except OSError as error:
                _log.debug("landing log %s: probe failed: %s", self.directory, error)
                return False
            with self._lock:
                if self._counters["write_failures"] != failures:
                    return False  # a write failed while probing: that answer is newer
                self._unwritable = None
        _log.warning(
            "landing log %s: %d bytes fit again, writing again", self.directory, size
        )
        return True

    def close(self) -> None:
        """Stops the housekeeper, fsyncs (unless the policy is ``never``), releases the
        directory. Idempotent."""
        if self._pending and not self._closed and self._broken is None:
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
        self._stop.set()
        self._spare_wanted.set()
        if (
            self._housekeeper is not None
            and self._housekeeper is not threading.current_thread()
        ):
            self._housekeeper.join()
        if self._spare_maker is not None:
            self._spare_maker.join()
        try:
            if self._policy is not FsyncPolicy.NEVER and self._broken is None:
                self._sync_round(self._next_offset)
        finally:
            with self._fsync_lock, self._lock:
                if self._broken is None:
                    self._release_reserved_locked(self._fd, self._active_size)
                self._drop_spare_locked()
                os.close(self._fd)
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
            if self._active_records and self._aged(now_ms * _NS_PER_MS):
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
            return self._next_offset

    @property
    def fsync_policy(self) -> FsyncPolicy:
        return self._policy

    def stats(self) -> LandingStats:
        with self._lock:
            return LandingStats(
                next_offset=self._next_offset,
                active_base_offset=self._active_base_offset,
                active_size_bytes=self._active_size,
                **self._counters,
            )

    def __repr__(self) -> str:
        return f"LandingLog({str(self.directory)!r}, fsync={self._policy.value!r})"

    # ------------------------------------------------------------------ internals: writing

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
        if self._broken is not None:
            raise LandingError(
                f"landing log {self.directory} is unusable until reopened: {self._broken}"
            )

    def _aged(self, now_ns: int) -> bool:
        return now_ns - self._active_first_append_ns >= self._segment_max_age_ns

    def _stage_locked(self, context_json: bytes, payload: bytes, now_ns: int) -> int:
        """Encodes one record behind the staged ones and returns its offset. Rolls first
        when the record would not fit (or the segment is old), writing what is staged:
        a staged record's head carries the sync marker of the segment it goes to."""
        record_bytes = RECORD_HEADER_BYTES + len(context_json) + len(payload)
        if (self._active_records or self._staged_records) and (
            self._active_size + self._staged_bytes + record_bytes
            > self._segment_max_bytes
            or (self._active_records > 0 and self._aged(now_ns))
        ):
            self._roll_locked()
        offset = self._next_offset + self._staged_records
        head = encode_record_head(
            self._sync_marker, offset, now_ns, context_json, payload
        )
        if not self._staged_records:
            self._staged_first_ns = now_ns
        self._staged += (head, context_json, payload)
        self._staged_bytes += record_bytes
        self._staged_records += 1
        self._staged_last_ns = now_ns
        if self._staged_records == _MAX_RECORDS_PER_WRITEV:
            self._write_staged_locked()
        return offset

    def _batch_fits_locked(self, batch_bytes: int, now_ns: int) -> bool:
        """Whether a whole batch goes to the active segment with no roll before any of its
        records (what _stage_locked decides record by record)."""
        if self._active_records > 0 and self._aged(now_ns):
            return False
        return (
            self._active_size + self._staged_bytes + batch_bytes
            <= self._segment_max_bytes
        )

    def _stage_batch_locked(
        self,
        contexts: list[bytes],
        pending: list[tuple[TelemetryContext, bytes]],
        now_ns: int,
    ) -> None:
        """_stage_locked for a batch known to fit the active segment: no roll test per
        record, one tight loop (one ``writev`` per 300 records)."""
        marker = self._sync_marker
        staged = self._staged
        offset = self._next_offset + self._staged_records
        if not self._staged_records:
            self._staged_first_ns = now_ns
        count = 0
        staged_bytes = 0
        for context_json, (_, payload) in zip(contexts, pending):
            head = encode_record_head(
                marker, offset + count, now_ns, context_json, payload
            )
            staged += (head, context_json, payload)
            staged_bytes += RECORD_HEADER_BYTES + len(context_json) + len(payload)
            count += 1
            if self._staged_records + count == _MAX_RECORDS_PER_WRITEV:
                self._staged_records += count
                self._staged_bytes += staged_bytes
                self._staged_last_ns = now_ns
                self._write_staged_locked()
                offset += count
                count = staged_bytes = 0
                staged = self._staged
                self._staged_first_ns = now_ns
        self._staged_records += count
        self._staged_bytes += staged_bytes
        self._staged_last_ns = now_ns

    def _discard_staged_locked(self) -> None:
        self._staged = []
        self._staged_bytes = 0
        self._staged_records = 0

    def _write_staged_locked(self) -> None:
        """One writev of every staged record. On failure nothing staged is in the log (a
        partial write is cut off) and the staged records are dropped."""
        records = self._staged_records
        if not records:
            return
        buffers, total_bytes = self._staged, self._staged_bytes
        self._discard_staged_locked()
        try:
            written = os.writev(self._fd, buffers)
            if written < total_bytes:
                # Regular files write short only on trouble (disk full, quota); retrying the
                # rest either completes or raises the real error.
                data = memoryview(b"".join(buffers))
                while written < total_bytes:
                    written += os.write(self._fd, data[written:])
        except OSError as error:
            self._undo_partial_write_locked(error)
            failure = f"write to {self._active_path.name} failed: {error}"
            self._mark_unwritable_locked(failure, total_bytes)
            raise LandingError(failure) from error
        self._unwritable = None  # a broken log never gets here (_check_writable)
        if self._active_records == 0:
            self._active_first_append_ns = self._staged_first_ns
        self._active_records += records
        self._active_size += total_bytes
        self._next_offset += records
        self._last_append_ns = self._staged_last_ns
        counters = self._counters
        counters["records_appended"] += records
        counters["bytes_appended"] += total_bytes

    def _reserve_active_locked(self) -> None:
        """Reserves the rest of the active segment (at open: not on the serving path)."""
        room = self._segment_max_bytes - self._active_size
        if self._reserve_ahead and room > 0 and spare_room_left(self.directory, room):
            reserved = reserve(self._fd, self._active_size, room)
            self._reserve_ahead = reserved is not None
            self._reserved = self._reserved or bool(reserved)

    @property
    def has_spare(self) -> bool:
        """Whether a segment's blocks are reserved for the next roll (preallocate.py)."""
        with self._lock:
            return self._spare is not None

    def _spare_maker_loop(self) -> None:
        while True:
            self._spare_wanted.wait()
            if self._stop.is_set():
                return
            self._spare_wanted.clear()
            try:
                self._prepare_spare()
            except (
                OSError
            ) as error:  # the next roll allocates as it goes; a tick asks again
                _log.warning(
                    "landing log %s: no spare segment: %s", self.directory, error
                )

    def _prepare_spare(self) -> None:
        """An empty file with a whole segment's blocks reserved, for the next roll, unless
        there is one, fallocate is unsupported or the disk is short of room."""
        with self._lock:
            if self._spare is not None or not self._reserve_ahead or self._closed:
                return
        path = self.directory / SPARE_FILE_NAME
        size = self._segment_max_bytes
        if not spare_room_left(self.directory, size):
            return
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            reserved = reserve(fd, 0, size)
        finally:
            os.close(fd)
        with self._lock:
            if reserved and not self._closed:
                self._spare = path
                return
            if reserved is None:
                self._reserve_ahead = False
        path.unlink(missing_ok=True)  # part of it may be reserved: give it back

    def _take_spare_locked(self, temp_path: Path) -> bool:
        """The spare renamed to ``temp_path``; False when there is none (or it is gone)."""
        spare, self._spare = self._spare, None
        self._spare_wanted.set()  # the next one, off this thread
        if spare is None:
            return False
        try:
            os.rename(spare, temp_path)
        except OSError:
            return False
        return True

    def _drop_spare_locked(self) -> None:
        """Gives the spare's blocks back (a full disk needs them for records; closing)."""
        spare, self._spare = self._spare, None
        if spare is not None:
            spare.unlink(missing_ok=True)

    def _release_reserved_locked(self, fd: int, size: int) -> None:
        """Gives back the blocks reserved past ``size`` (a sealed or closing segment)."""
        if self._reserved:
            self._reserved = False
            try:
                os.ftruncate(fd, size)
            except OSError as error:  # they stay allocated: space, not data, is lost
                _log.warning(
                    "landing log %s: reserved blocks not released: %s",
                    self.directory,
                    error,
                )

    def _mark_unwritable_locked(self, reason: str, attempted_bytes: int) -> None:
        self._drop_spare_locked()
        self._unwritable = reason
        self._counters["write_failures"] += 1
        self._probe_bytes = min(
            max(attempted_bytes, _PROBE_MIN_BYTES), _PROBE_MAX_BYTES
        )

    def _write_probe_file(self, size: int) -> None:
        """Writes ``size`` bytes to a scratch file (fsynced unless the policy is ``never``)
        and removes it: raises OSError when the file system cannot take them."""
        path = self.directory / _PROBE_FILE_NAME
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            written = 0
            while written < size:
                written += os.write(fd, _PROBE_CHUNK[: size - written])
            if self._policy is not FsyncPolicy.NEVER:
                os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(path)

    def _reopen_locked(self) -> None:
        """What a restart does to the active segment: scan it, cut a torn tail, fsync it.
        Holds both locks (no sync round may use the old descriptor meanwhile)."""
        old_fd = self._fd
        self._fd = -1
        try:
            self._open_active_segment()
            if self._policy is not FsyncPolicy.NEVER:
                os.fsync(self._fd)
        except BaseException:
            if self._fd >= 0:
                os.close(self._fd)
            self._fd = old_fd
            raise
        os.close(old_fd)
        self._discard_staged_locked()
        if self._policy is not FsyncPolicy.NEVER:
            self._durable_offset = self._next_offset

    def _undo_partial_write_locked(self, error: OSError) -> None:
        """A failed write may have left part of a record; cut it off so later records do
        not follow garbage. If even that fails, refuse further appends until reopened
        (recovery on open truncates the torn tail)."""
        self._reserved = False  # the cut gives back what was reserved past the end
        try:
            os.ftruncate(self._fd, self._active_size)
        except OSError as truncate_error:
            self._broken = (
                f"write failed ({error}) and truncate failed ({truncate_error})"
            )
            _log.error("landing log %s: %s", self.directory, self._broken)

    def _fsync_locked(self, fd: int) -> None:
        try:
            os.fsync(fd)
        except OSError as error:
            self._fsync_failed_locked(error)
            raise
        self._counters["fsyncs"] += 1

    def _fsync_active_locked(self) -> None:
        self._fsync_locked(self._fd)
        self._durable_offset = self._next_offset

    def _fsync_failed_locked(self, error: OSError) -> None:
        # After a failed fsync the kernel may have dropped the dirty pages, and a retry
        # would "succeed" without them (PostgreSQL's fsyncgate): stop acknowledging.
        self._broken = f"fsync failed: {error}"
        self._mark_unwritable_locked(self._broken, self._probe_bytes)
        _log.error("landing log %s: %s", self.directory, self._broken)

    def _sync_round(self, target_offset: int) -> None:
        """fsync whatever holds offsets below ``target_offset``: sealed segments not synced
        yet (opened by path), the active segment (through a dup, so a concurrent roll cannot
        close it under us) and the directory. One round at a time; a round that finds the
        target already covered by an earlier one returns at once."""
        with self._fsync_lock:
            with self._lock:
                if self._descriptors_closed:
                    raise LandingLogClosed(f"landing log {self.directory} is closed")
                if self._broken is not None:
                    raise LandingError(
                        f"landing log {self.directory} is unusable: {self._broken}"
                    )
                if (
                    self._durable_offset >= target_offset
                    and self._unsynced_sealed_base is None
                    and not self._directory_dirty
                ):
                    return
                covered = self._next_offset
                active_base = self._active_base_offset
                sealed_from, self._unsynced_sealed_base = (
                    self._unsynced_sealed_base,
                    None,
                )
                directory_dirty, self._directory_dirty = self._directory_dirty, False
                # A new segment's header must be durable before its name is.
                needs_active = covered > self._durable_offset or directory_dirty
                active = os.dup(self._fd) if needs_active else None
            fsyncs = 0
            try:
                if sealed_from is not None:
                    fsyncs += _fsync_segments(self.directory, sealed_from, active_base)
                if active is not None:
                    os.fsync(active)
                    fsyncs += 1
                if directory_dirty:
                    fsync_directory(self.directory)
            except OSError as error:
                with self._lock:
                    self._fsync_failed_locked(error)
                raise
            finally:
                if active is not None:
                    os.close(active)
            with self._lock:
                self._durable_offset = max(self._durable_offset, covered)
                self._counters["fsyncs"] += fsyncs

    # ------------------------------------------------------------------ internals: segments

    def _roll_locked(self) -> None:
        self._write_staged_locked()  # staged records belong to the segment being sealed
        old_fd, old_base = self._fd, self._active_base_offset
        self._release_reserved_locked(old_fd, self._active_size)
        # A sealed segment's mtime is its last record's appended time: retention compares
        # it with now_ms, so an injected clock and a restart agree with what was written.
        os.utime(old_fd, ns=(self._last_append_ns, self._last_append_ns))
        try:
            self._create_segment_locked(self._next_offset)
        except OSError as error:
            # No room for a new segment: keep writing the old one once there is.
            failure = f"rolling {self._active_path.name} failed: {error}"
            self._mark_unwritable_locked(failure, SEGMENT_HEADER_BYTES)
            raise LandingError(failure) from error
        self._counters["segments_rolled"] += 1
        try:
            if self._fsync_inline:
                self._fsync_locked(
                    old_fd
                )  # its data is synced; this persists the mtime
            elif self._unsynced_sealed_base is None:
                self._unsynced_sealed_base = old_base  # the next sync round fsyncs it
        finally:
            os.close(old_fd)

    def _create_segment_locked(self, base_offset: int) -> None:
        """Writes the header under a temporary name and renames it, so a ``.log`` file
        always starts with a whole header."""
        final_path = segment_path(self.directory, base_offset)
        if final_path.exists():
            raise LandingError(f"segment {final_path.name} already exists")
        temp_path = final_path.with_name(final_path.name + TEMP_SUFFIX)
        marker = new_sync_marker()
        header = encode_segment_header(SegmentHeader(base_offset, marker))
        # The spare is empty and its blocks are reserved: no O_TRUNC, which would free them.
        reserved = self._take_spare_locked(temp_path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        fd = os.open(temp_path, flags if reserved else flags | os.O_TRUNC, 0o644)
        try:
            if os.write(fd, header) != len(header):
                raise OSError(
                    errno.ENOSPC, f"short write of segment header {temp_path.name}"
                )
            if self._fsync_inline:
                self._fsync_locked(fd)
            # Otherwise the next sync round fsyncs the new file before its directory entry.
            os.rename(temp_path, final_path)
        except BaseException:
            os.close(fd)
            temp_path.unlink(missing_ok=True)  # a full disk: give back what it took
            raise
        if self._fsync_inline:
            fsync_directory(self.directory)
        elif self._policy is not FsyncPolicy.NEVER:
            self._directory_dirty = True
        self._fd = fd
        self._sync_marker = marker
        self._active_path = final_path
        self._active_base_offset = base_offset
        self._active_size = len(header)
        self._reserved = reserved
        self._active_records = 0
        self._active_first_append_ns = 0
        self._next_offset = base_offset

    def _open_active_segment(self) -> None:
        for name in os.listdir(self.directory):
            if name.endswith(TEMP_SUFFIX) and not name.startswith("."):
                # A segment whose creation was interrupted: it never held a record.
                os.unlink(self.directory / name)
        # A probe interrupted by a crash (a restart, or a reopen after a failed fsync).
        (self.directory / _PROBE_FILE_NAME).unlink(missing_ok=True)
        if self._spare is None:
            (self.directory / SPARE_FILE_NAME).unlink(missing_ok=True)
        self._last_append_ns = self._time_ns()
        segments = list_segments(self.directory)
        if not segments:
            self._create_segment_locked(0)
            return
        active = segments[-1]
        with open_for_scan(active.path) as file:
            try:
                header = decode_segment_header(file.read(SEGMENT_HEADER_BYTES))
                if header.base_offset != active.base_offset:
                    raise SegmentHeaderError(
                        f"header says base offset {header.base_offset}, name says "
                        f"{active.base_offset}"
                    )
            except SegmentHeaderError as error:
                self._abandon_damaged_segment(active, error)
                return
            items = scan_records(
                file,
                sync_marker=header.sync_marker,
                start_position=SEGMENT_HEADER_BYTES,
                previous_offset=active.base_offset - 1,
                file_size=os.fstat(file.fileno()).st_size,
                max_record_bytes=self._max_record_bytes,
            )
            next_offset = active.base_offset
            records = 0
            first_append_ns = 0
            last_append_ns = 0
            tail: Tail | None = None
            for item in items:
                if isinstance(item, ScannedRecord):
                    if records == 0:
                        first_append_ns = item.appended_time_unix_nano
                    records += 1
                    last_append_ns = item.appended_time_unix_nano
                    next_offset = item.offset + 1
                elif isinstance(item, CorruptRegion):
                    self._counters["recovered_corrupt_regions"] += 1
                    _log.warning(
                        "landing log %s: segment %s damaged at bytes %d..%d (%s); "
                        "keeping the valid records after it",
                        self.directory,
                        active.path.name,
                        item.position,
                        item.end_position,
                        item.reason,
                    )
                else:
                    tail = item
        assert tail is not None  # scan_records always ends with a Tail
        fd = os.open(active.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        if not tail.clean:
            torn_bytes = tail.file_size - tail.position
            _log.warning(
                "landing log %s: truncating a torn tail of %d bytes in %s at byte %d (%s)",
                self.directory,
                torn_bytes,
                active.path.name,
                tail.position,
                tail.reason,
            )
            try:
                os.ftruncate(fd, tail.position)
                if self._policy is not FsyncPolicy.NEVER:
                    os.fsync(fd)
            except BaseException:
                os.close(fd)
                raise
            self._counters["recovered_truncated_bytes"] += torn_bytes
        self._fd = fd
        self._sync_marker = header.sync_marker
        self._active_path = active.path
        self._active_base_offset = active.base_offset
        self._active_size = tail.position
        self._reserved = True  # a crash may have left blocks reserved past its end
        self._active_records = records
        self._active_first_append_ns = first_append_ns
        if records:
            self._last_append_ns = last_append_ns
        self._next_offset = next_offset

    def _abandon_damaged_segment(
        self, active: SegmentInfo, error: SegmentHeaderError
    ) -> None:
        """The newest segment's header is unreadable, so its records cannot be found. It is
        left in place (sealed; readers report it) and writing continues in a new segment
        whose base offset is certainly above any offset it holds: a record takes at least
        RECORD_HEADER_BYTES, so it has fewer than size / 45 + 1 of them."""
        fresh_base = active.base_offset + active.size_bytes // RECORD_HEADER_BYTES + 1
        _log.error(
            "landing log %s: newest segment %s has a damaged header (%s); continuing at "
            "offset %d in a new segment",
            self.directory,
            active.path.name,
            error,
            fresh_base,
        )
        self._create_segment_locked(fresh_base)

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

    # ------------------------------------------------------------------ housekeeping thread

    def _housekeeping_loop(self) -> None:
        period_ms = (
            self._fsync_interval_ms
            if self._policy is FsyncPolicy.INTERVAL
            else min(self._fsync_interval_ms, 1000)
        )
        next_retention_ms = 0
        while not self._clock.wait(self._stop, period_ms / 1000):
            try:
                if self._unwritable is not None:
                    self.probe()  # room again? (a reopen after a failed fsync)
                if self._broken is not None:
                    continue  # appends already fail with the reason; no log line every tick
                if self._policy is FsyncPolicy.INTERVAL:
                    with self._lock:
                        target = self._next_offset
                    self._sync_round(target)
                now_ms = self._time_ns() // _NS_PER_MS
                if self._unwritable is None:  # no new segment on a full disk
                    self.maybe_roll(now_ms)
                if now_ms >= next_retention_ms:
                    next_retention_ms = now_ms + self._retention_check_interval_ms
                    self.apply_retention(now_ms)
                if self._unwritable is None and not self.has_spare:
                    self._spare_wanted.set()  # e.g. room again after a full disk
            except LandingLogClosed:
                return
            except Exception:
                _log.exception("landing log %s: housekeeping failed", self.directory)


def _limit_or_none(limit: int | None) -> int | None:
    return None if limit is None or limit < 0 else limit


def _fsync_segments(directory: Path, from_base: int, below_base: int) -> int:
    """fsyncs the segment files with base offsets in [from_base, below_base) by path (an
    fsync flushes the file, whichever descriptor asks). Returns how many."""
    synced = 0
    for segment in list_segments(directory):
        if from_base <= segment.base_offset < below_base:
            try:
                fd = os.open(segment.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # retention deleted it meanwhile
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            synced += 1
    return synced
