"""The topic's record format, version 1: what a plain Kafka consumer decodes.

| part | content |
|---|---|
| key | the client instance id (Kafka ``Uuid`` text, UTF-8): one client's pushes stay in one partition, in order |
| value | the decompressed OTLP ``MetricsData`` protobuf, as the client pushed it |
| header ``ktc.format`` | ``1`` (ASCII): this format's version |
| header ``ktc.context`` | the landing record's context: the compact JSON of ``TelemetryContext`` (the bytes the landing log stores) |
| timestamp | when the collector received the push (CreateTime, milliseconds) |

A record is at most ``record_max_bytes(telemetry.max.bytes)`` bytes as librdkafka counts
them, and its batch on the broker ``RECORD_BATCH_OVERHEAD`` more (settings.py sets the
producer's ``message.max.bytes``, topic.py the topic's ``max.message.bytes``).

Headers rather than a framed value: the value stays plain OTLP, readable by anything that
reads OTLP from Kafka (the OpenTelemetry Collector's kafka receiver with ``otlp_proto``),
and the context is readable without parsing the payload. A reader refuses a record whose
``ktc.format`` it does not know (a later format may change what the value holds).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Final

from exporters.context import TelemetryContext
from exporters.landing.format import ContextEncodingError, encode_context

__all__ = [
    "CONTEXT_HEADER",
    "FORMAT_HEADER",
    "FORMAT_VERSION",
    "MAX_CONTEXT_BYTES",
    "RECORD_BATCH_OVERHEAD",
    "TopicRecordError",
    "decode_record",
    "encode_headers",
    "record_max_bytes",
]

FORMAT_HEADER: Final = "ktc.format"
CONTEXT_HEADER: Final = "ktc.context"
FORMAT_VERSION: Final = b"1"
# The context is a few hundred bytes; a header claiming more is not ours, and the writer
# refuses a push whose context would be longer (a reader would skip its record).
MAX_CONTEXT_BYTES: Final = 64 * 1024

# What librdkafka's produce() compares with message.max.bytes (rd_kafka_msg_max_wire_size,
# src/rdkafka_msg.h): the record's varints at their widest (RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD:
# length 5, attributes 1, timestamp delta 10, offset delta 5, key length 5, value length 5,
# header count 5 = 36) plus the key, the value and the headers as serialized (per header
# a zigzag varint of the name's length, the name, one of the value's length, the value).
_RECORD_MAX_OVERHEAD: Final = 36
_KEY_BYTES: Final = 22  # a Kafka Uuid's text: 22 characters of base64url
_FORMAT_HEADER_BYTES: Final = 1 + len(FORMAT_HEADER) + 1 + len(FORMAT_VERSION)  # 13
# 65,536 is 131,072 zigzagged: a 3-byte varint.
_CONTEXT_HEADER_MAX_BYTES: Final = 1 + len(CONTEXT_HEADER) + 3 + MAX_CONTEXT_BYTES
# A record batch's header (v2, Kafka's DefaultRecordBatch.RECORD_BATCH_OVERHEAD): what a
# batch holding one record adds to it on the broker, where max.message.bytes applies.
RECORD_BATCH_OVERHEAD: Final = 61


class TopicRecordError(ValueError):
    """A record that is not in a format this reader knows."""


def record_max_bytes(payload_max_bytes: int) -> int:
    """The largest record of a push whose payload is at most ``payload_max_bytes``, as
    librdkafka measures it against ``message.max.bytes``: with telemetry.max.bytes 1 MiB,
    1,048,576 + 36 + 22 + 13 + 65,551 = 1,114,198."""
    return (
        _RECORD_MAX_OVERHEAD
        + _KEY_BYTES
        + payload_max_bytes
        + _FORMAT_HEADER_BYTES
        + _CONTEXT_HEADER_MAX_BYTES
    )


def encode_headers(
    context: TelemetryContext,
) -> list[tuple[str, str | bytes | None]]:
    """The headers of one push's record (raises ContextEncodingError, as the log does,
    and for a context longer than a reader takes)."""
    context_json = encode_context(context)
    if len(context_json) > MAX_CONTEXT_BYTES:
        raise ContextEncodingError(
            f"telemetry context of {len(context_json)} bytes, more than a reader takes "
            f"({MAX_CONTEXT_BYTES})"
        )
    return [(FORMAT_HEADER, FORMAT_VERSION), (CONTEXT_HEADER, context_json)]


def decode_record(
    headers: Sequence[tuple[str, str | bytes | None]]
    | Mapping[str, str | bytes | None]
    | None,
    value: bytes | None,
) -> tuple[TelemetryContext, bytes]:
    """(context, OTLP payload) of one consumed record; TopicRecordError if not format 1."""
    found = dict(headers.items() if isinstance(headers, Mapping) else headers or ())
    version = found.get(FORMAT_HEADER)
    if version != FORMAT_VERSION:
        raise TopicRecordError(
            f"{FORMAT_HEADER} is {version!r}, not {FORMAT_VERSION!r}"
        )
    context_json = found.get(CONTEXT_HEADER)
    if not isinstance(context_json, bytes) or len(context_json) > MAX_CONTEXT_BYTES:
        raise TopicRecordError(f"no {CONTEXT_HEADER} header of at most 64 KiB")
    try:
        fields = json.loads(context_json)
        context = TelemetryContext.from_json_dict(fields)
    except (ValueError, TypeError) as exc:
        raise TopicRecordError(f"{CONTEXT_HEADER}: {exc}") from None
    return context, value or b""
