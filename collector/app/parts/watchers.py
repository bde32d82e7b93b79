"""The node's config watchers: one per durable config store (the subscriptions and quotas,
the ACLs, the SCRAM credentials; ``subscriptions.durable_store``), each reloading its store
when its directory changes, and SIGHUP's reload of them all.  A watcher that stops (an
error) is logged; SIGHUP still reloads its store."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Protocol

from collector.app.parts.tasks import BackgroundTasks
from subscriptions.durable_store import OnReload

__all__ = ["ConfigWatchers", "WatchedStore"]

log = logging.getLogger(__name__)


class WatchedStore(Protocol):
    """A durable config store (``subscriptions.durable_store.DurableConfigStore``)."""

    def reload(self) -> bool: ...

    async def watch_directory(
        self,
        on_change: OnReload = ...,
        stop_event: asyncio.Event | None = None,
        *,
        debounce_ms: int = ...,
        force_polling: bool | None = None,
        ready: asyncio.Event | None = None,
    ) -> None: ...


def _nothing() -> None:
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class _Watched:
    store: WatchedStore
    what: str
    on_change: Callable[[], None]
    ready: asyncio.Event
    task: asyncio.Task[object]


class ConfigWatchers:
    """The watchers a node started, in the order it started them."""

    def __init__(self, tasks: BackgroundTasks) -> None:
        self._tasks = tasks
        self._watched: list[_Watched] = []

    def watch(
        self,
        store: WatchedStore,
        what: str,
        *,
        task_name: str,
        on_change: Callable[[], None] = _nothing,
        ready: asyncio.Event | None = None,
    ) -> None:
        """Watch ``store`` (``what`` names it in logs); ``on_change`` runs after a change
        was put in force, by the watcher or by SIGHUP; ``ready`` is set once its
        directory is watched."""
        ready = ready or asyncio.Event()
        task = self._tasks.start(self._run(store, what, on_change, ready), task_name)
        self._watched.append(_Watched(store, what, on_change, ready, task))

    def watch_node_stores(
        self,
        store: WatchedStore,
        credentials: WatchedStore | None,
        acls: WatchedStore | None,
        *,
        on_store_change: Callable[[], None],
        store_ready: asyncio.Event,
    ) -> None:
        """Watch a node's stores: the config store, and the credentials and the ACLs when
        the node keeps them."""
        self.watch(
            store,
            "config store",
            task_name="store-watch",
            on_change=on_store_change,
            ready=store_ready,
        )
        if credentials is not None:
            self.watch(credentials, "credentials", task_name="credentials-watch")
        if acls is not None:
            self.watch(acls, "ACL", task_name="acls-watch")

    @staticmethod
    async def _run(
        store: WatchedStore,
        what: str,
        on_change: Callable[[], None],
        ready: asyncio.Event,
    ) -> None:
        try:
            await store.watch_directory(on_change, ready=ready)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s watcher stopped; SIGHUP still reloads", what)

    async def watching(self) -> None:
        """Return once every store's directory is watched (or its watcher stopped): a
        change made after this returns is seen without a SIGHUP."""
        for watched in self._watched:
            ready = asyncio.ensure_future(watched.ready.wait())
            try:
                await asyncio.wait(
                    {ready, watched.task}, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                ready.cancel()

    def reload(self) -> None:
        """SIGHUP: re-read every watched store (an invalid file keeps the last good
        content in force)."""
        for watched in self._watched:
            try:
                changed = watched.store.reload()
            except Exception as exc:
                log.error(
                    "%s not reloaded, the last good one stays: %s", watched.what, exc
                )
                continue
            log.info(
                "%s reloaded (%s)", watched.what, "changed" if changed else "as it was"
            )
            watched.on_change()
