"""Primitive encodings: Hypothesis round trips, boundaries, and bounds checks on lengths."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto import primitives as p
from proto.errors import Errors, InvalidRequestError

U32_MAX = 2**32 - 1
VARINT_BOUNDARIES = [
    0,
    1,
    127,
    128,
    16383,
    16384,
    2**21 - 1,
    2**21,
    2**28 - 1,
    2**28,
    U32_MAX,
]


def written(writer, value) -> bytes:
    out = bytearray()
    writer(out, value)
    return bytes(out)


@given(st.integers(0, U32_MAX) | st.sampled_from(VARINT_BOUNDARIES))
def test_uvarint_round_trip(value: int) -> None:
    wire = written(p.write_uvarint, value)
    assert len(wire) == p.uvarint_size(value) <= 5
    assert p.read_uvarint(wire + b"\xaa", 0) == (value, len(wire))


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, "00"),
        (127, "7f"),
        (128, "8001"),
        (300, "ac02"),
        (16384, "808001"),
        (U32_MAX, "ffffffff0f"),
    ],
)
def test_uvarint_known_bytes(value: int, wire: str) -> None:
    assert written(p.write_uvarint, value).hex() == wire


@pytest.mark.parametrize(
    "wire",
    [
        "",  # nothing
        "80",  # continuation with no next byte
        "ffffffff",  # truncated 5-byte varint
        "8080808080",  # 5th byte still says "more"
        "ffffffff1f",  # 35 bits: over 32
    ],
)
def test_uvarint_malformed(wire: str) -> None:
    with pytest.raises(p.MalformedError) as info:
        p.read_uvarint(bytes.fromhex(wire), 0)
    assert info.value.error_code == Errors.INVALID_REQUEST
    assert isinstance(info.value, InvalidRequestError)


def test_uvarint_rejects_out_of_range_writes() -> None:
    for bad in (-1, 2**32):
        with pytest.raises(ValueError):
            p.write_uvarint(bytearray(), bad)


TEXT = st.text(max_size=40)
NULLABLE_TEXT = st.none() | TEXT
BLOBS = st.binary(max_size=300)


@given(TEXT)
def test_strings_round_trip(value: str) -> None:
    for writer, reader in [
        (p.write_string, p.read_string),
        (p.write_compact_string, p.read_compact_string),
        (p.write_nullable_string, p.read_nullable_string),
        (p.write_nullable_compact_string, p.read_nullable_compact_string),
    ]:
        wire = written(writer, value)
        assert reader(memoryview(wire), 0) == (value, len(wire))


def test_null_and_empty_strings() -> None:
    assert written(p.write_nullable_string, None) == b"\xff\xff"
    assert written(p.write_nullable_compact_string, None) == b"\x00"
    assert written(p.write_compact_string, "") == b"\x01"
    assert written(p.write_string, "") == b"\x00\x00"
    assert p.read_nullable_compact_string(b"\x00", 0) == (None, 1)
    assert p.read_nullable_string(b"\xff\xff", 0) == (None, 2)
    for reader, null in [
        (p.read_compact_string, b"\x00"),
        (p.read_string, b"\xff\xff"),
    ]:
        with pytest.raises(p.MalformedError, match="Non-nullable"):
            reader(null, 0)
    with pytest.raises(p.MalformedError, match="negative"):
        p.read_nullable_string(b"\xff\xfe", 0)


def test_invalid_utf8_is_replaced_like_java() -> None:
    assert p.read_compact_string(b"\x03\xff\xfe", 0)[0] == "\ufffd\ufffd"


@given(st.none() | BLOBS)
def test_bytes_round_trip(value: bytes | None) -> None:
    for writer, reader in [
        (p.write_nullable_bytes, p.read_nullable_bytes),
        (p.write_nullable_compact_bytes, p.read_nullable_compact_bytes),
    ]:
        wire = written(writer, value)
        decoded, end = reader(wire, 0)
        assert end == len(wire)
        assert (None if decoded is None else bytes(decoded)) == value


def test_bytes_decode_zero_copy() -> None:
    frame = memoryview(b"\x04abc\x00")
    value, _ = p.read_compact_bytes(frame, 0)
    assert (
        isinstance(value, memoryview)
        and value.obj is frame.obj
        and bytes(value) == b"abc"
    )


@pytest.mark.parametrize(
    ("reader", "wire"),
    [
        (p.read_compact_bytes, b"\x05abc"),  # 4 bytes declared, 3 present
        (p.read_compact_string, b"\x05abc"),
        (p.read_bytes, b"\x00\x00\x00\x04abc"),
        (p.read_string, b"\x00\x04abc"),
        (p.read_bytes, b"\x7f\xff\xff\xff"),  # 2 GiB claimed by a 4-byte message
        (p.read_compact_bytes, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_lengths_past_the_end_are_rejected_before_allocating(
    reader, wire: bytes
) -> None:
    with pytest.raises(p.MalformedError, match="past the end"):
        reader(wire, 0)


def test_fixed_width_reads_on_short_buffers_raise_struct_error() -> None:
    # decode_request turns struct.error into InvalidRequestError (tested in test_connection)
    with pytest.raises(struct.error):
        p.read_string(b"\x00", 0)


@given(st.lists(st.integers(0, 2**31 - 2), max_size=5) | st.none())
def test_array_lengths(items: list[int] | None) -> None:
    count = -1 if items is None else len(items)
    payload = b"\x00" * max(count, 0)
    compact = written(p.write_compact_array_length, count) + payload
    legacy = written(p.write_array_length, count) + payload
    assert p.read_compact_array_length(compact, 0)[0] == count
    assert p.read_array_length(legacy, 0)[0] == count


def test_null_compact_array_is_zero_and_counts_are_bounded() -> None:
    assert written(p.write_compact_array_length, -1) == b"\x00"
    assert written(p.write_array_length, -1) == b"\xff\xff\xff\xff"
    with pytest.raises(p.MalformedError, match="past the end"):
        p.read_compact_array_length(b"\x0b" + b"\x00" * 9, 0)  # 10 elements, 9 bytes
    with pytest.raises(p.MalformedError, match="past the end"):
        p.read_array_length(b"\x7f\xff\xff\xff", 0)
    with pytest.raises(p.MalformedError, match="negative"):
        p.read_array_length(b"\xff\xff\xff\xfe", 0)


@given(st.uuids())
def test_uuid_round_trip_msb_then_lsb(value: uuid.UUID) -> None:
    wire = written(p.write_uuid, value)
    msb, lsb = struct.unpack(">qq", wire)
    assert (msb & (2**64 - 1)) << 64 | (lsb & (2**64 - 1)) == value.int
    assert p.read_uuid(wire, 0) == (value, 16)
    assert p.read_uuid(bytes(16), 0)[0] == p.ZERO_UUID


TAGGED = st.dictionaries(st.integers(0, 2**20), st.binary(max_size=20), max_size=5)


@given(TAGGED)
def test_tagged_fields_round_trip_and_unknown_ones_are_skipped(
    fields: dict[int, bytes],
) -> None:
    wire = written(p.write_tagged_fields, sorted(fields.items()))
    decoded, end = p.read_tagged_fields(wire + b"\xee", 0)
    assert end == len(wire)
    assert {tag: bytes(raw) for tag, raw in decoded.items()} == fields
    assert p.skip_tagged_fields(wire + b"\xee", 0) == len(wire)


def test_tagged_field_errors() -> None:
    with pytest.raises(p.MalformedError, match="out of order"):
        p.read_tagged_fields(b"\x02\x01\x00\x01\x00", 0)
    with pytest.raises(p.MalformedError, match="past the end"):
        p.read_tagged_fields(b"\x01\x00\x05ab", 0)
    with pytest.raises(p.MalformedError, match="Missing tagged-field"):
        p.skip_tagged_fields(b"", 0)
    with pytest.raises(p.MalformedError, match="declared"):
        p.decode_tagged(b"\x00\x00\x00\x01\xff", lambda buf, pos: (1, pos + 4), 7)
