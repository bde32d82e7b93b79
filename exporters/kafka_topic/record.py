"""The topic's record format, version 1: what a plain Kafka consumer decodes.

| part | content |
|---|---|
| key | the client instance id (Kafka ``Uuid`` text, UTF-8): one client's pushes stay in one partition, in order |
| value | the decompressed OTLP ``MetricsData`` protobuf, as the client pushed it |
| header ``ktc.format`` | ``1`` (ASCII): this format's version |
| header ``ktc.context`` | the landing record's context: the compact JSON of ``TelemetryContext`` (the bytes the landing log stores) |
| timestamp | when the collector received the push (CreateTime, milliseconds) |

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
from exporters.landing.format import encode_context

__all__ = [
    "CONTEXT_HEADER",
    "FORMAT_HEADER",
    "FORMAT_VERSION",
    "TopicRecordError",
    "decode_record",
    "encode_headers",
]

FORMAT_HEADER: Final = "ktc.format"
CONTEXT_HEADER: Final = "ktc.context"
FORMAT_VERSION: Final = b"1"
# The context is a few hundred bytes; a header claiming more is not ours.
_MAX_CONTEXT_BYTES: Final = 64 * 1024


class TopicRecordError(ValueError):
    """A record that is not in a format this reader knows."""


def encode_headers(
    context: TelemetryContext,
) -> list[tuple[str, str | bytes | None]]:
    """The headers of one push's record (raises ContextEncodingError, as the log does)."""
    return [(FORMAT_HEADER, FORMAT_VERSION), (CONTEXT_HEADER, encode_context(context))]


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
    if not isinstance(context_json, bytes) or len(context_json) > _MAX_CONTEXT_BYTES:
        raise TopicRecordError(f"no {CONTEXT_HEADER} header of at most 64 KiB")
    try:
        fields = json.loads(context_json)
        context = TelemetryContext.from_json_dict(fields)
    except (ValueError, TypeError) as exc:
        raise TopicRecordError(f"{CONTEXT_HEADER}: {exc}") from None
    return context, value or b""
