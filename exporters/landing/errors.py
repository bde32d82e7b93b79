"""What the landing log raises. Every error is a ``LandingError``: the log could not take a
record, and nothing acknowledged before is affected."""

from __future__ import annotations

from exporters.context import TelemetryContext

__all__ = [
    "LandingError",
    "LandingLogClosed",
    "LandingLogLocked",
    "RecordRejected",
    "RecordTooLarge",
    "UnlandedRecords",
]


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
