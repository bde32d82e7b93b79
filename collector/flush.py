"""One landing-log write per event-loop turn, shared by every connection.

The landing log is write-behind: a push is only *staged* while its request is handled;
before the answers of that push leave, the staged records must be handed to the kernel
(``LandingLog.flush``, one ``writev``).  Flushing once per socket read costs a system call
and a round of per-flush Python for every read, and at high load a read carries only one
to three pushes.  Instead, the first connection that has answers waiting on staged records
in a loop turn schedules one flush with ``call_soon``; every other connection that reads in
the same turn joins it.  When the loop has run that turn's reads, the flush writes all of
their records with one ``writev`` and releases every waiting connection's answers at once
(Kafka's group commit idea, applied to the page cache).

:class:`FlushBarrier` is the part of ``asyncio.Future`` that ``KafkaProtocol`` waits on
(``done``, ``exception``, ``add_done_callback``), resolved synchronously: the answers go
out in the same loop turn as the flush, without one more scheduled callback per
connection.  A failed flush resolves it with the error, and each waiting connection closes
without its answers (nothing unwritten is acknowledged).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["FlushBarrier", "TurnFlusher"]

log = logging.getLogger(__name__)


class FlushBarrier:
    __slots__ = ("_callbacks", "_done", "_exception")

    def __init__(self) -> None:
        self._callbacks: list[Callable[[FlushBarrier], None]] = []
        self._done = False
        self._exception: BaseException | None = None

    def done(self) -> bool:
        return self._done

    def exception(self) -> BaseException | None:
        return self._exception

    def add_done_callback(self, callback: Callable[[FlushBarrier], None]) -> None:
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def resolve(self, exception: BaseException | None = None) -> None:
        self._done = True
        self._exception = exception
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:  # one connection's failure must not hold the others' answers
                log.exception("releasing answers after a landing flush failed")


class TurnFlusher:
    """Schedules at most one flush per loop turn and hands out its barrier.

    ``flush`` writes what is staged (raises when it is not all in the log); ``sync``, when
    given, returns an awaitable that completes once the written records are fsynced (the
    ``fsync: always`` + ``group_commit`` policy), or ``None`` when nothing needs syncing.
    """

    __slots__ = ("_barrier", "_flush", "_sync")

    def __init__(
        self,
        flush: Callable[[], None],
        sync: Callable[[], asyncio.Future[Any] | None] | None = None,
    ) -> None:
        self._flush = flush
        self._sync = sync
        self._barrier: FlushBarrier | None = None

    def barrier(self) -> FlushBarrier:
        barrier = self._barrier
        if barrier is None:
            barrier = self._barrier = FlushBarrier()
            asyncio.get_running_loop().call_soon(self._run)
        return barrier

    def _run(self) -> None:
        barrier, self._barrier = self._barrier, None
        if barrier is None:
            return
        try:
            self._flush()
        except Exception as exc:  # noqa: BLE001 - LandingError or OSError: both mean "not in the log"
            barrier.resolve(exc)
            return
        synced = self._sync() if self._sync is not None else None
        if synced is None:
            barrier.resolve()
            return

        def synced_done(future: asyncio.Future[Any]) -> None:
            if future.cancelled():
                barrier.resolve(asyncio.CancelledError("landing sync cancelled"))
            else:
                barrier.resolve(future.exception())

        synced.add_done_callback(synced_done)
