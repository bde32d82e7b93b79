"""Write-behind: records staged by ``export``, encoded and written by ``flush``.

With ``write_behind=True`` (what the collector uses), ``LandingLog.export`` only stages the
record (context and payload, not encoded yet); the owner calls ``flush`` before it
acknowledges, and ``flush`` encodes every staged record into the batch and hands the batch
to the kernel in one ``writev`` (appender.py). The collector flushes once per socket read,
just before writing that read's responses, so one system call covers every push of the
read, and "acknowledged means in the log" still holds. A failed flush raises: none of the
staged records is in the log and none may be acknowledged.

Staging runs on the owner's thread only; ``flush`` takes the log's lock (gate.py) to write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from exporters.context import TelemetryContext
from exporters.landing.appender import Appender
from exporters.landing.errors import LandingError, RecordTooLarge, UnlandedRecords
from exporters.landing.format import ContextEncodingError
from exporters.landing.gate import Gate
from exporters.landing.health import DiskHealth

__all__ = ["Staging"]

_log = logging.getLogger("exporters.landing")


class Staging:
    """The records staged for the next flush, and the flush that writes them."""

    def __init__(
        self,
        directory: Path,
        gate: Gate,
        health: DiskHealth,
        appender: Appender,
        *,
        time_ns: Callable[[], int],
        monotonic: Callable[[], float],
        max_record_bytes: int,
        max_records: int,
        fsync_inline: bool,
    ) -> None:
        self._directory = directory
        self._gate = gate
        self._lock = gate.lock
        self._health = health
        self._appender = appender
        self._time_ns = time_ns
        self._monotonic = monotonic
        self._max_record_bytes = max_record_bytes
        # How many staged records the owner lets wait for its flush (needs_flush_now).
        self.max_records = max_records
        self._fsync_inline = fsync_inline
        # (context, payload) handed to stage() and not encoded yet. flush() encodes them in
        # one loop (the code stays hot in the CPU's caches: about half the cost of encoding
        # each at stage time, on the push path) and writes them.
        self.records: list[tuple[TelemetryContext, bytes]] = []

    def stage(self, context: TelemetryContext, payload: bytes) -> None:
        """Stages one record for the next ``flush`` (``LandingLog.stage``)."""
        if len(payload) <= self._max_record_bytes and not self._gate.closed:
            # The usual case, once per accepted push: a log closed meanwhile, or one that
            # cannot write, is caught by flush(), under the lock.
            self.records.append((context, payload))
            return
        if len(payload) > self._max_record_bytes:
            raise RecordTooLarge(
                f"record of {len(payload)} bytes exceeds max_record_bytes {self._max_record_bytes}"
            )
        with self._lock:
            self._gate.check_open()
        # A log that cannot write still stages: the flush tries the disk again (or refuses
        # at once while a reopen is owed), so every refusal comes from one place.
        self.records.append((context, payload))

    def flush(self) -> list[tuple[TelemetryContext, bytes]]:
        """Encodes and writes every staged record and returns them (``LandingLog.flush``);
        raises ``UnlandedRecords`` naming them when they are not all in the log."""
        staged = self.records
        if not staged:
            with self._lock:
                self._gate.check_open()
            return staged
        self.records = []
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
        self.note_failure(failure, len(staged))
        raise UnlandedRecords(str(failure), staged) from failure

    def flush_at_close(self) -> None:
        """Writes what is staged, never acknowledged, as the log closes (logged if lost)."""
        if self.records and not self._gate.closed and self._health.broken is None:
            try:
                self.flush()
            except LandingError as error:
                _log.error(
                    "landing log %s: staged records lost at close: %s",
                    self._directory,
                    error,
                )

    def note_failure(self, error: Exception, records: int = 1) -> None:
        """Counts ``records`` refused (an export or a flush failed), logging at most one
        line a second (health.py)."""
        with self._lock:
            failures = self._health.export_failed(records, self._monotonic())
        if failures is not None:
            _log.error(
                "landing log %s: append failed (%d so far): %s",
                self._directory,
                failures,
                error,
            )
