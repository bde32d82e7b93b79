"""Waiting for something outside the test's control: a real process, the operating
system's file events, a socket's other end.

Windows, throttles, delays and backoffs never need this: they run on
``clock.testing.FakeClock`` and a test moves it.  This is for effects that arrive on their
own schedule with no callback to wait on; it polls the effect against a deadline (the one
real-time poll the test suite has, see tests/test_no_sleeps.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["POLL_S", "eventually", "eventually_sync"]

# How often the condition is looked at.
POLL_S = 0.01


async def eventually(
    condition: Callable[[], object], *, timeout_s: float, what: str
) -> None:
    """Return once ``condition()`` is true; AssertionError naming ``what`` after
    ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        await asyncio.sleep(POLL_S)


def eventually_sync(
    condition: Callable[[], object], *, timeout_s: float, what: str
) -> None:
    """:func:`eventually` for a thread that is not an event loop."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(POLL_S)
