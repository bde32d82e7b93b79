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
from pathlib import Path
from typing import Final

__all__ = ["SPARE_FILE_NAME", "reserve", "spare_room_left"]

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
