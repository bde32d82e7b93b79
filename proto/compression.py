"""Payload codecs for PushTelemetry ``Metrics``: bounded decompression, compression for tests.

Kafka's ``CompressionType`` ids (``clients/.../common/record/CompressionType.java``) name the
codec of the OTLP payload. Every decompression here is bounded: at most ``max_bytes`` of output
is ever produced, whatever the input claims, and memory stays proportional to ``max_bytes``
(Kafka does the same since #22327: ``telemetry.max.bytes`` bounds the decompressed size too,
and since KAFKA-21076 going over it answers TELEMETRY_TOO_LARGE).

How each codec is bounded:

========  =====================================================================================
codec     bound
========  =====================================================================================
none      the length itself
gzip      ``zlib.decompressobj().decompress(data, max_length)``: zlib stops producing output
zstd      a single frame that declares its content size (librdkafka and the Java client both
          write it) and declares at most ``max_bytes`` is decompressed in one call with a
          reused per-thread ``zstandard.ZstdDecompressor`` (zstd checks the output matches
          the declaration); anything else (no declared size, more than one frame, over the
          cap, corrupt) goes through ``cramjam.zstd.decompress_into(data, out)``, which
          streams into a fixed buffer and stops when it is full (a 1 GiB bomb stops after
          ``len(out)`` bytes, in about a millisecond)
lz4       ``cramjam.lz4.decompress_into`` (frame format), same as zstd, after the frame
          descriptor checks of Kafka's ``Lz4BlockInputStream`` (independent blocks only)
snappy    the uncompressed length is declared up front (raw block: varint header; xerial:
          per block), so it is checked before any output buffer is allocated
========  =====================================================================================

Snappy comes in two framings on the wire: librdkafka sends one raw snappy block; Java's
``SnappyOutputStream`` (snappy-java) writes xerial framing: magic ``\\x82SNAPPY\\x00``, two
int32 versions, then blocks of ``int32 length`` + raw block. Both are accepted, told apart by
the magic (a raw block cannot start with it: its first byte would declare a length of more than
2**32 - 1 bytes).

Errors: unknown id -> ``UnsupportedCompressionTypeError``; output over ``max_bytes`` ->
``TelemetryTooLargeError``; corrupt or truncated input -> ``InvalidRecordError`` (what Kafka
answers when ``ClientTelemetryUtils.decompress`` throws anything else).
"""

from __future__ import annotations

import enum
import struct
import threading
import zlib
from collections.abc import Callable
from types import ModuleType

import cramjam
import zstandard

from proto.errors import (
    InvalidRecordError,
    TelemetryTooLargeError,
    UnsupportedCompressionTypeError,
)

__all__ = ["XERIAL_SNAPPY_MAGIC", "CompressionType", "compress", "decompress"]


class CompressionType(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


XERIAL_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
# magic, then int32 version and int32 minimum compatible version (both 1 from snappy-java).
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
_XERIAL_BLOCK_BYTES = 32 * 1024  # snappy-java's default block size
# The most a raw snappy block can expand: its best element is a 3-byte copy of 64 bytes
# (format_description.txt in google/snappy), so n bytes produce at most 64 * n / 3 < 22 * n.
_SNAPPY_MAX_EXPANSION = 22

# gzip: wbits 16+15 = gzip container with a 32 KiB window (Java's GZIPOutputStream, librdkafka).
_GZIP_WBITS = 16 + zlib.MAX_WBITS

# The message Rust's io::ErrorKind::WriteZero carries through cramjam when decompress_into runs
# out of output space; any other DecompressionError means the input is corrupt.
_OUTPUT_FULL = "failed to write whole buffer"

# First output buffer for zstd/lz4: OTLP metrics compress 3-10x, so 16x the input (at least
# 64 KiB) fits nearly every real push in one pass; a bigger result is decompressed again into
# a buffer of max_bytes + 1. Worked numbers: a 453-byte zstd push of 1438 bytes gets a
# 64 KiB buffer; a 1 MiB cap never allocates more than 1 MiB + 1.
_FIRST_GUESS_RATIO = 16
_FIRST_GUESS_MIN_BYTES = 64 * 1024

Payload = bytes | bytearray | memoryview


def decompress(compression_type: int, data: Payload, max_bytes: int) -> bytes:
    """Decompress ``data`` producing at most ``max_bytes`` bytes (else TelemetryTooLargeError)."""
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    decoder = _DECODERS.get(compression_type)
    if decoder is None:
        raise UnsupportedCompressionTypeError(
            f"Unknown compression type id {compression_type}"
        )
    return decoder(data, max_bytes)


def compress(
    compression_type: int, data: Payload, *, snappy_xerial: bool = False
) -> bytes:
    """Compress ``data`` the way a client would (librdkafka; ``snappy_xerial`` = Java's framing)."""
    if compression_type == CompressionType.NONE:
        return bytes(data)
    if compression_type == CompressionType.GZIP:
        encoder = zlib.compressobj(
            zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, _GZIP_WBITS
        )
        return encoder.compress(data) + encoder.flush()
    if compression_type == CompressionType.SNAPPY:
        return (
            _xerial_compress(data)
            if snappy_xerial
            else bytes(cramjam.snappy.compress_raw(data))
        )
    if compression_type == CompressionType.LZ4:
        # Independent blocks, as librdkafka and Kafka's Lz4BlockOutputStream write them
        # (Kafka cannot read linked blocks).
        lz4_frame = cramjam.lz4.Compressor(block_linked=False)
        lz4_frame.compress(data)
        return bytes(lz4_frame.finish())
    if compression_type == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompressionTypeError(
        f"Unknown compression type id {compression_type}"
    )


def _too_large(max_bytes: int) -> TelemetryTooLargeError:
    return TelemetryTooLargeError(f"Decompressed telemetry exceeds {max_bytes} bytes")


def _none(data: Payload, max_bytes: int) -> bytes:
    if len(data) > max_bytes:
        raise _too_large(max_bytes)
    return bytes(data)


def _gzip(data: Payload, max_bytes: int) -> bytes:
    parts: list[bytes] = []
    produced = 0
    remaining: Payload = data
    # A gzip stream may hold several members back to back (GZIPInputStream reads them all).
    while True:
        decoder = zlib.decompressobj(_GZIP_WBITS)
        try:
            # max_length caps what zlib produces: one byte over the budget proves "too large".
            chunk = decoder.decompress(remaining, max_bytes - produced + 1)
        except zlib.error as exc:
            raise InvalidRecordError(f"Corrupt gzip payload: {exc}") from exc
        produced += len(chunk)
        if produced > max_bytes:
            raise _too_large(max_bytes)
        parts.append(chunk)
        if not decoder.eof:
            raise InvalidRecordError("Truncated gzip payload")
        remaining = decoder.unused_data
        if not remaining:
            return b"".join(parts) if len(parts) != 1 else parts[0]


def _streaming_codec(codec: ModuleType, name: str) -> Callable[[Payload, int], bytes]:
    decompress_into = codec.decompress_into

    def decode(data: Payload, max_bytes: int) -> bytes:
        cap = max_bytes + 1
        guess = max(_FIRST_GUESS_MIN_BYTES, len(data) * _FIRST_GUESS_RATIO)
        sizes = (guess, cap) if guess < cap else (cap,)
        for size in sizes:
            out = bytearray(size)
            try:
                produced = decompress_into(data, out)
            except cramjam.DecompressionError as exc:
                if str(exc) == _OUTPUT_FULL:
                    continue  # did not fit: next size, or over the cap
                raise InvalidRecordError(f"Corrupt {name} payload: {exc}") from exc
            if produced > max_bytes:
                raise _too_large(max_bytes)
            return bytes(memoryview(out)[:produced])
        raise _too_large(max_bytes)

    return decode


def _snappy(data: Payload, max_bytes: int) -> bytes:
    if bytes(data[: len(XERIAL_SNAPPY_MAGIC)]) == XERIAL_SNAPPY_MAGIC:
        return _xerial_decompress(memoryview(data), max_bytes)
    return _snappy_raw_block(data, max_bytes, max_bytes)


def _snappy_raw_block(block: Payload, budget: int, max_bytes: int) -> bytes:
    try:
        declared = cramjam.snappy.decompress_raw_len(block)
    except cramjam.DecompressionError as exc:
        raise InvalidRecordError(f"Corrupt snappy payload: {exc}") from exc
    if declared > len(block) * _SNAPPY_MAX_EXPANSION:
        # More than any snappy block of this size can hold: the header lies. snappy-java
        # fails such a block (Kafka 4.4.0 answers INVALID_RECORD), so does this, without
        # allocating what it declares (a 6-byte block can declare 4 GiB).
        raise InvalidRecordError(
            f"Corrupt snappy payload: {len(block)} bytes cannot hold the {declared} declared"
        )
    if declared > budget:
        raise _too_large(max_bytes)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise InvalidRecordError(f"Corrupt snappy payload: {exc}") from exc


def _xerial_decompress(view: memoryview, max_bytes: int) -> bytes:
    if len(view) < _XERIAL_HEADER.size:
        raise InvalidRecordError("Truncated xerial snappy header")
    parts: list[bytes] = []
    produced = 0
    pos = _XERIAL_HEADER.size
    while pos < len(view):
        if len(view) - pos < _XERIAL_BLOCK_LENGTH.size:
            raise InvalidRecordError("Truncated xerial snappy block length")
        (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(view, pos)
        pos += _XERIAL_BLOCK_LENGTH.size
        if length < 0 or length > len(view) - pos:
            raise InvalidRecordError(
                f"Xerial snappy block length {length} past the end"
            )
        block = _snappy_raw_block(
            view[pos : pos + length], max_bytes - produced, max_bytes
        )
        produced += len(block)
        parts.append(block)
        pos += length
    return b"".join(parts)


def _xerial_compress(data: Payload) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER.pack(XERIAL_SNAPPY_MAGIC, 1, 1)]
    for start in range(0, len(view), _XERIAL_BLOCK_BYTES):
        block = bytes(
            cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES])
        )
        parts.append(_XERIAL_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


_zstd_streaming = _streaming_codec(cramjam.zstd, "zstd")
# One decompression context per thread (a ZstdDecompressor is not thread-safe): creating a
# zstd context and its buffers is most of the cost of decompressing a push, about 12 us of
# 14 us for a 245-byte push of 877 bytes; reused, the call takes about 3 us.
_zstd_contexts = threading.local()
_frame_content_size = zstandard.frame_content_size


def _zstd(data: Payload, max_bytes: int) -> bytes:
    try:
        declared = _frame_content_size(data)
    except zstandard.ZstdError:
        declared = -1  # not a frame header we can read: let the streaming path say why
    if 0 < declared <= max_bytes:
        try:
            decompressor = _zstd_contexts.decompressor
        except AttributeError:
            decompressor = _zstd_contexts.decompressor = zstandard.ZstdDecompressor()
        try:
            # Allocates exactly `declared` bytes (bounded above); zstd fails the call when
            # the frame's output differs from its declaration, and allow_extra_data=False
            # fails it when a second frame follows (decompressed below, like Kafka's
            # ZstdInputStream reads every frame).
            return decompressor.decompress(data, allow_extra_data=False)
        except zstandard.ZstdError:
            pass  # the streaming path gives the same answer the slow way, with its error
    return _zstd_streaming(data, max_bytes)


_lz4_streaming = _streaming_codec(cramjam.lz4, "lz4")
_LZ4_MAGIC = b"\x04\x22\x4d\x18"


def _lz4_frame_error(data: Payload) -> str | None:
    """Why Kafka 4.4.0's ``Lz4BlockInputStream`` refuses a frame's descriptor, or None:
    the FLG byte's version must be 1, its bits 0-1 zero and its block-independence bit set
    (Kafka reads no linked blocks); the BD byte's low nibble and top bit zero and its block
    size code 4-7. Checked first, since the lz4 library itself reads such frames."""
    if len(data) < 6:
        return "Stream ended prematurely"
    if bytes(data[:4]) != _LZ4_MAGIC:
        return "Stream unsupported (invalid magic bytes)"
    flg, bd = data[4], data[5]
    if flg & 0x03:
        return "Reserved bits must be 0"
    if not flg & 0x20:
        return "Dependent block stream is unsupported"
    if flg >> 6 != 1:
        return f"Version {flg >> 6} is unsupported"
    if bd & 0x0F:
        return "Reserved2 field must be 0"
    if not 4 <= (bd >> 4) & 0x07 <= 7:
        return "Block size value must be between 4 and 7"
    if bd & 0x80:
        return "Reserved3 field must be 0"
    return None


def _lz4(data: Payload, max_bytes: int) -> bytes:
    error = _lz4_frame_error(data)
    if error is not None:
        raise InvalidRecordError(f"Corrupt lz4 payload: {error}")
    return _lz4_streaming(data, max_bytes)


_DECODERS: dict[int, Callable[[Payload, int], bytes]] = {
    CompressionType.NONE: _none,
    CompressionType.GZIP: _gzip,
    CompressionType.SNAPPY: _snappy,
    CompressionType.LZ4: _lz4,
    CompressionType.ZSTD: _zstd,
}
