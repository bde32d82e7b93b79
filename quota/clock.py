"""The clock is injected at the edge; everything inside ``quota`` takes ``now_ms``.

Kafka's quota code reads ``Time.milliseconds()`` (wall clock).  We use a monotonic clock
instead: quota windows must not jump when NTP steps the wall clock.  The only place where
the absolute value of time mattered in Kafka (the token bucket starting "full" because its
``lastUpdateMs`` is the epoch) is handled explicitly in ``token_bucket.py``.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of milliseconds. Only differences between readings are meaningful."""

    def milliseconds(self) -> int: ...


class SystemClock:
    """Monotonic milliseconds (``time.monotonic_ns``), immune to wall-clock steps."""

    __slots__ = ()

    def milliseconds(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to (the tests' ``MockTime``); never sleeps."""

    __slots__ = ("_now_ms",)

    def __init__(self, now_ms: int = 0) -> None:
        self._now_ms = now_ms

    def milliseconds(self) -> int:
        return self._now_ms

    def sleep(self, duration_ms: int) -> None:
        """Advance by ``duration_ms`` (named after Kafka's ``MockTime.sleep``)."""
        if duration_ms < 0:
            raise ValueError(f"cannot move a clock backwards by {duration_ms} ms")
        self._now_ms += duration_ms

    advance = sleep
