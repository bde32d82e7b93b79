"""A kafka-clients 4.4.0 producer (java/TelemetryProducer.java) as a context manager: it
pushes telemetry until the block ends, then closes (its terminating push)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.gateway.golden import kafka_classpath

HERE = Path(__file__).resolve().parent


@contextmanager
def java_producer(
    bootstrap: str, client_id: str, work: Path, *extra: str
) -> Iterator[None]:
    """``extra``: more arguments of TelemetryProducer (``--app-metric N``)."""
    classpath = kafka_classpath()
    if classpath is None:
        reason = "needs the kafka-clients 4.4.0 jars (make kafka-libs)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    process = subprocess.Popen(
        [
            "java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work}", "-cp", classpath,
            str(HERE / "java" / "TelemetryProducer.java"),
            "--bootstrap", bootstrap, "--client-id", client_id, *extra,
        ],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield
    finally:
        try:  # closing its stdin closes the producer: the terminating push
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        assert "KTC error" not in out, f"{out}\n{err[-3000:]}"
