"""Kafka protocol primitive types: readers and writers over (buffer, offset).

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; ``buf`` is anything that supports
the buffer protocol and slicing (``bytes`` or a ``memoryview`` of a frame). Writers append to a
``bytearray``. Encodings follow ``org.apache.kafka.common.protocol.types.Type`` and
``ByteUtils`` (Kafka's ``clients`` module) and the protocol guide
(https://kafka.apache.org/protocol#protocol_types).

Bounds: every length read from the wire is checked against the bytes that remain *before*
anything is sliced or allocated, so a 4-byte prefix claiming 2 GiB costs nothing. Fixed-size
fields are read with precompiled ``struct.Struct.unpack_from``, which raises ``struct.error`` on
a short buffer; ``decode`` helpers turn that into ``InvalidRequestError``.

Byte fields decode as zero-copy ``memoryview`` slices of the buffer they were read from (the
frame); call ``bytes()`` to own a copy.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from proto.errors import InvalidRequestError

__all__ = [
    "BOOL",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT16",
    "UINT32",
    "UUID_BYTES",
    "ZERO_UUID",
    "BytesLike",
    "MalformedError",
    "decode_tagged",
    "read_array_length",
    "read_bytes",
    "read_compact_array_length",
    "read_compact_bytes",
    "read_compact_string",
    "read_nullable_bytes",
    "read_nullable_compact_bytes",
    "read_nullable_compact_string",
    "read_nullable_string",
    "read_string",
    "read_tagged_fields",
    "read_uuid",
    "read_uvarint",
    "skip_tagged_fields",
    "slot_setter",
    "uuid_from_bytes",
    "uvarint_size",
    "write_array_length",
    "write_bytes",
    "write_compact_array_length",
    "write_compact_bytes",
    "write_compact_string",
    "write_empty_tagged_fields",
    "write_nullable_bytes",
    "write_nullable_compact_bytes",
    "write_nullable_compact_string",
    "write_nullable_string",
    "write_string",
    "write_tagged_fields",
    "write_uuid",
    "write_uvarint",
]

BytesLike = bytes | bytearray | memoryview
T = TypeVar("T")

ZERO_UUID = uuid.UUID(int=0)


class MalformedError(InvalidRequestError):
    """Bytes that do not follow the schema (truncated, lengths past the end, bad varint)."""


INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(
    ">?"
)  # any non-zero byte reads as true, like Java's readByte() != 0
UUID_BYTES = struct.Struct(">16s")

# An unsigned varint carrying a 32-bit value needs at most 5 bytes (5 x 7 = 35 bits);
# Kafka's ByteUtils.readUnsignedVarint rejects a 5th byte with its high bit set.
_UVARINT_MAX_BYTES = 5
_INT32_MAX = 0x7FFFFFFF
_UTF8_ERRORS = "replace"  # Java's new String(bytes, UTF_8) replaces malformed sequences


# ---- varints ---------------------------------------------------------------------------------


def read_uvarint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint of at most 5 bytes (a 32-bit value)."""
    try:
        byte = buf[pos]
        if byte < 0x80:  # fast path: one byte, the common case for lengths and counts
            return byte, pos + 1
        second = buf[pos + 1]
        if (
            second < 0x80
        ):  # two bytes: lengths 128..16383, e.g. a typical Metrics payload
            return (byte & 0x7F) | (second << 7), pos + 2
        value = byte & 0x7F
        shift = 7
        for index in range(1, _UVARINT_MAX_BYTES):
            byte = buf[pos + index]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                if value > 0xFFFFFFFF:
                    break
                return value, pos + index + 1
            shift += 7
    except IndexError:
        raise MalformedError(f"Truncated varint at offset {pos}") from None
    raise MalformedError(
        f"Varint at offset {pos} is longer than 5 bytes or over 32 bits"
    )


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0x80:
        out.append(value)
        return
    if value > 0xFFFFFFFF or value < 0:
        raise ValueError(f"uvarint out of the unsigned 32-bit range: {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


# ---- lengths, bounds ---------------------------------------------------------------------------


def _take(buf: BytesLike, pos: int, length: int, what: str) -> tuple[BytesLike, int]:
    end = pos + length
    if end > len(buf):
        raise MalformedError(
            f"{what} of {length} bytes at offset {pos} runs past the end ({len(buf)} bytes)"
        )
    return buf[pos:end], end


def _null(what: str) -> MalformedError:
    return MalformedError(f"Non-nullable {what} was null")


# ---- strings -------------------------------------------------------------------------------


def read_nullable_string(buf: BytesLike, pos: int) -> tuple[str | None, int]:
    (length,) = INT16.unpack_from(buf, pos)
    pos += 2
    if length < 0:
        if length != -1:
            raise MalformedError(f"String length {length} is negative")
        return None, pos
    raw, pos = _take(buf, pos, length, "string")
    return str(raw, "utf-8", _UTF8_ERRORS), pos


def read_string(buf: BytesLike, pos: int) -> tuple[str, int]:
    value, pos = read_nullable_string(buf, pos)
    if value is None:
        raise _null("string")
    return value, pos


def read_nullable_compact_string(buf: BytesLike, pos: int) -> tuple[str | None, int]:
    length_plus_one, pos = read_uvarint(buf, pos)
    if length_plus_one == 0:
        return None, pos
    if length_plus_one - 1 > 0x7FFF:
        raise MalformedError(
            f"Compact string length {length_plus_one - 1} exceeds 32767"
        )
    raw, pos = _take(buf, pos, length_plus_one - 1, "compact string")
    return str(raw, "utf-8", _UTF8_ERRORS), pos


def read_compact_string(buf: BytesLike, pos: int) -> tuple[str, int]:
    value, pos = read_nullable_compact_string(buf, pos)
    if value is None:
        raise _null("compact string")
    return value, pos


def _encode_string(value: str) -> bytes:
    encoded = value.encode("utf-8")
    if len(encoded) > 0x7FFF:
        raise ValueError(f"String of {len(encoded)} bytes exceeds 32767")
    return encoded


def write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    encoded = _encode_string(value)
    out += INT16.pack(len(encoded))
    out += encoded


def write_string(out: bytearray, value: str | None) -> None:
    """Raises ValueError on None: the field is not nullable in this version."""
    if value is None:
        raise ValueError("Non-nullable string was None")
    write_nullable_string(out, value)


def write_nullable_compact_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    encoded = _encode_string(value)
    write_uvarint(out, len(encoded) + 1)
    out += encoded


def write_compact_string(out: bytearray, value: str | None) -> None:
    """Raises ValueError on None: the field is not nullable in this version."""
    if value is None:
        raise ValueError("Non-nullable string was None")
    write_nullable_compact_string(out, value)


# ---- bytes -------------------------------------------------------------------------------------


def read_nullable_bytes(buf: BytesLike, pos: int) -> tuple[BytesLike | None, int]:
    (length,) = INT32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        if length != -1:
            raise MalformedError(f"Bytes length {length} is negative")
        return None, pos
    return _take(buf, pos, length, "bytes")


def read_bytes(buf: BytesLike, pos: int) -> tuple[BytesLike, int]:
    value, pos = read_nullable_bytes(buf, pos)
    if value is None:
        raise _null("bytes")
    return value, pos


def read_nullable_compact_bytes(
    buf: BytesLike, pos: int
) -> tuple[BytesLike | None, int]:
    length_plus_one, pos = read_uvarint(buf, pos)
    if length_plus_one == 0:
        return None, pos
    return _take(buf, pos, length_plus_one - 1, "compact bytes")


def read_compact_bytes(buf: BytesLike, pos: int) -> tuple[BytesLike, int]:
    # Hot path (PushTelemetry Metrics): one varint read, one bounds check, one slice.
    length_plus_one, pos = read_uvarint(buf, pos)
    if length_plus_one == 0:
        raise _null("compact bytes")
    end = pos + length_plus_one - 1
    if end > len(buf):
        raise MalformedError(
            f"compact bytes of {length_plus_one - 1} bytes at offset {pos} runs past the end "
            f"({len(buf)} bytes)"
        )
    return buf[pos:end], end


def write_nullable_bytes(out: bytearray, value: BytesLike | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(len(value))
    out += value


def write_bytes(out: bytearray, value: BytesLike | None) -> None:
    """Raises ValueError on None: the field is not nullable in this version."""
    if value is None:
        raise ValueError("Non-nullable bytes was None")
    write_nullable_bytes(out, value)


def write_nullable_compact_bytes(out: bytearray, value: BytesLike | None) -> None:
    if value is None:
        out.append(0)
        return
    write_uvarint(out, len(value) + 1)
    out += value


def write_compact_bytes(out: bytearray, value: BytesLike | None) -> None:
    """Raises ValueError on None: the field is not nullable in this version."""
    if value is None:
        raise ValueError("Non-nullable bytes was None")
    write_nullable_compact_bytes(out, value)


# ---- arrays ------------------------------------------------------------------------------------


def read_array_length(buf: BytesLike, pos: int) -> tuple[int, int]:
    """int32 element count, -1 = null (returned as -1). Bounded by the bytes that remain."""
    (count,) = INT32.unpack_from(buf, pos)
    pos += 4
    if count < -1:
        raise MalformedError(f"Array length {count} is negative")
    # Like Kafka's generated readers: more elements than remaining bytes cannot be real.
    if count > len(buf) - pos:
        raise MalformedError(
            f"Array of {count} elements at offset {pos} runs past the end"
        )
    return count, pos


def read_compact_array_length(buf: BytesLike, pos: int) -> tuple[int, int]:
    """uvarint (count + 1), 0 = null (returned as -1). Bounded by the bytes that remain."""
    count_plus_one, pos = read_uvarint(buf, pos)
    count = count_plus_one - 1
    if count > len(buf) - pos:
        raise MalformedError(
            f"Array of {count} elements at offset {pos} runs past the end"
        )
    return count, pos


def write_array_length(out: bytearray, count: int) -> None:
    out += INT32.pack(count)


def write_compact_array_length(out: bytearray, count: int) -> None:
    write_uvarint(out, count + 1)


# ---- uuid --------------------------------------------------------------------------------------


def slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The raw setter of slot ``name``: stores a value without ``__setattr__``.

    Generated readers build frozen dataclasses with it (allocate with ``object.__new__``, then
    set every slot): about 3x faster than the frozen ``__init__``, which goes through
    ``object.__setattr__`` once per field. Only for code that sets every slot exactly once.
    """
    setter: Callable[[Any, Any], None] = cls.__dict__[name].__set__
    return setter


_new_object = object.__new__
_set_uuid_int = slot_setter(uuid.UUID, "int")
_set_uuid_is_safe = slot_setter(uuid.UUID, "is_safe")
_UUID_SAFETY_UNKNOWN = uuid.SafeUUID.unknown


def uuid_from_bytes(raw: bytes) -> uuid.UUID:
    """``uuid.UUID(bytes=raw)`` for exactly 16 bytes, without its argument checks (3x faster).

    The instance is the same as the constructor's: UUID keeps only ``int`` and ``is_safe``.
    """
    value = _new_object(uuid.UUID)
    _set_uuid_int(value, int.from_bytes(raw, "big"))
    _set_uuid_is_safe(value, _UUID_SAFETY_UNKNOWN)
    return value


def read_uuid(buf: BytesLike, pos: int) -> tuple[uuid.UUID, int]:
    """16 bytes: most significant 64 bits, then least significant, both big-endian."""
    (raw,) = UUID_BYTES.unpack_from(buf, pos)
    return uuid_from_bytes(raw), pos + 16


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes


# ---- tagged fields ---------------------------------------------------------------------------


def read_tagged_fields(buf: BytesLike, pos: int) -> tuple[dict[int, BytesLike], int]:
    """A tagged-field section: uvarint count, then (uvarint tag, uvarint size, bytes) each.

    Returns every field's raw bytes by tag; callers decode the tags they know and ignore the
    rest (Kafka keeps unknown tags as ``_unknownTaggedFields``; nothing here needs them).
    """
    count, pos = read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise MalformedError(f"{count} tagged fields at offset {pos} run past the end")
    fields: dict[int, BytesLike] = {}
    previous = -1
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        if tag <= previous:
            # Kafka's writer emits ascending tags; its reader rejects duplicates.
            raise MalformedError(f"Tagged field {tag} out of order or repeated")
        previous = tag
        size, pos = read_uvarint(buf, pos)
        fields[tag], pos = _take(buf, pos, size, f"tagged field {tag}")
    return fields, pos


def skip_tagged_fields(buf: BytesLike, pos: int) -> int:
    try:
        if buf[pos] == 0:  # fast path: the empty section, by far the most common
            return pos + 1
    except IndexError:
        raise MalformedError(f"Missing tagged-field section at offset {pos}") from None
    return read_tagged_fields(buf, pos)[1]


def write_tagged_fields(
    out: bytearray, fields: Sequence[tuple[int, bytes | bytearray]]
) -> None:
    """Write ``(tag, encoded value)`` pairs, which must already be in ascending tag order."""
    write_uvarint(out, len(fields))
    for tag, encoded in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(encoded))
        out += encoded


def write_empty_tagged_fields(out: bytearray) -> None:
    out.append(0)


def decode_tagged(
    raw: BytesLike, reader: Callable[[BytesLike, int], tuple[T, int]], tag: int
) -> T:
    """Decode one known tagged field; its value must use exactly the bytes its size declared."""
    value, end = reader(raw, 0)
    if end != len(raw):
        raise MalformedError(
            f"Tagged field {tag} declared {len(raw)} bytes, value used {end}"
        )
    return value
