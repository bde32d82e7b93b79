"""Creating the landing topic when it is missing (partitions and replication by config),
and checking at start that it takes a push of telemetry.max.bytes.

Created here, the topic gets ``max.message.bytes`` =
``TopicSettings.topic_max_message_bytes`` (the broker's ``message.max.bytes`` caps only
topics without it).  An existing topic's value (its own or the broker's) is read with
DescribeConfigs; lower, the collector does not start: every push near the limit would be
answered 89 on every interval, forever.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from exporters.kafka_topic.settings import TopicSettings

__all__ = ["TopicTooSmall", "TopicUnavailable", "ensure_topic", "too_small"]

log = logging.getLogger("exporters.kafka_topic")
_LIBRDKAFKA_LOG = logging.getLogger("exporters.kafka_topic.librdkafka")

_MAX_MESSAGE_BYTES: Final = "max.message.bytes"
# Where a topic's max.message.bytes comes from when the topic does not set it.
_FROM_THE_BROKER: Final = frozenset(
    {
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    }
)


class TopicUnavailable(Exception):
    """The cluster could not be reached, or the topic neither found nor created."""


class TopicTooSmall(TopicUnavailable):
    """The topic's max.message.bytes is below what a push of telemetry.max.bytes needs."""


def too_small(
    settings: TopicSettings, max_message_bytes: int, from_broker: bool
) -> str | None:
    """The one-line reason the topic cannot take a push of telemetry.max.bytes, or None
    when it can."""
    needed = settings.topic_max_message_bytes
    if max_message_bytes >= needed:
        return None
    where = (
        "the broker's message.max.bytes, the topic sets none"
        if from_broker
        else "set on the topic"
    )
    return (
        f"topic {settings.topic} has max.message.bytes {max_message_bytes} ({where}); "
        f"a push of telemetry.max.bytes ({settings.telemetry_max_bytes}) needs at least "
        f"{needed}: raise the topic's max.message.bytes or lower telemetry.max.bytes"
    )


def ensure_topic(settings: TopicSettings, timeout_s: float = 30.0) -> bool:
    """Creates ``settings.topic`` unless it exists; True when it was created here.
    Raises TopicTooSmall when an existing topic cannot take a push of
    telemetry.max.bytes."""
    config: dict[str, Any] = {**settings.client, "logger": _LIBRDKAFKA_LOG}
    try:
        admin = AdminClient(config)
    except KafkaException as exc:  # a client setting librdkafka refuses
        error = exc.args[0] if exc.args else None
        reason = error.str() if isinstance(error, KafkaError) else str(exc)
        raise TopicUnavailable(f"the admin client: {reason}") from None
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
        _check_size(admin, settings, timeout_s)
        return False
    new = NewTopic(
        settings.topic,
        num_partitions=settings.partitions,
        replication_factor=settings.replication_factor,
        config={_MAX_MESSAGE_BYTES: str(settings.topic_max_message_bytes)},
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
            # Another replica created it first (with the same setting, unless its
            # telemetry.max.bytes differs).
            _check_size(admin, settings, timeout_s)
            return False
        raise TopicUnavailable(f"creating topic {settings.topic}: {exc}") from None
    log.info(
        "landing topic %s created: %d partitions, replication factor %s, "
        "max.message.bytes %d",
        settings.topic,
        settings.partitions,
        "the cluster's default"
        if settings.replication_factor < 0
        else settings.replication_factor,
        settings.topic_max_message_bytes,
    )
    return True


def _check_size(admin: AdminClient, settings: TopicSettings, timeout_s: float) -> None:
    """Raises TopicTooSmall unless the existing topic takes a push of
    telemetry.max.bytes; a cluster that does not say (no DescribeConfigs permission on
    the topic) is logged and trusted."""
    resource = ConfigResource(ResourceType.TOPIC, settings.topic)
    try:
        described = admin.describe_configs([resource], request_timeout=timeout_s)
        entries = described[resource].result(timeout=timeout_s)
        entry = entries[_MAX_MESSAGE_BYTES]
        max_message_bytes = int(entry.value)
    except (KafkaException, KeyError, TypeError, ValueError) as exc:
        log.warning(
            "landing topic %s: its max.message.bytes is unknown (%s); a push of "
            "telemetry.max.bytes (%d) needs at least %d",
            settings.topic,
            exc,
            settings.telemetry_max_bytes,
            settings.topic_max_message_bytes,
        )
        return
    source = entry.source
    if not isinstance(source, ConfigSource):  # the C binding's int
        source = ConfigSource(source)
    reason = too_small(settings, max_message_bytes, source in _FROM_THE_BROKER)
    if reason is not None:
        raise TopicTooSmall(reason)
