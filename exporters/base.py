"""The exporter interface: one call per accepted push, a result value back.

An exporter never takes the pipeline down: it reports failure through its result and
the collector turns a failure into Kafka's INVALID_RECORD (87), as Kafka does when a
plugin throws.
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

    @classmethod
    def success(cls) -> "ExportResult":
        return _SUCCESS

    @classmethod
    def failure(cls, error: str) -> "ExportResult":
        return cls(False, error)


_SUCCESS = ExportResult(True)


@runtime_checkable
class Exporter(Protocol):
    """``payload`` is the decompressed OTLP ``MetricsData`` protobuf."""

    def export(self, context: TelemetryContext, payload: bytes) -> ExportResult: ...

    def close(self) -> None: ...
