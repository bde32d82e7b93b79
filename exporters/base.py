"""The exporter interface: one call per accepted push, a result value back.

An exporter never takes the pipeline down: it reports failure through its result.  The
collector turns a failure into Kafka's INVALID_RECORD (87), as Kafka does when a plugin
throws, and a *retriable* one (the exporter cannot take records now: a full or failing
disk under the landing log) into THROTTLING_QUOTA_EXCEEDED (89), the push error both
librdkafka and the Java client retry at the next push interval (docs/landing-log.md,
"Full or failing disk").
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

from exporters.context import TelemetryContext

__all__ = ["ExportResult", "Exporter"]


@dataclasses.dataclass(frozen=True, slots=True)
class ExportResult:
    ok: bool
    error: str | None = None
    # The push may succeed later (storage full or failing), as opposed to a push this
    # exporter will never take (too large, not encodable).
    retriable: bool = False

    @classmethod
    def success(cls) -> ExportResult:
        return _SUCCESS

    @classmethod
    def failure(cls, error: str) -> ExportResult:
        return cls(False, error)

    @classmethod
    def unavailable(cls, error: str) -> ExportResult:
        """The exporter cannot take records now; the client should push again later."""
        return cls(False, error, retriable=True)


_SUCCESS = ExportResult(True)


@runtime_checkable
class Exporter(Protocol):
    """``payload`` is the decompressed OTLP ``MetricsData`` protobuf."""

    def export(self, context: TelemetryContext, payload: bytes) -> ExportResult: ...

    def close(self) -> None: ...
