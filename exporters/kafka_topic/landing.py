"""Landing pushes on a Kafka topic: produced before they are answered.

``export`` hands the record to librdkafka (``produce``: no I/O on the event loop; its own
threads send) and numbers it.  A connection's answers wait on :meth:`pending_delivery`: a
future done once every record produced before the call has its delivery report.  It fails
with ``NotLanded`` naming the records whose delivery failed, so
``DurabilityGate.refuse_pushes`` answers exactly those pushes 89 (retriable, as a full
disk does) and the rest of the batch 0 (collector/net/flush.py).

The reports are served on the event loop, never blocking it: ``poll(0)`` (returns at once)
every millisecond while records are outstanding, and before each new barrier.  A thread
blocking in ``poll()`` was tried first: its callbacks contend with the loop for the GIL
and each batch of reports costs a cross-thread wake-up, for no gain measured
(tests/perf/bench_landing_topic.py).

Why this shape: the gate's group-commit path already waits for a future per batch of
answers; a producer's delivery report is that batch's "fsync".  Idempotence and acks=all
(settings.py) make a record that librdkafka retried land once, and "in the topic" mean
"on every in-sync replica".
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import Callable
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from exporters.base import ExportResult
from exporters.context import TelemetryContext
from exporters.kafka_topic.record import encode_headers
from exporters.kafka_topic.settings import TopicSettings
from exporters.landing.format import ContextEncodingError

__all__ = ["Refusal", "TopicLanding"]

Refusal = Callable[[BaseException, list[tuple[TelemetryContext, bytes]]], BaseException]

log = logging.getLogger("exporters.kafka_topic")

# How often the event loop polls the producer while records are outstanding: what a
# report may wait after librdkafka's threads received it (a poll with nothing to serve
# costs about a microsecond; none runs while nothing is outstanding).
_POLL_S: Final = 0.001
# A failing topic fails every push: at most one log line a second.
_FAILURE_LOG_INTERVAL_S: Final = 1.0


class _Waiter:
    """Answers waiting until every record numbered below ``until`` has its report."""

    __slots__ = ("failed", "future", "until")

    def __init__(self, until: int, future: asyncio.Future[None]) -> None:
        self.until = until
        self.future = future
        self.failed: list[tuple[TelemetryContext, bytes]] = []


class TopicLanding:
    """An Exporter producing every push to ``settings.topic`` (keyed by client instance
    id), and the delivery barrier its answers wait for.  Owned by the event loop's thread:
    ``export``, ``pending_delivery`` and ``close`` are called there."""

    def __init__(
        self,
        settings: TopicSettings,
        loop: asyncio.AbstractEventLoop,
        *,
        refusal: Refusal,
        producer: Any = None,
    ) -> None:
        """``refusal(cause, records)`` is the error a barrier fails with when ``records``
        did not land: the collector's ``NotLanded``, which its gate turns into 89 answers
        (this package may not import the collector)."""
        self.settings = settings
        self.topic = settings.topic
        self._loop = loop
        self._refusal = refusal
        self._producer = (
            producer if producer is not None else Producer(settings.producer_config())
        )
        self._next = 0  # the number the next produced record gets
        # Produced, no report yet: number -> context (what names the push to refuse; the
        # payload is librdkafka's to keep), in produce order, so the lowest outstanding
        # number is the first key.
        self._outstanding: dict[int, TelemetryContext] = {}
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._reports: list[tuple[int, KafkaError | None]] = []
        self._poll_handle: asyncio.TimerHandle | None = None
        self._closed = False
        self.records_produced = 0
        self.records_delivered = 0
        self.records_failed = 0  # failed delivery reports and refused produce calls
        self.unwritable: str | None = None  # the last delivery error, until a success
        self._last_failure = "delivery failed"
        self._last_failure_log_s = -1e9

    # ------------------------------------------------------------ the Exporter
    def export(self, context: TelemetryContext, payload: bytes) -> ExportResult:
        number = self._next
        try:
            headers = encode_headers(context)
        except ContextEncodingError as exc:
            # No reader would take its record: refused for good, never "push again".
            self.records_failed += 1
            return ExportResult.failure(f"landing topic {self.topic}: {exc}")
        try:
            self._producer.produce(
                self.topic,
                value=payload,
                key=context.client_instance_id,
                headers=headers,
                timestamp=context.received_time_unix_nano // 1_000_000,
                on_delivery=functools.partial(self._report, number),
            )
        except BufferError:
            # librdkafka's queue is full (queue.buffering.max.messages/kbytes): the
            # cluster is not keeping up; the client pushes again one interval later.
            return self._refused("the producer's queue is full")
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if (
                isinstance(error, KafkaError)
                and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
            ):
                # Larger than message.max.bytes (settings.py: a push of
                # telemetry.max.bytes fits): the same push would be refused every time.
                self.records_failed += 1
                return ExportResult.failure(
                    f"producing to {self.topic} failed: {error.str()}"
                )
            return self._refused(str(exc))
        self._next = number + 1
        self._outstanding[number] = context
        self.records_produced += 1
        if self._poll_handle is None:
            self._poll_handle = self._loop.call_later(_POLL_S, self._poll)
        return ExportResult.success()

    def close(self) -> None:
        """Waits for the outstanding reports (up to the delivery timeout), then stops."""
        if self._closed:
            return
        self._closed = True
        if self._poll_handle is not None:
            self._poll_handle.cancel()
            self._poll_handle = None
        remaining = self._producer.flush(self.settings.delivery_timeout_ms / 1000)
        self._take_reports()
        if remaining:
            log.error("landing topic %s: %d records undelivered", self.topic, remaining)

    # ------------------------------------------------------------ the barrier
    def pending_delivery(self) -> asyncio.Future[None] | None:
        """A future done when every record produced so far has its delivery report (failed
        with NotLanded naming those that did not land); None when none is outstanding."""
        if not self._outstanding:
            return None
        self._producer.poll(0)  # reports already in: settle them before waiting
        self._take_reports()
        if not self._outstanding:
            return None
        future = self._loop.create_future()
        self._waiters.append(_Waiter(self._next, future))
        return future

    # ------------------------------------------------------------ delivery reports
    def _report(self, number: int, error: KafkaError | None, _: Message) -> None:
        # Inside poll(): collected, settled after the poll.
        self._reports.append((number, error))

    def _poll(self) -> None:
        """Serves the delivery reports librdkafka's threads queued; again ``_POLL_S``
        later while records are outstanding."""
        self._poll_handle = None
        self._producer.poll(0)
        self._take_reports()
        if self._outstanding and not self._closed:
            self._poll_handle = self._loop.call_later(_POLL_S, self._poll)

    def _take_reports(self) -> None:
        if self._reports:
            reports, self._reports = self._reports, []
            self._delivered(reports)

    def _delivered(self, reports: list[tuple[int, KafkaError | None]]) -> None:
        outstanding = self._outstanding
        for number, error in reports:
            context = outstanding.pop(number, None)
            if error is None:
                self.records_delivered += 1
                self.unwritable = None
                continue
            self.records_failed += 1
            self.unwritable = self._last_failure = (
                f"delivery to {self.topic} failed: {error.str()}"
            )
            if context is not None:
                for waiter in self._waiters:
                    if number < waiter.until:
                        waiter.failed.append((context, b""))
            self._log_failure()
        lowest = next(iter(outstanding), self._next)
        waiters = self._waiters
        while waiters and waiters[0].until <= lowest:
            waiter = waiters.popleft()
            if waiter.future.done():
                continue
            if waiter.failed:
                cause = RuntimeError(self._last_failure)
                waiter.future.set_exception(self._refusal(cause, waiter.failed))
            else:
                waiter.future.set_result(None)

    def _refused(self, reason: str) -> ExportResult:
        self.records_failed += 1
        self.unwritable = f"producing to {self.topic} failed: {reason}"
        self._log_failure()
        return ExportResult.unavailable(self.unwritable)

    def _log_failure(self) -> None:
        now_s = self._loop.time()
        if now_s - self._last_failure_log_s >= _FAILURE_LOG_INTERVAL_S:
            self._last_failure_log_s = now_s
            log.error(
                "landing topic: %s (%d records refused so far)",
                self.unwritable,
                self.records_failed,
            )
