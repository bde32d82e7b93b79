"""OTLP forwarder throughput against a baseline measured in the same run.

Baseline: the same pushes, already serialized and *not* enriched, sent with a bare gRPC
stub, one ``Export`` per push, to the same in-process receiver: what gRPC itself costs.
Cases: the forwarder draining a landing log of those pushes (read, parse, enrich,
re-encode, send, commit), one request per push and then with ``sending_queue.batch``.
Each case is the best of ``--repeats`` runs (the machine is shared).

    .venv/bin/python tests/perf/bench_otlp_forwarder.py [--records 5000] [--compression none]

Prints one line per case: pushes/s, points/s and the ratio to the baseline (>1 is faster).
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from exporters.landing import LandingLog, LandingOptions
from exporters.otlp import OtlpExporterConfig, OtlpForwarder
from exporters.otlp.transport import EXPORT_METHOD
from tests.exporters.otlp_receiver import (
    OtlpReceiver,
    sample_context,
    sample_metrics_data,
)

# A librdkafka producer pushes 10 metrics with one point each.
PUSH = sample_metrics_data(gauges=9).SerializeToString()
POINTS_PER_PUSH = 10


def best_rate(repeats: int, records: int, run: Callable[[], None]) -> float:
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = max(best, records / (time.perf_counter() - start))
    return best


def baseline(target: str, records: int, compression: grpc.Compression) -> None:
    with grpc.insecure_channel(target) as channel:
        export = channel.unary_unary(EXPORT_METHOD)
        for _ in range(records):
            export(PUSH, timeout=5, compression=compression)


def forward(
    directory: Path, config: OtlpExporterConfig, records: int, fresh: int
) -> None:
    forwarder = OtlpForwarder([directory], config, exporter_name=f"otlp/run{fresh}")
    try:
        stats = forwarder.run_once()
    finally:
        forwarder.close()
    assert stats.records_committed == records, stats


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compression", choices=["none", "gzip"], default="none")
    args = parser.parse_args()
    grpc_compression = {
        "none": grpc.Compression.NoCompression,
        "gzip": grpc.Compression.Gzip,
    }

    with tempfile.TemporaryDirectory() as tmp, OtlpReceiver() as receiver:
        directory = Path(tmp) / "landing" / "node-1"
        with LandingLog(
            directory, LandingOptions(fsync="never"), housekeeping=False
        ) as log:
            context = sample_context()
            for _ in range(args.records):
                log.append(context, PUSH)

        base = best_rate(
            args.repeats,
            args.records,
            lambda: baseline(
                receiver.target, args.records, grpc_compression[args.compression]
            ),
        )
        print(
            f"baseline bare gRPC stub, 1 push/request: {base:10.0f} pushes/s "
            f"{base * POINTS_PER_PUSH:12.0f} points/s  ratio 1.00"
        )

        cases: dict[str, dict[str, object]] = {
            "forwarder, 1 push/request": {},
            "forwarder, sending_queue.batch (8192 points)": {
                "sending_queue": {"batch": {}}
            },
        }
        runs = iter(
            range(10**6)
        )  # each run reads the log from 0 under a fresh consumer name

        def run(config: OtlpExporterConfig) -> None:
            forward(directory, config, args.records, next(runs))

        for name, overrides in cases.items():
            config = OtlpExporterConfig.model_validate(
                {
                    "endpoint": receiver.target,
                    "tls": {"insecure": True},
                    "compression": args.compression,
                    **overrides,
                }
            )
            rate = best_rate(
                args.repeats,
                args.records,
                functools.partial(run, config),
            )
            print(
                f"{name:41s}: {rate:10.0f} pushes/s {rate * POINTS_PER_PUSH:12.0f} points/s"
                f"  ratio {rate / base:.2f}"
            )
        again = best_rate(
            args.repeats,
            args.records,
            lambda: baseline(
                receiver.target, args.records, grpc_compression[args.compression]
            ),
        )
        print(f"baseline measured again (machine noise): {again:10.0f} pushes/s")


if __name__ == "__main__":
    main()
