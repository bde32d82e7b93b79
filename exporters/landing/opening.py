"""Opening a landing log: its parts made over one lock, the directory locked, the active
segment recovered (or created), for a serving log its blocks reserved, and what a previous
run left in the page cache fsynced (log.py is the interface over these parts)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from clock import Clock
from exporters.landing.active import ActiveSegment
from exporters.landing.appender import Appender
from exporters.landing.durability import FsyncPolicy
from exporters.landing.gate import Gate
from exporters.landing.health import DiskHealth
from exporters.landing.housekeeping import (
    Housekeeper,
    HousekeepingSchedule,
    HousekeptLog,
)
from exporters.landing.layout import lock_directory
from exporters.landing.options import LandingOptions
from exporters.landing.preallocate import BlockReservations
from exporters.landing.retention import RetentionPolicy
from exporters.landing.segments import Segments
from exporters.landing.staging import Staging
from exporters.landing.sync import SyncRounds
from exporters.landing.syncer import Syncer

__all__ = ["LogParts", "open_parts", "retention_policy", "start_housekeeping"]

_NS_PER_MS = 1_000_000


@dataclasses.dataclass(frozen=True, slots=True)
class LogParts:
    """One open log's parts (the lock is ``gate.lock``; ``lock_fd`` holds the flock)."""

    health: DiskHealth
    gate: Gate
    rounds: SyncRounds
    reservations: BlockReservations
    segments: Segments
    appender: Appender
    syncer: Syncer
    staging: Staging
    counters: dict[str, int]  # LandingStats' counts, updated by the parts
    lock_fd: int

    def release(self) -> None:
        """Closes the active segment and releases the directory (``close``'s last step)."""
        with self.rounds.lock, self.gate.lock:
            active = self.appender.active
            if self.health.broken is None:
                active.release_reserved()
            self.reservations.drop_spare_locked()
            os.close(active.fd)
            os.close(self.lock_fd)
            self.gate.descriptors_closed = True


def open_parts(
    directory: Path,
    options: LandingOptions,
    *,
    durable: bool,
    fsync_inline: bool,
    reserve: bool,
    time_ns: Callable[[], int],
    monotonic: Callable[[], float],
) -> LogParts:
    """Opens the log in ``directory`` (raises LandingLogLocked when another writer holds
    it). ``durable``: the policy fsyncs at all; ``fsync_inline``: appends fsync;
    ``reserve``: reserve the active segment's blocks (a serving log)."""
    health = DiskHealth(directory)
    gate = Gate(directory, health)
    rounds = SyncRounds()
    reservations = BlockReservations(directory, options.segment_max_bytes, gate.lock)
    counters = {
        "records_appended": 0,
        "bytes_appended": 0,
        "segments_rolled": 0,
        "segments_deleted": 0,
        "fsyncs": 0,
        "recovered_truncated_bytes": 0,
        "recovered_corrupt_regions": 0,
    }
    segments = Segments(
        directory,
        reservations,
        rounds,
        health,
        counters,
        durable=durable,
        fsync_inline=fsync_inline,
        max_record_bytes=options.max_record_bytes,
        time_ns=time_ns,
    )
    directory.mkdir(parents=True, exist_ok=True)
    lock_fd = lock_directory(directory)
    active: ActiveSegment | None = None
    try:
        active, last_append_ns = segments.open_active()
        if reserve:  # a serving log: its appends should not allocate blocks
            reserved = reservations.reserve_rest(active.fd, active.size)
            active.reserved = active.reserved or reserved
        if durable:
            # What a previous run left in the page cache becomes durable too.
            os.fsync(active.fd)
            rounds.durable_offset = active.next_offset
    except BaseException:
        if active is not None:
            os.close(active.fd)
        os.close(lock_fd)
        raise
    appender = Appender(
        segments,
        active,
        last_append_ns,
        health,
        rounds,
        counters,
        segment_max_bytes=options.segment_max_bytes,
        segment_max_age_ns=options.segment_max_age_ms * _NS_PER_MS,
        durable=durable,
    )
    syncer = Syncer(gate, rounds, appender, segments, health, counters, durable=durable)
    staging = Staging(
        directory,
        gate,
        health,
        appender,
        time_ns=time_ns,
        monotonic=monotonic,
        max_record_bytes=options.max_record_bytes,
        max_records=options.write_behind_max_records,
        fsync_inline=fsync_inline,
    )
    return LogParts(
        health,
        gate,
        rounds,
        reservations,
        segments,
        appender,
        syncer,
        staging,
        counters,
        lock_fd,
    )


def retention_policy(options: LandingOptions) -> RetentionPolicy:
    """The options' retention; None or a negative value (Kafka's -1) means no limit."""
    return RetentionPolicy(
        retention_ms=_limit_or_none(options.retention_ms),
        retention_bytes=_limit_or_none(options.retention_bytes),
        respect_consumers=options.retention_respect_consumers,
    )


def start_housekeeping(
    log: HousekeptLog,
    reservations: BlockReservations,
    options: LandingOptions,
    policy: FsyncPolicy,
    clock: Clock,
    name: str,
) -> Housekeeper:
    """Starts a serving log's threads (housekeeping.py): they tick every
    ``fsync_interval_ms`` under the ``interval`` policy, else at most every second."""
    interval = policy is FsyncPolicy.INTERVAL
    schedule = HousekeepingSchedule(
        period_ms=(
            options.fsync_interval_ms
            if interval
            else min(options.fsync_interval_ms, 1000)
        ),
        interval_sync=interval,
        retention_check_interval_ms=options.retention_check_interval_ms,
    )
    housekeeper = Housekeeper(log, reservations, clock, schedule, name=name)
    housekeeper.start()
    return housekeeper


def _limit_or_none(limit: int | None) -> int | None:
    return None if limit is None or limit < 0 else limit
