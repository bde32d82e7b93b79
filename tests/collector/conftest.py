"""Fixtures for the collector's unit tests: real subscriptions, a real landing log, a
fake clock (plain integers: ``now_ms`` is a parameter everywhere), a real node."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from clock import SYSTEM_CLOCK, Clock
from collector.app.server import CollectorServer
from collector.telemetry.client_metrics import ClientMetricsManager
from exporters.landing import LandingLog, LandingOptions
from tests.collector.collector_testkit import (
    MemorySubscriptions,
    Start,
    collector_config,
    make_manager,
    running,
    subscription,
)


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


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[CollectorServer]:
    """A node with the default settings on loopback port 0 (``collector_config``); a test
    module that needs other settings defines its own ``server`` with them."""
    async with running(collector_config(tmp_path)) as node:
        yield node


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    """Starts nodes with ``collector_config``'s settings and the given ones, on a clock
    (the system's unless given): ``await start(clock, **settings)``; all of them are
    stopped after the test."""
    async with AsyncExitStack() as nodes:

        async def start_node(
            clock: Clock = SYSTEM_CLOCK, **overrides: object
        ) -> CollectorServer:
            config = collector_config(tmp_path, **overrides)
            return await nodes.enter_async_context(running(config, clock=clock))

        yield start_node
