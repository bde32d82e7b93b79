"""Payload codecs: round trips, the size cap at its boundary, corrupt input, bombs."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
import tracemalloc
import zlib
from pathlib import Path

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proto.compression import XERIAL_SNAPPY_MAGIC, CompressionType, compress, decompress
from proto.errors import (
    Errors,
    InvalidRecordError,
    TelemetryTooLargeError,
    UnsupportedCompressionTypeError,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ONE_MIB = 1 << 20
ONE_GIB = 1 << 30

# (compression type, xerial framing for snappy)
CODECS = [
    (CompressionType.NONE, False),
    (CompressionType.GZIP, False),
    (CompressionType.SNAPPY, False),
    (CompressionType.SNAPPY, True),
    (CompressionType.LZ4, False),
    (CompressionType.ZSTD, False),
]
CODEC_IDS = [f"{t.name}{'-xerial' if x else ''}" for t, x in CODECS]


@pytest.mark.parametrize(("ctype", "xerial"), CODECS, ids=CODEC_IDS)
@settings(max_examples=60, deadline=None)
@given(
    payload=st.binary(max_size=3000)
    | st.builds(lambda n: bytes(n), st.integers(0, 200_000))
)
def test_round_trip(ctype: CompressionType, xerial: bool, payload: bytes) -> None:
    packed = compress(ctype, payload, snappy_xerial=xerial)
    assert decompress(ctype, packed, len(payload)) == payload
    assert decompress(ctype, memoryview(packed), len(payload) + 10) == payload


@pytest.mark.parametrize(("ctype", "xerial"), CODECS, ids=CODEC_IDS)
def test_cap_is_exact(ctype: CompressionType, xerial: bool) -> None:
    payload = os.urandom(1000) + bytes(150_000)  # bigger than the first output guess
    packed = compress(ctype, payload, snappy_xerial=xerial)
    assert decompress(ctype, packed, len(payload)) == payload
    with pytest.raises(TelemetryTooLargeError) as info:
        decompress(ctype, packed, len(payload) - 1)
    assert info.value.error_code == Errors.TELEMETRY_TOO_LARGE


def test_unknown_type_is_unsupported_compression() -> None:
    for bad_id in (5, -1, 127):
        with pytest.raises(UnsupportedCompressionTypeError) as info:
            decompress(bad_id, b"x", 100)
        assert info.value.error_code == Errors.UNSUPPORTED_COMPRESSION_TYPE
    assert int(Errors.UNSUPPORTED_COMPRESSION_TYPE) == 76
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(9, b"x")


def test_librdkafka_snappy_is_a_raw_block_and_java_is_xerial() -> None:
    payload = b"org.apache.kafka.producer." * 50
    raw = compress(CompressionType.SNAPPY, payload)
    assert bytes(cramjam.snappy.decompress_raw(raw)) == payload
    framed = compress(CompressionType.SNAPPY, payload, snappy_xerial=True)
    assert framed.startswith(XERIAL_SNAPPY_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01")
    assert decompress(CompressionType.SNAPPY, framed, 10_000) == payload
    # an empty xerial stream (header only) is an empty payload
    assert decompress(CompressionType.SNAPPY, framed[:16], 0) == b""


def _corruptions(packed: bytes) -> list[bytes]:
    return [packed[: len(packed) // 2], packed[:3], b"\x13\x37" * 20]


@pytest.mark.parametrize(
    ("ctype", "xerial"),
    [c for c in CODECS if c[0] != CompressionType.NONE],
    ids=CODEC_IDS[1:],
)
def test_corrupt_input_is_invalid_record(ctype: CompressionType, xerial: bool) -> None:
    packed = compress(ctype, os.urandom(2000) * 3, snappy_xerial=xerial)
    for bad in _corruptions(packed):
        with pytest.raises(InvalidRecordError) as info:
            decompress(ctype, bad, 100_000)
        assert info.value.error_code == Errors.INVALID_RECORD


def test_xerial_block_length_past_end_is_invalid_record() -> None:
    header = XERIAL_SNAPPY_MAGIC + struct.pack(">ii", 1, 1)
    for tail in (struct.pack(">i", 1000) + b"abc", struct.pack(">i", -5), b"\x00\x00"):
        with pytest.raises(InvalidRecordError):
            decompress(CompressionType.SNAPPY, header + tail, 100_000)


def test_gzip_concatenated_members_are_read_like_gzipinputstream() -> None:
    one = compress(CompressionType.GZIP, b"abc")
    assert decompress(CompressionType.GZIP, one + one, 6) == b"abcabc"
    with pytest.raises(TelemetryTooLargeError):
        decompress(CompressionType.GZIP, one + one, 5)


# ---- decompression bombs: 1 GiB of zeros (256 MiB for snappy, whose ratio is ~21:1) ----------


def _zstd_bomb() -> bytes:
    encoder = cramjam.zstd.Compressor()
    chunk = bytes(ONE_MIB)
    for _ in range(ONE_GIB // ONE_MIB):
        encoder.compress(chunk)
    return bytes(encoder.finish())


def _gzip_bomb() -> bytes:
    # A full flush resets the window, so every 1 MiB of zeros compresses to the same bytes:
    # repeat them instead of compressing 1 GiB (seconds) and close with a valid trailer.
    encoder = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(ONE_MIB)
    head = encoder.compress(chunk) + encoder.flush(zlib.Z_FULL_FLUSH)
    block = encoder.compress(chunk) + encoder.flush(zlib.Z_FULL_FLUSH)
    assert encoder.compress(chunk) + encoder.flush(zlib.Z_FULL_FLUSH) == block
    final_block = b"\x03\x00"  # an empty final fixed-Huffman block
    crc = 0
    for _ in range(ONE_GIB // ONE_MIB):
        crc = zlib.crc32(chunk, crc)
    trailer = struct.pack("<II", crc, ONE_GIB & 0xFFFFFFFF)
    return head + block * (ONE_GIB // ONE_MIB - 1) + final_block + trailer


def _lz4_bomb() -> bytes:
    # An lz4 frame of 8 MiB zeros has 4 MiB blocks that are byte-identical (zeros referencing
    # zeros): repeat the middle block to reach 1 GiB. Decompression stops at the cap long
    # before the (then stale) content checksum.
    frame = compress(CompressionType.LZ4, bytes(12 * ONE_MIB))  # independent blocks
    flags = frame[4]
    block_checksum = 4 if flags & 0x10 else 0
    pos = 7 + (8 if flags & 0x08 else 0)
    blocks = []
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        if word == 0:
            break
        end = pos + 4 + (word & 0x7FFFFFFF) + block_checksum
        blocks.append(frame[pos:end])
        pos = end
    assert blocks[1] == blocks[2]
    return frame[:7] + blocks[0] + blocks[1] * 255 + frame[pos:]


def _snappy_bomb() -> bytes:
    return bytes(cramjam.snappy.compress_raw(bytes(256 * ONE_MIB)))


def _xerial_bomb() -> bytes:
    block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
    framed_block = struct.pack(">i", len(block)) + block
    return (
        XERIAL_SNAPPY_MAGIC
        + struct.pack(">ii", 1, 1)
        + framed_block * (ONE_GIB // 32768)
    )


BOMBS = {
    "gzip": (CompressionType.GZIP, _gzip_bomb),
    "snappy": (CompressionType.SNAPPY, _snappy_bomb),
    "snappy-xerial": (CompressionType.SNAPPY, _xerial_bomb),
    "lz4": (CompressionType.LZ4, _lz4_bomb),
    "zstd": (CompressionType.ZSTD, _zstd_bomb),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_bomb_stops_at_the_cap_with_bounded_python_memory(name: str) -> None:
    ctype, build = BOMBS[name]
    bomb = build()
    tracemalloc.start()
    try:
        with pytest.raises(TelemetryTooLargeError):
            decompress(ctype, bomb, ONE_MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * ONE_MIB, f"{name}: Python peak {peak} bytes for a 1 MiB cap"


@pytest.mark.parametrize("name", ["zstd", "lz4"])
def test_bomb_native_memory_is_bounded(name: str) -> None:
    """tracemalloc cannot see cramjam's Rust allocations: measure the RSS high-water mark."""
    script = textwrap.dedent(
        f"""
        import resource, sys
        from tests.proto.test_payload_compression import BOMBS
        from proto.compression import decompress
        from proto.errors import TelemetryTooLargeError
        ctype, build = BOMBS[{name!r}]
        bomb = build()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            decompress(ctype, bomb, 1 << 20)
        except TelemetryTooLargeError:
            pass
        else:
            sys.exit("no error")
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    grown_kib = int(done.stdout.split()[-1])
    assert grown_kib < 32 * 1024, (
        f"{name}: RSS grew {grown_kib} KiB decompressing a 1 GiB bomb"
    )


# ---- what Apache Kafka 4.4.0 answers (checked against a broker by tests/compat) ---------------


def test_a_snappy_block_declaring_4_gib_is_invalid_record_not_too_large() -> None:
    """Six bytes cannot hold what they declare: corrupt (INVALID_RECORD, as snappy-java
    fails it), and nothing near the declared size is allocated."""
    bomb = b"\xff\xff\xff\xff\x0f\x00"
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecordError) as info:
            decompress(CompressionType.SNAPPY, bomb, ONE_MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.error_code == Errors.INVALID_RECORD
    assert peak < ONE_MIB


def test_a_real_snappy_block_over_the_cap_is_still_too_large() -> None:
    block = bytes(cramjam.snappy.compress_raw(bytes(2 * ONE_MIB)))
    with pytest.raises(TelemetryTooLargeError):
        decompress(CompressionType.SNAPPY, block, ONE_MIB)


def test_lz4_with_linked_blocks_is_invalid_record_like_kafka() -> None:
    """Kafka's Lz4BlockInputStream reads independent blocks only ("Dependent block stream
    is unsupported"); librdkafka and the Java client write them, and so does compress()."""
    payload = os.urandom(1000) * 20
    linked = bytes(cramjam.lz4.compress(payload))  # lz4_flex's default: linked blocks
    assert not linked[4] & 0x20
    with pytest.raises(InvalidRecordError, match="Dependent block stream"):
        decompress(CompressionType.LZ4, linked, ONE_MIB)
    independent = compress(CompressionType.LZ4, payload)
    assert independent[4] & 0x20
    assert decompress(CompressionType.LZ4, independent, ONE_MIB) == payload


@pytest.mark.parametrize(
    ("flg", "bd", "reason"),
    [
        (0x61, 0x40, "Reserved bits must be 0"),
        (0xA0, 0x40, "Version 2 is unsupported"),
        (0x60, 0x41, "Reserved2 field must be 0"),
        (0x60, 0x30, "Block size value must be between 4 and 7"),
        (0x60, 0xC0, "Reserved3 field must be 0"),
    ],
)
def test_lz4_frame_descriptor_checks_are_kafkas(flg: int, bd: int, reason: str) -> None:
    frame = bytearray(compress(CompressionType.LZ4, b"x" * 100))
    frame[4], frame[5] = flg, bd
    with pytest.raises(InvalidRecordError, match=reason):
        decompress(CompressionType.LZ4, bytes(frame), ONE_MIB)
