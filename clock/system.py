"""The :class:`Clock` interface and the system clock (compiled with mypyc)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Final, Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "Timer"]

_monotonic_ns: Final = time.monotonic_ns
_monotonic: Final = time.monotonic
_time_ns: Final = time.time_ns


class Timer(Protocol):
    """A scheduled call (``asyncio.TimerHandle`` is one)."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int:
        """Monotonic milliseconds: only differences mean anything (quota windows, push
        intervals, expiry deadlines); never jumps when NTP steps the wall clock."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds (elapsed-time budgets, commit intervals)."""
        ...

    def time_ns(self) -> int:
        """Wall-clock Unix nanoseconds (timestamps that leave the process)."""
        ...

    def call_later(self, delay_ms: float, callback: Callable[[], object]) -> Timer:
        """Call ``callback`` on the running event loop ``delay_ms`` from now."""
        ...

    async def sleep(self, delay_ms: float) -> None:
        """Return to the awaiting task ``delay_ms`` from now."""
        ...

    def wait(self, stop: threading.Event, timeout_s: float) -> bool:
        """A worker thread's wait: up to ``timeout_s``; True as soon as ``stop`` is set."""
        ...


class SystemClock:
    """The process's clocks (``time.monotonic_ns``, ``time.time_ns``) and the running
    event loop's timers."""

    __slots__ = ()

    def now_ms(self) -> int:
        return _monotonic_ns() // 1_000_000

    def monotonic(self) -> float:
        return _monotonic()

    def time_ns(self) -> int:
        return _time_ns()

    def call_later(self, delay_ms: float, callback: Callable[[], object]) -> Timer:
        return asyncio.get_running_loop().call_later(
            max(0.0, delay_ms) / 1000.0, callback
        )

    async def sleep(self, delay_ms: float) -> None:
        await asyncio.sleep(max(0.0, delay_ms) / 1000.0)

    def wait(self, stop: threading.Event, timeout_s: float) -> bool:
        return stop.wait(max(0.0, timeout_s))


SYSTEM_CLOCK: Final = SystemClock()
