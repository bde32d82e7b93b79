"""Fixtures of the quota tests: a manual clock and a fresh metrics registry.

The clock starts far from zero (Kafka's MockTime starts at the wall clock), so nothing may
silently depend on "time zero".
"""

from __future__ import annotations

import pytest

from clock.testing import FakeClock
from quota import Metrics

START_MS = 1_700_000_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START_MS)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()
