"""Which sealed segments retention deletes: a pure function of sizes, times and offsets.

Follows Kafka's ``UnifiedLog.deleteOldSegments`` (storage/.../UnifiedLog.java): only sealed
segments, oldest first, and only a prefix (the first segment that must stay stops the
walk, so the log never has holes). A segment goes when it is too old OR the log is too
big, and, with ``retention.respect.consumers``, only when every offset in it is below the
lowest committed consumer position.

Worked example, retention_bytes = 100: segments of 40, 40, 40 and an active 30 make 150.
The excess is 50; the first segment (40) fits in it (50 - 40 >= 0) and goes, leaving 10;
the second (40) does not (10 - 40 < 0) and stays. Total after: 110 (Kafka deletes only
whole segments and never goes below the limit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from exporters.landing.layout import SegmentInfo

__all__ = ["RetentionPolicy", "segments_to_delete"]


@dataclasses.dataclass(frozen=True, slots=True)
class RetentionPolicy:
    retention_ms: int | None  # None: no time limit
    retention_bytes: int | None  # None: no size limit
    respect_consumers: bool = True


def segments_to_delete(
    segments: Sequence[SegmentInfo],
    policy: RetentionPolicy,
    now_ms: int,
    min_committed_offset: int | None,
) -> list[SegmentInfo]:
    """``segments`` is the whole log in base-offset order (the active one last)."""
    total_bytes = sum(s.size_bytes for s in segments)
    excess_bytes = (
        total_bytes - policy.retention_bytes
        if policy.retention_bytes is not None
        else None
    )
    doomed: list[SegmentInfo] = []
    for segment in segments:
        if not segment.sealed or segment.next_base_offset is None:
            break
        age_ms = now_ms - segment.modified_time_unix_nano // 1_000_000
        too_old = policy.retention_ms is not None and age_ms > policy.retention_ms
        too_big = excess_bytes is not None and excess_bytes - segment.size_bytes >= 0
        still_needed = (
            policy.respect_consumers
            and min_committed_offset is not None
            and segment.next_base_offset > min_committed_offset
        )
        if not (too_old or too_big) or still_needed:
            break
        doomed.append(segment)
        if excess_bytes is not None:
            excess_bytes -= segment.size_bytes
    return doomed
