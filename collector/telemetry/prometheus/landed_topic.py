"""What ``/metrics/clients`` folds in the scale-out layout: the records of the landing topic.

A push landed on the topic (``landing.kafka.topic``) is answered once the topic acknowledged
its record (``acks=all``, exporters/kafka_topic/landing.py); a push whose delivery failed is
answered 89 and pushed again, and the topic then holds it once.  Reading the topic, not the
producer's queue, the fold counts each landed push once, as the OTLP forwarder and the
lakehouse do; and one reader of the whole topic sees every replica's clients, so a client
that moved replicas keeps one series set.

A plain consumer, no group: every partition of the topic assigned, each from its end
offset when the reader starts (as the landing log's fold starts at the log's next offset:
the series are those of pushes landed since), positions kept in memory and never
committed.  The producer is idempotent, not transactional, so there are no aborted
records to skip; ``read_committed`` (librdkafka's default) is kept so that a transactional
writer of the topic would not make the fold count what it aborted.  Records are decoded as
every reader of the topic decodes them (``decode_record``): a record of a format this
reader does not know is skipped, counted in ``records_skipped`` and logged.

Partitions added to the topic after the reader started (``kafka-topics --alter
--partitions``) are looked for every ``PARTITION_REFRESH_S`` and read from their
beginning: each of their records landed after the reader started.  A reader started again
with the first one's ``start_offsets`` reads a partition those do not name from its
beginning too, for the same reason.

Read by one thread (the series' worker, or the fold process).
"""

from __future__ import annotations

import logging
from typing import Final

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from clock import SYSTEM_CLOCK, Clock
from exporters.context import TelemetryContext
from exporters.kafka_topic.record import TopicRecordError, decode_record
from exporters.kafka_topic.settings import TopicSettings

__all__ = ["LandedTopic", "LandedTopicUnavailable"]

log = logging.getLogger(__name__)

# Records taken from the consumer's fetch queue per consume() call.
_CONSUME_BATCH: Final = 500
# The consumer's group: never joined (partitions are assigned) and never committed to.
_GROUP: Final = "ktc-client-metrics"
# How often the topic's partitions are looked up again, and how long one look may take:
# the look runs between two takes of the fold, so it is kept short, and a cluster that
# does not answer in time is asked again at the next interval.  (The Java consumer's
# metadata.max.age.ms is 5 minutes; a fold reads a new partition's records from its
# beginning, so a later look loses none, it only shows them later.)
PARTITION_REFRESH_S: Final = 30.0
_REFRESH_TIMEOUT_S: Final = 1.0


class LandedTopicUnavailable(RuntimeError):
    """The topic's partitions or their end offsets could not be read at start."""


class LandedTopic:
    """The landing topic of ``settings`` from each partition's end offset on (from its
    beginning with ``from_beginning``): ``take`` as :class:`~.landed.LandedRecords`."""

    def __init__(
        self,
        settings: TopicSettings,
        *,
        from_beginning: bool = False,
        start_offsets: dict[int, int] | None = None,
        timeout_s: float = 10.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """``start_offsets``: where the first reader started (a fold started again reads
        from there); a partition they do not name was added since and is read from its
        beginning.  Without them, every partition is read from its end."""
        self.topic = settings.topic
        self._clock = clock
        self._consumer = Consumer(
            {
                **settings.consumer_config(_GROUP),
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "client.id": "ktc-client-metrics",
            }
        )
        try:
            partitions = self._partitions(timeout_s)
            if start_offsets is not None:
                starts = {p: start_offsets.get(p, OFFSET_BEGINNING) for p in partitions}
            else:
                starts = self._start_offsets(partitions, from_beginning, timeout_s)
        except BaseException:
            self._consumer.close()
            raise
        # Where this reader started each partition it found at its start.
        self.start_offsets = starts
        # Partition -> the offset after the last record taken.
        self.next_offsets = dict(self.start_offsets)
        self._consumer.assign(
            [TopicPartition(self.topic, p, o) for p, o in self.start_offsets.items()]
        )
        self.records_read = 0
        self.records_skipped = 0
        self.partitions_added = 0
        self._refresh_at = clock.monotonic() + PARTITION_REFRESH_S

    def _partitions(self, timeout_s: float) -> list[int]:
        """The topic's partitions, as the cluster's metadata has them now."""
        try:
            metadata = self._consumer.list_topics(self.topic, timeout=timeout_s)
        except KafkaException as exc:
            raise LandedTopicUnavailable(
                f"landing topic {self.topic}: {_reason(exc)}"
            ) from None
        found = metadata.topics.get(self.topic)
        if found is None or found.error is not None or not found.partitions:
            reason = found.error.str() if found and found.error else "no partitions"
            raise LandedTopicUnavailable(f"landing topic {self.topic}: {reason}")
        return sorted(found.partitions)

    def _start_offsets(
        self, partitions: list[int], from_beginning: bool, timeout_s: float
    ) -> dict[int, int]:
        if from_beginning:
            return dict.fromkeys(partitions, OFFSET_BEGINNING)
        starts: dict[int, int] = {}
        try:
            for partition in partitions:
                _, high = self._consumer.get_watermark_offsets(
                    TopicPartition(self.topic, partition), timeout=timeout_s
                )
                starts[partition] = high
        except KafkaException as exc:
            raise LandedTopicUnavailable(
                f"landing topic {self.topic}: {_reason(exc)}"
            ) from None
        return starts

    def refresh_partitions(self) -> list[int]:
        """Read the partitions added to the topic since the last look, each from its
        beginning; the ones added.  A cluster that does not answer adds none now."""
        self._refresh_at = self._clock.monotonic() + PARTITION_REFRESH_S
        try:
            partitions = self._partitions(_REFRESH_TIMEOUT_S)
        except LandedTopicUnavailable as exc:
            log.debug("%s; its partitions are looked up again later", exc)
            return []
        added = [p for p in partitions if p not in self.next_offsets]
        if added:
            self._consumer.incremental_assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in added]
            )
            self.next_offsets.update(dict.fromkeys(added, OFFSET_BEGINNING))
            self.partitions_added += len(added)
            log.info(
                "landing topic %s: partitions %s added, read from their beginning",
                self.topic,
                ",".join(map(str, added)),
            )
        return added

    def take(self, max_bytes: int) -> list[tuple[TelemetryContext, bytes]]:
        """The records fetched since the last call, until about ``max_bytes`` of payload
        (a consume batch more at most); empty when none was fetched yet."""
        if self._clock.monotonic() >= self._refresh_at:
            self.refresh_partitions()
        batch: list[tuple[TelemetryContext, bytes]] = []
        size = 0
        while size < max_bytes:
            messages = self._consumer.consume(_CONSUME_BATCH, timeout=0)
            if not messages:
                break
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        log.warning("landing topic %s: %s", self.topic, error.str())
                    continue
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None  # a record
                self.next_offsets[partition] = offset + 1
                try:
                    context, payload = decode_record(message.headers(), message.value())
                except TopicRecordError as exc:
                    self.records_skipped += 1
                    log.warning(
                        "landing topic %s: partition %d offset %d skipped: %s",
                        self.topic,
                        partition,
                        offset,
                        exc,
                    )
                    continue
                batch.append((context, payload))
                size += len(payload)
        self.records_read += len(batch)
        return batch

    def close(self) -> None:
        self._consumer.close()


def _reason(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)
