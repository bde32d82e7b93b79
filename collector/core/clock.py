"""The server's millisecond clock: monotonic, read on every request (so compiled, and a
bound builtin rather than a module attribute looked up per call)."""

from __future__ import annotations

import time
from typing import Final

__all__ = ["monotonic_ms"]

_monotonic_ns: Final = time.monotonic_ns


def monotonic_ms() -> int:
    return _monotonic_ns() // 1_000_000
