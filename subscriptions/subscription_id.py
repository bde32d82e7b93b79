"""The KIP-714 SubscriptionId, bit-compatible with Apache Kafka.

Follows ``ClientMetricsManager.computeSubscriptionId`` (server module)::

    bytes = UTF8(metrics.toString() + Integer.toString(pushIntervalMs))
    id    = (int) Crc32C.compute(bytes) ^ clientInstanceId.hashCode()

Worked example (``ClientMetricsManager.computeSubscriptionId``): metrics ``[org.apache.kafka.producer.]``, interval 5000,
instance ``VQQTF4UpT8qqtooenFFlgA``: CRC32C of ``"[org.apache.kafka.producer.]5000"`` is
0x520CB48A = 1376564362; Uuid.hashCode is -422923453 (0xE6CAB343); the XOR is
0xB4C607C9 = -1262090295.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import crc32c

from subscriptions.java_lang import java_utf8, to_int32
from subscriptions.kafka_uuid import kafka_uuid_hash_code

__all__ = ["compute_subscription_id", "java_collection_string"]


def java_collection_string(elements: Iterable[str]) -> str:
    """``AbstractCollection.toString()``: ``"[" + join(", ") + "]"``."""
    return "[" + ", ".join(elements) + "]"


def compute_subscription_id(
    metrics_in_set_order: Iterable[str], push_interval_ms: int, instance_id: uuid.UUID
) -> int:
    """Kafka's SubscriptionId (signed int32) for a merged metrics set already in HashSet order."""
    text = java_collection_string(metrics_in_set_order) + str(push_interval_ms)
    checksum = crc32c.crc32c(java_utf8(text))
    return to_int32(checksum ^ (kafka_uuid_hash_code(instance_id) & 0xFFFFFFFF))
