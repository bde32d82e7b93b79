"""The batch: records encoded for the active segment and not written yet, and the one
``writev`` that hands them to the kernel.

A record is three buffers (head, context JSON, payload; format.py); ``writev`` takes at most
IOV_MAX (1024 on Linux) buffers, so a batch holds at most 300 records and is written when
full. Once ``write_batch`` returns the bytes are the kernel's: they survive the process
being killed.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["MAX_RECORDS_PER_WRITEV", "EncodedBatch", "write_batch"]

MAX_RECORDS_PER_WRITEV: Final = 300


class EncodedBatch:
    """Encoded records not written yet, with the appended times of the first and last."""

    __slots__ = ("buffers", "byte_count", "first_ns", "last_ns", "records")

    def __init__(self) -> None:
        self.buffers: list[bytes] = []
        self.byte_count = 0
        self.records = 0
        self.first_ns = 0
        self.last_ns = 0

    def add(
        self, head: bytes, context_json: bytes, payload: bytes, now_ns: int
    ) -> bool:
        """Adds one record; True when the batch is full (write it before adding more)."""
        if not self.records:
            self.first_ns = now_ns
        self.buffers += (head, context_json, payload)
        self.byte_count += len(head) + len(context_json) + len(payload)
        self.records += 1
        self.last_ns = now_ns
        return self.records == MAX_RECORDS_PER_WRITEV

    def take(self) -> list[bytes]:
        """The buffers, leaving the batch empty (its counts are the caller's to read first)."""
        buffers = self.buffers
        self.buffers = []
        self.byte_count = 0
        self.records = 0
        return buffers


def write_batch(fd: int, buffers: list[bytes], total_bytes: int) -> None:
    """Writes every buffer with one ``writev`` (``fd`` is opened ``O_APPEND``); raises
    OSError when the file system refuses, after part of them may have been written."""
    written = os.writev(fd, buffers)
    if written < total_bytes:
        # Regular files write short only on trouble (disk full, quota); retrying the
        # rest either completes or raises the real error.
        data = memoryview(b"".join(buffers))
        while written < total_bytes:
            written += os.write(fd, data[written:])
