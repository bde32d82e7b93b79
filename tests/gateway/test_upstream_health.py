"""The gateway's outage log (collector/gateway/outages.py): one line when an upstream goes
down, one when it is back with how long it was down, timed by the injected clock."""

from __future__ import annotations

import logging

import pytest

from clock.testing import FakeClock
from collector.gateway.outages import UpstreamHealth


def test_an_outage_is_timed_by_the_clock_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    health = UpstreamHealth(clock)
    with caplog.at_level(logging.DEBUG, logger="collector.gateway.outages"):
        health.failed(2, "unreachable", "connection refused")
        clock.advance(1_500)
        health.failed(2, "unreachable", "connection refused")
        assert health.down == ["2"]
        clock.advance(1_000)
        health.connected(2, "127.0.0.1", 9092)
    assert health.down == []
    assert health.failures == {("2", "unreachable"): 2}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "node 2 is down" in warnings[0]
    back = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert back == [
        "upstream node 2 is back (127.0.0.1:9092) after 2.5 s down, "
        "2 failed connections meanwhile"
    ]
