"""Every record of a topic, read by a plain consumer: what the landing-topic tests check
pushes against."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, TopicPartition


def read_topic(client: str | Mapping[str, Any], topic: str) -> list[Any]:
    """Every record of ``topic`` (none if there is no such topic), read by a plain
    consumer of a fresh group; ``client`` is the bootstrap address, or the whole client
    config (a login's settings beside ``bootstrap.servers``)."""
    consumer = Consumer(
        {
            **({"bootstrap.servers": client} if isinstance(client, str) else client),
            "group.id": f"reader-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        if topic not in metadata.topics or metadata.topics[topic].error is not None:
            return []
        partitions = list(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        at_end: set[int] = set()
        records = []
        while len(at_end) < len(partitions):
            message = consumer.poll(10)
            assert message is not None, "the topic did not reach its end in 10 s"
            if message.error() is not None:
                partition = message.partition()
                assert partition is not None
                at_end.add(partition)
                continue
            records.append(message)
        return records
    finally:
        consumer.close()
