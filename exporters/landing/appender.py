"""The active segment and the batch of records encoded for it: records get their offsets
and heads here, in order, go to the kernel in one ``writev`` per batch (writer.py), and
move to a new segment when the active one is full or old (the roll, segments.py).

Every method is called with the log's lock held (log.py).

Rolling (Kafka's segment.bytes / segment.ms): before a record is added, the active segment
is sealed when the record would take it past ``segment_max_bytes`` or its first record is
``segment_max_age_ns`` old. A segment never holds zero records when sealed, so base
offsets strictly increase.
"""

from __future__ import annotations

import os

from exporters.context import TelemetryContext
from exporters.landing.active import ActiveSegment
from exporters.landing.errors import LandingError, RecordTooLarge
from exporters.landing.format import (
    RECORD_HEADER_BYTES,
    encode_context,
    encode_record_head,
)
from exporters.landing.health import DiskHealth
from exporters.landing.segments import Segments
from exporters.landing.sync import SyncRounds
from exporters.landing.writer import MAX_RECORDS_PER_WRITEV, EncodedBatch, write_batch

__all__ = ["Appender"]


class Appender:
    """Adds encoded records to the active segment (``active``) through the batch.

    ``last_append_ns``: the last written record's appended time (a sealed segment's
    mtime). ``durable``: the fsync policy is not ``never``. ``counters``: the log's,
    shared."""

    def __init__(
        self,
        segments: Segments,
        active: ActiveSegment,
        last_append_ns: int,
        health: DiskHealth,
        rounds: SyncRounds,
        counters: dict[str, int],
        *,
        segment_max_bytes: int,
        segment_max_age_ns: int,
        durable: bool,
    ) -> None:
        self.active = active
        self.last_append_ns = last_append_ns
        self.batch = EncodedBatch()
        self._segments = segments
        self._health = health
        self._rounds = rounds
        self._counters = counters
        self._segment_max_bytes = segment_max_bytes
        self._segment_max_age_ns = segment_max_age_ns
        self._durable = durable

    def add(self, context_json: bytes, payload: bytes, now_ns: int) -> int:
        """Encodes one record behind the batch and returns its offset. Rolls first when
        the record would not fit (or the segment is old), writing the batch: a record's
        head carries the sync marker of the segment it goes to."""
        active = self.active
        batch = self.batch
        record_bytes = RECORD_HEADER_BYTES + len(context_json) + len(payload)
        if (active.records or batch.records) and (
            active.size + batch.byte_count + record_bytes > self._segment_max_bytes
            or (active.records > 0 and active.aged(now_ns, self._segment_max_age_ns))
        ):
            self.roll()
            active = self.active
        offset = active.next_offset + batch.records
        head = encode_record_head(
            active.sync_marker, offset, now_ns, context_json, payload
        )
        if batch.add(head, context_json, payload, now_ns):
            self.write_batch()
        return offset

    def add_staged(
        self,
        staged: list[tuple[TelemetryContext, bytes]],
        now_ns: int,
        max_record_bytes: int,
    ) -> None:
        """Encodes staged records (write-behind, log.py) behind the batch, all appended at
        ``now_ns``. Raises ContextEncodingError or RecordTooLarge before adding any when
        one of them cannot be encoded or is too large; the batch may be partly written
        when a roll or a full batch's write fails (LandingError)."""
        # This runs once per event-loop turn that carried pushes: encode and check every
        # context first, then add them to the batch in one tight loop when they fit the
        # active segment (the usual case), else one by one with rolls.
        contexts = [encode_context(context) for context, _ in staged]
        batch_bytes = RECORD_HEADER_BYTES * len(staged)
        # (A plain zip, lengths equal by construction: mypyc compiles it to a native
        # loop, zip(strict=True) to a generic iterator.)
        for context_json, (_, payload) in zip(contexts, staged):  # noqa: B905
            size = len(context_json) + len(payload)
            if size > max_record_bytes:
                raise RecordTooLarge(
                    f"record of {size} bytes exceeds max_record_bytes {max_record_bytes}"
                )
            batch_bytes += size
        if self.fits(batch_bytes, now_ns):
            self.add_fitting(contexts, staged, now_ns)
        else:
            for context_json, (_, payload) in zip(contexts, staged):  # noqa: B905
                self.add(context_json, payload, now_ns)

    def fits(self, batch_bytes: int, now_ns: int) -> bool:
        """Whether ``batch_bytes`` more go to the active segment with no roll before any
        of them (what :meth:`add` decides record by record)."""
        active = self.active
        if active.records > 0 and active.aged(now_ns, self._segment_max_age_ns):
            return False
        return (
            active.size + self.batch.byte_count + batch_bytes <= self._segment_max_bytes
        )

    def add_fitting(
        self,
        contexts: list[bytes],
        staged: list[tuple[TelemetryContext, bytes]],
        now_ns: int,
    ) -> None:
        """:meth:`add` for records known to fit the active segment (:meth:`fits`): no roll
        test per record, one tight loop (the batch is written each time it is full)."""
        batch = self.batch
        marker = self.active.sync_marker
        offset = self.active.next_offset + batch.records
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
                self.write_batch()
                buffers = batch.buffers
                count = added_bytes = 0
                batch.first_ns = now_ns
        batch.records = count
        batch.byte_count += added_bytes
        batch.last_ns = now_ns

    def write_batch(self) -> None:
        """One writev of the batch. On failure nothing of it is in the log (a partial
        write is cut off) and the batch is dropped."""
        batch = self.batch
        records = batch.records
        if not records:
            return
        total_bytes = batch.byte_count
        first_ns = batch.first_ns
        last_ns = batch.last_ns
        buffers = batch.take()
        active = self.active
        try:
            write_batch(active.fd, buffers, total_bytes)
        except OSError as error:
            active.reserved = False  # the cut gives back what was reserved past the end
            self._health.cut_back(active.fd, active.size, error)
            failure = f"write to {active.path.name} failed: {error}"
            self._segments.write_failed(failure, total_bytes)
            raise LandingError(failure) from error
        self._health.unwritable = (
            None  # a broken log never gets here (it refuses first)
        )
        if active.records == 0:
            active.first_append_ns = first_ns
        active.records += records
        active.size += total_bytes
        active.next_offset += records
        self.last_append_ns = last_ns
        counters = self._counters
        counters["records_appended"] += records
        counters["bytes_appended"] += total_bytes

    def drop_batch(self) -> None:
        """Forgets the records added and not written (a flush that failed)."""
        self.batch.take()

    def fsync_active(self) -> None:
        """Makes everything written to the active segment durable (plain ``always``)."""
        try:
            os.fsync(self.active.fd)
        except OSError as error:
            self._segments.fsync_failed(error)
            raise
        self._counters["fsyncs"] += 1
        self._rounds.durable_offset = self.active.next_offset

    def roll(self) -> None:
        """Seals the active segment and continues in a new one (segments.py)."""
        self.write_batch()  # the batch belongs to the segment being sealed
        old = self.active
        self.active = self._segments.start_next(old, self.last_append_ns)
        self._segments.seal(old)

    def reopen(self) -> None:
        """What a restart does to the active segment: scan it, cut a torn tail, fsync it.
        The log holds both its locks (no sync round may use the old descriptor
        meanwhile)."""
        old = self.active
        segment, last_append_ns = self._segments.open_active()
        self.last_append_ns = last_append_ns
        try:
            if self._durable:
                os.fsync(segment.fd)
        except BaseException:
            os.close(segment.fd)
            raise
        self.active = segment
        os.close(old.fd)
        self.batch.take()
        if self._durable:
            self._rounds.durable_offset = segment.next_offset
