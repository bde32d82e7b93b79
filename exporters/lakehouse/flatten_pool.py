"""Flattening a batch of landing records, on several processes when the batch is large.

Flattening is Python, one point at a time (about 115,000 points a second on one core),
and it is the part of a batch that grows with its size: Spark's appends cost mostly the
same for 70,000 points as for 140,000.  A batch of many records is cut into contiguous
slices, one per process: this process flattens the first while worker processes flatten
the others; each slice's rows come back before their shared columns are expanded (see
flatten.RowParts: 7 MB instead of 17 MB for 2,500 pushes) and are assembled in order, so
the tables are what one process would have made.  Small batches (and a machine with one
core) stay in this process: handing records over costs more than it saves.

The workers are spawned (never forked: the driver process runs the JVM gateway's
threads) when the first large batch comes and live as long as this process, ignore
Ctrl-C (the terminal sends it to the whole process group; the parent decides what an
interrupt means), and exit as soon as their parent is gone, so a killed ingest leaves no
worker behind.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa

from exporters.lakehouse.flatten import (
    PointRowsBuilder,
    RowParts,
    add_records,
    assemble,
)
from exporters.landing import LandingRecord

# Slices are at least this long, or the batch is flattened here: handing a slice over
# (its records pickled and sent, its rows sent back) costs about a third of flattening
# it, so a slice of a few hundred records saves a few tens of milliseconds at most.
MIN_RECORDS_PER_SLICE = 500

log = logging.getLogger(__name__)


class SourceRecord(NamedTuple):
    """One landing record to flatten, with the landing directory it came from."""

    source: str
    record: LandingRecord


class Flattened(NamedTuple):
    tables: dict[str, pa.Table]  # by kind, as PointRowsBuilder.finish() returns them
    # Records whose payload is not OTLP MetricsData: source, offset and the parser's error.
    rejected: list[dict[str, object]]
    processes: int = 1  # how many processes flattened the batch


def flatten_records(records: Sequence[SourceRecord]) -> Flattened:
    """Flatten ``records`` in this process."""
    parts, rejected = _flatten_parts(records)
    return Flattened(assemble([parts]), rejected)


def _flatten_parts(
    records: Sequence[SourceRecord],
) -> tuple[RowParts, list[dict[str, object]]]:
    """The rows of ``records`` before their shared columns are expanded (what a worker
    hands back: 7 MB instead of 17 MB for 2,500 pushes), and the rejected records."""
    builder = PointRowsBuilder()
    rejected: list[dict[str, object]] = []
    add_records(
        builder,
        (
            (
                source,
                record.offset,
                record.context,
                record.payload,
                record.appended_time_unix_nano,
            )
            for source, record in records
        ),
        rejected,
    )
    return builder.finish_parts(), rejected


def _flatten_pickled(
    records: bytes,
) -> tuple[RowParts, list[dict[str, object]]]:
    return _flatten_parts(pickle.loads(records))


def _slices(
    records: Sequence[SourceRecord], count: int
) -> list[Sequence[SourceRecord]]:
    """``records`` cut into ``count`` contiguous slices of nearly equal length."""
    size, extra = divmod(len(records), count)
    bounds = [0]
    for index in range(count):
        bounds.append(bounds[-1] + size + (1 if index < extra else 0))
    return [records[start:end] for start, end in zip(bounds, bounds[1:], strict=False)]


def _worker_started() -> None:
    """Runs first in every worker process."""
    # Spawned by the main thread, it already ignores SIGINT (see _start()); by another
    # thread, from here on.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is not None:

        def exit_with_parent() -> None:
            multiprocessing.connection.wait([parent.sentinel])
            os._exit(1)

        threading.Thread(
            target=exit_with_parent, name="ktc-flatten-parent", daemon=True
        ).start()


def _ready() -> None:
    """A task that only makes sure a worker process has started and imported this."""


def available_cores(cgroup_cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota
    (a container limited to 1.5 CPUs of a 16-core node has 2, not 16)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        quota, period = cgroup_cpu_max.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota to honour
    return cores


class Flattener:
    """Flattens batches; a large one on ``processes`` processes (this one included)."""

    def __init__(
        self, processes: int, min_records_per_slice: int = MIN_RECORDS_PER_SLICE
    ) -> None:
        self.processes = max(1, processes)
        self.min_records_per_slice = max(1, min_records_per_slice)
        self._pool: ProcessPoolExecutor | None = None
        self._starting = threading.Lock()

    def start(self) -> None:
        """Spawn the worker processes and wait until each has run its initializer
        (flatten() does, for the first batch it slices). From then on a Ctrl-C finds
        every worker ignoring it and no task pending, so the parent's exit only sends
        each worker its end-of-work sentinel."""
        with self._starting:
            for ready in self._start():
                ready.result()

    def _start(self) -> list[Future[None]]:
        if self.processes == 1 or self._pool is not None:
            return []
        workers = self.processes - 1
        # A Ctrl-C while a worker's interpreter starts (before its initializer runs)
        # would kill it with a traceback. An ignored signal stays ignored across exec,
        # and Python keeps it so: SIGINT is ignored here while the workers are spawned
        # (each submit spawns one until all are), a few milliseconds. Only the main
        # thread may change a handler; elsewhere the workers take their chance.
        swap = (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is not None  # None: not set by Python
        )
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if swap else None
        try:
            self._pool = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_started,
            )
            return [self._pool.submit(_ready) for _ in range(workers)]
        finally:
            if swap:
                signal.signal(signal.SIGINT, previous)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def flatten(self, records: Sequence[SourceRecord]) -> Flattened:
        count = min(self.processes, len(records) // self.min_records_per_slice)
        if count <= 1:
            return flatten_records(records)
        first, *others = _slices(records, count)
        try:
            self.start()
            assert self._pool is not None
            # Pickled here, before this process starts on its own slice: the pool's
            # threads that would pickle them otherwise wait for the interpreter lock.
            pending = [
                self._pool.submit(
                    _flatten_pickled, pickle.dumps(list(part), protocol=5)
                )
                for part in others
            ]
            results = [_flatten_parts(first)] + [future.result() for future in pending]
        except BrokenProcessPool:
            log.warning(
                "a flattening worker process died (killed, or out of memory?): this "
                "batch is flattened in the ingest process, the next large one on new "
                "workers"
            )
            self.close()
            return flatten_records(records)
        return Flattened(
            assemble([parts for parts, _ in results]),
            [entry for _, rejected in results for entry in rejected],
            processes=count,
        )


_shared: dict[int, Flattener] = {}
_shared_lock = threading.Lock()


def shared_flattener(processes: int) -> Flattener:
    """This process's flattener of ``processes`` processes.  Its workers live as long as
    this process (the interpreter's exit stops them): ingest jobs come and go (one per
    `ktc ingest --once`, one per retry), and a worker takes ~0.5 s to start."""
    with _shared_lock:
        flattener = _shared.get(processes)
        if flattener is None:
            flattener = _shared[processes] = Flattener(processes)
        return flattener


def default_processes() -> int:
    """One flattening process per core, at most four: past that the appends dominate."""
    return min(4, available_cores())
