"""Settings of the serving process itself (not of any one component), applied by ``ktc
serve`` once the server is up.

| setting | value | why |
|---|---|---|
| cyclic GC thresholds | (50,000, 20, 100) | full collections walk every cached client instance (16,384 by default); the push path allocates many short-lived, acyclic objects that would trigger them often (measured: worst 20-push batch 50 ms -> 16 ms with 20,000 instances cached) |
| glibc ``M_TRIM_THRESHOLD`` | 64 MiB | glibc shrinks the heap whenever its free top exceeds 128 KiB; a loop turn's worth of payloads is freed at once after the landing write, so the heap shrank and grew back hundreds of times a second, each time faulting its pages in again (measured: about one page fault per push) |
| glibc ``M_TOP_PAD`` | 16 MiB | grow the heap in large steps for the same reason |

The glibc settings are skipped off glibc and when the operator set them through glibc's own
environment variables (``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_``).  They bound
memory the process keeps, not memory it uses: at most 64 MiB of freed heap stays mapped.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
from typing import Final

__all__ = [
    "GC_THRESHOLDS",
    "MALLOC_TOP_PAD",
    "MALLOC_TRIM_THRESHOLD",
    "tune_serving_process",
]

log = logging.getLogger(__name__)

GC_THRESHOLDS: Final = (50_000, 20, 100)
MALLOC_TRIM_THRESHOLD: Final = 64 * 1024 * 1024
MALLOC_TOP_PAD: Final = 16 * 1024 * 1024

# mallopt parameter numbers (glibc's malloc.h).
_M_TRIM_THRESHOLD: Final = -1
_M_TOP_PAD: Final = -2

# (mallopt parameter, value, the environment variable that already set it)
_MALLOC_SETTINGS: Final = (
    (_M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD, "MALLOC_TRIM_THRESHOLD_"),
    (_M_TOP_PAD, MALLOC_TOP_PAD, "MALLOC_TOP_PAD_"),
)


def tune_serving_process() -> dict[str, object]:
    """Apply the table above; returns what was applied (for the log and tests)."""
    gc.set_threshold(*GC_THRESHOLDS)
    applied: dict[str, object] = {"gc_thresholds": GC_THRESHOLDS}
    mallopt = _glibc_mallopt()
    if mallopt is None:
        return applied
    for parameter, value, environment_variable in _MALLOC_SETTINGS:
        if environment_variable in os.environ:
            continue  # the operator's choice, already applied by glibc at start
        if mallopt(parameter, value) == 1:
            applied[environment_variable.rstrip("_").lower()] = value
        else:
            log.warning("mallopt(%d, %d) was refused", parameter, value)
    return applied


def _glibc_mallopt() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it (musl has no mallopt knobs)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt
