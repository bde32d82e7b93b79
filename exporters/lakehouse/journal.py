"""The ingest's exactly-once journal: batch plans and commits, written atomically.

    <lake>/_ingest/<database>/offsets/<batch_id>.json   the plan: per landing dir, [from, to)
    <lake>/_ingest/<database>/commits/<batch_id>.json   written after the batch's data is in
    <lake>/_ingest/<database>/lock                      one writer at a time (flock)

The same two-log scheme as a Structured Streaming checkpoint (``offsets/`` then
``commits/``): a plan without a commit is replayed exactly, with the same offsets and
the same batch id, before anything new is read.  Files are JSON, written to a temp
name, fsynced and renamed, so a reader sees a whole file or none.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import os
import re
from pathlib import Path
from typing import Any, Self

__all__ = [
    "BatchCommit",
    "BatchPlan",
    "IngestJournal",
    "LakehouseBusy",
    "SourceRange",
    "WriterLock",
    "atomic_write_json",
]

_BATCH_FILE = re.compile(r"^(\d+)\.json$")


def atomic_write_json(path: Path, value: Any) -> None:
    """Write JSON so that ``path`` holds either the old content or all of the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    data = json.dumps(value, indent=2, sort_keys=True).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself must survive a crash
    finally:
        os.close(dir_fd)


@dataclasses.dataclass(frozen=True, slots=True)
class SourceRange:
    """The records of one landing directory in a batch: offsets ``[from_offset, to_offset)``."""

    name: str  # the landing directory's name, e.g. "node-1"; rows carry it as landing_node
    directory: str
    from_offset: int
    to_offset: int

    @property
    def empty(self) -> bool:
        return self.to_offset <= self.from_offset


@dataclasses.dataclass(frozen=True, slots=True)
class BatchPlan:
    batch_id: int
    sources: tuple[SourceRange, ...]
    created_time_unix_ms: int

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "created_time_unix_ms": self.created_time_unix_ms,
            "sources": [dataclasses.asdict(s) for s in self.sources],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchPlan:
        return cls(
            batch_id=int(data["batch_id"]),
            created_time_unix_ms=int(data["created_time_unix_ms"]),
            sources=tuple(SourceRange(**s) for s in data["sources"]),
        )

    def next_offsets(self) -> dict[str, SourceRange]:
        """Where the following batch starts, per source name (an empty range at ``to``)."""
        return {
            s.name: SourceRange(s.name, s.directory, s.to_offset, s.to_offset)
            for s in self.sources
        }


@dataclasses.dataclass(frozen=True, slots=True)
class BatchCommit:
    batch_id: int
    records: int  # landing records (pushes) read
    rows: dict[str, int]  # rows written per table
    committed_time_unix_ms: int
    # Records that are not OTLP MetricsData: {"source", "offset", "error"}; kept here
    # so they are accounted for instead of failing every retry.
    rejected: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "records": self.records,
            "rows": self.rows,
            "committed_time_unix_ms": self.committed_time_unix_ms,
            "rejected": list(self.rejected),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchCommit:
        return cls(
            batch_id=int(data["batch_id"]),
            records=int(data["records"]),
            rows={str(k): int(v) for k, v in data["rows"].items()},
            committed_time_unix_ms=int(data["committed_time_unix_ms"]),
            rejected=tuple(data.get("rejected", ())),
        )


class IngestJournal:
    """Plans and commits under ``<lake>/_ingest``."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.offsets_dir = self.state_dir / "offsets"
        self.commits_dir = self.state_dir / "commits"

    @staticmethod
    def _ids(directory: Path) -> list[int]:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for n in names if (m := _BATCH_FILE.match(n)))

    def plan_ids(self) -> list[int]:
        return self._ids(self.offsets_dir)

    def latest_plan(self) -> BatchPlan | None:
        ids = self.plan_ids()
        return self.read_plan(ids[-1]) if ids else None

    def read_plan(self, batch_id: int) -> BatchPlan:
        return BatchPlan.from_json(
            json.loads((self.offsets_dir / f"{batch_id}.json").read_text())
        )

    def read_commit(self, batch_id: int) -> BatchCommit | None:
        try:
            text = (self.commits_dir / f"{batch_id}.json").read_text()
        except FileNotFoundError:
            return None
        return BatchCommit.from_json(json.loads(text))

    def is_committed(self, batch_id: int) -> bool:
        return (self.commits_dir / f"{batch_id}.json").exists()

    def write_plan(self, plan: BatchPlan) -> None:
        atomic_write_json(self.offsets_dir / f"{plan.batch_id}.json", plan.to_json())

    def write_commit(self, commit: BatchCommit) -> None:
        atomic_write_json(
            self.commits_dir / f"{commit.batch_id}.json", commit.to_json()
        )

    def prune(self, keep: int) -> None:
        """Delete all but the newest ``keep`` committed plans (the latest one is the
        state; older ones are history for debugging)."""
        committed = [
            i
            for i in self._ids(self.commits_dir)
            if (self.offsets_dir / f"{i}.json").exists()
        ]
        for batch_id in committed[:-keep] if keep > 0 else committed:
            # The plan before its commit: a plan left without its commit would be
            # replayed (harmless, as only older batches are pruned, but confusing).
            for path in (
                self.offsets_dir / f"{batch_id}.json",
                self.commits_dir / f"{batch_id}.json",
            ):
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass


class LakehouseBusy(RuntimeError):
    """Another process holds the lakehouse writer lock."""


class WriterLock:
    """``flock`` on ``<lake>/_ingest/<database>/lock``: one writer (ingest or maintenance) at a time.

    Held for the life of ``ktc ingest``; ``ktc lake compact`` takes it too, so a
    compaction never rewrites a partition the ingest is writing.  flock is honoured on
    local filesystems and NFSv4; on storage without working locks run a single writer.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / "lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise LakehouseBusy(
                    f"another ingest or maintenance process holds {self.path}"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
