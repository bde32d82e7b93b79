"""Walking a Kafka message without decoding it: skip what is not needed, note where things are.

The gateway decodes as little as it can (docs/protocol.md, "What the gateway decodes"): it
walks a response's bytes to find a few fields (broker addresses, the throttle time) and
splices the bytes it changes, copying every other byte as the upstream sent it, including
tagged fields it does not know. These helpers are the walking steps: each takes
``(buf, pos)`` and returns the position after what it skipped; ``flexible`` selects Kafka's
compact encodings (uvarint length + 1) over the legacy ones (int16/int32 lengths).

The encodings themselves are ``proto.primitives``': an array's length, a string, a tagged
section are read there (compiled, with Kafka's bounds checks). What is here is what a walk
needs and a decoder does not: one step for either encoding, chosen by the version at run
time (``array_length``, ``read_string``); skipping a string, bytes or an int32 array without
copying or decoding it; a tagged section's fields as offsets into the buffer, for splicing
(``tagged_fields``); and the gateway's own error for a response that breaks its schema.

Every length and count is checked against the bytes that remain before it is used; a
response that breaks its schema raises ``MalformedResponseError`` (the public walkers turn
``proto``'s ``MalformedError`` and the other ``WALK_ERRORS`` into it), and the gateway closes
the client/upstream pair (there is nothing valid to forward).
"""

from __future__ import annotations

import struct

from proto.errors import FramingError, KafkaError
from proto.primitives import (
    INT16,
    INT32,
    BytesLike,
    read_array_length,
    read_compact_array_length,
    read_nullable_compact_string,
    read_nullable_string,
    read_uvarint,
)

__all__ = [
    "MalformedResponseError",
    "array_length",
    "check_end",
    "malformed",
    "read_string",
    "skip_bytes",
    "skip_int32_array",
    "skip_string",
    "tagged_fields",
]


class MalformedResponseError(FramingError):
    """An upstream response that does not follow its schema (a length or count past the end,
    a truncated field, bytes left after the body). The gateway closes the pair."""


# What a walk over a truncated or corrupt buffer raises (struct on a short read, primitives'
# MalformedError, an index past the end), turned into MalformedResponseError at each public
# entry point.
WALK_ERRORS = (struct.error, IndexError, ValueError, KafkaError)


def malformed(what: str, exc: BaseException) -> MalformedResponseError:
    return MalformedResponseError(f"Malformed {what}: {exc}")


def _past_end(what: str, pos: int, size: int, buf: BytesLike) -> MalformedResponseError:
    return MalformedResponseError(
        f"{what} of {size} at offset {pos} runs past the end ({len(buf)} bytes)"
    )


def array_length(buf: BytesLike, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's element count (-1 for null) and the position of its first element."""
    if flexible:
        return read_compact_array_length(buf, pos)
    return read_array_length(buf, pos)


def skip_string(buf: BytesLike, pos: int, flexible: bool) -> int:
    """Skips a string, nullable or not (null is not checked against the schema here)."""
    if flexible:
        length, pos = read_uvarint(buf, pos)
        length -= 1
    else:
        (length,) = INT16.unpack_from(buf, pos)
        pos += 2
    if length < 0:
        if length != -1:
            raise MalformedResponseError(f"String length {length} at offset {pos}")
        return pos
    end = pos + length
    if end > len(buf):
        raise _past_end("String", pos, length, buf)
    return end


def read_string(buf: BytesLike, pos: int, flexible: bool) -> tuple[str | None, int]:
    """A nullable string as Kafka reads it (invalid UTF-8 replaced, as Java's new String does)."""
    if flexible:
        return read_nullable_compact_string(buf, pos)
    return read_nullable_string(buf, pos)


def skip_bytes(buf: BytesLike, pos: int, flexible: bool) -> int:
    """Skips a bytes or records field (nullable or not) without looking inside it."""
    if flexible:
        length, pos = read_uvarint(buf, pos)
        length -= 1
    else:
        (length,) = INT32.unpack_from(buf, pos)
        pos += 4
    if length < 0:
        if length != -1:
            raise MalformedResponseError(f"Bytes length {length} at offset {pos}")
        return pos
    end = pos + length
    if end > len(buf):
        raise _past_end("Bytes", pos, length, buf)
    return end


def skip_int32_array(buf: BytesLike, pos: int, flexible: bool) -> int:
    count, pos = array_length(buf, pos, flexible)
    if count > 0:
        end = pos + 4 * count
        if end > len(buf):
            raise _past_end("int32 array", pos, count, buf)
        return end
    return pos


def tagged_fields(
    buf: BytesLike, pos: int
) -> tuple[list[tuple[int, int, int, int]], int]:
    """Each field of a tagged section as (tag, offset of its size, value start, value end),
    in wire order, and the position after the section."""
    count, pos = read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise _past_end("Tagged-field section", pos, count, buf)
    fields = []
    previous = -1
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        if tag <= previous:  # Kafka's reader rejects repeated tags; writers sort them
            raise MalformedResponseError(f"Tagged field {tag} out of order or repeated")
        previous = tag
        size_at = pos
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise _past_end(f"Tagged field {tag}", pos, size, buf)
        fields.append((tag, size_at, pos, end))
        pos = end
    return fields, pos


def check_end(buf: BytesLike, pos: int, what: str) -> None:
    """A response body must end where its schema ends: bytes left over mean the walk and the
    upstream disagree about the layout, so nothing in it can be trusted (or spliced)."""
    if pos != len(buf):
        raise MalformedResponseError(
            f"{what}: {len(buf) - pos} bytes left after the body ({len(buf)} bytes)"
        )
