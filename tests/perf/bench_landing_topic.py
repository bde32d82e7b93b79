"""Topic landing against the local landing log, in one run: pushes/s and p99 of ``ktc
serve`` with ``landing.kafka.topic`` (every push produced, idempotent and acks=all, and
answered after its delivery report) beside ``ktc serve`` with the landing log (the
default: fsync interval, write-behind), both under the same closed-loop load.

A one-node Apache Kafka 4.4.0 broker (the gateway tests' harness, tests/gateway/harness)
holds the topic, on the same machine: its CPU is part of what the topic costs here.  Both
collectors run as subprocesses for the whole run, and the rounds alternate between them so
that drifting load from other jobs hits both alike.  Each round is closed-loop (every
instance pushes one interval after its answer) with more instances than either collector
takes, so each runs at its peak; p99 is of the answers in that load.  Target: topic >=
0.8 x the landing log's pushes/s (median of the rounds' ratios).

Run: ``.venv/bin/python tests/perf/bench_landing_topic.py`` (about two minutes with the
broker's start; ``--check`` exits 1 when the target is missed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.gateway.harness.kafka_cluster import KafkaCluster, missing_prerequisites
from tests.perf.bench_push import INTERVAL_MS, _serving, _wait_for_file
from tests.perf.loadgen import (
    CLOSED,
    OPEN,
    OPEN_PERIOD_FACTOR,
    LoadResult,
    run_load_blocking,
)

TARGET_RATIO = 0.8
# Each collector's /metrics port, by name.
HTTP_PORTS: dict[str, int] = {}


def scrape(name: str, metric: str) -> float:
    """``metric`` summed over its samples, from the collector ``name``'s /metrics."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    url = f"http://127.0.0.1:{HTTP_PORTS[name]}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == metric
        for sample in family.samples
        if sample.name == metric + "_total" or sample.name == metric
    )


@contextlib.contextmanager
def collector(tmp: Path, name: str, extra: str) -> Iterator[tuple[int, int]]:
    """``ktc serve`` with a subscription every load instance matches: (port, pid)."""
    from subscriptions.store import ConfigStore

    data_dir = tmp / name / "data"
    ConfigStore(data_dir).alter_subscription(
        "bench",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": str(INTERVAL_MS)},
        [],
    )
    config = tmp / name / "ktc.yaml"
    config.write_text(
        "listeners: PLAINTEXT://127.0.0.1:0\n"
        "http.listener: 127.0.0.1:0\n"
        f"data.dir: {data_dir}\n"
        "log.level: WARNING\n"
        "connection.max.inflight.requests: 100000\n" + extra
    )
    ready = tmp / name / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector.app.cli", "serve"]
        + ["--config", str(config), "--ready-file", str(ready)],
        cwd=ROOT,
    )
    with _serving(proc):
        info = json.loads(_wait_for_file(ready, proc, timeout_s=60))
        HTTP_PORTS[name] = int(info["http_port"])
        yield int(next(iter(info["listeners"].values()))), proc.pid


def measure(port: int, pid: int, args: argparse.Namespace, mode: str) -> LoadResult:
    period_s = INTERVAL_MS / 1000.0 * OPEN_PERIOD_FACTOR
    return run_load_blocking(
        "127.0.0.1",
        port,
        instances=args.instances
        if mode == CLOSED
        else max(args.connections, round(args.latency_rate * period_s)),
        connections=args.connections,
        interval_ms=INTERVAL_MS,
        duration_s=args.duration_s,
        mode=mode,
        workers=args.workers,
        server_pid=pid,
    )


def bare_producer(
    bootstrap: str, topic: str, outstanding: int, duration_s: float
) -> float:
    """Records/s of librdkafka alone, with the collector's producer settings and record
    shape (a 2 KiB value, a 500-byte context header), keeping ``outstanding`` records in
    flight as the topic collector does at its peak: the ceiling the broker and librdkafka
    set on this machine, whatever the collector does."""
    import os
    import time

    from confluent_kafka import Producer

    from exporters.kafka_topic import TopicSettings

    settings = TopicSettings(topic=topic, client={"bootstrap.servers": bootstrap})
    producer = Producer(settings.producer_config())
    in_flight = [0]
    delivered = [0]

    def report(error: object, message: object) -> None:
        in_flight[0] -= 1
        delivered[0] += 1

    payload = os.urandom(2048)
    headers: list[tuple[str, str | bytes | None]] = [
        ("ktc.format", b"1"),
        ("ktc.context", b"x" * 500),
    ]
    started = time.monotonic()
    key = 0
    while time.monotonic() - started < duration_s:
        while in_flight[0] < outstanding:
            producer.produce(
                topic,
                value=payload,
                key=str(key % 4000),
                headers=headers,
                on_delivery=report,
            )
            in_flight[0] += 1
            key += 1
        producer.poll(0.001)
    rate = delivered[0] / (time.monotonic() - started)
    producer.flush(30)
    return rate


def records_in(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        )
    finally:
        consumer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--instances", type=int, default=4000)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--duration-s", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument(
        "--latency-rate", type=int, default=1000, help="open-loop pushes/s for p99"
    )
    parser.add_argument(
        "--bare-outstanding",
        type=int,
        default=3000,
        help="records in flight for the librdkafka-alone ceiling",
    )
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    missing = missing_prerequisites()
    if missing is not None:
        print(f"cannot run: {missing}")
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-landing-topic-") as name:
        tmp = Path(name)
        kafka = KafkaCluster(nodes=1, heap="512m", work_dir=tmp / "kafka")
        kafka.start()
        try:
            topic = f"bench-telemetry-{uuid.uuid4().hex[:8]}"
            topic_config = (
                f"landing.kafka.topic: {topic}\n"
                f"landing.kafka.bootstrap.servers: {kafka.bootstrap_servers()}\n"
                f"landing.kafka.topic.partitions: {args.partitions}\n"
            )
            with (
                collector(tmp, "log", "") as log_server,
                collector(tmp, "topic", topic_config) as topic_server,
            ):
                results: dict[str, list[LoadResult]] = {"log": [], "topic": []}
                latency: dict[str, list[LoadResult]] = {"log": [], "topic": []}
                for _ in range(args.rounds):
                    for phase, mode in ((results, CLOSED), (latency, OPEN)):
                        for label, (port, pid) in (
                            ("log", log_server),
                            ("topic", topic_server),
                        ):
                            result = measure(port, pid, args, mode)
                            phase[label].append(result)
                            print(
                                f"  {mode:6} {label:5} "
                                f"{result.pushes_per_s:8,.0f} pushes/s  "
                                f"p50 {result.percentile_ms(0.5):7.2f} ms  "
                                f"p99 {result.percentile_ms(0.99):7.2f} ms  "
                                f"errors {dict(result.errors) or 0}  "
                                f"server CPU {result.server_cpu_us_per_push:4.0f} "
                                "us/push",
                                flush=True,
                            )
                refused = scrape("topic", "ktc_landing_pushes_refused")
                delivered = scrape("topic", "ktc_landing_topic_records_delivered")
            bare = [
                bare_producer(
                    kafka.bootstrap_servers(),
                    f"{topic}-bare",
                    args.bare_outstanding,
                    args.duration_s,
                )
                for _ in range(args.rounds)
            ]
            answered = sum(
                r.acked_total for phase in (results, latency) for r in phase["topic"]
            )
            landed = records_in(kafka.bootstrap_servers(), topic)
        finally:
            kafka.stop()
    ratios = [
        t.pushes_per_s / lg.pushes_per_s
        for lg, t in zip(results["log"], results["topic"], strict=True)
        if lg.pushes_per_s
    ]
    ratio = statistics.median(ratios)

    def rate(label: str) -> float:
        return statistics.median(r.pushes_per_s for r in results[label])

    def p99(phase: dict[str, list[LoadResult]], label: str) -> float:
        return statistics.median(r.percentile_ms(0.99) for r in phase[label])

    print(
        f"peak (closed loop, {args.instances:,} instances):\n"
        f"  landing log: {rate('log'):,.0f} pushes/s, p99 {p99(results, 'log'):.1f} ms\n"
        f"  topic:       {rate('topic'):,.0f} pushes/s, "
        f"p99 {p99(results, 'topic'):.1f} ms\n"
        f"  topic / log pushes/s: {ratio:.2f} (median of {len(ratios)} rounds; "
        f"target >= {TARGET_RATIO})\n"
        f"librdkafka alone, {args.bare_outstanding:,} records in flight: "
        f"{statistics.median(bare):,.0f} records/s (median of {len(bare)})\n"
        f"at {args.latency_rate:,} pushes/s offered (open loop):\n"
        f"  landing log p99 {p99(latency, 'log'):.2f} ms, "
        f"topic p99 {p99(latency, 'topic'):.2f} ms\n"
        f"topic collector: {delivered:,.0f} records delivered, {refused:,.0f} pushes "
        "refused for a failed delivery (89s beside these are the push-interval check's)\n"
        f"topic: {landed:,} records, {answered:,} pushes answered 0 (every answer "
        "waited for its delivery report; a record may be a push answered after the "
        "load generator stopped counting)"
    )
    return 1 if args.check and ratio < TARGET_RATIO else 0


if __name__ == "__main__":
    sys.exit(main())
