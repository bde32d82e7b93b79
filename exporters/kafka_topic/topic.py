"""Creating the landing topic when it is missing (partitions and replication by config)."""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from exporters.kafka_topic.settings import TopicSettings

__all__ = ["TopicUnavailable", "ensure_topic"]

log = logging.getLogger("exporters.kafka_topic")
_LIBRDKAFKA_LOG = logging.getLogger("exporters.kafka_topic.librdkafka")


class TopicUnavailable(Exception):
    """The cluster could not be reached, or the topic neither found nor created."""


def ensure_topic(settings: TopicSettings, timeout_s: float = 30.0) -> bool:
    """Creates ``settings.topic`` unless it exists; True when it was created here."""
    config: dict[str, Any] = {**settings.client, "logger": _LIBRDKAFKA_LOG}
    admin = AdminClient(config)
    try:
        # All topics: asking for one by name may auto-create it with the broker's
        # defaults (auto.create.topics.enable), not ours.
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise TopicUnavailable(
            f"{settings.client.get('bootstrap.servers')}: {exc}"
        ) from None
    found = metadata.topics.get(settings.topic)
    if found is not None and found.error is None:
        return False
    new = NewTopic(
        settings.topic,
        num_partitions=settings.partitions,
        replication_factor=settings.replication_factor,
    )
    future = admin.create_topics([new], operation_timeout=timeout_s)[settings.topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if (
            isinstance(error, KafkaError)
            and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
        ):
            return False  # another replica created it first
        raise TopicUnavailable(f"creating topic {settings.topic}: {exc}") from None
    log.info(
        "landing topic %s created: %d partitions, replication factor %s",
        settings.topic,
        settings.partitions,
        "the cluster's default"
        if settings.replication_factor < 0
        else settings.replication_factor,
    )
    return True
