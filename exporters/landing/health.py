"""Disk health: whether the log can write, and finding out when it can again.

A full or failing disk (docs/landing-log.md, "Full or failing disk"): a failed write is cut
back to the last whole record, so the log stays readable, and the log reports itself
unwritable (``unwritable``) until a write succeeds again. Writes keep being tried: the next
flush with its own records, and the housekeeping thread's probe, every tick while
unwritable, which writes and removes a scratch file of the failed write's size. After a
failed fsync, or a failed cut-back, the log is ``broken``: it refuses appends until the
active segment is reopened as a restart would reopen it (the probe does that too).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Final

__all__ = ["PROBE_FILE_NAME", "DiskHealth"]

_log = logging.getLogger("exporters.landing")

# The scratch file a probe writes and removes (a dot name: no reader or lister sees it).
PROBE_FILE_NAME: Final = ".probe"
_PROBE_MIN_BYTES: Final = 4096
_PROBE_MAX_BYTES: Final = 8 << 20
_PROBE_CHUNK: Final = bytes(64 << 10)
# A full disk fails every push: each is counted, at most one line a second is logged.
_FAILURE_LOG_INTERVAL_S: Final = 1.0


class DiskHealth:
    """The log's write state and failure counts. Guarded by the log's lock."""

    __slots__ = (
        "broken",
        "directory",
        "export_failures",
        "last_failure_log_s",
        "probe_bytes",
        "unwritable",
        "write_failures",
    )

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        # Why the last write failed; None once a write (or a probe) succeeds. Readiness.
        self.unwritable: str | None = None
        # A failed write could not be undone, or an fsync failed: reopen before writing.
        self.broken: str | None = None
        # How many bytes a probe writes: the size of the write that failed.
        self.probe_bytes = _PROBE_MIN_BYTES
        self.write_failures = 0  # writes, fsyncs and rolls that failed since open
        self.export_failures = 0  # records refused (export() failures, failed flushes)
        self.last_failure_log_s = -1e9

    def write_failed(self, reason: str, attempted_bytes: int) -> None:
        self.unwritable = reason
        self.write_failures += 1
        self.probe_bytes = min(max(attempted_bytes, _PROBE_MIN_BYTES), _PROBE_MAX_BYTES)

    def fsync_failed(self, error: OSError) -> None:
        # After a failed fsync the kernel may have dropped the dirty pages, and a retry
        # would "succeed" without them (PostgreSQL's fsyncgate): stop acknowledging.
        self.broken = f"fsync failed: {error}"
        self.write_failed(self.broken, self.probe_bytes)
        _log.error("landing log %s: %s", self.directory, self.broken)

    def cut_back(self, fd: int, size: int, error: OSError) -> None:
        """A failed write may have left part of a record; cut it off so later records do
        not follow garbage. If even that fails the log is broken (recovery on open
        truncates the torn tail)."""
        try:
            os.ftruncate(fd, size)
        except OSError as truncate_error:
            self.broken = (
                f"write failed ({error}) and truncate failed ({truncate_error})"
            )
            _log.error("landing log %s: %s", self.directory, self.broken)

    def export_failed(self, records: int, now_s: float) -> int | None:
        """Counts refused records; the count so far when it is time for a log line."""
        self.export_failures += records
        if now_s - self.last_failure_log_s < _FAILURE_LOG_INTERVAL_S:
            return None
        self.last_failure_log_s = now_s
        return self.export_failures

    def write_probe_file(self, size: int, fsync: bool) -> None:
        """Writes ``size`` bytes to a scratch file (fsynced when ``fsync``) and removes it:
        raises OSError when the file system cannot take them."""
        path = self.directory / PROBE_FILE_NAME
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            written = 0
            while written < size:
                written += os.write(fd, _PROBE_CHUNK[: size - written])
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(path)
