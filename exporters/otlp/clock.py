"""The forwarder's view of time: read it, and wait on it in a way shutdown can cut short."""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    def monotonic_s(self) -> float:
        """Seconds on a clock that never jumps (elapsed-time budgets)."""
        ...

    def time_ns(self) -> int:
        """Wall-clock Unix nanoseconds (compared with a record's append time)."""
        ...

    def wait(self, stop: threading.Event, timeout_s: float) -> bool:
        """Wait up to ``timeout_s``; return True as soon as ``stop`` is set."""
        ...


class SystemClock:
    def monotonic_s(self) -> float:
        return time.monotonic()

    def time_ns(self) -> int:
        return time.time_ns()

    def wait(self, stop: threading.Event, timeout_s: float) -> bool:
        return stop.wait(max(0.0, timeout_s))
