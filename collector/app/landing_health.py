"""What the node's readiness and ``/metrics`` say about its landing log's writes.

A full or failing disk under the landing log (docs/landing-log.md, "Full or failing disk")
makes the node refuse pushes with THROTTLING_QUOTA_EXCEEDED (collector/net/flush.py) and
turns ``/readyz`` false until the log writes again; these series count it:

| series                              | kind    | what                                                        |
|-------------------------------------|---------|-------------------------------------------------------------|
| ``ktc_landing_writable``            | gauge   | 1 while the log writes, 0 from a failed write until one succeeds (or a probe does) |
| ``ktc_landing_write_failures``      | counter | writes, fsyncs and segment rolls of the landing log that failed |
| ``ktc_landing_records_refused``     | counter | records the log did not take (a failed write refuses its whole batch) |
| ``ktc_landing_pushes_refused``      | counter | push answers turned from "accepted" into 89 because their records did not land |
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from collector.net.flush import DurabilityGate
from exporters.landing import LandingLog

__all__ = ["LandingHealth"]


class LandingHealth:
    """The readiness check and the scrape of one node's landing log."""

    def __init__(self, landing: LandingLog, gate: DurabilityGate | None) -> None:
        self._landing = landing
        self._gate = gate

    def not_ready_reason(self) -> str | None:
        reason = self._landing.unwritable_reason
        return None if reason is None else f"landing log cannot write: {reason}"

    def collect(self) -> Iterator[Metric]:
        stats = self._landing.stats()
        yield GaugeMetricFamily(
            "ktc_landing_writable",
            "1 while the landing log writes, 0 from a failed write until one succeeds",
            value=0 if self._landing.unwritable_reason is not None else 1,
        )
        yield CounterMetricFamily(
            "ktc_landing_write_failures",
            "Writes, fsyncs and segment rolls of the landing log that failed",
            value=stats.write_failures,
        )
        yield CounterMetricFamily(
            "ktc_landing_records_refused",
            "Records the landing log did not take",
            value=stats.export_failures,
        )
        yield CounterMetricFamily(
            "ktc_landing_pushes_refused",
            "Push answers turned into THROTTLING_QUOTA_EXCEEDED because their records "
            "did not land",
            value=self._gate.pushes_refused if self._gate is not None else 0,
        )
