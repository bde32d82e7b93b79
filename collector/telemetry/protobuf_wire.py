"""The protobuf wire format as the push path's walks read it (payload.py, push_shape.py,
application_signals.py): varints and the skip of a field's value, over the payload's bytes,
no message built.  Compiled with them (mypyc): a call from one to another is a C call."""

from __future__ import annotations

__all__ = ["read_varint", "skip_field"]


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it (a varint cut off by the end of
    ``buf`` ends there)."""
    value = 0
    shift = 0
    end = len(buf)
    while pos < end:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    return value, pos


def skip_field(buf: bytes, pos: int, key: int) -> int:
    """The position after the value of a field whose key (or wire type) was just read;
    the end of ``buf`` for a group (not OTLP's: nothing after it is read)."""
    wire_type = key & 7
    if wire_type == 2:
        length, pos = read_varint(buf, pos)
        return pos + length
    if wire_type == 0:
        return read_varint(buf, pos)[1]
    if wire_type == 1:
        return pos + 8
    if wire_type == 5:
        return pos + 4
    return len(buf)
