"""The OTLP forwarder: tail each node's landing log, enrich, batch, send, then commit.

Delivery contract
-----------------
* Per landing directory, records go out in offset order, one request in flight at a time,
  so every client's points reach the receiver in the order the client pushed them.
* The consumer position (``ConsumerPositions(dir, "otlp-forwarder")``) only ever covers
  batches the receiver accepted, or *permanently* rejected (counted as dropped).  It is
  written at most every ``commit_interval_s`` (a commit is an fsync: ~150/s on this
  machine's disk, far below the push rate), when ``run_once`` finishes and on shutdown.
  A crash therefore resends at most the last ``commit_interval_s`` of batches: delivery is
  at-least-once, and exactly-once whenever the process is not killed.
* Retryable failures are retried with the Collector's jittered exponential backoff.  When
  ``max_elapsed_time`` is exceeded the Collector would drop the batch; here the data is
  still in the durable landing log, so the forwarder keeps retrying every
  ``max_interval`` instead: an outage of any length loses nothing the retention keeps.
  The ``ktc_forwarder_batches_past_max_elapsed_time`` gauge shows when this is happening.
* ``retry_on_failure.enabled: false`` keeps the Collector's meaning: a failed batch is
  dropped (and counted) after its one attempt.

Sources: landing directories, or a ``RecordSource`` read the same way (the landing topic,
exporters/kafka_topic/source.py, whose position is its consumer group's offsets).

Threads: ``sending_queue.num_consumers`` threads, each owning a fixed share of the landing
directories (one directory is never served by two threads).  See ``transport.py`` for why
the gRPC side is synchronous.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import os
import random
import threading
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData
from prometheus_client import CollectorRegistry

from clock import SYSTEM_CLOCK, Clock
from exporters.landing import ConsumerPositions, LandingReader, LandingRecord
from exporters.otlp.config import OtlpExporterConfig
from exporters.otlp.enrich import count_data_points, enrich
from exporters.otlp.metrics import ForwarderMetrics
from exporters.otlp.retry import ExponentialBackoff
from exporters.otlp.transport import ExportAccepted, OtlpGrpcTransport

__all__ = [
    "CONSUMER_NAME",
    "ForwardStats",
    "OtlpForwarder",
    "RecordSource",
    "consumer_name_for",
]

log = logging.getLogger(__name__)

CONSUMER_NAME = "otlp-forwarder"


def consumer_name_for(exporter_name: str) -> str:
    """The landing-log consumer name of one configured exporter: ``otlp`` ->
    ``otlp-forwarder``, ``otlp/backup`` -> ``otlp-forwarder.backup``.  Each exporter keeps
    its own position, so two backends never share (and so lose) each other's progress.
    ``otlp_grpc`` is the Collector's newer name for the same exporter."""
    kind, _, name = exporter_name.partition("/")
    if kind not in {"otlp", "otlp_grpc"}:
        raise ValueError(
            f"exporter name {exporter_name!r} must be 'otlp' or 'otlp/<name>'"
        )
    return f"{CONSUMER_NAME}.{name}" if name else CONSUMER_NAME


# gRPC servers refuse messages over 4 MiB unless configured otherwise (grpc-go's and the
# Collector's otlp receiver default).  A batch stops short of that; a single record larger
# than this still goes out alone (the receiver decides).
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024 - 64 * 1024

# How often an idle consumer looks for new records in its landing logs.
DEFAULT_POLL_INTERVAL_S = 0.1

# How often delivered progress is written to the positions file (see the module doc).
DEFAULT_COMMIT_INTERVAL_S = 1.0

# After an unexpected error (a corrupt log, a full disk on commit) a consumer pauses this
# long before trying the same directory again, instead of spinning.
_ERROR_PAUSE_S = 1.0


@dataclasses.dataclass(frozen=True, slots=True)
class ForwardStats:
    """What one ``run_once`` moved.  Points are OTLP data points."""

    records_committed: int = 0
    points_sent: int = 0
    points_failed: int = 0
    records_dropped: int = 0

    def __add__(self, other: ForwardStats) -> ForwardStats:
        pairs = zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True)
        return ForwardStats(*(a + b for a, b in pairs))


@dataclasses.dataclass(frozen=True, slots=True)
class _Prepared:
    """A landing record, enriched and encoded, waiting in the read-ahead window."""

    offset: int
    body: bytes  # enriched MetricsData encoding; b"" when the payload did not decode
    points: int
    appended_time_unix_nano: int
    decodable: bool
    size: int  # in sending_queue sizer units


_DropReason = Literal["rejected", "retry_disabled"]


@dataclasses.dataclass(frozen=True, slots=True)
class _Outcome:
    sent_points: int
    failed_points: int
    dropped: _DropReason | None = None


class _Window:
    """The read-ahead budget shared by all directories (``sending_queue.queue_size``)."""

    def __init__(self, capacity: int, metrics: ForwarderMetrics) -> None:
        self.capacity = capacity
        self._used = 0
        self._lock = threading.Lock()
        self._metrics = metrics
        metrics.queue_capacity.set(capacity)

    def take(self, size: int, force: bool) -> bool:
        """Reserve ``size``.  ``force`` lets a directory with nothing in hand take one record
        even past capacity, so a record bigger than the whole window still moves."""
        with self._lock:
            if not force and self._used + size > self.capacity:
                return False
            self._used += size
            self._metrics.queue_size.set(self._used)
            return True

    def give_back(self, size: int) -> None:
        with self._lock:
            self._used -= size
            self._metrics.queue_size.set(self._used)


class RecordSource(Protocol):
    """Somewhere else pushes land (the topic: exporters/kafka_topic/source.py), read as a
    landing directory is: numbered records (``end_offset``, ``read``), a position
    (``load``, ``commit``: only ever what was delivered), the lag gauge's value."""

    name: str

    def end_offset(self) -> int: ...

    def read(self, from_offset: int) -> Iterator[LandingRecord]: ...

    def load(self) -> int: ...

    def commit(self, offset: int) -> None: ...

    def lag(self) -> int: ...

    def close(self) -> None: ...


class _LogTail:
    """One landing directory (or other source): its reader, its committed position, its
    read-ahead."""

    def __init__(
        self, source: Path | RecordSource, consumer_name: str, clock: Clock
    ) -> None:
        self.source = None if isinstance(source, Path) else source
        self.directory = source if isinstance(source, Path) else source.name
        self.reader: Any = LandingReader(source) if isinstance(source, Path) else source
        self.positions: Any = (
            ConsumerPositions(source, consumer_name, clock=clock)
            if isinstance(source, Path)
            else source
        )
        self.committed = self.positions.load()  # durable: in the positions file
        self.acked = self.committed  # delivered (or dropped); committed lazily
        self.last_commit_s = float("-inf")
        self.read_offset = self.committed
        self.pending: collections.deque[_Prepared] = collections.deque()
        self.held: _Prepared | None = None  # read and prepared, waiting for window room
        self.cursor: Generator[LandingRecord, None, None] | None = (
            None  # an open read()
        )
        # The lag is read at scrape time on the scraping thread, so it has its own reader
        # (a reader keeps per-segment state and is not shared between threads).
        self._lag_reader = LandingReader(source) if isinstance(source, Path) else None
        self._lag_lock = threading.Lock()

    def lag(self) -> int:
        """Records landed and not yet committed as delivered (or dropped)."""
        if self.source is not None:
            return self.source.lag()
        assert self._lag_reader is not None
        with self._lag_lock:
            landed = self._lag_reader.end_offset()
        return max(landed - self.committed, 0)

    def close(self) -> None:
        if self.cursor is not None:
            self.cursor.close()  # releases the segment file it holds open
            self.cursor = None
        self.end_offset = self.committed
        if self.source is not None:
            self.source.close()


class OtlpForwarder:
    """Forward every landed push to one OTLP/gRPC endpoint.

    ``run(stop_event)`` tails the logs until the event is set; ``run_once()`` drains what is
    in them now and returns; ``close()`` releases the channel and the logs.
    """

    def __init__(
        self,
        landing_dirs: Sequence[Path | RecordSource],
        config: OtlpExporterConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        registry: CollectorRegistry | None = None,
        exporter_name: str = "otlp",
        rng: random.Random | None = None,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        commit_interval_s: float = DEFAULT_COMMIT_INTERVAL_S,
    ) -> None:
        self._config = config
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._poll_interval_s = poll_interval_s
        self._max_request_bytes = max_request_bytes
        self._commit_interval_s = commit_interval_s
        self.metrics = ForwarderMetrics(
            registry if registry is not None else CollectorRegistry(), exporter_name
        )
        queue = config.sending_queue
        self._sizer = queue.sizer if queue.enabled else "requests"
        self._batch = queue.batch if queue.enabled else None
        self._num_consumers = queue.num_consumers if queue.enabled else 1
        self._window = _Window(queue.queue_size if queue.enabled else 1, self.metrics)
        self.consumer_name = consumer_name_for(exporter_name)
        self._tails = [
            _LogTail(
                Path(d) if isinstance(d, str | os.PathLike) else d,
                self.consumer_name,
                clock,
            )
            for d in landing_dirs
        ]
        for tail in self._tails:
            self.metrics.watch_lag(str(tail.directory), tail.lag)
        self._transport = OtlpGrpcTransport(config)
        self._closed = False

    # ------------------------------------------------------------------ public API

    def run_once(self, stop: threading.Event | None = None) -> ForwardStats:
        """Send everything landed so far, directory by directory, then return.

        Retryable failures are retried as in ``run`` (so this blocks while the receiver is
        down, until it is back or ``stop`` is set).
        """
        stop = stop if stop is not None else threading.Event()
        total = ForwardStats()
        for tail in self._tails:
            tail.end_offset = tail.reader.end_offset()
            target = tail.end_offset
            try:
                while tail.acked < target and not stop.is_set():
                    moved = self._step(tail, stop, draining=True)
                    if (
                        moved is None
                    ):  # the reader had nothing after all, or we were stopped
                        break
                    total += moved
            finally:
                self._commit(tail, force=True)
        return total

    def serve(self, stop: threading.Event) -> None:
        """Tail all logs until ``stop`` is set (blocking; runs the consumer threads)."""
        shares = [
            self._tails[i :: self._num_consumers] for i in range(self._num_consumers)
        ]
        threads = [
            threading.Thread(
                target=self._consume,
                args=(share, stop),
                name=f"otlp-forwarder-{i}",
                daemon=True,
            )
            for i, share in enumerate(shares)
            if share
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    async def run(self, stop_event: asyncio.Event) -> None:
        """Tail all logs until ``stop_event`` is set; the work runs in worker threads."""
        stop = threading.Event()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def serve() -> None:
            try:
                self.serve(stop)
            except BaseException as error:  # handed to the awaiting task
                loop.call_soon_threadsafe(_settle, done, error)
            else:
                loop.call_soon_threadsafe(_settle, done, None)

        threading.Thread(target=serve, name="otlp-forwarder", daemon=True).start()
        stop_waiter: asyncio.Future[Any] = asyncio.ensure_future(stop_event.wait())
        try:
            await asyncio.wait((stop_waiter, done), return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Cancellation of run() is a stop too; in every case wait for the threads, so
            # no send is left running behind the caller's back.
            stop.set()
            stop_waiter.cancel()
            await asyncio.shield(done)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._transport.close()
        for tail in self._tails:
            tail.close()

    # ------------------------------------------------------------------ consumer loop

    def _consume(self, tails: list[_LogTail], stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                wake_in_s = self._poll_interval_s
                for tail in tails:
                    if stop.is_set():
                        return
                    try:
                        tail.end_offset = tail.reader.end_offset()
                        if tail.acked < tail.end_offset:
                            if self._step(tail, stop, draining=False) is not None:
                                wake_in_s = 0.0
                            else:  # holding a small batch back for flush_timeout
                                wake_in_s = min(wake_in_s, self._flush_wait_s(tail))
                        self._commit(tail, force=False)
                    except Exception:
                        log.exception(
                            "otlp forwarder: error on %s; pausing", tail.directory
                        )
                        wake_in_s = max(wake_in_s, _ERROR_PAUSE_S)
                if wake_in_s > 0 and self._clock.wait(stop, wake_in_s):
                    return
        finally:
            for tail in tails:
                try:
                    self._commit(tail, force=True)
                except Exception:
                    log.exception(
                        "otlp forwarder: final commit failed on %s", tail.directory
                    )

    def _commit(self, tail: _LogTail, *, force: bool) -> None:
        """Write the delivered position if it moved and the interval passed (or ``force``)."""
        now_s = self._clock.monotonic()
        if tail.acked > tail.committed and (
            force or now_s - tail.last_commit_s >= self._commit_interval_s
        ):
            tail.positions.commit(tail.acked)
            tail.committed = tail.acked
            tail.last_commit_s = now_s

    # ------------------------------------------------------------------ one batch

    def _step(
        self, tail: _LogTail, stop: threading.Event, *, draining: bool
    ) -> ForwardStats | None:
        """Read ahead, cut one batch, deliver it, mark it acked.  Returns what it moved, or
        None when nothing moved (no batch ready yet, or stopped mid-backoff)."""
        self._fill(tail)
        batch = self._cut_batch(tail, draining=draining)
        if not batch:
            return None
        points = sum(p.points for p in batch)
        undecodable = sum(1 for p in batch if not p.decodable)
        # A batch without data points (empty pushes, undecodable ones) has nothing to send.
        outcome = (
            _Outcome(0, 0)
            if points == 0
            else self._deliver(b"".join(p.body for p in batch), points, stop)
        )
        if outcome is None:  # stopped mid-backoff: not acked, the batch stays landed
            return None
        for _ in batch:
            self._window.give_back(tail.pending.popleft().size)
        tail.acked = batch[-1].offset + 1

        if outcome.sent_points:
            self.metrics.sent_metric_points.inc(outcome.sent_points)
        if outcome.failed_points:
            self.metrics.send_failed_metric_points.inc(outcome.failed_points)
        dropped = 0
        if undecodable:
            self.metrics.dropped("undecodable", undecodable)
            dropped += undecodable
        if outcome.dropped is not None:
            decodable = len(batch) - undecodable
            self.metrics.dropped(outcome.dropped, decodable)
            dropped += decodable
        return ForwardStats(
            len(batch), outcome.sent_points, outcome.failed_points, dropped
        )

    def _fill(self, tail: _LogTail) -> None:
        """Read records into the window until it is full or the log is exhausted."""
        if tail.held is not None:  # prepared last time, did not fit then
            if not self._admit(tail, tail.held):
                return
            tail.held = None
        while True:
            if tail.cursor is None:
                if tail.read_offset >= tail.end_offset:
                    return
                # One read() is kept open across batches: starting a read mid-segment makes
                # the reader scan forward from its nearest index point (up to 1 MiB), which
                # per small batch would cost more than the sending.
                tail.cursor = cast(
                    "Generator[LandingRecord, None, None]",
                    tail.reader.read(tail.read_offset),
                )
            record = next(tail.cursor, None)
            if record is None:  # the end of what was on disk when this read began
                tail.cursor = None
                return
            prepared = self._prepare(record)
            tail.read_offset = record.offset + 1
            if not self._admit(tail, prepared):
                tail.held = prepared  # keep the work; admit it when the window drains
                return

    def _admit(self, tail: _LogTail, prepared: _Prepared) -> bool:
        if not self._window.take(prepared.size, force=not tail.pending):
            return False
        tail.pending.append(prepared)
        return True

    def _prepare(self, record: LandingRecord) -> _Prepared:
        try:
            metrics = MetricsData.FromString(record.payload)
        except DecodeError as error:
            # The collector lands what it acknowledged; a payload that is not MetricsData
            # cannot be forwarded, and holding the log back for it would stop everyone.
            log.warning(
                "otlp forwarder: record %d is not OTLP MetricsData (%s); skipping it",
                record.offset,
                error,
            )
            return _Prepared(
                record.offset,
                b"",
                0,
                record.appended_time_unix_nano,
                False,
                self._size_of(0, 0),
            )
        enrich(metrics, record.context)
        body = metrics.SerializeToString()
        points = count_data_points(metrics.resource_metrics)
        return _Prepared(
            record.offset,
            body,
            points,
            record.appended_time_unix_nano,
            True,
            self._size_of(points, len(body)),
        )

    def _size_of(self, points: int, body_bytes: int) -> int:
        return {"requests": 1, "items": points, "bytes": body_bytes}[self._sizer]

    def _cut_batch(self, tail: _LogTail, *, draining: bool) -> list[_Prepared]:
        """The next request's records, or [] to wait for more (batch below ``min_size``)."""
        if not tail.pending:
            return []
        if self._batch is None:
            return [tail.pending[0]]
        batch_config = self._batch
        size_key = (
            (lambda p: p.points)
            if batch_config.sizer == "items"
            else (lambda p: len(p.body))
        )
        batch: list[_Prepared] = []
        size = body_bytes = 0
        for prepared in tail.pending:
            grows = size_key(prepared)
            if batch and (
                (batch_config.max_size and size + grows > batch_config.max_size)
                or body_bytes + len(prepared.body) > self._max_request_bytes
            ):
                return batch  # full: send now
            batch.append(prepared)
            size += grows
            body_bytes += len(prepared.body)
        if draining or size >= batch_config.min_size or self._flush_wait_s(tail) <= 0:
            return batch
        if tail.held is not None or tail.read_offset < tail.end_offset:
            return batch  # the window is full: waiting for min_size could never finish
        return []

    def _flush_wait_s(self, tail: _LogTail) -> float:
        """Seconds until the oldest waiting record has waited ``flush_timeout``."""
        if not tail.pending or self._batch is None:
            return self._poll_interval_s
        age_s = (self._clock.time_ns() - tail.pending[0].appended_time_unix_nano) / 1e9
        return self._batch.flush_timeout.total_seconds() - age_s

    def _deliver(
        self, body: bytes, points: int, stop: threading.Event
    ) -> _Outcome | None:
        """Send one request until it is accepted or permanently refused; None if stopped."""
        retry = self._config.retry_on_failure
        backoff = ExponentialBackoff(retry, self._rng)
        max_elapsed_s = retry.max_elapsed_time.total_seconds()
        started_s = self._clock.monotonic()
        past_max_elapsed = False
        try:
            while not stop.is_set():
                result = self._transport.export(body)
                if isinstance(result, ExportAccepted):
                    rejected = min(max(result.rejected_data_points, 0), points)
                    if rejected or result.error_message:
                        log.warning(
                            "otlp forwarder: partial success, %d of %d points rejected: %s",
                            rejected,
                            points,
                            result.error_message,
                        )
                    return _Outcome(points - rejected, rejected)
                if not result.retryable:
                    log.error(
                        "otlp forwarder: %s (%s) is permanent; dropping %d points",
                        result.code.name,
                        result.message,
                        points,
                    )
                    return _Outcome(0, points, "rejected")
                if not retry.enabled:
                    log.error(
                        "otlp forwarder: %s (%s) and retry_on_failure is disabled; "
                        "dropping %d points",
                        result.code.name,
                        result.message,
                        points,
                    )
                    return _Outcome(0, points, "retry_disabled")
                self.metrics.retries.inc()
                delay_s = backoff.next_delay_s()
                elapsed_s = self._clock.monotonic() - started_s
                if (
                    not past_max_elapsed
                    and max_elapsed_s
                    and elapsed_s + delay_s > max_elapsed_s
                ):
                    # Where the Collector gives up.  The landing log still holds the batch,
                    # so keep it and settle into retrying every max_interval.
                    past_max_elapsed = True
                    self.metrics.batches_past_max_elapsed.inc()
                    log.warning(
                        "otlp forwarder: receiver failing for %.1fs (max_elapsed_time %.1fs); "
                        "keeping the data in the landing log and retrying every max_interval",
                        elapsed_s,
                        max_elapsed_s,
                    )
                if past_max_elapsed:
                    delay_s = backoff.jitter(backoff.max_interval_s)
                if result.retry_delay_s is not None:
                    delay_s = max(
                        delay_s, result.retry_delay_s
                    )  # the server knows best
                log.info(
                    "otlp forwarder: %s (%s); retrying in %.3fs",
                    result.code.name,
                    result.message,
                    delay_s,
                )
                if self._clock.wait(stop, delay_s):
                    return None
            return None
        finally:
            if past_max_elapsed:
                self.metrics.batches_past_max_elapsed.dec()


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
