"""The ``/metrics/clients`` tests reuse the collector harness (tests/integration), the real
OpenTelemetry Collector (tests/exporters) and the wire client (tests/collector)."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1]
for _helpers in ("integration", "exporters", "collector"):
    if str(_TESTS / _helpers) not in sys.path:
        sys.path.append(str(_TESTS / _helpers))
