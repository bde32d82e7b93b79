"""Landing pushes on a Kafka topic: produced before they are answered.

``export`` hands the record to librdkafka (``produce``: no I/O on the event loop) and
numbers it; a thread polls the producer for delivery reports and passes them to the event
loop in batches (one ``call_soon_threadsafe`` per poll, not per record).  A connection's
answers wait on :meth:`pending_delivery`: a future done once every record produced before
the call has its report.  It fails with ``NotLanded`` naming the records whose delivery
failed, so ``DurabilityGate.refuse_pushes`` answers exactly those pushes 89 (retriable,
as a full disk does) and the rest of the batch 0 (collector/net/flush.py).

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
import threading
from collections.abc import Callable
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from exporters.base import ExportResult
from exporters.context import TelemetryContext
from exporters.kafka_topic.record import encode_headers
from exporters.kafka_topic.settings import TopicSettings

__all__ = ["Refusal", "TopicLanding"]

Refusal = Callable[[BaseException, list[tuple[TelemetryContext, bytes]]], BaseException]

log = logging.getLogger("exporters.kafka_topic")

# How long the delivery thread blocks in poll(): reports wake it at once, this only bounds
# how late it sees a close.
_POLL_S: Final = 0.2
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
        # Produced, no report yet: number -> (context, payload), in produce order, so the
        # lowest outstanding number is the first key.
        self._outstanding: dict[int, tuple[TelemetryContext, bytes]] = {}
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._reports: list[tuple[int, KafkaError | None]] = []
        self._closed = threading.Event()
        self.records_produced = 0
        self.records_delivered = 0
        self.records_failed = 0  # failed delivery reports and refused produce calls
        self.unwritable: str | None = None  # the last delivery error, until a success
        self._last_failure_log_s = -1e9
        self._thread = threading.Thread(
            target=self._poll, name="landing-topic-delivery", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------ the Exporter
    def export(self, context: TelemetryContext, payload: bytes) -> ExportResult:
        number = self._next
        try:
            self._producer.produce(
                self.topic,
                value=payload,
                key=context.client_instance_id,
                headers=encode_headers(context),
                timestamp=context.received_time_unix_nano // 1_000_000,
                on_delivery=functools.partial(self._report, number),
            )
        except BufferError:
            # librdkafka's queue is full (queue.buffering.max.messages/kbytes): the
            # cluster is not keeping up; the client pushes again one interval later.
            return self._refused("the producer's queue is full")
        except KafkaException as exc:
            return self._refused(str(exc))
        self._next = number + 1
        self._outstanding[number] = (context, payload)
        self.records_produced += 1
        return ExportResult.success()

    def close(self) -> None:
        """Waits for the outstanding reports (up to the delivery timeout), then stops."""
        if self._closed.is_set():
            return
        remaining = self._producer.flush(self.settings.delivery_timeout_ms / 1000)
        self._closed.set()
        self._thread.join()
        if remaining:
            log.error("landing topic %s: %d records undelivered", self.topic, remaining)

    # ------------------------------------------------------------ the barrier
    def pending_delivery(self) -> asyncio.Future[None] | None:
        """A future done when every record produced so far has its delivery report (failed
        with NotLanded naming those that did not land); None when none is outstanding."""
        if not self._outstanding:
            return None
        future = self._loop.create_future()
        self._waiters.append(_Waiter(self._next, future))
        return future

    # ------------------------------------------------------------ delivery reports
    def _report(self, number: int, error: KafkaError | None, _: Message) -> None:
        # On the delivery thread, inside poll(): collected, handed over after the poll.
        self._reports.append((number, error))

    def _poll(self) -> None:
        producer = self._producer
        while not self._closed.is_set():
            producer.poll(_POLL_S)
            if self._reports:
                reports, self._reports = self._reports, []
                try:
                    self._loop.call_soon_threadsafe(self._delivered, reports)
                except RuntimeError:  # the loop is closed: nobody waits any more
                    return

    def _delivered(self, reports: list[tuple[int, KafkaError | None]]) -> None:
        outstanding = self._outstanding
        for number, error in reports:
            record = outstanding.pop(number, None)
            if error is None:
                self.records_delivered += 1
                self.unwritable = None
                continue
            self.records_failed += 1
            self.unwritable = f"delivery to {self.topic} failed: {error.str()}"
            if record is not None:
                for waiter in self._waiters:
                    if number < waiter.until:
                        waiter.failed.append(record)
            self._log_failure()
        lowest = next(iter(outstanding), self._next)
        waiters = self._waiters
        while waiters and waiters[0].until <= lowest:
            waiter = waiters.popleft()
            if waiter.future.done():
                continue
            if waiter.failed:
                cause = RuntimeError(self.unwritable or "delivery failed")
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
