"""Kafka's ``org.apache.kafka.common.Uuid``: string form, hash code, random ids.

Kafka prints a Uuid as URL-safe base64 of its 16 bytes without padding (22 chars), e.g.
``VQQTF4UpT8qqtooenFFlgA`` = msb 0x5504131785294FCA, lsb 0xAAB68A1E9C516580.
"""

from __future__ import annotations

import base64
import binascii
import uuid

from proto.primitives import ZERO_UUID
from subscriptions.java_lang import to_int32

__all__ = [
    "ONE_UUID",
    "RESERVED_UUIDS",
    "ZERO_UUID",
    "kafka_uuid_from_str",
    "kafka_uuid_hash_code",
    "kafka_uuid_to_str",
    "random_instance_id",
]

# Uuid.ONE_UUID, the metadata topic id (ZERO_UUID is the wire codec's, proto.primitives).
ONE_UUID = uuid.UUID(int=1)
# Uuid.RESERVED: ids a broker never hands out.
RESERVED_UUIDS = frozenset({ZERO_UUID, ONE_UUID})


def kafka_uuid_to_str(value: uuid.UUID) -> str:
    """``Uuid.toString()``: base64url of the 16 big-endian bytes, no padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def kafka_uuid_from_str(text: str) -> uuid.UUID:
    """``Uuid.fromString``: accepts exactly 22 base64url chars (16 bytes); else ValueError."""
    if len(text) != 22:
        raise ValueError(
            f"Invalid Kafka Uuid {text!r}: expected 22 base64url characters"
        )
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"Invalid Kafka Uuid string {text!r}: {exc}") from None
    if len(raw) != 16 or kafka_uuid_to_str(uuid.UUID(bytes=raw)) != text:
        raise ValueError(f"Invalid Kafka Uuid string {text!r}: not canonical base64url")
    return uuid.UUID(bytes=raw)


def kafka_uuid_hash_code(value: uuid.UUID) -> int:
    """``Uuid.hashCode()``: ``x = msb ^ lsb; (int)(x >> 32) ^ (int)x``, signed int32.

    Worked example: msb 0x5504131785294FCA ^ lsb 0xAAB68A1E9C516580 = 0xFFB2990919782A4A;
    0xFFB29909 ^ 0x19782A4A = 0xE6CAB343 = -422923453.
    """
    x = (value.int >> 64) ^ (value.int & 0xFFFFFFFFFFFFFFFF)
    return to_int32((x >> 32) ^ (x & 0xFFFFFFFF))


def random_instance_id() -> uuid.UUID:
    """``Uuid.randomUuid()``: a random v4 uuid, never ZERO/ONE, never with '-' in its string.

    Since KAFKA-20072 Kafka rejects any id whose string *contains* '-' (before: starts
    with), so ids are safe as command-line arguments; about 29% of draws are retried.
    """
    while True:
        candidate = uuid.uuid4()
        if candidate not in RESERVED_UUIDS and "-" not in kafka_uuid_to_str(candidate):
            return candidate
