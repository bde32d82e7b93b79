"""The zstd fast path (one frame with a declared size, reused context) must answer exactly
what the bounded streaming path answers, for every shape of input."""

from __future__ import annotations

import threading

import pytest
import zstandard

from proto.compression import CompressionType, decompress
from proto.errors import InvalidRecordError, TelemetryTooLargeError

PAYLOAD = b"org.apache.kafka.producer.request.latency.avg" * 40  # 1800 bytes


def test_single_frame_with_declared_size() -> None:
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(PAYLOAD)
    assert zstandard.frame_content_size(frame) == len(PAYLOAD)
    assert decompress(CompressionType.ZSTD, frame, len(PAYLOAD)) == PAYLOAD
    assert decompress(CompressionType.ZSTD, memoryview(frame), 1 << 20) == PAYLOAD


def test_declared_size_over_the_cap_is_too_large() -> None:
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(PAYLOAD)
    with pytest.raises(TelemetryTooLargeError):
        decompress(CompressionType.ZSTD, frame, len(PAYLOAD) - 1)


def test_concatenated_frames_are_all_read() -> None:
    compressor = zstandard.ZstdCompressor(write_content_size=True)
    two = compressor.compress(PAYLOAD) + compressor.compress(b"second frame")
    assert decompress(CompressionType.ZSTD, two, 1 << 20) == PAYLOAD + b"second frame"
    with pytest.raises(TelemetryTooLargeError):
        decompress(CompressionType.ZSTD, two, len(PAYLOAD) + 3)


def test_frame_without_declared_size() -> None:
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    assert zstandard.frame_content_size(frame) == -1
    assert decompress(CompressionType.ZSTD, frame, 1 << 20) == PAYLOAD


def test_understated_declared_size_is_corrupt_not_truncated() -> None:
    # Declare 100 bytes (single-segment header, 1-byte size field) for 1800 bytes of content.
    frame = bytearray(
        zstandard.ZstdCompressor(write_content_size=True).compress(PAYLOAD)
    )
    small = zstandard.ZstdCompressor(write_content_size=True).compress(PAYLOAD[:100])
    forged = small[:6] + bytes(frame[zstandard.frame_header_size(bytes(frame)) :])
    with pytest.raises((InvalidRecordError, TelemetryTooLargeError)):
        decompress(CompressionType.ZSTD, forged, 1 << 20)


def test_corrupt_body_after_a_valid_header() -> None:
    frame = bytearray(
        zstandard.ZstdCompressor(write_content_size=True).compress(PAYLOAD)
    )
    for i in range(8, len(frame)):
        frame[i] ^= 0x5A
    with pytest.raises(InvalidRecordError):
        decompress(CompressionType.ZSTD, bytes(frame), 1 << 20)


def test_each_thread_gets_its_own_context() -> None:
    frames = [
        zstandard.ZstdCompressor(write_content_size=True).compress(
            PAYLOAD + bytes([i]) * 50
        )
        for i in range(4)
    ]
    failures: list[str] = []

    def work(i: int) -> None:
        for _ in range(300):
            if (
                decompress(CompressionType.ZSTD, frames[i], 1 << 20)
                != PAYLOAD + bytes([i]) * 50
            ):
                failures.append(f"thread {i}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
