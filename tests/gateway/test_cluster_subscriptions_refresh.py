"""SubscriptionRefresh on a fake clock, with a scripted cluster: a read every refresh.ms, one
at once after an alter was forwarded (and a follow-up 500 ms later), a failed read keeps
the last set (one WARNING for a run of failures, one INFO when reads work again), and a
cluster that does not serve CLIENT_METRICS configs is said once and the local store used."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from clock.testing import FakeClock
from collector.gateway.cluster_subscriptions import (
    FOLLOW_UP_MS,
    NotServed,
    SubscriptionRefresh,
)
from subscriptions.cluster_store import ClusterSubscriptionStore
from subscriptions.store import ConfigStore
from tests.waiting import eventually

REFRESH_MS = 2000


class ScriptedCluster:
    """Answers each read with the next of ``answers`` (the last one repeats)."""

    def __init__(self, *answers: dict[str, dict[str, str]] | Exception) -> None:
        self.answers = list(answers)
        self.reads = 0

    async def read(self) -> dict[str, dict[str, str]]:
        self.reads += 1
        answer = self.answers[0] if len(self.answers) == 1 else self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def interval(store: ClusterSubscriptionStore, name: str) -> str | None:
    return store.snapshot().subscription_configs.get(name, {}).get("interval.ms")


@pytest.fixture
def store(tmp_path: Path) -> ClusterSubscriptionStore:
    local = ConfigStore(tmp_path)
    local.alter_subscription("local-only", {"interval.ms": "5000"})
    return ClusterSubscriptionStore(local, "kafka:9092")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def running() -> Iterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    yield tasks
    for task in tasks:
        task.cancel()


async def asleep(clock: FakeClock) -> None:
    await eventually(lambda: clock.pending == 1, timeout_s=10, what="asleep")


def sub(interval_ms: int) -> dict[str, dict[str, str]]:
    return {"s": {"interval.ms": str(interval_ms)}}


async def test_read_every_refresh_interval(
    store: ClusterSubscriptionStore,
    clock: FakeClock,
    running: list[asyncio.Task[None]],
) -> None:
    cluster = ScriptedCluster(sub(1000), sub(2000))
    refresh = SubscriptionRefresh(
        store, cluster.read, clock=clock, refresh_ms=REFRESH_MS
    )
    assert await refresh.refresh()
    assert interval(store, "s") == "1000"
    running.append(asyncio.create_task(refresh.run()))
    await asleep(clock)
    clock.advance(REFRESH_MS - 1)
    await asyncio.sleep(0)
    assert cluster.reads == 1
    clock.advance(1)
    await eventually(lambda: cluster.reads == 2, timeout_s=10, what="second read")
    assert interval(store, "s") == "2000"
    assert refresh.changed_ms == REFRESH_MS


async def test_an_alter_forwarded_is_read_at_once_and_again_shortly_after(
    store: ClusterSubscriptionStore,
    clock: FakeClock,
    running: list[asyncio.Task[None]],
) -> None:
    # The broker read at once has not applied the alter yet; the follow-up sees it.
    cluster = ScriptedCluster(sub(1000), sub(1000), sub(3000))
    refresh = SubscriptionRefresh(
        store, cluster.read, clock=clock, refresh_ms=REFRESH_MS
    )
    await refresh.refresh()
    running.append(asyncio.create_task(refresh.run()))
    await asleep(clock)
    refresh.soon()
    await eventually(lambda: cluster.reads == 2, timeout_s=10, what="read at once")
    assert clock.now_ms() == 0
    await asleep(clock)
    clock.advance(FOLLOW_UP_MS)
    await eventually(lambda: cluster.reads == 3, timeout_s=10, what="follow-up")
    assert interval(store, "s") == "3000"
    assert refresh.changed_ms == FOLLOW_UP_MS


async def test_a_failed_read_keeps_the_last_set_and_is_said_once(
    store: ClusterSubscriptionStore,
    clock: FakeClock,
    running: list[asyncio.Task[None]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = ConnectionRefusedError(111, "Connection refused")
    cluster = ScriptedCluster(sub(1000), down, down, down, sub(4000))
    refresh = SubscriptionRefresh(
        store, cluster.read, clock=clock, refresh_ms=REFRESH_MS
    )
    caplog.set_level(logging.INFO)
    await refresh.refresh()
    running.append(asyncio.create_task(refresh.run()))
    for reads in (2, 3, 4):
        await asleep(clock)
        clock.advance(REFRESH_MS)

        def read(expected: int = reads) -> bool:
            return cluster.reads == expected

        await eventually(read, timeout_s=10, what="read")
        assert interval(store, "s") == "1000"
    await asleep(clock)
    clock.advance(REFRESH_MS)
    await eventually(lambda: interval(store, "s") == "4000", timeout_s=10, what="back")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "last set read stays" in warnings[0].getMessage()
    assert refresh.failures == 3
    assert any("read from the cluster again" in r.getMessage() for r in caplog.records)


async def test_a_cluster_without_client_metrics_configs_is_said_once(
    store: ClusterSubscriptionStore,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = ScriptedCluster(NotServed("its ApiVersions lists no ListConfigResources"))
    refresh = SubscriptionRefresh(
        store, cluster.read, clock=clock, refresh_ms=REFRESH_MS
    )
    with caplog.at_level(logging.INFO):
        assert not await refresh.refresh()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "does not serve CLIENT_METRICS configs" in lines[0]
    assert not store.in_cluster
    assert [s.name for s in store.snapshot().subscriptions] == ["local-only"]
