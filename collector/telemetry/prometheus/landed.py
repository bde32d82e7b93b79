"""What ``/metrics/clients`` folds: the records the landing log holds, read back.

The endpoint counts what landed, as the OTLP forwarder and the lakehouse do, not what a
push path staged: a push whose flush (or group-commit fsync) failed is answered 89 and
pushed again by its client, and the log then holds it once, so the endpoint counts it
once.  A record is read once the landing log's reader sees it, which is after the flush
that precedes its answer (write-behind: a staged record is invisible to readers,
exporters/landing/log.py); with ``fsync: always`` and group commit, only below the
log's durable offset, the one its answers waited for.

Read on the series' worker thread (one :class:`~exporters.landing.LandingReader` per
thread): from the offset the log was at when the endpoint started, in batches of at most
``max_bytes`` payload bytes, so a fold that fell behind catches up from the log rather
than from memory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from exporters.context import TelemetryContext
from exporters.landing import LandingReader

__all__ = ["Landed", "LandedRecords"]


class Landed(Protocol):
    """What a fold reads: the landing log read back (:class:`LandedRecords`) or the
    landing topic (``landed_topic.LandedTopic``)."""

    records_read: int

    def take(self, max_bytes: int) -> list[tuple[TelemetryContext, bytes]]:
        """The next landed records, up to ``max_bytes`` of payload; empty once caught up."""
        ...


class LandedRecords:
    """The landing log in ``directory`` from ``start_offset`` on; ``durable_below``
    (None: every record a reader sees has landed) bounds what may be read."""

    def __init__(
        self,
        directory: Path,
        start_offset: int,
        durable_below: Callable[[], int] | None = None,
    ) -> None:
        self._reader = LandingReader(directory)
        self._durable_below = durable_below
        self.next_offset = start_offset
        self.records_read = 0

    def take(self, max_bytes: int) -> list[tuple[TelemetryContext, bytes]]:
        """The next landed records, up to ``max_bytes`` of payload (one at least, if any
        landed); empty once caught up."""
        bound = self._durable_below() if self._durable_below is not None else None
        if bound is not None and bound <= self.next_offset:
            return []
        batch: list[tuple[TelemetryContext, bytes]] = []
        for record in self._reader.read(self.next_offset, max_bytes=max_bytes):
            if bound is not None and record.offset >= bound:
                break
            batch.append((record.context, record.payload))
            self.next_offset = record.offset + 1
        self.records_read += len(batch)
        return batch
