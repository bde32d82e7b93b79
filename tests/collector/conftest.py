"""Fixtures for the collector's unit tests: real subscriptions, a real landing log, a
fake clock (plain integers: ``now_ms`` is a parameter everywhere)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from collector_testkit import MemorySubscriptions, make_manager, subscription

from collector.telemetry.client_metrics import ClientMetricsManager
from exporters.landing import LandingLog, LandingOptions


@pytest.fixture
def landing(tmp_path: Path) -> Iterator[LandingLog]:
    # export() appends at once (no server flushes write-behind records here).
    log = LandingLog(
        tmp_path / "landing", LandingOptions(write_behind=False), housekeeping=False
    )
    yield log
    log.close()


@pytest.fixture
def subs() -> MemorySubscriptions:
    return MemorySubscriptions(
        subscription("producers", "org.apache.kafka.producer.", 1000)
    )


@pytest.fixture
def manager(subs: MemorySubscriptions, landing: LandingLog) -> ClientMetricsManager:
    return make_manager(subs, landing)
