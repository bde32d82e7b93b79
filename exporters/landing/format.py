"""The bytes of a landing segment, format version 1 (big-endian, like Kafka).

A segment file is a segment header followed by records back to back::

    segment header (37 bytes)
      0  segment_magic   8   b"KTCLAND\\n"
      8  version         u8  1
      9  base_offset     i64 offset of the first record; also the file name
     17  sync_marker     16  random bytes, fresh per segment
     33  header_crc      u32 crc32c of bytes 0..32

    record (45 bytes + context + payload)
      0  sync_marker     16  the segment's marker
     16  magic           u8  1: record format version
     17  length          u32 bytes after this record's crc field: 20 + context_len + payload_len
     21  crc             u32 crc32c of those `length` bytes
     25  offset          i64
     33  appended_time_unix_nano i64
     41  context_len     u32
     45  context         JSON, UTF-8 (TelemetryContext)
         payload         the decompressed OTLP MetricsData protobuf

Why a sync marker: after damage a reader must find the next record again. Searching for a
one-byte magic would let bytes inside a client's payload pose as a record (a client could
even craft one, with a valid CRC, to impersonate another client). The marker is random
per segment and never leaves the server, so only the writer can produce it; this is the
sync marker of Avro object container files. Cost: 16 bytes per record, under 1 % of a
typical 2-10 KiB push.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from typing import Final

import crc32c
import orjson

from exporters.context import TelemetryContext

SEGMENT_MAGIC: Final = b"KTCLAND\n"
SEGMENT_FORMAT_VERSION: Final = 1
RECORD_MAGIC_V1: Final = 1
SYNC_MARKER_BYTES: Final = 16

# ">8sBq16s": magic, version, base_offset, sync_marker; then the crc32c of those 33 bytes.
_SEGMENT_HEADER_BODY: Final = struct.Struct(">8sBq16s")
_CRC: Final = struct.Struct(">I")
SEGMENT_HEADER_BYTES: Final = _SEGMENT_HEADER_BODY.size + _CRC.size  # 37

# Record prefix before the crc-covered part: marker, magic, length, crc.
RECORD_PREFIX: Final = struct.Struct(">16sBII")  # 25 bytes
# The first 20 crc-covered bytes: offset, appended_time_unix_nano, context_len.
RECORD_FIXED_BODY: Final = struct.Struct(">qqI")  # 20 bytes
RECORD_HEADER_BYTES: Final = RECORD_PREFIX.size + RECORD_FIXED_BODY.size  # 45

# A record's context plus payload may not exceed this. KIP-714's telemetry.max.bytes
# defaults to 1 MiB, so 64 MiB is generous; a larger length field is damage, not a
# reason to allocate.
DEFAULT_MAX_RECORD_BYTES: Final = 64 * 1024 * 1024

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "RECORD_HEADER_BYTES",
    "RECORD_MAGIC_V1",
    "SEGMENT_FORMAT_VERSION",
    "SEGMENT_HEADER_BYTES",
    "SEGMENT_MAGIC",
    "ContextEncodingError",
    "SegmentHeader",
    "SegmentHeaderError",
    "decode_context",
    "decode_segment_header",
    "encode_context",
    "encode_record_head",
    "encode_segment_header",
    "new_sync_marker",
]


class SegmentHeaderError(ValueError):
    """The first bytes of a segment file are not a valid version-1 header."""


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentHeader:
    base_offset: int
    sync_marker: bytes


def new_sync_marker() -> bytes:
    return os.urandom(SYNC_MARKER_BYTES)


def encode_segment_header(header: SegmentHeader) -> bytes:
    body = _SEGMENT_HEADER_BODY.pack(
        SEGMENT_MAGIC, SEGMENT_FORMAT_VERSION, header.base_offset, header.sync_marker
    )
    return body + _CRC.pack(crc32c.crc32c(body))


def decode_segment_header(raw: bytes) -> SegmentHeader:
    if len(raw) < SEGMENT_HEADER_BYTES:
        raise SegmentHeaderError(
            f"segment header truncated: {len(raw)} of {SEGMENT_HEADER_BYTES} bytes"
        )
    body = raw[: _SEGMENT_HEADER_BODY.size]
    magic, version, base_offset, marker = _SEGMENT_HEADER_BODY.unpack(body)
    if magic != SEGMENT_MAGIC:
        raise SegmentHeaderError(f"not a landing segment: magic {magic!r}")
    if version != SEGMENT_FORMAT_VERSION:
        raise SegmentHeaderError(f"unsupported landing segment version {version}")
    (stored_crc,) = _CRC.unpack_from(raw, _SEGMENT_HEADER_BODY.size)
    if crc32c.crc32c(body) != stored_crc:
        raise SegmentHeaderError("segment header crc mismatch")
    return SegmentHeader(base_offset, marker)


def encode_record_head(
    sync_marker: bytes,
    offset: int,
    appended_time_unix_nano: int,
    context_json: bytes,
    payload: bytes,
) -> bytes:
    """The 45 bytes before context and payload. The payload is never copied (the writer
    hands head, context and payload to one writev); the CRC runs over the fixed part and
    the context joined (one short copy costs less than a third crc32c call)."""
    context_len = len(context_json)
    crc = _crc32c(
        payload,
        _crc32c(
            _pack_fixed_body(offset, appended_time_unix_nano, context_len)
            + context_json
        ),
    )
    length = _FIXED_BODY_BYTES + context_len + len(payload)
    return _pack_head(
        sync_marker,
        RECORD_MAGIC_V1,
        length,
        crc,
        offset,
        appended_time_unix_nano,
        context_len,
    )


# Bound once: looked up per record otherwise (a module attribute, a method).
_crc32c: Final = crc32c.crc32c
_pack_fixed_body: Final = RECORD_FIXED_BODY.pack
# The whole head in one pack: RECORD_PREFIX then RECORD_FIXED_BODY.
_pack_head: Final = struct.Struct(
    RECORD_PREFIX.format + RECORD_FIXED_BODY.format[1:]
).pack
_FIXED_BODY_BYTES: Final = RECORD_FIXED_BODY.size


_CONTEXT_FIELD_SET: Final = frozenset(
    f.name for f in dataclasses.fields(TelemetryContext)
)


class ContextEncodingError(ValueError):
    """A context field holds a value JSON cannot carry (e.g. an int beyond 64 bits)."""


def encode_context(context: TelemetryContext) -> bytes:
    """Byte-identical to ``context.to_json_bytes()`` (a property test pins it): the compact
    JSON of every field, in field order.

    Runs once per landed push, so it is built from parts.  The fields a client instance
    repeats on every push (instance id through principal, and the collector's node id,
    cluster id, upstream cluster id and content type) are encoded by orjson once and kept
    per instance id (:class:`_ConstantPart`); the per-push integers are formatted into the
    tail, and so is the upstream node id, which is per connection (a gateway client
    pushes over whichever broker connection it picks, so keeping it in the constant part
    would re-encode that part whenever the client switches brokers); the parts are
    joined into one exactly sized object.  Encoding the whole context with orjson on
    every push cost about 3.5 us on a loaded server (measured with perf), most of it
    reallocations of orjson's growing output buffer faulting in fresh heap pages.  A value
    the fast path cannot prove it writes as orjson does (a bool that is not exactly
    True/False, an int subclass or one outside 64 bits) goes through orjson whole, which
    also raises ContextEncodingError for what JSON cannot carry.
    """
    c = context
    part = _constant_parts.get(c.client_instance_id)
    if part is None or not part.matches(c):
        if not (_plain_int64(c.client_source_port) and _plain_int64(c.node_id)):
            return _encode_whole(c)
        part = _ConstantPart(c)
        if len(_constant_parts) >= _CONSTANT_PARTS_MAX:
            _constant_parts.clear()  # a bound, not an LRU: refilled at one orjson call each
        _constant_parts[c.client_instance_id] = part
    push_interval_ms = c.push_interval_ms
    terminating = c.terminating
    received = c.received_time_unix_nano
    upstream_node_id = c.upstream_node_id
    subscription_id = c.subscription_id
    compression_type = c.compression_type
    correlation_id = c.correlation_id
    if (
        (terminating is True or terminating is False)
        and _plain_int64(push_interval_ms)
        and _plain_int64(received)
        and _plain_int64(subscription_id)
        and _plain_int64(compression_type)
        and _plain_int64(correlation_id)
    ):
        # The per-push part after the constant head, in field order; node id, cluster id
        # and upstream cluster id (between received time and upstream node id) and the
        # content type come encoded.  Bytes literals with typed operands: compiled, this
        # is one exactly sized build (mypyc's bytes formatting), not a format string
        # parsed per call.  One literal per form of the upstream node id (null or an
        # integer), so neither form costs an object of its own.
        if upstream_node_id is None:
            return (
                b'%b,"push_interval_ms":%d,"terminating":%b,"received_time_unix_nano":%d,%b'
                b',"upstream_node_id":null,"subscription_id":%d,"compression_type":%d'
                b',"correlation_id":%d,"content_type":%b}'
            ) % (
                part.head,
                push_interval_ms,
                b"true" if terminating else b"false",
                received,
                part.node_and_clusters,
                subscription_id,
                compression_type,
                correlation_id,
                part.content_type_json,
            )
        if _plain_int64(upstream_node_id):
            return (
                b'%b,"push_interval_ms":%d,"terminating":%b,"received_time_unix_nano":%d,%b'
                b',"upstream_node_id":%d,"subscription_id":%d,"compression_type":%d'
                b',"correlation_id":%d,"content_type":%b}'
            ) % (
                part.head,
                push_interval_ms,
                b"true" if terminating else b"false",
                received,
                part.node_and_clusters,
                upstream_node_id,
                subscription_id,
                compression_type,
                correlation_id,
                part.content_type_json,
            )
    return _encode_whole(c)


# Distinct constant parts kept at most: one per live client instance.
_CONSTANT_PARTS_MAX: Final = 65_536


class _ConstantPart:
    """The repeated fields of one client instance's contexts, and orjson's encoding of
    them cut into the pieces encode_context joins: ``{...,"principal":"..."`` (no closing
    brace), ``"node_id":..,"cluster_id":"..","upstream_cluster_id":..`` and the content
    type's JSON string.

    Kept per instance id and checked field by field against each push's context (a
    client may reconnect with another address or software version under the same id):
    on a steady stream that is one dict lookup by a string whose hash is cached and a few
    comparisons of identical objects, cheaper than hashing a tuple of all thirteen.
    Nothing that may differ between the connections of one instance belongs here (the
    upstream node id does not: see encode_context)."""

    def __init__(self, c: TelemetryContext) -> None:
        self.client_id = c.client_id
        self.client_software_name = c.client_software_name
        self.client_software_version = c.client_software_version
        self.client_source_address = c.client_source_address
        self.client_source_port = c.client_source_port
        self.listener_name = c.listener_name
        self.security_protocol = c.security_protocol
        self.principal = c.principal
        self.node_id = c.node_id
        self.cluster_id = c.cluster_id
        self.upstream_cluster_id = c.upstream_cluster_id
        self.content_type = c.content_type
        try:
            head = orjson.dumps(_connection_fields(c))
            node_and_clusters = orjson.dumps(
                {
                    "node_id": c.node_id,
                    "cluster_id": c.cluster_id,
                    "upstream_cluster_id": c.upstream_cluster_id,
                }
            )
            content_type_json = orjson.dumps(c.content_type)
        except orjson.JSONEncodeError as error:
            raise ContextEncodingError(
                f"telemetry context not encodable: {error}"
            ) from error
        # Kept as exact-size copies (slices): the object orjson returns keeps its whole
        # output buffer, 4 KiB, which would be most of this part's memory.
        self.head: bytes = head[:-1]
        self.node_and_clusters: bytes = node_and_clusters[1:-1]
        self.content_type_json: bytes = bytes(memoryview(content_type_json))

    def matches(self, c: TelemetryContext) -> bool:
        # The two integers must also be exactly int: a bool equals 1 but orjson writes it
        # as true (the interpreted build keeps whatever was assigned).
        return (
            self.client_id == c.client_id
            and self.client_software_name == c.client_software_name
            and self.client_software_version == c.client_software_version
            and self.client_source_address == c.client_source_address
            and self.client_source_port == c.client_source_port
            and self.listener_name == c.listener_name
            and self.security_protocol == c.security_protocol
            and self.principal == c.principal
            and self.node_id == c.node_id
            and self.cluster_id == c.cluster_id
            and self.upstream_cluster_id == c.upstream_cluster_id
            and self.content_type == c.content_type
            and _plain_int64(c.client_source_port)
            and _plain_int64(c.node_id)
        )


_constant_parts: dict[str, _ConstantPart] = {}


def _plain_int64(value: object) -> bool:
    """An int that ``b"%d"`` writes as orjson does: exactly int (not bool or a subclass),
    within the 64-bit range orjson accepts.  (The first range test is the usual case and
    cheap where compiled: both bounds are machine-word integers.)"""
    return type(value) is int and (
        -_WORD < value < _WORD or -(2**63) <= value < 2**64  # type: ignore[operator]
    )


_WORD: Final = 2**62 - 1


def _encode_whole(c: TelemetryContext) -> bytes:
    """The whole context through orjson: a dict built here, in field order (orjson given
    the slotted dataclass itself is slower, dataclasses.asdict much slower)."""
    fields = _connection_fields(c)
    fields["push_interval_ms"] = c.push_interval_ms
    fields["terminating"] = c.terminating
    fields["received_time_unix_nano"] = c.received_time_unix_nano
    fields["node_id"] = c.node_id
    fields["cluster_id"] = c.cluster_id
    fields["upstream_cluster_id"] = c.upstream_cluster_id
    fields["upstream_node_id"] = c.upstream_node_id
    fields["subscription_id"] = c.subscription_id
    fields["compression_type"] = c.compression_type
    fields["correlation_id"] = c.correlation_id
    fields["content_type"] = c.content_type
    try:
        return orjson.dumps(fields)
    except orjson.JSONEncodeError as error:
        raise ContextEncodingError(
            f"telemetry context not encodable: {error}"
        ) from error


def _connection_fields(c: TelemetryContext) -> dict[str, object]:
    """The context's first fields, in field order: the ones a client instance repeats."""
    return {
        "client_instance_id": c.client_instance_id,
        "client_id": c.client_id,
        "client_software_name": c.client_software_name,
        "client_software_version": c.client_software_version,
        "client_source_address": c.client_source_address,
        "client_source_port": c.client_source_port,
        "listener_name": c.listener_name,
        "security_protocol": c.security_protocol,
        "principal": c.principal,
    }


def decode_context(raw: bytes | memoryview) -> TelemetryContext:
    """Inverse of encode_context; unknown keys (a newer writer) are ignored."""
    data = orjson.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("record context is not a JSON object")
    if data.keys() <= _CONTEXT_FIELD_SET:
        return TelemetryContext(**data)
    return TelemetryContext(
        **{k: v for k, v in data.items() if k in _CONTEXT_FIELD_SET}
    )
