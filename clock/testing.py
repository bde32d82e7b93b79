"""A clock for tests that only moves when told to (trio's ``MockClock``, Kafka's
``MockTime``): ``advance(ms)`` jumps, and runs every timer that falls due on the way, in
deadline order; a coroutine's ``sleep`` ends when the clock passes its deadline; a worker
thread's ``wait`` ends when the clock passes its deadline (another thread advanced it) or
its ``stop`` event is set, whichever comes first.

Safe to read and advance from several threads (a forwarder's consumer threads wait on it
while the test advances it).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
from collections.abc import Callable

__all__ = ["FakeClock", "FakeTimer"]

_NS_PER_MS = 1_000_000
# How often a thread blocked in wait() looks at its stop event.
_STOP_POLL_S = 0.01
# 2025-11-21T06:40:00Z: a fixed, plausible wall-clock start (records' append times).
DEFAULT_WALL_START_NS = 1_763_707_200_000_000_000


class FakeTimer:
    """What ``FakeClock.call_later`` returns."""

    __slots__ = ("callback", "cancelled", "deadline_ns")

    def __init__(self, deadline_ns: int, callback: Callable[[], object]) -> None:
        self.deadline_ns = deadline_ns
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """Starts at ``now_ms`` on the monotonic scale and ``wall_ns`` on the wall clock; both
    move together, only by :meth:`advance` (or a thread's :meth:`wait`)."""

    def __init__(
        self, now_ms: int = 0, *, wall_ns: int = DEFAULT_WALL_START_NS
    ) -> None:
        self._now_ns = now_ms * _NS_PER_MS
        self._wall_offset_ns = wall_ns - self._now_ns
        self._timers: list[tuple[int, int, FakeTimer]] = []
        self._sequence = itertools.count()
        self._lock = threading.RLock()
        self._moved = threading.Condition(self._lock)
        self.waits_s: list[float] = []  # every thread wait's timeout, in order

    # -- reading ---------------------------------------------------------------------------
    def now_ms(self) -> int:
        return self._now_ns // _NS_PER_MS

    def monotonic(self) -> float:
        return self._now_ns / 1e9

    def time_ns(self) -> int:
        return self._now_ns + self._wall_offset_ns

    @property
    def pending(self) -> int:
        """Timers and sleeps scheduled and neither run nor cancelled: a test waits for the
        code under test to be asleep on this clock before it advances past the deadline."""
        with self._lock:
            return sum(1 for _, _, timer in self._timers if not timer.cancelled)

    # -- scheduling ------------------------------------------------------------------------
    def call_later(self, delay_ms: float, callback: Callable[[], object]) -> FakeTimer:
        with self._lock:
            timer = FakeTimer(
                self._now_ns + max(0, round(delay_ms * _NS_PER_MS)), callback
            )
            heapq.heappush(
                self._timers, (timer.deadline_ns, next(self._sequence), timer)
            )
            return timer

    async def sleep(self, delay_ms: float) -> None:
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not woken.done():
                woken.set_result(None)

        def wake() -> None:
            loop.call_soon_threadsafe(resolve)

        timer = self.call_later(delay_ms, wake)
        try:
            await woken
        finally:
            timer.cancel()

    def wait(self, stop: threading.Event, timeout_s: float) -> bool:
        with self._moved:
            self.waits_s.append(timeout_s)
            deadline_ns = self._now_ns + round(max(0.0, timeout_s) * 1e9)
            while not stop.is_set() and self._now_ns < deadline_ns:
                # Woken by advance(); setting ``stop`` cannot notify this condition, so
                # look at it again after a short real pause.
                self._moved.wait(_STOP_POLL_S)
        return stop.is_set()

    # -- moving ----------------------------------------------------------------------------
    def advance(self, ms: float) -> None:
        """Jump ``ms`` ahead, running each timer that falls due at its own deadline (a
        timer scheduled by a callback runs too if it falls due within the jump)."""
        if ms < 0:
            raise ValueError(f"cannot move a clock backwards by {ms} ms")
        with self._lock:
            target_ns = self._now_ns + round(ms * _NS_PER_MS)
        while True:
            with self._lock:
                if not self._timers or self._timers[0][0] > target_ns:
                    self._now_ns = max(self._now_ns, target_ns)
                    self._moved.notify_all()
                    return
                deadline_ns, _, timer = heapq.heappop(self._timers)
                self._now_ns = max(self._now_ns, deadline_ns)
                self._moved.notify_all()
            if not timer.cancelled:
                timer.callback()
