"""Named crash points for the fault tests: ``KTC_LAKEHOUSE_KILL_AT=<point>[@<batch>]``.

When set, the process SIGKILLs its whole process group (itself and its Spark JVM, as a
container kill would) on reaching that point of the ingest, optionally only in the
process's n-th batch (from 1); ``during_write`` takes a delay, ``during_write:<ms>``, and kills from a timer
while Spark is writing.  Unset (always, outside tests) every call is a dictionary miss.
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["POINTS", "arm_timer", "reached"]

POINTS: tuple[str, ...] = (
    "after_read",  # the batch read and flattened, nothing written (before the commits)
    "during_write",  # a timer fires while Spark writes or commits the batch
    "mid_write",  # one table's append committed, the others not
    "after_write",  # every table committed, landing consumer positions not yet
)

_ENV = "KTC_LAKEHOUSE_KILL_AT"


def _armed() -> tuple[str, int | None, int] | None:
    spec = os.environ.get(_ENV)
    if not spec:
        return None
    point, _, batch = spec.partition("@")
    point, _, delay = point.partition(":")
    if point not in POINTS:
        raise ValueError(f"{_ENV}: unknown point {point!r}; one of {POINTS}")
    return point, int(batch) if batch else None, int(delay or 0)


def _kill() -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def reached(point: str, batch_id: int) -> None:
    armed = _armed()
    if armed and armed[0] == point and armed[1] in (None, batch_id):
        _kill()


def arm_timer(batch_id: int) -> threading.Timer | None:
    """Start the ``during_write`` timer for this batch, if armed; cancel it after the write."""
    armed = _armed()
    if not armed or armed[0] != "during_write" or armed[1] not in (None, batch_id):
        return None
    timer = threading.Timer(armed[2] / 1000, _kill)
    timer.daemon = True
    timer.start()
    return timer
