"""`ktc ingest` streaming as a real process: picks up pushes landed while it runs, and
SIGTERM finishes the batch and exits 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exporters.lakehouse.ingest import CONSUMER_NAME
from exporters.landing import ConsumerPositions
from tests.lakehouse.conftest import write_landing
from tests.lakehouse.lakehouse_otlp import make_context, sample_metrics_data

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]


def test_streaming_ingest_follows_the_log_and_stops_cleanly_on_sigterm(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    node = data / "landing" / "node-1"
    write_landing(node, [(make_context(), sample_metrics_data(0).SerializeToString())])
    out = (tmp_path / "ingest.out").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporters.lakehouse",
            "ingest",
            "--data-dir",
            str(data),
            "--master",
            "local[1]",
            "--trigger-interval",
            "500ms",
        ],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=out,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    positions = ConsumerPositions(node, CONSUMER_NAME)

    def wait_for_position(offset: int) -> None:
        deadline = time.monotonic() + 240
        while positions.load() < offset:
            assert proc.poll() is None, "ingest exited"
            assert time.monotonic() < deadline, f"position {offset} not reached"
            time.sleep(0.2)

    try:
        wait_for_position(1)
        write_landing(
            node,
            [
                (make_context(), sample_metrics_data(i).SerializeToString())
                for i in (1, 2)
            ],
        )  # while it runs
        wait_for_position(3)
    finally:
        proc.send_signal(
            signal.SIGTERM
        )  # to the ingest only, as Kubernetes does to PID 1
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        out.close()
    assert code == 0
    batches = [
        json.loads(line) for line in (tmp_path / "ingest.out").read_text().splitlines()
    ]
    assert sum(b["records"] for b in batches) == 3
    assert [b["batch"] for b in batches] == list(range(1, len(batches) + 1))
    assert batches[0]["ranges"] == {"node-1": [0, 1]}
