"""Named crash points for the fault tests: ``KTC_LAKEHOUSE_KILL_AT=<point>[:<n>][@<batch>]``,
and pause points for the race tests: ``KTC_LAKEHOUSE_PAUSE_AT=<point>[@<batch>]``.

When set, the process SIGKILLs its whole process group (itself and its Spark JVM, as a
container kill would) on reaching that point of the ingest, optionally only in the
process's n-th batch (from 1).  Unset (always, outside tests) every call is a dictionary
miss.

=================  ==========================================================  ==========
point              where the process dies                                      ``:<n>``
=================  ==========================================================  ==========
``after_read``     the batch read and flattened, nothing written               (none)
``mid_write``      ``n`` tables' appends ended (default 1); the point tables   tables
                   append side by side, so others may have committed too
``before_pushes``  every point table's append committed, ``pushes``' not       (none)
``after_write``    every table committed, landing consumer positions not yet   (none)
``during_write``   a timer fires ``n`` ms into the batch's writes and commits  delay, ms
=================  ==========================================================  ==========

``after_read``, ``before_pushes`` and ``after_write`` leave the same tables committed
on every machine, and ``mid_write`` dies at the same moment (what else committed by
then varies): the fault tests that must give the same verdict everywhere use only
those.  ``during_write`` kills wherever Spark happens to be after
the delay (writing files, committing, between tables): the randomized run uses it, with
its seed printed, to reach the moments no named point stops at.

A pause point (any of the points, several separated by commas; ``KTC_LAKEHOUSE_PAUSE_DIR``
names a directory) stops the process instead: it creates ``<dir>/<point>.reached``, then
opens the FIFO ``<dir>/<point>.go`` (made by the test) for reading and blocks until the
test has opened it, written and closed it.  Two ingests paused at chosen points and released
in a chosen order commit in that order on every machine: no timer decides.
"""

from __future__ import annotations

import collections
import os
import signal
import threading

__all__ = ["POINTS", "arm_timer", "reached"]

POINTS: tuple[str, ...] = (
    "after_read",
    "mid_write",
    "before_pushes",
    "after_write",
    "during_write",
)

_ENV = "KTC_LAKEHOUSE_KILL_AT"
_PAUSE_ENV = "KTC_LAKEHOUSE_PAUSE_AT"
_PAUSE_DIR_ENV = "KTC_LAKEHOUSE_PAUSE_DIR"
# mid_write: tables committed so far per batch (the point tables append side by side).
_committed_tables: collections.Counter[int] = collections.Counter()
_lock = threading.Lock()


def _armed() -> tuple[str, int | None, int] | None:
    spec = os.environ.get(_ENV)
    if not spec:
        return None
    point, _, batch = spec.partition("@")
    point, _, argument = point.partition(":")
    if point not in POINTS:
        raise ValueError(f"{_ENV}: unknown point {point!r}; one of {POINTS}")
    default = 1 if point == "mid_write" else 0
    return point, int(batch) if batch else None, int(argument or default)


def _kill() -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _pause(point: str, batch_id: int) -> None:
    spec = os.environ.get(_PAUSE_ENV)
    if not spec:
        return
    for entry in spec.split(","):
        paused, _, batch = entry.partition("@")
        if paused not in POINTS:
            raise ValueError(f"{_PAUSE_ENV}: unknown point {paused!r}; one of {POINTS}")
        if paused == point and (not batch or int(batch) == batch_id):
            break
    else:
        return
    directory = os.environ[_PAUSE_DIR_ENV]
    with open(os.path.join(directory, f"{point}.reached"), "w") as reached_file:
        reached_file.write(f"{os.getpid()}\n")
    # Opening a FIFO for reading blocks until a writer opens it; EOF once it closed it.
    with open(os.path.join(directory, f"{point}.go"), "rb") as go:
        go.read()


def reached(point: str, batch_id: int) -> None:
    _pause(point, batch_id)
    armed = _armed()
    if not armed or armed[0] != point or armed[1] not in (None, batch_id):
        return
    if point == "mid_write":
        with _lock:
            _committed_tables[batch_id] += 1
            if _committed_tables[batch_id] != armed[2]:
                return
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
