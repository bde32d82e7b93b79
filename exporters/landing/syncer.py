"""The durability loop: sync rounds run against the active segment (what ``sync`` and
``close`` wait for, and the interval policy's tick), and the probe that finds out whether
a log that could not write can again.

Both hold the rounds' lock (sync.py) for their whole run and take the log's lock only to
plan and to finish, so appends go on during an fsync. Order: the rounds' lock before the
log's.
"""

from __future__ import annotations

import logging

from exporters.landing.appender import Appender
from exporters.landing.errors import LandingError
from exporters.landing.gate import Gate
from exporters.landing.health import DiskHealth
from exporters.landing.segments import Segments
from exporters.landing.sync import SyncRounds

__all__ = ["Syncer"]

_log = logging.getLogger("exporters.landing")


class Syncer:
    """Runs sync rounds and probes for one log. ``durable``: the fsync policy is not
    ``never``. ``counters``: the log's, shared."""

    def __init__(
        self,
        gate: Gate,
        rounds: SyncRounds,
        appender: Appender,
        segments: Segments,
        health: DiskHealth,
        counters: dict[str, int],
        *,
        durable: bool,
    ) -> None:
        self.rounds = rounds
        self._gate = gate
        self._appender = appender
        self._segments = segments
        self._health = health
        self._counters = counters
        self._durable = durable

    def sync(self) -> None:
        """One round covering everything appended before the call."""
        with self._gate.lock:
            self._gate.check_open()
            target = self._appender.active.next_offset
        self.run_round(target)

    def run_round(self, target_offset: int) -> None:
        """One sync round (sync.py) making every offset below ``target_offset`` durable."""
        rounds = self.rounds
        gate = self._gate
        with rounds.lock:
            with gate.lock:
                gate.check_syncable()
                active = self._appender.active
                plan = rounds.plan(
                    target_offset, active.next_offset, active.base_offset, active.fd
                )
            if plan is None:
                return
            try:
                fsyncs = plan.run(gate.directory)
            except OSError as error:
                with gate.lock:
                    self._segments.fsync_failed(error)
                raise
            with gate.lock:
                rounds.done(plan)
                self._counters["fsyncs"] += fsyncs

    def probe(self) -> bool:
        """While the log cannot write, tries whether it can again; True when it can.

        | state                                   | probe                                     |
        |-----------------------------------------|-------------------------------------------|
        | writable                                | nothing                                   |
        | a write failed, its bytes were cut off  | writes, fsyncs and removes ``.probe``, as large as the failed write |
        | an fsync or the cut-off failed (broken) | reopens the active segment as a restart does: scan, truncate a torn tail, fsync |
        """
        health = self._health
        gate = self._gate
        directory = gate.directory
        with self.rounds.lock:
            with gate.lock:
                gate.check_open()
                if health.unwritable is None:
                    return True
                failures = health.write_failures
                if health.broken is not None:
                    try:
                        self._appender.reopen()
                    except (OSError, LandingError) as error:
                        _log.debug(
                            "landing log %s: reopen failed: %s", directory, error
                        )
                        return False
                    health.broken = None
                    health.unwritable = None
                    _log.warning("landing log %s: reopened, writing again", directory)
                    return True
                size = health.probe_bytes
            try:
                health.write_probe_file(size, self._durable)
            except OSError as error:
                _log.debug("landing log %s: probe failed: %s", directory, error)
                return False
            with gate.lock:
                if health.write_failures != failures:
                    return False  # a write failed while probing: that answer is newer
                health.unwritable = None
        _log.warning(
            "landing log %s: %d bytes fit again, writing again", directory, size
        )
        return True
