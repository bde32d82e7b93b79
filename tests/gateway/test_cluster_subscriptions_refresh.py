"""SubscriptionRefresh on a fake clock, with a scripted cluster: a read every refresh.ms, one
at once after an alter was forwarded (and a follow-up 500 ms later), a failed read keeps
the last set (one WARNING for a run of failures, one INFO when reads work again) until it
is older than stale.after.ms (one WARNING, ``stale``), a node no read of which has worked
is unready and serves nothing, and a cluster that does not serve CLIENT_METRICS configs is
said once, the local store used and the cluster asked again every refresh.ms."""

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
    _raise,
)
from proto import Errors, KafkaError
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


async def test_a_cluster_without_client_metrics_configs_is_said_once_and_asked_again(
    store: ClusterSubscriptionStore,
    clock: FakeClock,
    running: list[asyncio.Task[None]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before any read worked, NotServed is definitive: the local store, ready, said once;
    the cluster is asked again every refresh.ms, and once it serves the subscriptions
    (a rolling upgrade done) they are its again."""
    not_served = NotServed("its ApiVersions lists no ListConfigResources")
    cluster = ScriptedCluster(not_served, not_served, sub(6000))
    refresh = SubscriptionRefresh(
        store, cluster.read, clock=clock, refresh_ms=REFRESH_MS
    )
    with caplog.at_level(logging.INFO):
        assert await refresh.refresh()
        running.append(asyncio.create_task(refresh.run()))
        await asleep(clock)
        clock.advance(REFRESH_MS)
        await eventually(lambda: cluster.reads == 2, timeout_s=10, what="asked again")
        assert not store.in_cluster and not refresh.unread and not refresh.stale
        assert refresh.not_ready_reason() is None
        assert [s.name for s in store.snapshot().subscriptions] == ["local-only"]
        await asleep(clock)
        clock.advance(REFRESH_MS)
        await eventually(lambda: store.in_cluster, timeout_s=10, what="cluster again")
    lines = [r.getMessage() for r in caplog.records]
    said = [line for line in lines if "does not serve CLIENT_METRICS configs" in line]
    assert len(said) == 1, lines
    assert store.read_from_cluster and interval(store, "s") == "6000"
    assert "local-only" not in store.snapshot().subscription_configs


async def test_a_node_never_read_is_unready_until_a_read_works(
    store: ClusterSubscriptionStore,
    clock: FakeClock,
    running: list[asyncio.Task[None]],
) -> None:
    """The cluster unreachable at start: unready (the reason names the cluster and the
    error), stale, no read age, not in_cluster's set; then the first read that works."""
    down = ConnectionRefusedError(111, "Connection refused")
    cluster = ScriptedCluster(down, sub(7000))
    refresh = SubscriptionRefresh(
        store, cluster.read, clock=clock, refresh_ms=REFRESH_MS
    )
    assert not await refresh.refresh()
    assert refresh.unread and refresh.stale and not store.read_from_cluster
    reason = refresh.not_ready_reason()
    assert reason is not None and "kafka:9092" in reason and "refused" in reason
    assert refresh.read_age_ms() is None
    running.append(asyncio.create_task(refresh.run()))
    await asleep(clock)
    clock.advance(REFRESH_MS)
    await eventually(lambda: not refresh.unread, timeout_s=10, what="first read")
    assert refresh.not_ready_reason() is None and not refresh.stale
    assert store.read_from_cluster and interval(store, "s") == "7000"


@pytest.mark.parametrize(
    "error",
    [Errors.UNKNOWN_SERVER_ERROR, Errors.CLUSTER_AUTHORIZATION_FAILED],
)
async def test_an_error_answer_before_any_read_is_not_a_cluster_without_them(
    store: ClusterSubscriptionStore, clock: FakeClock, error: Errors
) -> None:
    """Only INVALID_REQUEST, UNSUPPORTED_VERSION and INVALID_CONFIG say the cluster does
    not serve CLIENT_METRICS configs; any other answer is a failed read: the node stays
    unready and in the cluster, never the local store's set."""
    with pytest.raises(KafkaError) as raised:
        _raise(error, "boom", "DescribeConfigs")
    assert not isinstance(raised.value, NotServed)
    cluster = ScriptedCluster(raised.value)
    refresh = SubscriptionRefresh(
        store, cluster.read, clock=clock, refresh_ms=REFRESH_MS
    )
    assert not await refresh.refresh()
    assert store.in_cluster and refresh.unread
    assert "local-only" in store.snapshot().subscription_configs  # never served: unread
    for not_served in (
        Errors.INVALID_REQUEST,
        Errors.UNSUPPORTED_VERSION,
        Errors.INVALID_CONFIG,
    ):
        with pytest.raises(NotServed):
            _raise(not_served, None, "DescribeConfigs")


async def test_not_served_after_a_read_worked_keeps_the_last_set(
    store: ClusterSubscriptionStore, clock: FakeClock
) -> None:
    """A cluster read once serves CLIENT_METRICS configs: a broker of a rolling upgrade
    that answers otherwise is a failed read, not a switch to the local store."""
    cluster = ScriptedCluster(sub(1000), NotServed("its ApiVersions lists none"))
    refresh = SubscriptionRefresh(
        store, cluster.read, clock=clock, refresh_ms=REFRESH_MS
    )
    assert await refresh.refresh()
    assert not await refresh.refresh()
    assert store.read_from_cluster and interval(store, "s") == "1000"
    assert refresh.failures == 1


async def test_past_stale_after_ms_the_node_says_so_once(
    store: ClusterSubscriptionStore,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = ConnectionRefusedError(111, "Connection refused")
    cluster = ScriptedCluster(sub(1000), down, down, down, sub(1000))
    refresh = SubscriptionRefresh(
        store, cluster.read, clock=clock, refresh_ms=REFRESH_MS, stale_after_ms=3000
    )
    caplog.set_level(logging.INFO)
    assert await refresh.refresh()
    clock.advance(2000)
    assert not await refresh.refresh()
    assert not refresh.stale and refresh.read_age_ms() == 2000
    clock.advance(1001)
    assert refresh.stale  # the scrape says so between reads too
    for _ in range(2):
        assert not await refresh.refresh()
        clock.advance(2000)
    said = [r for r in caplog.records if "longer than the 3000 ms" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert interval(store, "s") == "1000"  # the last set stays in force
    assert await refresh.refresh()
    assert not refresh.stale and refresh.read_age_ms() == 0
