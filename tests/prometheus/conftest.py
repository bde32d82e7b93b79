"""The ``/metrics/clients`` tests reuse the collector harness (tests/integration), the real
OpenTelemetry Collector (tests/exporters) and the wire client (tests/collector)."""

from __future__ import annotations
