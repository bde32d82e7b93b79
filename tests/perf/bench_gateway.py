"""Gateway benchmark: librdkafka direct to Kafka, through a byte relay, through ``ktc gateway``.

One run, one machine, one real Apache Kafka 4.4.0 cluster (tests/gateway/harness, started
here), three ways in:

(a) **direct**: the clients bootstrap to the brokers' PLAINTEXT listeners;
(b) **relay**: through tests/perf/byte_relay.py, one uvloop process that only copies bytes
    (the floor of any proxy written like the gateway).  A relay cannot rewrite Metadata, so
    every node gets an extra listener, RELAY, whose advertised address is that node's relay
    port; the relay forwards relay port *i* to node *i*'s RELAY listener.  Clients stay on
    the relay exactly as they stay on the gateway, and the brokers do the same work;
(c) **gateway**: ``.venv/bin/ktc gateway`` as a subprocess in front of the PLAINTEXT
    listeners (landing log on, as shipped), with quotas configured for the clients' client
    ids that never limit (producer_byte_rate and consumer_byte_rate 1 GB/s,
    request_percentage 1,000,000 %: every quota is recorded, none throttles).

Each round measures every leg (the order rotates, so drifting load from other jobs on the
machine hits all legs alike), on a fresh 6-partition topic per leg:

1. **Produce throughput**: ``--records`` records of 1 KiB, acks=all, librdkafka defaults
   otherwise (linger.ms 5, batch.size 1 MB, no compression, no idempotence), timed from the
   first produce() to the end of flush(), after a warm-up that opens the connections.
2. **Consume throughput**: the same records read back by one consumer (assigned partitions,
   from the beginning, librdkafka's default fetch sizes), timed from the first batch to the
   last record.
3. **Produce latency**: ``--latency-rate`` records/s (default 500; 1 KiB, acks=all,
   linger.ms 0, so about one Produce request per record) for ``--latency-seconds``, all
   legs at the same time, one producer process per leg (a burst of load from another job
   lands on every leg alike; measured one leg after the other, a p99 said mostly which leg
   such a burst hit); per record, the time from produce() to its delivery callback
   (``Message.latency()``, with a thread that polls so that callbacks run as soon as the
   acknowledgement is in), p50 and p99.

For the relay and the gateway the process's CPU time (psutil ``cpu_times``, user + system)
over each throughput phase is divided by the MiB of record payload it forwarded, and over the
latency slices by the records sent (about one request and its response each).  CPU time per
unit of work moves far less with what else the machine runs than throughput and latency do,
so it is the steadiest comparison on a shared machine.

Targets: gateway throughput >= 0.8 x the relay's (produce and consume; the median of the
rounds' ratios); the gateway's added p99 (gateway p99 - direct p99) <= 1.5 x the relay's
(p99 over every round's samples of a leg).  Also printed: everything per leg, gateway/direct,
added p50, the proxies' CPU per MiB and per request, and each round's figures.

Cluster size: ``--nodes`` (default 1).  On 2 shared cores, three broker JVMs doing acks=all
replication (every byte written three times, replica fetchers polling) take most of the CPU,
so every leg measures the brokers' contention and the proxy's own cost disappears in it;
one node (replication factor 1, acks=all = the leader's append) leaves the proxy's cost
visible.  ``--nodes 3`` runs the same benchmark on the 3-node cluster.

Run: ``.venv/bin/python tests/perf/bench_gateway.py`` (about four minutes with one node;
``--quick`` for a short smoke run; ``--check`` exits 1 when a target is missed).  Needs the
JDK and the Kafka jars (``make kafka-libs``); without them it says so and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from tests.gateway.harness import _proc
from tests.gateway.harness.kafka_cluster import (
    KafkaCluster,
    KafkaNode,
    missing_prerequisites,
)

RECORD_BYTES = 1024
PARTITIONS = 6
TARGET_THROUGHPUT_RATIO = 0.8
TARGET_ADDED_P99_RATIO = 1.5
LEGS = ("direct", "relay", "gateway")
PRODUCER_ID = "bench-producer"
CONSUMER_ID = "bench-consumer"
LATENCY_ID = "bench-latency"
GB_PER_S = 1_000_000_000
MiB = 1 << 20


# ---------------------------------------------------------------------------- servers
class RelayedKafkaCluster(KafkaCluster):
    """The harness's cluster with one more PLAINTEXT listener per node, RELAY, advertised
    at that node's relay port (so Metadata fetched through the relay names the relay)."""

    relay_listener_ports: dict[int, int]  # node id -> the broker's RELAY port
    relay_ports: dict[int, int]  # node id -> the relay's port for it (advertised)

    def _server_properties(self, node: KafkaNode) -> str:
        base = super()._server_properties(node)
        nid = node.node_id
        listeners = [
            f"{name}://127.0.0.1:{node.ports[name]}" for name in self.listeners
        ]
        advertised = [
            f"{name}://127.0.0.1:{node.ports[name]}" for name in self.client_listeners
        ]
        extra = {
            "listeners": ",".join(
                [*listeners, f"RELAY://127.0.0.1:{self.relay_listener_ports[nid]}"]
            ),
            "advertised.listeners": ",".join(
                [*advertised, f"RELAY://127.0.0.1:{self.relay_ports[nid]}"]
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT,"
                "RELAY:PLAINTEXT"
            ),
        }
        # Later keys win in a Java properties file.
        return base + "".join(f"{key}={value}\n" for key, value in extra.items())


def _wait_for_file(
    path: Path, proc: subprocess.Popen[bytes], timeout_s: float = 60
) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            raise RuntimeError(
                f"{proc.args!r} exited with {proc.returncode} before it was ready"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {timeout_s} s")
        time.sleep(0.05)
    return path.read_text()


def _start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*_proc.die_with_parent(), *command],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    _proc.register(proc)
    return proc


@contextlib.contextmanager
def relay_process(
    tmp: Path, targets: dict[int, int]
) -> Iterator[tuple[dict[int, int], int]]:
    """byte_relay.py with one listener per node (OS-chosen ports) forwarding to the node's
    RELAY listener: ({node id: relay port}, pid)."""
    ready = tmp / "relay.ports"
    nodes = sorted(targets)
    proc = _start(
        [
            sys.executable,
            str(HERE / "byte_relay.py"),
            *[arg for n in nodes for arg in ("--map", f"0=127.0.0.1:{targets[n]}")],
            "--ready-file",
            str(ready),
        ],
        tmp / "relay.log",
    )
    try:
        ports = json.loads(_wait_for_file(ready, proc))
        yield dict(zip(nodes, ports, strict=True)), proc.pid
    finally:
        _proc.kill(proc, graceful_s=10)


@contextlib.contextmanager
def gateway_process(tmp: Path, upstream: str) -> Iterator[tuple[int, int]]:
    """``ktc gateway`` (the installed entry point) in front of ``upstream``, with quotas
    for the bench's client ids that never limit: (bootstrap port, pid)."""
    from subscriptions.store import ConfigStore

    data_dir = tmp / "gateway-data"
    store = ConfigStore(data_dir)
    for client_id in (PRODUCER_ID, CONSUMER_ID, LATENCY_ID):
        store.alter_quotas(
            {"client-id": client_id},
            {
                "producer_byte_rate": GB_PER_S,
                "consumer_byte_rate": GB_PER_S,
                "request_percentage": 1_000_000.0,
            },
        )
    config = tmp / "gateway.yaml"
    config.write_text("http.listener: null\nlog.level: WARNING\n")
    ready = tmp / "gateway.ready"
    ktc = ROOT / ".venv" / "bin" / "ktc"
    proc = _start(
        [
            str(ktc if ktc.exists() else Path(sys.executable).with_name("ktc")),
            "gateway",
            "--upstream",
            upstream,
            "--listeners",
            "PLAINTEXT://127.0.0.1:0",
            "--broker-port-start",
            "0",
            "--data-dir",
            str(data_dir),
            "--config",
            str(config),
            "--ready-file",
            str(ready),
        ],
        tmp / "gateway.log",
    )
    try:
        info = json.loads(_wait_for_file(ready, proc))
        yield int(next(iter(info["listeners"].values()))), proc.pid
    finally:
        _proc.kill(proc, graceful_s=15)


# ---------------------------------------------------------------------------- measurements
@dataclass
class LegResult:
    produce_s: float = math.nan
    produce_records: int = 0
    consume_s: float = math.nan
    consume_records: int = 0
    latencies_s: list[float] = field(default_factory=list)
    latency_errors: int = 0
    proxy_cpu_produce_s: float = math.nan
    proxy_cpu_consume_s: float = math.nan
    proxy_cpu_latency_s: float = 0.0
    latency_requests: int = 0

    @property
    def produce_mb_s(self) -> float:
        return self.produce_records * RECORD_BYTES / 1e6 / self.produce_s

    @property
    def produce_records_s(self) -> float:
        return self.produce_records / self.produce_s

    @property
    def consume_mb_s(self) -> float:
        return self.consume_records * RECORD_BYTES / 1e6 / self.consume_s

    @property
    def consume_records_s(self) -> float:
        return self.consume_records / self.consume_s

    def percentile_ms(self, q: float) -> float:
        if not self.latencies_s:
            return math.nan
        ordered = sorted(self.latencies_s)
        return 1000.0 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def cpu_ms_per_mib_produce(self) -> float:
        return (
            1000.0
            * self.proxy_cpu_produce_s
            / (self.produce_records * RECORD_BYTES / MiB)
        )

    @property
    def cpu_ms_per_mib_consume(self) -> float:
        return (
            1000.0
            * self.proxy_cpu_consume_s
            / (self.consume_records * RECORD_BYTES / MiB)
        )

    @property
    def cpu_us_per_request(self) -> float:
        if not self.latency_requests:
            return math.nan
        return 1e6 * self.proxy_cpu_latency_s / self.latency_requests

    def summary(self) -> dict[str, float]:
        return {
            "produce_mb_s": round(self.produce_mb_s, 2),
            "produce_records_s": round(self.produce_records_s),
            "consume_mb_s": round(self.consume_mb_s, 2),
            "consume_records_s": round(self.consume_records_s),
            "p50_ms": round(self.percentile_ms(0.50), 3),
            "p99_ms": round(self.percentile_ms(0.99), 3),
            "latency_samples": len(self.latencies_s),
            "latency_errors": self.latency_errors,
            "proxy_cpu_ms_per_mib_produce": round(self.cpu_ms_per_mib_produce, 2),
            "proxy_cpu_ms_per_mib_consume": round(self.cpu_ms_per_mib_consume, 2),
            "proxy_cpu_us_per_request": round(self.cpu_us_per_request, 1),
        }


def _cpu_s(pid: int | None) -> float:
    if pid is None:
        return math.nan
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def _payload() -> bytes:
    return os.urandom(RECORD_BYTES)


def produce_throughput(bootstrap: str, topic: str, records: int) -> tuple[int, float]:
    from confluent_kafka import Producer

    failures: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": PRODUCER_ID,
            "acks": "all",
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
            "log_level": 4,
        }
    )
    value = _payload()
    for _ in range(1000):  # warm-up: metadata, a connection to every leader
        producer.produce(topic, value)
    producer.flush(60)
    produce = producer.produce
    poll = producer.poll
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.005)
        if i & 1023 == 0:
            poll(0)
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(
            f"produce to {topic}: {remaining} undelivered, errors {failures[:3]}"
        )
    return records, elapsed


def consume_throughput(bootstrap: str, topic: str, expected: int) -> tuple[int, float]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": CONSUMER_ID,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "log_level": 4,
        }
    )
    try:
        consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
        )
        seen = 0
        first_batch = 0
        started = math.nan
        deadline = time.monotonic() + 300
        while seen < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"consume {topic}: {seen} of {expected} records in 300 s"
                )
            # consume() waits for a full batch or the timeout: a short one, or the last
            # (partial) batch would add its whole timeout to the measured time.
            batch = consumer.consume(num_messages=10_000, timeout=0.02)
            for message in batch:
                if message.error() is not None:
                    raise RuntimeError(f"consume {topic}: {message.error()}")
            if batch and math.isnan(started):
                started = time.perf_counter()
                first_batch = len(batch)
            seen += len(batch)
        elapsed = time.perf_counter() - started
        return seen - first_batch, elapsed
    finally:
        consumer.close()


class LatencyProbe:
    """One producer (1 KiB records, acks=all, linger.ms 0) that sends at a fixed rate for a
    while and keeps each record's latency from produce() to its delivery callback.

    The callback's ``Message.latency()`` is librdkafka's clock at the moment the callback
    runs minus the produce() time, so callbacks must run as soon as their acknowledgement
    arrives: a thread of their own polls (``poll`` blocks until a report is ready), while the
    sending thread sleeps between records.  (Polling only between sends measured the gap to
    the next send, not the latency.)"""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.latencies_s: list[float] = []
        self.sent = 0
        self.errors = 0
        self._measuring = False
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": LATENCY_ID,
                "acks": "all",
                "linger.ms": 0,
                "on_delivery": self._on_delivery,
                "log_level": 4,
            }
        )
        self._value = _payload()
        for _ in range(200):  # warm-up: metadata, a connection to every leader
            self._producer.produce(topic, self._value)
        self._producer.flush(60)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors += 1
        elif self._measuring:
            latency = msg.latency()
            if latency is not None:
                self.latencies_s.append(latency)

    def _poll(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._producer.poll(0.05)

    def run(self, rate: float, seconds: float) -> None:
        producer = self._producer
        interval = 1.0 / rate
        count = int(rate * seconds)
        stop = threading.Event()
        poller = threading.Thread(
            target=self._poll, args=(stop,), name="latency-poller"
        )
        self._measuring = True
        poller.start()
        try:
            next_at = time.perf_counter()
            for _ in range(count):
                wait = next_at - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                producer.produce(self.topic, self._value)
                next_at += interval
            producer.flush(60)
        finally:
            stop.set()
            poller.join()
            self._measuring = False
        self.sent += count


def _latency_worker(
    bootstrap: str, topic: str, rate: float, seconds: float, conn: Any
) -> None:
    """One leg's latency probe in a process of its own (see run_round)."""
    probe = LatencyProbe(bootstrap, topic)
    conn.send("ready")
    start_at = conn.recv()
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    probe.run(rate, seconds)
    conn.send((probe.latencies_s, probe.errors, probe.sent))
    conn.close()


def measure_latency(
    legs: list[str],
    ways: dict[str, tuple[str, int | None]],
    create_topic: Callable[[str], str],
    args: argparse.Namespace,
    results: dict[str, LegResult],
) -> None:
    """Every leg's latency at the same time, one producer process per leg: a burst of load
    from another job on the machine then lands on all legs alike (measured one after the
    other, a p99 says mostly which leg such a burst happened to hit)."""
    context = multiprocessing.get_context("spawn")
    workers = {}
    for leg in legs:
        parent, child = context.Pipe()
        process = context.Process(
            target=_latency_worker,
            args=(
                ways[leg][0],
                create_topic(f"{leg}-latency"),
                args.latency_rate,
                args.latency_seconds,
                child,
            ),
            daemon=True,
        )
        process.start()
        workers[leg] = (process, parent)
    try:
        for leg, (_, conn) in workers.items():
            if not conn.poll(120) or conn.recv() != "ready":
                raise RuntimeError(f"the {leg} latency producer did not get ready")
        cpu0 = {leg: _cpu_s(ways[leg][1]) for leg in legs}
        # Staggered by a fraction of the send interval: sending at the same instants, the
        # legs' requests would queue behind each other at the broker in whatever order the
        # scheduler woke their processes.
        start_at = time.time() + 0.5
        for number, (_, conn) in enumerate(workers.values()):
            conn.send(start_at + number / (len(workers) * args.latency_rate))
        for leg, (_, conn) in workers.items():
            if not conn.poll(args.latency_seconds + 120):
                raise RuntimeError(f"the {leg} latency producer did not finish")
            latencies, errors, sent = conn.recv()
            results[leg].latencies_s = latencies
            results[leg].latency_errors = errors
            results[leg].latency_requests = sent
        for leg in legs:
            results[leg].proxy_cpu_latency_s = _cpu_s(ways[leg][1]) - cpu0[leg]
    finally:
        for process, _ in workers.values():
            process.join(10)
            if process.is_alive():
                process.kill()


def measure_throughput(
    bootstrap: str, proxy_pid: int | None, topic: str, args: argparse.Namespace
) -> LegResult:
    result = LegResult()
    cpu0 = _cpu_s(proxy_pid)
    result.produce_records, result.produce_s = produce_throughput(
        bootstrap, topic, args.records
    )
    cpu1 = _cpu_s(proxy_pid)
    # Everything the topic holds (the warm-up's 1000 records and the measured ones), read
    # ``--consume-passes`` times by a fresh consumer each: one pass takes well under a second.
    result.consume_records, result.consume_s = 0, 0.0
    for _ in range(args.consume_passes):
        records, seconds = consume_throughput(bootstrap, topic, args.records + 1000)
        result.consume_records += records
        result.consume_s += seconds
    cpu2 = _cpu_s(proxy_pid)
    result.proxy_cpu_produce_s = cpu1 - cpu0
    result.proxy_cpu_consume_s = cpu2 - cpu1
    return result


def run_round(
    index: int,
    legs: list[str],
    ways: dict[str, tuple[str, int | None]],
    create_topic: Callable[[str], str],
    args: argparse.Namespace,
) -> dict[str, LegResult]:
    """Throughput of every leg, one after the other in an order that rotates with the round
    (so that load from other jobs on the machine, which drifts over seconds, lands on every
    leg alike), then the latency of all legs at once."""
    shift = index % len(legs)
    order = legs[shift:] + legs[:shift]
    results: dict[str, LegResult] = {}
    for leg in order:
        bootstrap, pid = ways[leg]
        results[leg] = measure_throughput(bootstrap, pid, create_topic(leg), args)
    measure_latency(order, ways, create_topic, args, results)
    for leg in order:
        s = results[leg].summary()
        print(
            f"round {index + 1} {leg:8} produce {s['produce_mb_s']:.1f} MB/s "
            f"consume {s['consume_mb_s']:.1f} MB/s p50 {s['p50_ms']:.2f} ms "
            f"p99 {s['p99_ms']:.2f} ms"
            + (
                f"; proxy CPU {s['proxy_cpu_ms_per_mib_produce']:.2f}/"
                f"{s['proxy_cpu_ms_per_mib_consume']:.2f} ms per MiB produced/consumed, "
                f"{s['proxy_cpu_us_per_request']:.0f} us per request at the latency rate"
                if ways[leg][1] is not None
                else ""
            ),
            flush=True,
        )
    return results


# ---------------------------------------------------------------------------- report
def _median(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else math.nan


def _cpu_ticks() -> tuple[int, int]:
    """(steal, all) jiffies of the machine from /proc/stat (Linux; (0, 0) elsewhere)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0, 0
    ticks = [int(value) for value in fields]
    return (ticks[7] if len(ticks) > 7 else 0), sum(ticks[:8])


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def report(
    rounds: list[dict[str, LegResult]], args: argparse.Namespace, steal: float
) -> bool:
    def med(leg: str, fn: Callable[[LegResult], float]) -> float:
        return _median([fn(r[leg]) for r in rounds])

    def ratio(a: str, b: str, fn: Callable[[LegResult], float]) -> float:
        return _median([fn(r[a]) / fn(r[b]) for r in rounds if fn(r[b])])

    # Latency percentiles over every sample of every round (a burst of load from another
    # job lands in whichever leg's slice is running; pooled, it weighs on all legs alike).
    pooled = {
        leg: LegResult(latencies_s=[x for r in rounds for x in r[leg].latencies_s])
        for leg in LEGS
    }

    def added(leg: str, q: float = 0.99) -> float:
        return pooled[leg].percentile_ms(q) - pooled["direct"].percentile_ms(q)

    metrics: list[tuple[str, Callable[[LegResult], float], str]] = [
        ("produce MB/s", lambda r: r.produce_mb_s, "{:.1f}"),
        ("produce records/s", lambda r: r.produce_records_s, "{:,.0f}"),
        ("consume MB/s", lambda r: r.consume_mb_s, "{:.1f}"),
        ("consume records/s", lambda r: r.consume_records_s, "{:,.0f}"),
    ]
    print(
        f"\nmedians of {len(rounds)} round(s) (latency: all rounds' samples); "
        f"{args.nodes}-node Kafka 4.4.0, "
        f"{os.cpu_count()} cores ({_cpu_model()}), load average {os.getloadavg()[0]:.1f}, "
        f"CPU stolen by the hypervisor {steal:.0f}%"
    )
    print(
        f"{'':28}{'direct':>12}{'relay':>12}{'gateway':>12}{'gw/relay':>10}{'gw/direct':>10}"
    )
    for label, fn, fmt in metrics:
        cells = [fmt.format(med(leg, fn)) for leg in LEGS]
        print(
            f"{label:28}{cells[0]:>12}{cells[1]:>12}{cells[2]:>12}"
            f"{ratio('gateway', 'relay', fn):>10.2f}{ratio('gateway', 'direct', fn):>10.2f}"
        )
    for q in (0.50, 0.99):
        ms = [pooled[leg].percentile_ms(q) for leg in LEGS]
        print(
            f"{f'produce latency p{round(q * 100)} ms':28}{ms[0]:>12.2f}{ms[1]:>12.2f}"
            f"{ms[2]:>12.2f}{ms[2] / ms[1]:>10.2f}{ms[2] / ms[0]:>10.2f}"
        )
    for q in (0.50, 0.99):
        relay_q, gateway_q = added("relay", q), added("gateway", q)
        ratio_q = gateway_q / relay_q if relay_q > 0 else math.nan
        print(
            f"{f'added p{round(q * 100)} ms (vs direct)':28}{'':>12}{relay_q:>12.2f}"
            f"{gateway_q:>12.2f}{ratio_q:>10.2f}"
        )
    # The target: each proxy's p99 minus direct's, over the pooled samples.
    relay_added, gateway_added = added("relay"), added("gateway")
    added_ratio = gateway_added / relay_added if relay_added > 0 else math.nan
    for phase, fn in (
        ("produce", lambda r: r.cpu_ms_per_mib_produce),
        ("consume", lambda r: r.cpu_ms_per_mib_consume),
    ):
        relay_cpu, gateway_cpu = med("relay", fn), med("gateway", fn)
        print(
            f"{'proxy CPU ms/MiB ' + phase:28}{'':>12}{relay_cpu:>12.2f}{gateway_cpu:>12.2f}"
            f"{gateway_cpu / relay_cpu:>10.2f}"
        )
    relay_cpu = med("relay", lambda r: r.cpu_us_per_request)
    gateway_cpu = med("gateway", lambda r: r.cpu_us_per_request)
    print(
        f"{'proxy CPU us/request (lat.)':28}{'':>12}{relay_cpu:>12.0f}{gateway_cpu:>12.0f}"
        f"{gateway_cpu / relay_cpu:>10.2f}"
    )
    print("\nper round (produce MB/s, consume MB/s, p50/p99 ms):")
    for index, r in enumerate(rounds, 1):
        legs = "; ".join(
            f"{leg} {r[leg].produce_mb_s:.1f}, {r[leg].consume_mb_s:.1f}, "
            f"{r[leg].percentile_ms(0.5):.2f}/{r[leg].percentile_ms(0.99):.2f}"
            for leg in LEGS
        )
        print(f"  {index}: {legs}")
    produce_ratio = ratio("gateway", "relay", lambda r: r.produce_mb_s)
    consume_ratio = ratio("gateway", "relay", lambda r: r.consume_mb_s)
    errors = sum(r[leg].latency_errors for r in rounds for leg in LEGS)
    checks = [
        (
            "produce throughput gateway/relay",
            produce_ratio,
            f">= {TARGET_THROUGHPUT_RATIO}",
            produce_ratio >= TARGET_THROUGHPUT_RATIO,
        ),
        (
            "consume throughput gateway/relay",
            consume_ratio,
            f">= {TARGET_THROUGHPUT_RATIO}",
            consume_ratio >= TARGET_THROUGHPUT_RATIO,
        ),
        # When the relay's added p99 is not above 0 (lost in the noise), the gateway's must
        # not be either.
        (
            "added p99 gateway/relay",
            added_ratio,
            f"<= {TARGET_ADDED_P99_RATIO}",
            gateway_added <= TARGET_ADDED_P99_RATIO * max(relay_added, 0.0),
        ),
        ("delivery errors", float(errors), "0", errors == 0),
    ]
    print()
    for label, value, target, ok in checks:
        print(f"{'PASS' if ok else 'MISS'}  {label}: {value:.2f} (target {target})")
    if relay_added <= 0:
        print(
            f"      (the relay's added p99 is {relay_added:.2f} ms: below the noise of this run; "
            f"the gateway's is {gateway_added:.2f} ms)"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "nodes": args.nodes,
                    "rounds": [{leg: r[leg].summary() for leg in LEGS} for r in rounds],
                    "gateway_over_relay": {
                        "produce": produce_ratio,
                        "consume": consume_ratio,
                    },
                    "added_p99_ms": {"relay": relay_added, "gateway": gateway_added},
                    "cpu_count": os.cpu_count(),
                    "cpu_steal_percent": round(steal, 1),
                    "checks": {label: ok for label, _, _, ok in checks},
                },
                indent=2,
            )
        )
    return all(ok for *_, ok in checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="one short round (smoke test)"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--nodes", type=int, default=1, help="Kafka nodes (see the docstring)"
    )
    parser.add_argument(
        "--records", type=int, default=200_000, help="records per throughput run"
    )
    parser.add_argument("--latency-rate", type=float, default=500.0, help="records/s")
    parser.add_argument(
        "--latency-seconds", type=float, default=10.0, help="per leg and round"
    )
    parser.add_argument(
        "--consume-passes", type=int, default=3, help="reads of each topic"
    )
    parser.add_argument("--legs", default=",".join(LEGS), help=argparse.SUPPRESS)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when a target is missed"
    )
    parser.add_argument("--json", type=Path, help="also write the full report here")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.records, args.latency_seconds, args.consume_passes = (
            1,
            50_000,
            4.0,
            1,
        )
    reason = missing_prerequisites()
    if reason is not None:
        print(f"skipped: {reason}")
        return 1 if args.check else 0

    from confluent_kafka.admin import AdminClient, NewTopic

    rounds: list[dict[str, LegResult]] = []
    steal_before, ticks_before = _cpu_ticks()
    with tempfile.TemporaryDirectory(prefix="ktc-bench-gateway-") as tmp_name:
        tmp = Path(tmp_name)
        cluster = RelayedKafkaCluster(
            nodes=args.nodes, work_dir=tmp / "kafka", log_level="WARN"
        )
        node_ids = list(range(1, args.nodes + 1))
        relay_targets = _proc.free_ports(args.nodes)
        cluster.relay_listener_ports = dict(zip(node_ids, relay_targets, strict=True))
        with relay_process(tmp, cluster.relay_listener_ports) as (
            relay_ports,
            relay_pid,
        ):
            cluster.relay_ports = relay_ports
            started = time.monotonic()
            cluster.start()
            print(
                f"{args.nodes}-node Kafka cluster up in {time.monotonic() - started:.1f} s",
                flush=True,
            )
            try:
                admin = AdminClient(
                    {"bootstrap.servers": cluster.bootstrap_servers(), "log_level": 3}
                )

                def create_topic(prefix: str) -> str:
                    name = f"bench-{prefix}-{uuid.uuid4().hex[:8]}"
                    futures = admin.create_topics(
                        [
                            NewTopic(
                                name, PARTITIONS, replication_factor=min(3, args.nodes)
                            )
                        ]
                    )
                    futures[name].result(60)
                    cluster.wait_in_sync([name])
                    return name

                with gateway_process(tmp, cluster.bootstrap_servers()) as (
                    gw_port,
                    gw_pid,
                ):
                    ways = {
                        "direct": (cluster.bootstrap_servers(), None),
                        "relay": (
                            ",".join(f"127.0.0.1:{relay_ports[n]}" for n in node_ids),
                            relay_pid,
                        ),
                        "gateway": (f"127.0.0.1:{gw_port}", gw_pid),
                    }
                    legs = [leg for leg in LEGS if leg in args.legs.split(",")]
                    # Warm-up, not counted: JIT-compiles the broker's paths, opens segments,
                    # brings every process's caches and allocator up to speed.
                    for leg in legs:
                        bootstrap, pid = ways[leg]
                        warm = argparse.Namespace(
                            **{
                                **vars(args),
                                "records": args.records // 4,
                                "consume_passes": 1,
                            }
                        )
                        measure_throughput(
                            bootstrap, pid, create_topic(f"{leg}-warm"), warm
                        )
                    measure_latency(
                        legs,
                        ways,
                        create_topic,
                        argparse.Namespace(**{**vars(args), "latency_seconds": 1.0}),
                        {leg: LegResult() for leg in legs},
                    )
                    for index in range(args.rounds):
                        rounds.append(run_round(index, legs, ways, create_topic, args))
            finally:
                cluster.stop()
    if set(LEGS) - set(rounds[0] if rounds else ()):
        return 0  # a partial run (--legs): per-leg lines only
    steal_after, ticks_after = _cpu_ticks()
    steal = (
        100.0 * (steal_after - steal_before) / (ticks_after - ticks_before)
        if ticks_after > ticks_before
        else 0.0
    )
    ok = report(rounds, args, steal)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
