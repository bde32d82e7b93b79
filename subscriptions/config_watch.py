"""Watch a config directory and reload what it holds: the hot reload of every durable,
hand-editable store under ``<data-dir>/config/`` (subscriptions and quotas, credentials).

The directory is watched, not the files, so editors that write-and-rename and the
Kubernetes ConfigMap ``..data`` symlink swap are both seen; the stores' own temp files
(``TMP_MARKER``) are ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path

from subscriptions.config_file import TMP_MARKER

__all__ = ["watch_config_dir"]


async def watch_config_dir(
    config_dir: Path,
    reload: Callable[[], bool],
    on_change: Callable[[], Awaitable[None] | None],
    stop_event: asyncio.Event | None = None,
    *,
    debounce_ms: int = 300,
    force_polling: bool | None = None,
    ready: asyncio.Event | None = None,
) -> None:
    """Call ``reload`` (in a thread) whenever something in ``config_dir`` changes, and
    ``on_change`` when it returns True.

    Runs until ``stop_event`` is set (or the task is cancelled). ``ready`` is set once the
    operating system watches the directory: a change made after that is seen.
    """
    import watchfiles  # imported here: only the server needs the watcher

    changes_of = watchfiles.awatch(
        config_dir,
        stop_event=stop_event,
        debounce=debounce_ms,
        step=50,
        force_polling=force_polling,
        recursive=True,
    )
    # The generator's first step registers the watch (watchfiles creates its notifier
    # before its first wait); the task runs that step before this one resumes.
    pending = asyncio.ensure_future(anext(changes_of))
    try:
        await asyncio.sleep(0)
        if ready is not None:
            ready.set()
        while True:
            try:
                changes = await pending
            except StopAsyncIteration:
                return
            pending = asyncio.ensure_future(anext(changes_of))
            if all(TMP_MARKER in Path(path).name for _, path in changes):
                continue  # the stores' own temp files
            if await asyncio.to_thread(reload):
                result = on_change()
                if inspect.isawaitable(result):
                    await result
    finally:
        pending.cancel()
        with contextlib.suppress(BaseException):
            await pending
        await changes_of.aclose()
