"""A large batch is flattened on several processes: the same rows, in the same order, as
one process makes; the workers do the work, ignore Ctrl-C and die with their parent."""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporters.lakehouse.flatten_pool import (
    Flattener,
    SourceRecord,
    available_cores,
    flatten_records,
)
from exporters.landing import LandingRecord
from tests.lakehouse.lakehouse_otlp import (
    CONTEXTS,
    make_context,
    metrics_data,
    sample_metrics_data,
)

REPO = Path(__file__).resolve().parents[2]
NOT_OTLP = b"\xff"  # a field tag cut short: protobuf's DecodeError
SLICE = 5


@pytest.fixture(scope="module")
def three_processes() -> Iterator[Flattener]:
    """Three processes, slicing batches of 15 records or more (fast to compare)."""
    flattener = Flattener(3, min_records_per_slice=SLICE)
    flattener.start()
    yield flattener
    flattener.close()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(pushes=st.lists(st.tuples(metrics_data(), CONTEXTS), min_size=1, max_size=6))
def test_several_processes_give_the_rows_one_process_gives(
    three_processes: Flattener, pushes: list
) -> None:
    count = 3 * SLICE + 2  # three slices, of unequal length
    records = [
        SourceRecord(
            f"node-{index % 2}",
            LandingRecord(
                index,
                pushes[index % len(pushes)][1],
                pushes[index % len(pushes)][0].SerializeToString(),
                index * 1_000,
            ),
        )
        for index in range(count)
    ]
    for index in (3, count // 2, count - 2):  # one rejected record in each slice
        source, record = records[index]
        records[index] = SourceRecord(
            source, dataclasses.replace(record, payload=NOT_OTLP)
        )
    alone = flatten_records(records)
    shared = three_processes.flatten(records)
    assert shared.processes == 3
    assert [(r["source"], r["offset"]) for r in shared.rejected] == [
        ("node-1", 3),
        (f"node-{count // 2 % 2}", count // 2),
        (f"node-{(count - 2) % 2}", count - 2),
    ]
    assert shared.rejected == alone.rejected
    assert list(shared.tables) == list(alone.tables)
    for kind, table in alone.tables.items():
        assert shared.tables[kind].schema == table.schema
        assert _comparable(shared.tables[kind].to_pylist()) == _comparable(
            table.to_pylist()
        ), kind


def _comparable(value: Any) -> Any:
    """``value`` with NaN (which the points may hold, and which equals nothing) spelt out."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {key: _comparable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_comparable(item) for item in value]
    return value


def _sample_records(count: int) -> list[SourceRecord]:
    return [
        SourceRecord(
            "node-1",
            LandingRecord(
                i, make_context(), sample_metrics_data(i).SerializeToString(), 0
            ),
        )
        for i in range(count)
    ]


def test_a_small_batch_stays_in_this_process(three_processes: Flattener) -> None:
    records = _sample_records(2 * SLICE - 1)
    flattened = three_processes.flatten(records)
    assert flattened.processes == 1
    assert flattened.tables["pushes"].num_rows == len(records)


def test_a_dead_worker_costs_one_batch_its_speed_not_its_rows() -> None:
    records = _sample_records(2 * SLICE)
    expected = _comparable(flatten_records(records).tables["gauge"].to_pylist())
    flattener = Flattener(2, min_records_per_slice=SLICE)
    before = set(multiprocessing.active_children())
    flattener.start()
    try:
        (worker,) = set(multiprocessing.active_children()) - before
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)  # as the kernel's OOM killer would
        worker.join(timeout=30)
        flattened = flattener.flatten(records)
        assert flattened.processes == 1  # this batch: here
        assert _comparable(flattened.tables["gauge"].to_pylist()) == expected
        again = flattener.flatten(records)
        assert again.processes == 2  # the next: on a new worker
        assert _comparable(again.tables["gauge"].to_pylist()) == expected
    finally:
        flattener.close()


def test_a_telemetry_context_survives_pickling() -> None:
    """Compiled by mypyc, the class needs its own __reduce__ to cross to a worker."""
    context = make_context(upstream_cluster_id="upstream", upstream_node_id=2)
    assert pickle.loads(pickle.dumps(context)) == context


# Starts a three-process flattener (two workers) and waits for ever.
WORKERS_THEN_WAIT = """
import faulthandler, multiprocessing, signal, threading
faulthandler.register(signal.SIGUSR1)  # where it waits, should it hang
from exporters.lakehouse.flatten_pool import Flattener
flattener = Flattener(3)  # held: a collected pool shuts its workers down
flattener.start()
print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
threading.Event().wait()
"""


def _start_with_workers() -> tuple[subprocess.Popen[str], list[psutil.Process]]:
    parent = subprocess.Popen(
        [sys.executable, "-c", WORKERS_THEN_WAIT],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert parent.stdout is not None
    line = parent.stdout.readline()
    assert line, parent.stderr.read() if parent.stderr else ""
    return parent, [psutil.Process(int(pid)) for pid in line.split()]


def _exited(parent: subprocess.Popen[str]) -> None:
    """Waits for ``parent`` to exit; if it hangs, fails with where its threads wait."""
    try:
        parent.wait(timeout=60)
    except subprocess.TimeoutExpired:
        parent.send_signal(signal.SIGUSR1)
        try:  # the dump is written by the signal handler; it does not end the parent
            parent.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(parent.pid, signal.SIGKILL)
        _, err = parent.communicate()
        pytest.fail(f"the parent did not exit:\n{err}")


def test_the_workers_exit_when_their_parent_is_killed() -> None:
    parent, workers = _start_with_workers()
    assert len(workers) == 2
    parent.kill()
    parent.wait(timeout=30)
    gone, alive = psutil.wait_procs(workers, timeout=30)
    assert alive == [], alive


def test_the_workers_ignore_ctrl_c() -> None:
    """The terminal sends Ctrl-C to the whole process group: the parent decides."""
    parent, workers = _start_with_workers()
    try:
        os.killpg(parent.pid, signal.SIGINT)
        _exited(parent)  # the parent's own KeyboardInterrupt ends it
        gone, alive = psutil.wait_procs(workers, timeout=60)
        assert alive == [], alive
        err = parent.stderr.read() if parent.stderr else ""
        assert err.count("KeyboardInterrupt") == 1, err  # the parent's, no worker's
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("cpu_max", "cap"),
    [
        ("max 100000\n", None),  # no quota: the affinity
        ("150000 100000\n", 2),  # 1.5 CPUs: two processes
        ("50000 100000\n", 1),
        ("not a quota\n", None),
    ],
)
def test_the_cores_honour_a_cgroup_cpu_quota(
    tmp_path: Path, cpu_max: str, cap: int | None
) -> None:
    affinity = len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").write_text(cpu_max)
    expected = affinity if cap is None else min(cap, affinity)
    assert available_cores(tmp_path / "cpu.max") == expected
    assert available_cores(tmp_path / "missing") == affinity
