"""Where the topic is and how to reach it: built by the collector from ``landing.kafka.*``
(docs/configuration.md), so this package never reads the collector's config."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, Final

from exporters.kafka_topic.record import RECORD_BATCH_OVERHEAD, record_max_bytes

__all__ = ["TopicSettings"]

# librdkafka's default message.max.bytes, which also caps its batches (with batch.size,
# the same 1,000,000 by default): never lowered, so a small telemetry.max.bytes does not
# shrink the producer's batches.
_LIBRDKAFKA_MESSAGE_MAX_BYTES: Final = 1_000_000

# librdkafka's own log lines (a broker going away, a retried PID) go through logging,
# not to stderr.
_LIBRDKAFKA_LOG = logging.getLogger("exporters.kafka_topic.librdkafka")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TopicSettings:
    topic: str
    # librdkafka settings every client of the topic shares: bootstrap.servers and the
    # security settings (security.protocol, sasl.*, ssl.*).
    client: Mapping[str, Any]
    partitions: int = 6
    # -1: the cluster's default.replication.factor.
    replication_factor: int = -1
    # How long a push's answer waits for its delivery report before it is refused (89):
    # librdkafka's message.timeout.ms (its default, 300 s, would outlast the client's
    # request timeout).
    delivery_timeout_ms: int = 10_000
    # The OTLP forwarder's consumer group.
    forwarder_group: str = "ktc-otlp-forwarder"
    # The largest payload a push lands (the collector's telemetry.max.bytes: it bounds the
    # decompressed payload too): what the producer and the topic must take.
    telemetry_max_bytes: int = 1_048_576

    @property
    def message_max_bytes(self) -> int:
        """The producer's message.max.bytes: a push of telemetry.max.bytes is never refused
        by produce() (librdkafka's default, 1,000,000, would refuse a 1,040,015-byte push
        on every interval)."""
        return max(
            record_max_bytes(self.telemetry_max_bytes), _LIBRDKAFKA_MESSAGE_MAX_BYTES
        )

    @property
    def topic_max_message_bytes(self) -> int:
        """The smallest max.message.bytes of the topic that takes every batch the producer
        sends: a batch of several records stays within message.max.bytes (librdkafka's
        msgset writer stops before it), one of a single record is that record and the
        batch header.  1,114,259 with telemetry.max.bytes 1 MiB, above the broker's
        default 1,048,588."""
        return self.message_max_bytes + RECORD_BATCH_OVERHEAD

    def producer_config(self) -> dict[str, Any]:
        return {
            **self.client,
            "logger": _LIBRDKAFKA_LOG,
            "enable.idempotence": True,
            "acks": "all",
            "message.max.bytes": self.message_max_bytes,
            "message.timeout.ms": self.delivery_timeout_ms,
            # librdkafka's default batching wait: 2 ms measured lower peak rates (smaller
            # produce requests cost the broker more CPU per record) for 3 ms less latency.
            "linger.ms": 5,
            # Small produce requests, answered in turn: Nagle would hold them for ACKs.
            "socket.nagle.disable": True,
            # What waits for the cluster is bounded (librdkafka's default is 1 GiB): past
            # it produce() refuses and the push is answered 89.
            "queue.buffering.max.kbytes": 65536,
            "client.id": "ktc-landing",
        }

    def consumer_config(self, group: str) -> dict[str, Any]:
        return {
            **self.client,
            "logger": _LIBRDKAFKA_LOG,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "client.id": "ktc-otlp-forwarder",
        }
