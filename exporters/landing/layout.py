"""Where the landing log lives on disk.

    <data-dir>/landing/node-<node.id>/
        00000000000000000000.log        segments, named by base offset (20 digits, as Kafka)
        00000000000000001234.log        the newest one is the active segment
        consumers/<name>.json           committed positions (ConsumerPositions)
        .lock                           held by the one writer (flock)

Segments are created as ``<name>.log.tmp`` and renamed once their header is written, so a
``.log`` file always starts with a whole header.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import os
import re
from pathlib import Path
from typing import Final

from exporters.landing.errors import LandingLogLocked

__all__ = [
    "SEGMENT_SUFFIX",
    "TEMP_SUFFIX",
    "SegmentInfo",
    "landing_directory",
    "list_segments",
    "lock_directory",
    "node_directories",
    "segment_path",
]

SEGMENT_SUFFIX: Final = ".log"
TEMP_SUFFIX: Final = ".tmp"
_SEGMENT_NAME: Final = re.compile(r"^(\d{20})\.log$")
_NODE_DIR_NAME: Final = re.compile(r"^node-(-?\d+)$")
_LOCK_FILE_NAME: Final = ".lock"


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    path: Path
    sealed: bool  # every segment but the newest: complete, never written again
    size_bytes: int
    modified_time_unix_nano: (
        int  # for a sealed segment: appended time of its last record
    )
    # Offsets in this segment are below this: the next segment's base offset (None for
    # the active segment, whose end moves).
    next_base_offset: int | None


def landing_directory(data_dir: Path, node_id: int) -> Path:
    return Path(data_dir) / "landing" / f"node-{node_id}"


def node_directories(data_dir: Path) -> list[Path]:
    """Every node's landing directory under a data dir, by node id."""
    root = Path(data_dir) / "landing"
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _NODE_DIR_NAME.match(child.name)
        if match and child.is_dir():
            found.append((int(match.group(1)), child))
    return [path for _, path in sorted(found)]


def segment_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{SEGMENT_SUFFIX}"


def list_segments(directory: Path) -> list[SegmentInfo]:
    """Segments ordered by base offset; files that vanish while listing are left out
    (retention may delete a segment at any moment)."""
    bases: list[int] = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    for name in names:
        match = _SEGMENT_NAME.match(name)
        if match:
            bases.append(int(match.group(1)))
    bases.sort()
    infos: list[SegmentInfo] = []
    for index, base in enumerate(bases):
        path = segment_path(directory, base)
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        is_newest = index == len(bases) - 1
        infos.append(
            SegmentInfo(
                base_offset=base,
                path=path,
                sealed=not is_newest,
                size_bytes=stat.st_size,
                modified_time_unix_nano=stat.st_mtime_ns,
                next_base_offset=None if is_newest else bases[index + 1],
            )
        )
    return infos


def lock_directory(directory: Path) -> int:
    """Takes the writer's lock on ``directory`` (an flock on ``.lock``) and returns its
    descriptor (closing it releases the lock); LandingLogLocked when another process
    holds it."""
    fd = os.open(
        directory / _LOCK_FILE_NAME,
        os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
        0o644,
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        os.close(fd)
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise LandingLogLocked(
                f"landing directory {directory} is already open for writing "
                "(another collector process with the same node.id?)"
            ) from error
        raise
    return fd
