"""``ThrottledChannelQueue``: channels held muted until their throttle time has passed.

Follows ``server/.../quota/ThrottledChannel.java`` and the ``DelayQueue`` + reaper thread of
``ClientQuotaManager``, sans I/O: the owner adds a channel when it mutes it, asks for the
next deadline to schedule one timer, and at that time pops the expired channels and unmutes
them.  One queue can serve every quota type (one reaper, as Kafka has one per type); it
keeps Kafka's per-type ``queue-size`` count.

Entries expiring at the same instant come out in insertion order.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["ThrottledChannel", "ThrottledChannelQueue"]

ChannelT = TypeVar("ChannelT")


@dataclass(frozen=True, slots=True, order=True)
class ThrottledChannel(Generic[ChannelT]):
    end_time_ms: int
    sequence: int
    channel: ChannelT = field(compare=False)
    throttle_time_ms: int = field(compare=False)
    quota_type: str = field(compare=False, default="")


class ThrottledChannelQueue(Generic[ChannelT]):
    __slots__ = ("_heap", "_sequence", "_size_by_type")

    def __init__(self) -> None:
        self._heap: list[ThrottledChannel[ChannelT]] = []
        self._sequence = itertools.count()
        self._size_by_type: Counter[str] = Counter()

    def add(
        self,
        channel: ChannelT,
        throttle_time_ms: int,
        now_ms: int,
        quota_type: str = "",
    ) -> ThrottledChannel[ChannelT]:
        """Hold ``channel`` for ``throttle_time_ms`` from ``now_ms`` (Kafka: startThrottling)."""
        if throttle_time_ms < 0:
            raise ValueError(
                f"throttle time must not be negative, got {throttle_time_ms}"
            )
        entry = ThrottledChannel(
            now_ms + throttle_time_ms,
            next(self._sequence),
            channel,
            throttle_time_ms,
            quota_type,
        )
        heapq.heappush(self._heap, entry)
        self._size_by_type[quota_type] += 1
        return entry

    def pop_expired(self, now_ms: int) -> list[ThrottledChannel[ChannelT]]:
        """Remove and return every entry whose end time is at or before ``now_ms``."""
        expired: list[ThrottledChannel[ChannelT]] = []
        heap = self._heap
        while heap and heap[0].end_time_ms <= now_ms:
            entry = heapq.heappop(heap)
            self._size_by_type[entry.quota_type] -= 1
            expired.append(entry)
        return expired

    def next_deadline_ms(self) -> int | None:
        """When the earliest entry expires, or None when nothing is throttled."""
        return self._heap[0].end_time_ms if self._heap else None

    def size(self, quota_type: str | None = None) -> int:
        """Entries held, for one quota type or all (Kafka's ``queue-size`` metric)."""
        if quota_type is None:
            return len(self._heap)
        return self._size_by_type[quota_type]

    def __len__(self) -> int:
        return len(self._heap)
