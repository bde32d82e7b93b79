"""What the applications walk (collector/telemetry/application_signals.py) costs a push:
``read_signals`` in a loop on the payloads of the instances it reads, a Kafka Streams
thread consumer's push (158 ``org.apache.kafka.stream.*`` metrics, as 4.4.0 sends at INFO
with one count store; read at every push) and a Java producer's (94 metrics; read at its
first push only).

    .venv/bin/python tests/perf/bench_application_signals.py [--rounds 2000]

Prints the module it ran (the compiled extension when installed, else the .py), the
payload sizes and the microseconds per walk.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import timeit

import collector.telemetry.application_signals as signals
from proto.streams_states import THREAD_STATE_METRIC
from tests.collector.streams_payloads import gauge, payload, point


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    rounds = parser.parse_args().rounds
    streams = payload(
        [
            gauge(
                f"org.apache.kafka.stream.task.metric{i}.rate",
                point(i, task_id="0_1", thread_id="app-StreamThread-1"),
            )
            for i in range(157)
        ]
        + [
            gauge(
                THREAD_STATE_METRIC,
                point(4, process_id="p", thread_id="app-StreamThread-1"),
            )
        ],
        {"group_id": "app"},
    )
    producer = payload(
        [
            gauge(f"org.apache.kafka.producer.metric{i}", point(i, node_id="1"))
            for i in range(94)
        ]
    )
    print(f"module: {signals.__file__}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs")
    for name, body in (
        ("streams thread consumer, 158 metrics", streams),
        ("java producer, 94 metrics", producer),
    ):
        seconds = timeit.timeit(
            functools.partial(signals.read_signals, body), number=rounds
        )
        print(f"{name} ({len(body)} bytes): {seconds / rounds * 1e6:.1f} us a walk")


if __name__ == "__main__":
    main()
