"""The landing log's two threads.

The housekeeper ticks every ``fsync_interval_ms`` (1 s when the policy is not ``interval``)
and, in order: probes a log that cannot write (room again? a reopen after a failed fsync),
runs a sync round under the ``interval`` policy, rolls an aged idle segment, applies
retention every ``retention_check_interval_ms`` and asks for a spare segment when there is
none. The spare maker reserves the next segment's blocks (preallocate.py) whenever one is
wanted: its own thread, because a roll can come sooner than the next tick (at 60,000
pushes/s a 64 MiB segment lasts about 2 s) and the tick may be in an fsync meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Protocol

from clock import Clock
from exporters.landing.errors import LandingLogClosed
from exporters.landing.preallocate import BlockReservations

__all__ = ["Housekeeper", "HousekeepingSchedule", "HousekeptLog"]

_log = logging.getLogger("exporters.landing")
_NS_PER_MS = 1_000_000


class HousekeptLog(Protocol):
    """What the housekeeper does to the log (LandingLog's public methods)."""

    @property
    def unwritable_reason(self) -> str | None: ...

    @property
    def has_spare(self) -> bool: ...

    def is_broken(self) -> bool: ...

    def probe(self) -> bool: ...

    def sync(self) -> None: ...

    def maybe_roll(self, now_ms: int) -> bool: ...

    def apply_retention(self, now_ms: int) -> object: ...


@dataclasses.dataclass(frozen=True, slots=True)
class HousekeepingSchedule:
    """When the ticker acts: a tick every ``period_ms``, a sync round at each tick when
    ``interval_sync`` (the ``interval`` policy), retention every
    ``retention_check_interval_ms``."""

    period_ms: int
    interval_sync: bool
    retention_check_interval_ms: int


class Housekeeper:
    """Starts both threads; ``stop`` ends and joins them."""

    def __init__(
        self,
        log: HousekeptLog,
        reservations: BlockReservations,
        clock: Clock,
        schedule: HousekeepingSchedule,
        *,
        name: str,
    ) -> None:
        self._log = log
        self._reservations = reservations
        self._clock = clock
        self._schedule = schedule
        self._stop = threading.Event()
        self._ticker = threading.Thread(
            target=self._tick_loop, name=f"landing-housekeeper:{name}", daemon=True
        )
        self._spare_maker = threading.Thread(
            target=self._spare_loop, name=f"landing-spare:{name}", daemon=True
        )

    def start(self) -> None:
        self._ticker.start()
        self._reservations.wanted.set()
        self._spare_maker.start()

    def stop(self) -> None:
        self._stop.set()
        self._reservations.wanted.set()
        if self._ticker is not threading.current_thread():
            self._ticker.join()
        self._spare_maker.join()

    def _tick_loop(self) -> None:
        log = self._log
        schedule = self._schedule
        next_retention_ms = 0
        while not self._clock.wait(self._stop, schedule.period_ms / 1000):
            try:
                if log.unwritable_reason is not None:
                    log.probe()
                if log.is_broken():
                    continue  # appends already fail with the reason; no line every tick
                if schedule.interval_sync:
                    log.sync()
                now_ms = self._clock.time_ns() // _NS_PER_MS
                if log.unwritable_reason is None:  # no new segment on a full disk
                    log.maybe_roll(now_ms)
                if now_ms >= next_retention_ms:
                    next_retention_ms = now_ms + schedule.retention_check_interval_ms
                    log.apply_retention(now_ms)
                if log.unwritable_reason is None and not log.has_spare:
                    self._reservations.wanted.set()  # e.g. room again after a full disk
            except LandingLogClosed:
                return
            except Exception:
                _log.exception(
                    "landing log %s: housekeeping failed", self._reservations.directory
                )

    def _spare_loop(self) -> None:
        reservations = self._reservations
        while True:
            reservations.wanted.wait()
            if self._stop.is_set():
                return
            reservations.wanted.clear()
            try:
                reservations.make_spare()
            except (
                OSError
            ) as error:  # the next roll allocates as it goes; a tick asks again
                _log.warning(
                    "landing log %s: no spare segment: %s",
                    reservations.directory,
                    error,
                )
