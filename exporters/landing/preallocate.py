"""Disk blocks reserved for the landing log's appends before they are written
(``fallocate`` with ``FALLOC_FL_KEEP_SIZE``), so an append only copies into the page cache.

Why: on ext4 an append that starts a new block reserves it (delayed allocation) under the
inode's ``i_data_sem``, which writeback holds while it allocates blocks and waits for the
journal: at each fsync round (every second by default) and whenever the kernel's flusher
runs.  The event loop writes the log, so it waited there: off-CPU stacks of the serving
thread at 20,000 pushes/s showed it in ``ext4_da_get_block_prep`` ->
``rwsem_down_write_slowpath`` for 12-35 ms at a time, several times in 5 s, on a machine
with other jobs writing.  Reserving blocks costs block-bitmap reads of its own (the same
stacks, now under ``ext4_fallocate``), so the serving thread does not reserve: a thread of
the log's own (``landing-spare``) keeps a spare file with a whole segment reserved, and a
roll renames it into place and wakes that thread for the next one.  Appends into reserved blocks are found in the extent cache and take no lock.

| case | what happens |
|---|---|
| ``fallocate`` missing or refused (``EOPNOTSUPP``, ``ENOSYS``: not Linux, some file systems) | no spare; segments are created and written as without reservation |
| the file system has less than two segments' room besides the spare | no spare (the room is the records'); tried again at the next housekeeping tick |
| reserving fails (``ENOSPC``, ``EIO``) or a write fails | the spare is removed, giving its blocks back |
| the segment is sealed or the log closed | the blocks past its end are given back (``ftruncate`` to its size); the spare is removed at close |

The files' sizes stay those of their records (``KEEP_SIZE``), so readers, recovery and
retention see the log as without reservation.  Disk held beyond the records: at most one
segment (the spare) plus the unwritten rest of the active segment.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import threading
from pathlib import Path
from typing import Final

__all__ = ["SPARE_FILE_NAME", "BlockReservations", "reserve", "spare_room_left"]

# Not a segment's name, and not a ".tmp" one (recovery deletes those as interrupted rolls).
SPARE_FILE_NAME: Final = ".spare"

_FALLOC_FL_KEEP_SIZE: Final = 1
_UNSUPPORTED: Final = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


def _load_fallocate() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        function = libc.fallocate64
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    function.restype = ctypes.c_int
    return function


_fallocate = _load_fallocate()


def reserve(fd: int, offset: int, length: int) -> bool | None:
    """Reserves ``length`` bytes of disk from ``offset`` without changing the file's size
    (ctypes releases the GIL for the call): True when reserved, False when not this time,
    None when this file system (or system) cannot reserve at all."""
    if _fallocate is None:
        return None
    if _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return True
    # No room, or trouble the next append reports itself (EIO): nothing reserved this time.
    return None if ctypes.get_errno() in _UNSUPPORTED else False


def spare_room_left(directory: Path, size: int) -> bool:
    """Whether reserving ``size`` bytes in ``directory``'s file system leaves two times
    that for the records written meanwhile."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize >= 3 * size


class BlockReservations:
    """The log's reserved blocks: the spare segment (made by its own thread, taken by a
    roll) and whether this file system reserves at all. Fields guarded by the log's
    ``lock``."""

    __slots__ = (
        "closed",
        "directory",
        "lock",
        "segment_bytes",
        "spare",
        "supported",
        "wanted",
    )

    def __init__(
        self, directory: Path, segment_bytes: int, lock: threading.Lock
    ) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.lock = lock
        self.supported = True  # False once fallocate turned out unsupported here
        self.spare: Path | None = None
        self.closed = False
        # Set when a spare is wanted (at start, after a roll took it, at a housekeeping
        # tick without one); the thread that makes spares waits for it.
        self.wanted = threading.Event()

    def reserve_rest(self, fd: int, size: int) -> bool:
        """Reserves a segment's blocks from ``size`` to its maximum size (at open, off the
        serving path); True when some are reserved."""
        room = self.segment_bytes - size
        if self.supported and room > 0 and spare_room_left(self.directory, room):
            reserved = reserve(fd, size, room)
            self.supported = reserved is not None
            return bool(reserved)
        return False

    def make_spare(self) -> None:
        """An empty file with a whole segment's blocks reserved, for the next roll, unless
        there is one, reserving is unsupported or the disk is short of room. Raises
        OSError when the file cannot be made."""
        with self.lock:
            if self.spare is not None or not self.supported or self.closed:
                return
        path = self.directory / SPARE_FILE_NAME
        if not spare_room_left(self.directory, self.segment_bytes):
            return
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            reserved = reserve(fd, 0, self.segment_bytes)
        finally:
            os.close(fd)
        with self.lock:
            if reserved and not self.closed:
                self.spare = path
                return
            if reserved is None:
                self.supported = False
        path.unlink(missing_ok=True)  # part of it may be reserved: give it back

    def take_spare_locked(self) -> Path | None:
        """The spare for a new segment (None when there is none), asking for the next."""
        spare, self.spare = self.spare, None
        self.wanted.set()  # the next one, off the caller's thread
        return spare

    def drop_spare_locked(self) -> None:
        """Gives the spare's blocks back (a full disk needs them for records; closing)."""
        spare, self.spare = self.spare, None
        if spare is not None:
            spare.unlink(missing_ok=True)
