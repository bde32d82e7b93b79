"""Crash safety with real processes: a writer is SIGKILLed at random moments; every
offset it acknowledged must be in the log, intact, and the log must carry on."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from exporters.landing import ConsumerPositions, LandingLog, LandingReader

REPO_ROOT = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from exporters.context import TelemetryContext
    from exporters.landing import LandingLog, LandingOptions

    directory, fsync = Path(sys.argv[1]), sys.argv[2]
    log = LandingLog(directory, LandingOptions(fsync=fsync, segment_max_bytes=256 * 1024))
    print("ready", log.next_offset, flush=True)
    while True:
        offset = log.next_offset
        context = TelemetryContext(
            "AAAAAAAAAAAAAAAAAAAAAA", f"client-{offset}", "confluent-kafka-python", "2.16.1",
            "127.0.0.1", 40000, "PLAINTEXT", "PLAINTEXT", "User:ANONYMOUS", 1000, False,
            offset, 1, "cluster", 7, 4)
        size = (offset * 7919) % 60_000
        acked = log.append(context, (offset % 251).to_bytes(1, "big") * size)
        print(acked, flush=True)
    """
)


def expected_payload(offset: int) -> bytes:
    return (offset % 251).to_bytes(1, "big") * ((offset * 7919) % 60_000)


def run_and_kill(directory: Path, fsync: str, rng: random.Random) -> list[int]:
    """Starts a writer, lets it append for a random while, SIGKILLs it; returns the
    offsets it acknowledged (printed after append returned)."""
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(directory), fsync],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        cwd=REPO_ROOT,
    )
    assert child.stdout is not None
    ready = child.stdout.readline().split()
    assert ready[:1] == [b"ready"], ready
    acked: list[int] = []
    wanted = rng.randrange(1, 400)
    while len(acked) < wanted:
        line = child.stdout.readline()
        assert line, "writer died on its own"
        acked.append(int(line))
    time.sleep(rng.random() * 0.05)  # a random moment, not a record boundary
    child.send_signal(signal.SIGKILL)
    rest = child.stdout.read()
    child.wait()
    acked += [int(line) for line in rest.split()]
    return acked


@pytest.mark.parametrize("fsync", ["never", "interval"])
def test_every_acknowledged_append_survives_sigkill(tmp_path: Path, fsync: str) -> None:
    rng = random.Random(f"landing-crash-{fsync}")
    all_acked: list[int] = []
    for _ in range(4):
        acked = run_and_kill(tmp_path, fsync, rng)
        assert acked, "nothing was acknowledged"
        all_acked += acked
        # What a fresh reader sees before any writer recovers the directory.
        records = {r.offset: r for r in LandingReader(tmp_path).read(0)}
        for offset in all_acked:
            assert offset in records, f"acknowledged offset {offset} lost"
            assert records[offset].payload == expected_payload(offset)
            assert records[offset].context.client_id == f"client-{offset}"
        # Offsets are dense: at most one unacknowledged record (the one in flight) after.
        assert sorted(records) == list(range(len(records)))
        assert len(records) - (max(all_acked) + 1) in (0, 1)
    assert len(LandingReader(tmp_path).segments()) > 1
    with LandingLog(tmp_path, housekeeping=False) as log:
        assert log.next_offset >= max(all_acked) + 1


POSITIONS_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from exporters.landing import ConsumerPositions
    positions = ConsumerPositions(Path(sys.argv[1]), "lakehouse-ingest")
    offset = 0
    while True:
        offset += 1
        positions.commit(offset)
        print(offset, flush=True)
    """
)


def test_a_killed_commit_leaves_the_old_or_the_new_position(tmp_path: Path) -> None:
    rng = random.Random("positions")
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", POSITIONS_WRITER, str(tmp_path)],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        assert child.stdout is not None
        last = 0
        for _ in range(rng.randrange(1, 40)):
            last = int(child.stdout.readline())
        child.send_signal(signal.SIGKILL)
        printed = [int(line) for line in child.stdout.read().split()]
        child.wait()
        last = printed[-1] if printed else last
        loaded = ConsumerPositions(tmp_path, "lakehouse-ingest").load()
        assert loaded in (
            last,
            last + 1,
        )  # the commit in flight may or may not have landed
        document = json.loads(
            (tmp_path / "consumers" / "lakehouse-ingest.json").read_bytes()
        )
        assert document["next_offset"] == loaded
