"""Telemetry on a Kafka topic: the landing destination beside the local landing log.

``TopicLanding`` (an Exporter) produces every accepted push to ``landing.kafka.topic``,
idempotently with acks=all, and its answer waits for the delivery report;
``TopicSource`` is where the OTLP forwarder reads them back, with a consumer group of its
own. The record format is in record.py and docs/landing-log.md ("Telemetry on a Kafka
topic").
"""

from exporters.kafka_topic.landing import TopicLanding
from exporters.kafka_topic.record import (
    CONTEXT_HEADER,
    FORMAT_HEADER,
    FORMAT_VERSION,
    MAX_CONTEXT_BYTES,
    TopicRecordError,
    decode_record,
    encode_headers,
)
from exporters.kafka_topic.settings import TopicSettings
from exporters.kafka_topic.source import TopicSource
from exporters.kafka_topic.topic import ensure_topic

__all__ = [
    "CONTEXT_HEADER",
    "FORMAT_HEADER",
    "FORMAT_VERSION",
    "MAX_CONTEXT_BYTES",
    "TopicLanding",
    "TopicRecordError",
    "TopicSettings",
    "TopicSource",
    "decode_record",
    "encode_headers",
    "ensure_topic",
]
