"""A node's background tasks: each started by name, ended at shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine

from clock import Clock

__all__ = ["BackgroundTasks"]

Work = Coroutine[object, object, object]


class BackgroundTasks:
    """The tasks a node started (accept loops, periodic work, watchers, the forwarder)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._tasks: list[asyncio.Task[object]] = []

    def start(self, work: Work, name: str) -> asyncio.Task[object]:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.append(task)
        return task

    def every(self, period_ms: int, name: str, work: Callable[[], object]) -> None:
        """Run ``work`` every ``period_ms`` on the clock, until shutdown."""

        async def loop() -> None:
            while True:
                await self._clock.sleep(period_ms)
                work()

        self.start(loop(), name)

    def named(self, name: str) -> asyncio.Task[object] | None:
        return next((t for t in self._tasks if t.get_name() == name), None)

    def cancel(self, which: Callable[[str], bool]) -> None:
        """Cancel the tasks whose name ``which`` accepts."""
        for task in self._tasks:
            if which(task.get_name()):
                task.cancel()

    async def finished(self) -> None:
        """Return once every task has ended (cancelled, failed or done)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)
