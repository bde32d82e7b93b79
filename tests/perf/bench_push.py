"""Push-path benchmark: the full collector against a minimal baseline, in one run.

1. **Throughput.** The load generator (tests/perf/loadgen.py, in this process) drives
   ``ktc serve`` (a subprocess, landing log on, default fsync policy) and then
   baseline_server.py (a subprocess, same process model: frame, decompress, parse OTLP,
   ack) with the same closed-loop load: many instances at a 100 ms push interval, more
   than either server can take, so each runs at its peak.  Target: full >= 0.6 x baseline.
2. **Latency.** Each server again at half its own peak rate (open loop: every instance
   pushes every interval).  Target: the collector's p99 push latency <= 5 ms.
3. **Memory.** 16,384 client instances created in a ClientMetricsManager in this process,
   measured with tracemalloc.  Target: <= 2 KiB per instance, cache bookkeeping included.

Run: ``.venv/bin/python tests/perf/bench_push.py`` (about a minute; ``--quick`` for a
short smoke run).  The load generator shares the machine's cores with the server, as in
field-notes.md, so absolute numbers depend on the machine; the ratios are the point.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from loadgen import LoadResult, run_load

INTERVAL_MS = 100
TARGET_RATIO = 0.6
TARGET_P99_MS = 5.0
TARGET_BYTES_PER_INSTANCE = 2048
CACHE_INSTANCES = 16_384


def _wait_for_file(path: Path, proc: subprocess.Popen[bytes], timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {timeout_s} s")
        time.sleep(0.05)
    return path.read_text()


@contextlib.contextmanager
def full_collector(tmp: Path) -> Iterator[int]:
    from subscriptions.store import ConfigStore

    data_dir = tmp / "data"
    ConfigStore(data_dir).alter_subscription(
        "bench", {"metrics": "org.apache.kafka.producer.", "interval.ms": str(INTERVAL_MS)}, []
    )
    config = tmp / "ktc.yaml"
    config.write_text(
        "listeners: PLAINTEXT://127.0.0.1:0\n"
        "http.listener: null\n"
        f"data.dir: {data_dir}\n"
        "log.level: WARNING\n"
        "connection.max.inflight.requests: 100000\n"
    )
    ready = tmp / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "collector.cli",
            "serve",
            "--config",
            str(config),
            "--ready-file",
            str(ready),
        ],
        cwd=ROOT,
    )
    try:
        info = json.loads(_wait_for_file(ready, proc))
        yield int(next(iter(info["listeners"].values())))
    finally:
        proc.terminate()
        proc.wait(30)


@contextlib.contextmanager
def baseline(tmp: Path) -> Iterator[int]:
    ready = tmp / "baseline.port"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("baseline_server.py")),
            "--ready-file",
            str(ready),
        ],
        cwd=ROOT,
    )
    try:
        yield int(_wait_for_file(ready, proc))
    finally:
        proc.terminate()
        proc.wait(30)


async def measure(
    port: int, *, peak_instances: int, connections: int, duration_s: float
) -> tuple[LoadResult, LoadResult]:
    peak = await run_load(
        "127.0.0.1",
        port,
        instances=peak_instances,
        connections=connections,
        interval_ms=INTERVAL_MS,
        duration_s=duration_s,
    )
    half_rate = peak.pushes_per_s / 2
    half_instances = max(connections, int(half_rate * INTERVAL_MS / 1000))
    half = await run_load(
        "127.0.0.1",
        port,
        instances=half_instances,
        connections=connections,
        interval_ms=INTERVAL_MS,
        duration_s=duration_s,
    )
    return peak, half


def memory_per_instance(count: int = CACHE_INSTANCES) -> float:
    """Bytes allocated per cached instance (instance, metadata, subscription, LRU and
    expiry-heap bookkeeping), measured with tracemalloc."""
    from collector.client_metrics import ClientMetricsManager
    from exporters.base import ExportResult
    from proto import compression
    from subscriptions.effective import resolve
    from subscriptions.kafka_uuid import kafka_uuid_to_str
    from subscriptions.model import Subscription

    subscriptions = [
        Subscription.from_configs(
            "bench", {"metrics": "org.apache.kafka.producer.", "interval.ms": str(INTERVAL_MS)}
        )
    ]

    class Source:
        version = 1

        def resolve(self, metadata, instance_id):  # type: ignore[no-untyped-def]
            return resolve(subscriptions, metadata, instance_id)

    class NullExporter:
        def export(self, context, payload):  # type: ignore[no-untyped-def]
            return ExportResult.success()

        def close(self) -> None:
            pass

    class Conn:
        def __init__(self, connection_id: int) -> None:
            self.connection_id = connection_id
            self.client_software_name = "confluent-kafka-python"
            self.client_software_version = "2.16.1-rdkafka-2.16.0"
            self.client_source_address = "10.1.2.3"
            self.client_source_port = 40000 + connection_id % 20000
            self.listener_name = "PLAINTEXT"
            self.security_protocol = "PLAINTEXT"
            self.principal = "User:ANONYMOUS"

    # One connection per instance, as librdkafka clients have (the worst case for us).
    connections = [Conn(i) for i in range(count)]
    client_ids = [f"app-{i % 500}" for i in range(count)]
    ids = iter([uuid.uuid4() for _ in range(count)])
    manager = ClientMetricsManager(
        subscriptions=Source(),
        exporter=NullExporter(),
        decompress=compression.decompress,
        instance_id_to_str=kafka_uuid_to_str,
        new_instance_id=lambda: next(ids),
        cache_max_size=count,
    )
    zero = uuid.UUID(int=0)
    manager.get_telemetry_subscriptions(uuid.uuid4(), connections[0], "warm-up", 0)  # lazy caches
    manager.connection_closed(0)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(count):
        manager.get_telemetry_subscriptions(zero, connections[i], client_ids[i], i)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert manager.instance_count == count
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return grown / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs (smoke test)")
    parser.add_argument("--peak-instances", type=int, default=20_000)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--duration-s", type=float, default=8.0)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    if args.quick:
        args.peak_instances, args.duration_s = 4000, 2.0
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    with tempfile.TemporaryDirectory(prefix="ktc-bench-") as tmp_name:
        tmp = Path(tmp_name)
        kwargs = {
            "peak_instances": args.peak_instances,
            "connections": args.connections,
            "duration_s": args.duration_s,
        }
        with full_collector(tmp) as port:
            full_peak, full_half = asyncio.run(measure(port, **kwargs))  # type: ignore[arg-type]
        with baseline(tmp) as port:
            base_peak, base_half = asyncio.run(measure(port, **kwargs))  # type: ignore[arg-type]
    per_instance = memory_per_instance()

    ratio = full_peak.pushes_per_s / base_peak.pushes_per_s if base_peak.pushes_per_s else 0.0
    report = {
        "full_collector": {"peak": full_peak.summary(), "half_peak": full_half.summary()},
        "baseline": {"peak": base_peak.summary(), "half_peak": base_half.summary()},
        "throughput_ratio_full_over_baseline": round(ratio, 3),
        "full_p99_ms_at_half_peak": round(full_half.percentile_ms(0.99), 3),
        "p99_ratio_full_over_baseline_at_half_peak": round(
            full_half.percentile_ms(0.99) / base_half.percentile_ms(0.99), 3
        ),
        "bytes_per_cached_instance": round(per_instance),
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(report, indent=2))
    checks = {
        f"throughput ratio {ratio:.2f} >= {TARGET_RATIO}": ratio >= TARGET_RATIO,
        f"p99 at half peak {full_half.percentile_ms(0.99):.2f} ms <= {TARGET_P99_MS} ms": full_half.percentile_ms(
            0.99
        )
        <= TARGET_P99_MS,
        f"{per_instance:.0f} B per cached instance <= {TARGET_BYTES_PER_INSTANCE} B": per_instance
        <= TARGET_BYTES_PER_INSTANCE,
        "no push errors at half peak": not full_half.errors,
    }
    for text, ok in checks.items():
        print(("PASS " if ok else "MISS ") + text)
    return 1 if args.check and not all(checks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
