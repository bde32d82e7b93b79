"""Where the OTLP forwarder reads pushes landed on the topic: a consumer group of its own.

The forwarder numbers what it reads (its "offsets") and says how far it delivered; this
source maps those numbers to the topic's per-partition offsets.  The records are numbered
in the order they were consumed, and the forwarder acknowledges in that order, so "every
number below n delivered" means, per partition, "every offset up to that of the last
record numbered below n": that is what ``commit`` commits to the group, only ever after
the OTLP export succeeded (or was refused for good).

``lag`` means what it means for the landing log: records landed and not committed as
forwarded, summed over every partition of the topic with the group's committed offsets.
Several collectors sharing the group each report the group's whole lag (take the max
across replicas, not the sum).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Iterator
from typing import Any, Final

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from exporters.kafka_topic.record import TopicRecordError, decode_record
from exporters.kafka_topic.settings import TopicSettings
from exporters.landing import LandingRecord

__all__ = ["TopicSource"]

log = logging.getLogger("exporters.kafka_topic")

# Records taken from the consumer per end_offset() call (its fetch queue holds more).
_CONSUME_BATCH: Final = 500
# A scrape during an outage waits this long per call before the last value is shown.
_LAG_TIMEOUT_S: Final = 2.0


class TopicSource:
    """The forwarder's view of the topic: ``end_offset``/``read`` as a LandingReader,
    ``load``/``commit`` as ConsumerPositions, and ``lag`` for the gauge.  Used by one
    forwarder thread; ``lag`` runs on the scraping thread with its own consumer."""

    def __init__(self, settings: TopicSettings, group: str) -> None:
        self.settings = settings
        self.topic = settings.topic
        self.group = group
        self.name = f"kafka:{settings.topic}"
        self._consumer = Consumer(settings.consumer_config(group))
        self._consumer.subscribe([self.topic], on_revoke=self._revoked)
        self._next = 0
        # Consumed, not yet handed to the forwarder.
        self._unread: collections.deque[tuple[int, Message]] = collections.deque()
        # (number, partition, offset) of every consumed record not yet committed, in
        # number order; a record skipped as undecodable shares the previous number.
        self._uncommitted: collections.deque[tuple[int, int, int]] = collections.deque()
        self.records_skipped = 0
        self._lag_consumer: Any = None
        self._lag_lock = threading.Lock()
        self._last_lag = 0

    # ------------------------------------------------------------ reading
    def load(self) -> int:
        return 0  # numbers start again in every process; the group has the offsets

    def end_offset(self) -> int:
        """Takes what the consumer has fetched; the number after the last record read."""
        for message in self._consumer.consume(_CONSUME_BATCH, timeout=0):
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("landing topic %s: %s", self.topic, error.str())
                continue
            self._unread.append((self._next, message))
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None  # a consumed record
            self._uncommitted.append((self._next, partition, offset))
            self._next += 1
        return self._next

    def read(self, from_offset: int) -> Iterator[LandingRecord]:
        # self._unread, not a local: a skip or a revocation replaces it.
        while self._unread:
            number, message = self._unread.popleft()
            if number < from_offset:
                continue
            try:
                context, payload = decode_record(message.headers(), message.value())
            except TopicRecordError as exc:
                self._skip(number, message, exc)
                continue
            _, timestamp_ms = message.timestamp()
            yield LandingRecord(number, context, payload, timestamp_ms * 1_000_000)

    def _skip(self, number: int, message: Message, error: Exception) -> None:
        """A record that is not ours: never forwarded, committed with the one before."""
        self.records_skipped += 1
        log.warning(
            "landing topic %s: partition %d offset %d skipped: %s",
            self.topic,
            message.partition(),
            message.offset(),
            error,
        )
        # Renumber: it takes the previous record's number, and the records after it one
        # less, so the forwarder's numbers stay dense.
        self._uncommitted = collections.deque(
            (n - 1 if n >= number else n, p, o) for n, p, o in self._uncommitted
        )
        self._unread = collections.deque((n - 1, m) for n, m in self._unread)
        self._next -= 1

    # ------------------------------------------------------------ positions
    def commit(self, offset: int) -> None:
        """Every record numbered below ``offset`` was delivered: commit their offsets."""
        ends: dict[int, int] = {}
        uncommitted = self._uncommitted
        while uncommitted and uncommitted[0][0] < offset:
            _, partition, partition_offset = uncommitted.popleft()
            ends[partition] = partition_offset + 1
        if not ends:
            return
        try:
            self._consumer.commit(
                offsets=[TopicPartition(self.topic, p, o) for p, o in ends.items()],
                asynchronous=False,
            )
        except KafkaException as exc:
            # A partition this member no longer owns (a rebalance): its new owner starts
            # from the group's last commit, so those records may be sent twice.
            log.warning("landing topic %s: commit failed: %s", self.topic, exc)

    def _revoked(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        gone = {p.partition for p in partitions}
        # Not handed to the forwarder yet: the partition's next owner reads them, and
        # their offsets must never be committed from here (that would skip them for the
        # group).  What was handed over is still sent and committed: at worst twice.
        dropped = {n for n, m in self._unread if m.partition() in gone}
        if not dropped:
            return
        self._unread = collections.deque(
            (n, m) for n, m in self._unread if n not in dropped
        )
        self._uncommitted = collections.deque(
            entry for entry in self._uncommitted if entry[0] not in dropped
        )

    # ------------------------------------------------------------ lag
    def lag(self) -> int:
        """Records in the topic not committed by the group, over every partition; the last
        value when the cluster does not answer."""
        with self._lag_lock:
            try:
                self._last_lag = self._group_lag()
            except KafkaException as exc:
                log.debug("landing topic %s: lag unknown: %s", self.topic, exc)
            return self._last_lag

    def _group_lag(self) -> int:
        if self._lag_consumer is None:
            self._lag_consumer = Consumer(self.settings.consumer_config(self.group))
        consumer = self._lag_consumer
        metadata = consumer.list_topics(self.topic, timeout=_LAG_TIMEOUT_S)
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None:
            return 0
        partitions = [TopicPartition(self.topic, p) for p in topic.partitions]
        committed = consumer.committed(partitions, timeout=_LAG_TIMEOUT_S)
        lag = 0
        for position in committed:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(self.topic, position.partition), timeout=_LAG_TIMEOUT_S
            )
            start = low if position.offset == OFFSET_INVALID else position.offset
            lag += max(high - max(start, low), 0)
        return lag

    def close(self) -> None:
        self._consumer.close()
        with self._lag_lock:
            if self._lag_consumer is not None:
                self._lag_consumer.close()
                self._lag_consumer = None
