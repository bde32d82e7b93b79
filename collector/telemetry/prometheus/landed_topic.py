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

Read by one thread (the series' worker, or the fold process); partitions added to the
topic after the reader started are read by the next reader (a restart).
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

from exporters.context import TelemetryContext
from exporters.kafka_topic.record import TopicRecordError, decode_record
from exporters.kafka_topic.settings import TopicSettings

__all__ = ["LandedTopic", "LandedTopicUnavailable"]

log = logging.getLogger(__name__)

# Records taken from the consumer's fetch queue per consume() call.
_CONSUME_BATCH: Final = 500
# The consumer's group: never joined (partitions are assigned) and never committed to.
_GROUP: Final = "ktc-client-metrics"


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
    ) -> None:
        """``start_offsets``: where to read each partition from (a fold started again
        reads from where the first one started); a partition not named starts at its
        end."""
        self.topic = settings.topic
        self._consumer = Consumer(
            {
                **settings.consumer_config(_GROUP),
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "client.id": "ktc-client-metrics",
            }
        )
        try:
            self.start_offsets = {
                **self._start_offsets(from_beginning, timeout_s),
                **(start_offsets or {}),
            }
        except BaseException:
            self._consumer.close()
            raise
        # Partition -> the offset after the last record taken.
        self.next_offsets = dict(self.start_offsets)
        self._consumer.assign(
            [TopicPartition(self.topic, p, o) for p, o in self.start_offsets.items()]
        )
        self.records_read = 0
        self.records_skipped = 0

    def _start_offsets(self, from_beginning: bool, timeout_s: float) -> dict[int, int]:
        try:
            metadata = self._consumer.list_topics(self.topic, timeout=timeout_s)
            found = metadata.topics.get(self.topic)
            if found is None or found.error is not None or not found.partitions:
                reason = found.error.str() if found and found.error else "no partitions"
                raise LandedTopicUnavailable(f"landing topic {self.topic}: {reason}")
            starts: dict[int, int] = {}
            for partition in sorted(found.partitions):
                if from_beginning:
                    starts[partition] = OFFSET_BEGINNING
                    continue
                _, high = self._consumer.get_watermark_offsets(
                    TopicPartition(self.topic, partition), timeout=timeout_s
                )
                starts[partition] = high
            return starts
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            reason = error.str() if isinstance(error, KafkaError) else str(exc)
            raise LandedTopicUnavailable(
                f"landing topic {self.topic}: {reason}"
            ) from None

    def take(self, max_bytes: int) -> list[tuple[TelemetryContext, bytes]]:
        """The records fetched since the last call, until about ``max_bytes`` of payload
        (a consume batch more at most); empty when none was fetched yet."""
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
