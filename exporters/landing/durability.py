"""When appended bytes reach the disk, and the fsync helpers the log uses.

Every policy hands a record to the kernel (one ``writev`` on an unbuffered descriptor)
before ``append`` returns, so an acknowledged push survives the collector process being
killed. The policies differ only in what survives losing the machine (power, kernel panic):

| policy     | fsync                                     | lost on power failure          |
|------------|-------------------------------------------|--------------------------------|
| always     | before append / append_many returns       | nothing acknowledged           |
| interval   | background thread every fsync_interval_ms | at most ~fsync_interval_ms     |
| never      | left to the kernel's writeback            | up to the kernel's dirty limit |
"""

from __future__ import annotations

import enum
import os
from pathlib import Path

__all__ = ["FsyncPolicy", "fsync_directory"]


class FsyncPolicy(enum.Enum):
    ALWAYS = "always"
    INTERVAL = "interval"
    NEVER = "never"

    @classmethod
    def parse(cls, value: str | FsyncPolicy) -> FsyncPolicy:
        if isinstance(value, FsyncPolicy):
            return value
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(policy.value for policy in cls)
            raise ValueError(
                f"fsync policy {value!r}: expected one of {choices}"
            ) from None


def fsync_directory(directory: Path) -> None:
    """Makes a created, renamed or deleted file name durable (the file's own fsync does not)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
