"""``landing.kafka.*``: pushes landed on a Kafka topic instead of the local landing log.

What the node needs from the config: the topic's settings (the bootstrap servers and
security settings, defaulting to the fronted cluster's in gateway mode), the topic created
when missing, the producer-backed exporter with the gate its answers wait on, and the
series that say how the topic takes records (the landing log's names, same meanings):

| series                          | kind    | what |
|---------------------------------|---------|------|
| ``ktc_landing_writable``        | gauge   | 1 while deliveries succeed, 0 from a failed one until one succeeds |
| ``ktc_landing_records_refused`` | counter | records not in the topic: failed deliveries and produce calls refused |
| ``ktc_landing_pushes_refused``  | counter | push answers turned from "accepted" into 89 because their records did not land |
| ``ktc_landing_topic_records_delivered`` | counter | records the topic acknowledged (acks=all) |

Readiness does not follow the topic: every replica shares the cluster, so routing clients
elsewhere would not help them, and the answers already say "push again later" (89).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from confluent_kafka import KafkaError, KafkaException
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from collector.app.config import CollectorConfig
from collector.net.flush import DurabilityGate, NotLanded
from exporters.kafka_topic import TopicLanding, TopicSettings, ensure_topic
from exporters.kafka_topic.topic import TopicUnavailable

__all__ = ["TopicLandingHealth", "open_topic_landing", "topic_settings"]


def topic_settings(config: CollectorConfig) -> TopicSettings:
    """``landing.kafka.*`` as the topic's settings; without its own bootstrap servers (the
    gateway), the fronted cluster with the gateway's upstream login."""
    assert config.landing_kafka_topic is not None
    return TopicSettings(
        topic=config.landing_kafka_topic,
        client=config.landing_cluster().librdkafka(),
        partitions=config.landing_kafka_topic_partitions,
        replication_factor=config.landing_kafka_topic_replication_factor,
        delivery_timeout_ms=config.landing_kafka_delivery_timeout_ms,
        forwarder_group=config.landing_kafka_forwarder_group_id,
        telemetry_max_bytes=config.telemetry_max_bytes,
    )


def open_topic_landing(
    config: CollectorConfig,
) -> tuple[TopicLanding, DurabilityGate, TopicLandingHealth]:
    """The topic (created when missing, one log line; an existing one too small for a
    push of telemetry.max.bytes is TopicTooSmall), its producer and the gate every
    connection's answers wait on: a push is answered once its record is in the topic."""
    settings = topic_settings(config)
    ensure_topic(settings)
    try:
        landing = TopicLanding(settings, asyncio.get_running_loop(), refusal=NotLanded)
    except KafkaException as exc:  # a client setting librdkafka refuses
        error = exc.args[0] if exc.args else None
        reason = error.str() if isinstance(error, KafkaError) else str(exc)
        raise TopicUnavailable(f"the producer: {reason}") from None
    gate = DurabilityGate(None, landing.pending_delivery)
    return landing, gate, TopicLandingHealth(landing, gate)


class TopicLandingHealth:
    def __init__(self, landing: TopicLanding, gate: DurabilityGate) -> None:
        self._landing = landing
        self._gate = gate

    def collect(self) -> Iterator[Metric]:
        landing = self._landing
        yield GaugeMetricFamily(
            "ktc_landing_writable",
            "1 while the landing topic takes records, 0 from a failed delivery until "
            "one succeeds",
            value=0 if landing.unwritable is not None else 1,
        )
        yield CounterMetricFamily(
            "ktc_landing_records_refused",
            "Records the landing topic did not take",
            value=landing.records_failed,
        )
        yield CounterMetricFamily(
            "ktc_landing_pushes_refused",
            "Push answers turned into THROTTLING_QUOTA_EXCEEDED because their records "
            "did not land",
            value=self._gate.pushes_refused,
        )
        yield CounterMetricFamily(
            "ktc_landing_topic_records_delivered",
            "Records the landing topic acknowledged (acks=all)",
            value=landing.records_delivered,
        )
