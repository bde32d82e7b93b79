"""proto/streams_states.py against Kafka Streams 4.4.0 itself: each enum's constants, read
with the JDK's javap from the kafka-streams jar (``make streams-libs``), in declaration
(= ordinal) order."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from proto.streams_states import (
    KAFKA_STREAMS_STATES,
    STREAM_THREAD_STATES,
    state_name,
)


def enum_constants(jar: Path, enum: str) -> tuple[str, ...]:
    javap = shutil.which("javap")
    if javap is None:
        pytest.skip("needs the JDK's javap")
    out = subprocess.run(
        [javap, "-cp", str(jar), enum], capture_output=True, text=True, check=True
    ).stdout
    return tuple(re.findall(rf"public static final {re.escape(enum)} (\w+);", out))


@pytest.fixture(scope="module")
def streams_jar() -> Path:
    jar = Path(os.environ.get("KTC_STREAMS_LIBS", "")) / "kafka-streams-4.4.0.jar"
    if not jar.is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("needs kafka-streams 4.4.0 (make streams-libs)", pytrace=False)
        pytest.skip("needs kafka-streams 4.4.0 (make streams-libs)")
    return jar


def test_the_client_states_are_kafka_streams_own(streams_jar: Path) -> None:
    enum = "org.apache.kafka.streams.KafkaStreams$State"
    assert enum_constants(streams_jar, enum) == KAFKA_STREAMS_STATES


def test_the_thread_states_are_kafka_streams_own(streams_jar: Path) -> None:
    enum = "org.apache.kafka.streams.processor.internals.StreamThread$State"
    assert enum_constants(streams_jar, enum) == STREAM_THREAD_STATES


@pytest.mark.parametrize(
    ("value", "name"),
    [(0.0, "CREATED"), (2.0, "RUNNING"), (6.0, "ERROR"), (7.0, None), (-1.0, None),
     (1.5, None), (float("nan"), None)],
)  # fmt: skip
def test_state_name(value: float, name: str | None) -> None:
    assert state_name(KAFKA_STREAMS_STATES, value) == name
