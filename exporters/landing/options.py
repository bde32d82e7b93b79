"""What a landing log can be told, with the one set of defaults (the collector's: the
``landing`` section of its config is exactly these keys).

| option | default | meaning |
|---|---|---|
| ``segment_max_bytes`` | 64 MiB | roll to a new segment past this size |
| ``segment_max_age_ms`` | 10 s | roll a segment this old (readers see sealed segments whole) |
| ``fsync`` | ``interval`` | ``always`` (before each answer), ``interval``, ``never`` |
| ``fsync_interval_ms`` | 1 s | the ``interval`` policy's period (and the housekeeper's) |
| ``retention_ms`` | 7 days | delete sealed segments older than this (None or < 0: keep) |
| ``retention_bytes`` | None | keep at most this many bytes of sealed segments |
| ``retention_respect_consumers`` | true | never delete what a registered consumer has not read |
| ``retention_required_consumers`` | () | consumers protected even before their first commit |
| ``retention_check_interval_ms`` | 5 min | how often the housekeeper applies retention |
| ``max_record_bytes`` | 16 MiB | the largest record |
| ``group_commit`` | false | with ``fsync: always``: one fsync for the records of many answers |
| ``write_behind`` | true | ``export`` stages; the owner's ``flush`` writes a loop turn's pushes in one ``writev`` before their answers |
| ``write_behind_max_records`` | 32 | staged pushes after which the owner flushes at once |
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from exporters.landing.durability import FsyncPolicy
from exporters.landing.format import DEFAULT_MAX_RECORD_BYTES, SEGMENT_HEADER_BYTES

__all__ = ["DAY_MS", "MIB", "LandingOptions"]

MIB: Final = 1024 * 1024
DAY_MS: Final = 24 * 60 * 60 * 1000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LandingOptions:
    segment_max_bytes: int = 64 * MIB
    segment_max_age_ms: int = 10_000
    fsync: FsyncPolicy | str = FsyncPolicy.INTERVAL  # a string is parsed
    fsync_interval_ms: int = 1000
    retention_ms: int | None = 7 * DAY_MS
    retention_bytes: int | None = None
    retention_respect_consumers: bool = True
    retention_required_consumers: tuple[str, ...] = ()
    retention_check_interval_ms: int = 300_000
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    group_commit: bool = False
    write_behind: bool = True
    write_behind_max_records: int = 32

    def __post_init__(self) -> None:
        # Accept the config file's spelling (strings, lists) and keep the canonical types.
        object.__setattr__(self, "fsync", FsyncPolicy.parse(self.fsync))
        object.__setattr__(
            self,
            "retention_required_consumers",
            tuple(self.retention_required_consumers),
        )
        if self.segment_max_bytes <= SEGMENT_HEADER_BYTES:
            raise ValueError(f"segment_max_bytes must exceed {SEGMENT_HEADER_BYTES}")
        if (
            self.segment_max_age_ms <= 0
            or self.fsync_interval_ms <= 0
            or self.retention_check_interval_ms <= 0
        ):
            raise ValueError(
                "segment_max_age_ms, fsync_interval_ms and "
                "retention_check_interval_ms must be positive"
            )
        if not 0 < self.max_record_bytes <= 2**31:
            raise ValueError("max_record_bytes must be in 1..2**31")
        if self.write_behind_max_records < 1:
            raise ValueError("write_behind_max_records must be at least 1")
        if self.group_commit and self.fsync is not FsyncPolicy.ALWAYS:
            raise ValueError("group_commit only applies to fsync='always'")

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> LandingOptions:
        """From the config's ``landing`` map; an unknown key is a ValueError naming it."""
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(
                f"landing: unknown option(s) {', '.join(unknown)} "
                f"(known: {', '.join(sorted(known))})"
            )
        return cls(**options)

    def replace(self, **changes: Any) -> LandingOptions:
        return dataclasses.replace(self, **changes)

    def with_required_consumer(self, consumer: str) -> LandingOptions:
        """These options, with retention also protecting ``consumer`` before its first
        commit (a consumer that never committed protects nothing otherwise)."""
        if consumer in self.retention_required_consumers:
            return self
        return self.replace(
            retention_required_consumers=(*self.retention_required_consumers, consumer)
        )
