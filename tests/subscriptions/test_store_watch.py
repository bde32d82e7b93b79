"""Hot reload with real filesystem events: a change takes effect within 2 s.

The watcher says when the operating system watches the directory (its ``ready`` event);
the changes' effects arrive on the operating system's schedule, so they are awaited
against a 2 s deadline.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from subscriptions.store import ConfigSnapshot, ConfigStore
from tests.waiting import eventually

DEADLINE_S = 2.0


async def _until(condition) -> None:
    await eventually(condition, timeout_s=DEADLINE_S, what="the watcher's reload")


async def _watching(
    store: ConfigStore, seen: list[ConfigSnapshot]
) -> tuple[asyncio.Task[None], asyncio.Event]:
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(store.watch(seen.append, stop_event=stop, ready=ready))
    await ready.wait()  # the directory is watched: the first change is seen
    return task, stop


async def test_a_hand_edit_takes_effect_within_two_seconds(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path)
    store.load()
    seen: list[ConfigSnapshot] = []
    task, stop = await _watching(store, seen)
    try:
        (store.config_dir / "client-metrics.yaml").write_text(
            "subscriptions:\n  edited:\n    metrics: org.apache.kafka.producer.\n"
        )
        await _until(lambda: store.list_names() == ["edited"])
        await _until(lambda: len(seen) == 1)
        assert seen[0].subscriptions[0].name == "edited"

        # an invalid edit is ignored, the last good state stays
        (store.config_dir / "client-metrics.yaml").write_text(
            "subscriptions:\n  edited: [a]\n"
        )
        await _until(lambda: store.last_error is not None)
        assert store.list_names() == ["edited"] and len(seen) == 1

        (store.config_dir / "quotas.yaml").write_text(
            "quotas:\n  users/alice: {producer_byte_rate: 1000}\n"
        )
        await _until(lambda: len(store.snapshot().quotas) == 1)
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_a_configmap_style_symlink_swap_is_seen(tmp_path: Path) -> None:
    """Kubernetes mounts a ConfigMap as files that link through ``..data`` to a
    timestamped directory, and updates it by re-pointing ``..data`` atomically."""
    data_dir = tmp_path / "data"
    config_dir = data_dir / "config"
    config_dir.mkdir(parents=True)
    first = config_dir / "..2026_11_21_10_00_00.1"
    first.mkdir()
    (first / "client-metrics.yaml").write_text("subscriptions:\n  v1: {metrics: a.}\n")
    os.symlink(first.name, config_dir / "..data")
    os.symlink("..data/client-metrics.yaml", config_dir / "client-metrics.yaml")

    store = ConfigStore(data_dir)
    assert [s.name for s in store.load().subscriptions] == ["v1"]
    seen: list[ConfigSnapshot] = []
    task, stop = await _watching(store, seen)
    try:
        second = config_dir / "..2026_11_21_10_05_00.2"
        second.mkdir()
        (second / "client-metrics.yaml").write_text(
            "subscriptions:\n  v2: {metrics: b.}\n"
        )
        os.symlink(second.name, config_dir / "..data_tmp")
        os.replace(config_dir / "..data_tmp", config_dir / "..data")  # the atomic swap
        await _until(lambda: store.list_names() == ["v2"])
        # The store installs the new state before the watcher calls back: wait for both.
        await _until(lambda: bool(seen))
        assert seen[-1].subscriptions[0].name == "v2"
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_api_writes_do_not_count_as_outside_changes(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path)
    store.load()
    seen: list[ConfigSnapshot] = []
    task, stop = await _watching(store, seen)
    try:
        store.alter_subscription("s", {"metrics": "a."})
        version = store.snapshot().version
        # A hand edit after our own write: once the watcher reports it, it has been through
        # our write's events too (they come first), and the hand edit is all it reported.
        (store.config_dir / "quotas.yaml").write_text(
            "quotas:\n  users/a: {producer_byte_rate: 1}\n"
        )
        await _until(lambda: seen)
        assert [snapshot.version for snapshot in seen] == [version + 1]
        assert [s.name for s in seen[0].subscriptions] == ["s"] and len(
            seen[0].quotas
        ) == 1
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_an_async_callback_is_awaited(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path)
    store.load()
    applied: list[int] = []

    async def on_change(snapshot: ConfigSnapshot) -> None:
        await asyncio.sleep(0)
        applied.append(snapshot.version)

    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(store.watch(on_change, stop_event=stop, ready=ready))
    await ready.wait()
    try:
        (store.config_dir / "client-metrics.yaml").write_text(
            "subscriptions:\n  s: {metrics: a.}\n"
        )
        await _until(lambda: applied == [store.snapshot().version])
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
