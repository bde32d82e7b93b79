"""CPU per push without sockets: the collector's push path against the baseline's, in one
process, fed the same frames.

bench_push.py measures the real thing over loopback, but on a shared 2-core machine its
numbers move with whatever else runs.  This measures only what the two servers' Python
does per push: a real ``CollectorServer`` (landing log on, default fsync policy, quotas,
metrics) and a real ``BaselineProtocol`` each get ``--instances`` steady-state pushes per
round, ``--batch`` frames per ``data_received`` call, as a socket read would deliver them,
and ``--reads-per-turn`` reads per event-loop turn (the landing log writes once per turn).
The transport is a stub that keeps the response bytes: socket system calls are left out on
purpose (both servers pay them; bench_push.py includes them).  The clock is injected and
advanced one push interval per round, so every push passes the interval gate.

Time is process CPU time per round; the figure is the median of the fastest quarter of
the rounds, which filters out rounds where other jobs stole the CPU's caches.

``--quotas`` configures the quotas bench_push_quotas.py sets (limits no load reaches), so
the difference to a run without it is what recording them costs per push.

Run: ``.venv/bin/python tests/perf/profile_push.py [--batch 10] [--reads-per-turn 10]
[--rounds 40] [--quotas]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from proto import compression
from proto.messages import (
    ApiVersionsRequest,
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
    api_versions_request,
    get_telemetry_subscriptions_request,
    get_telemetry_subscriptions_response,
    push_telemetry_request,
)
from tests.collector.collector_testkit import RecordingTransport
from tests.perf.baseline_server import BaselineProtocol
from tests.perf.loadgen import encode_frame, producer_payload

INTERVAL_MS = 100


def _check_all_accepted(written: list[bytes], pushes: int) -> None:
    """Every answer is a 16-byte PushTelemetryResponse v0 with error code 0 (bytes 13-14),
    so what was measured is the accepted-push path, not a rejection."""
    answers = b"".join(written)
    assert len(answers) == 16 * pushes, (
        f"{len(answers)} answer bytes for {pushes} pushes"
    )
    for at in range(0, len(answers), 16):
        assert answers[at + 13 : at + 15] == b"\x00\x00", f"push {at // 16} rejected"


def _fastest_quarter_median(samples: list[float]) -> float:
    fastest = sorted(samples)[: max(1, len(samples) // 4)]
    return statistics.median(fastest)


async def measure(
    instances: int, batch: int, rounds: int, reads_per_turn: int, quotas: bool = False
) -> dict[str, float]:
    from clock.testing import FakeClock
    from collector.app.config import load_config
    from collector.app.server import CollectorServer
    from subscriptions.store import ConfigStore

    clock = FakeClock()
    with tempfile.TemporaryDirectory(prefix="ktc-profile-") as tmp:
        data_dir = Path(tmp)
        store = ConfigStore(data_dir)
        store.alter_subscription(
            "bench",
            {"metrics": "org.apache.kafka.producer.", "interval.ms": str(INTERVAL_MS)},
            [],
        )
        if quotas:
            from tests.perf.bench_push_quotas import ENTITY_QUOTAS

            for entity, values in ENTITY_QUOTAS.items():
                store.alter_quotas(dict(entity), values)
        config = load_config(
            environ={},
            overrides={
                "listeners": "PLAINTEXT://127.0.0.1:0",
                # Not None: an override of None means "not overridden" (the default port).
                "http.listener": "127.0.0.1:0",
                "data.dir": str(data_dir),
            },
        )
        server = CollectorServer(config, clock=clock)
        await server.start()
        try:
            full = server.open_connections.new(next(iter(server.bound.values())))
            full_transport = RecordingTransport()
            full.connection_made(full_transport)  # type: ignore[arg-type]
            full.data_received(
                encode_frame(
                    18,
                    3,
                    0,
                    "profile",
                    api_versions_request.WRITERS[3],
                    ApiVersionsRequest("profile", "1.0"),
                )
            )
            get = encode_frame(
                71,
                0,
                1,
                "profile",
                get_telemetry_subscriptions_request.WRITERS[0],
                GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)),
            )
            full_transport.written.clear()
            subscriptions = []
            for _ in range(instances):
                full.data_received(get)
                answer = full_transport.written.pop()
                response, _ = get_telemetry_subscriptions_response.READERS[0](
                    answer, 4 + 5
                )
                subscriptions.append(
                    (response.client_instance_id, response.subscription_id)
                )
            compressed = compression.compress(
                compression.CompressionType.ZSTD, producer_payload()
            )
            frames = [
                encode_frame(
                    72,
                    0,
                    i,
                    "profile",
                    push_telemetry_request.WRITERS[0],
                    PushTelemetryRequest(
                        instance_id, subscription_id, False, 4, compressed
                    ),
                )
                for i, (instance_id, subscription_id) in enumerate(subscriptions)
            ]
            reads = [
                b"".join(frames[i : i + batch]) for i in range(0, instances, batch)
            ]
            turns = [
                reads[i : i + reads_per_turn]
                for i in range(0, len(reads), reads_per_turn)
            ]
            baseline = BaselineProtocol()
            baseline_transport = RecordingTransport()
            baseline.connection_made(baseline_transport)  # type: ignore[arg-type]

            samples: dict[str, list[float]] = {"full": [], "baseline": []}
            for _ in range(rounds):
                clock.advance(INTERVAL_MS)  # every instance is due again
                started = time.process_time()
                for turn in turns:
                    for read in turn:
                        full.data_received(read)
                    await asyncio.sleep(0)  # end of a loop turn: the landing flush runs
                samples["full"].append(time.process_time() - started)
                started = time.process_time()
                for turn in turns:
                    for read in turn:
                        baseline.data_received(read)
                    await asyncio.sleep(0)
                samples["baseline"].append(time.process_time() - started)
                for transport in (full_transport, baseline_transport):
                    _check_all_accepted(transport.written, instances)
                full_transport.written.clear()
                baseline_transport.written.clear()
        finally:
            await server.stop()
    return {
        name: _fastest_quarter_median(s) / instances * 1e6
        for name, s in samples.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=10, help="push frames per read")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument(
        "--quotas",
        action="store_true",
        help="configure bench_push_quotas.py's quotas (high limits: recording, no throttle)",
    )
    parser.add_argument(
        "--reads-per-turn",
        type=int,
        default=10,
        help="socket reads per event-loop turn (the landing log writes once per turn)",
    )
    args = parser.parse_args()
    from collector.app.process_tuning import tune_serving_process

    tune_serving_process()  # as `ktc serve` does
    result = asyncio.run(
        measure(
            args.instances, args.batch, args.rounds, args.reads_per_turn, args.quotas
        )
    )
    full, baseline = result["full"], result["baseline"]
    print(
        f"{args.batch} pushes per read, {args.reads_per_turn} reads per turn"
        f"{', quotas on' if args.quotas else ''}, CPU per push (us):"
    )
    print(f"  full collector  {full:7.2f}")
    print(f"  baseline        {baseline:7.2f}")
    print(f"  overhead        {full - baseline:7.2f}")
    print(f"  ratio           {baseline / full:7.3f}  (baseline / full)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
