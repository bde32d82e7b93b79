"""No test sleeps on a real clock to wait for a window, a throttle, a delay or a watcher.

Time-driven behaviour runs on ``clock.testing.FakeClock`` and a test moves it; a watcher
says when it is ready.  What is left is waiting for something outside the test's control
(a real process, a JVM, the operating system's file events), and each such wait is listed
here with its reason.  The scan looks at every ``time.sleep(...)`` and ``asyncio.sleep(...)``
under tests/ whose argument holds a non-zero number literal (``asyncio.sleep(0)``, which
only yields to the event loop, is fine).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# (file under tests/, the call as written) -> why it waits on real time.
REAL_WAITS: dict[tuple[str, str], str] = {
    ("exporters/test_landing_crash.py", "time.sleep(rng.random() * 0.05)"): (
        "kills a writer process at a random moment, not at a record boundary"
    ),
    ("helm/test_helm_pod_run.py", "time.sleep(0.05)"): (
        "polls a collector process started from the chart's rendered pod spec"
    ),
    ("lakehouse/test_lakehouse_ingest.py", "time.sleep(0.1)"): (
        "waits for a streaming Spark job (a JVM) to commit its first batch"
    ),
    ("lakehouse/test_lakehouse_streaming_cli.py", "time.sleep(0.2)"): (
        "waits for a `ktc ingest` process to commit a landing-log position"
    ),
    ("lakehouse/test_lakehouse_thriftserver.py", "time.sleep(1)"): (
        "waits for the Spark Thrift server process to listen"
    ),
    ("compat/test_kafka_differential.py", "time.sleep(0.01)"): (
        "polls a real Kafka broker until an admin change reached its metadata log"
    ),
    ("compat/test_kafka_differential.py", "time.sleep(interval_ms / 1000 * 1.5)"): (
        "lets a push interval pass on a real Kafka broker's own clock"
    ),
    ("proto/test_real_client.py", "time.sleep(0.02)"): (
        "waits for librdkafka's own threads to send its terminating push"
    ),
    ("perf/bench_push.py", "time.sleep(0.05)"): (
        "benchmark: waits for the server process it started to write its port file"
    ),
    ("perf/bench_client_metrics.py", "time.sleep(0.05)"): (
        "benchmark: waits for the server process it started to write its ready file"
    ),
    ("perf/bench_freshness.py", "time.sleep(0.2)"): (
        "benchmark: waits for a running ingest process to commit a batch"
    ),
    ("perf/bench_freshness.py", "time.sleep(probe * 3.3 % 10)"): (
        "benchmark: spreads probes over the ingest's real trigger cycle (what it measures)"
    ),
    ("perf/bench_freshness.py", "time.sleep(0.1)"): (
        "benchmark: watches the ingest journal of a real ingest process"
    ),
    ("perf/bench_memory.py", "time.sleep(0.05)"): (
        "benchmark: waits for the server process it started, then for it to read what it will"
    ),
    ("perf/bench_gateway.py", "time.sleep(0.05)"): (
        "benchmark: waits for a gateway or relay process it started to write its ready file"
    ),
    (
        "perf/loadgen.py",
        "asyncio.sleep(max(0.0, measure_to - time.perf_counter()) + 0.05)",
    ): ("benchmark: paces real load against a real server until the end of its window"),
}


def _real_sleeps() -> set[tuple[str, str]]:
    found = set()
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "sleep"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in {"time", "asyncio"}
                and any(
                    isinstance(literal, ast.Constant)
                    and isinstance(literal.value, int | float)
                    and not isinstance(literal.value, bool)
                    and literal.value != 0
                    for argument in node.args
                    for literal in ast.walk(argument)
                )
            ):
                found.add((path.relative_to(TESTS).as_posix(), ast.unparse(node)))
    return found


def test_every_real_time_sleep_is_a_listed_wait_for_something_outside_the_test() -> (
    None
):
    unlisted = sorted(_real_sleeps() - set(REAL_WAITS))
    assert not unlisted, (
        "sleeps on a real clock (use clock.testing.FakeClock for windows, throttles and "
        "delays, an event for a watcher, waiting.eventually for an outside effect; or "
        f"list a real-process wait in REAL_WAITS with its reason): {unlisted}"
    )


def test_every_listed_wait_still_exists_and_has_a_reason() -> None:
    found = _real_sleeps()
    stale = sorted(key for key in REAL_WAITS if key not in found)
    assert not stale, f"REAL_WAITS lists sleeps that are gone: {stale}"
    assert all(REAL_WAITS.values())
