"""Landing log throughput: appends/s under each fsync policy against a baseline measured in
the same run: the same three buffers per record, pre-encoded, written with one writev to
/dev/null (the bare syscall: no file system, no encoding, no CRC). A second reference,
the same writev to a regular file in the same directory, shows what the file system
itself costs. Each case is the best of ``--repeats`` runs (the machine is shared).

    .venv/bin/python tests/perf/bench_landing.py [--records 20000] [--payload-bytes 2048]

Prints one line per case with appends/s, MB/s and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from exporters.context import TelemetryContext
from exporters.landing import LandingLog, LandingOptions, LandingReader
from exporters.landing.format import encode_context, encode_record_head


def context_for(index: int) -> TelemetryContext:
    return TelemetryContext(
        client_instance_id="AAAAAAAAAAAAAAAAAAAAAA",
        client_id=f"client-{index % 1000}",
        client_software_name="confluent-kafka-python",
        client_software_version="2.16.1",
        client_source_address="10.0.0.1",
        client_source_port=40000 + index % 1000,
        listener_name="PLAINTEXT",
        security_protocol="PLAINTEXT",
        principal="User:ANONYMOUS",
        push_interval_ms=1000,
        terminating=False,
        received_time_unix_nano=time.time_ns(),
        node_id=1,
        cluster_id="bench",
        subscription_id=1,
        compression_type=4,
        correlation_id=index,
    )


def timed(records: int, run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return records / (time.perf_counter() - start)


def raw_writev(path: str, contexts: list[TelemetryContext], payload: bytes) -> float:
    """One writev of pre-encoded buffers per record to ``path``."""
    marker = os.urandom(16)
    encoded = [encode_context(c) for c in contexts]
    buffers = [
        (encode_record_head(marker, i, 0, e, payload), e, payload)
        for i, e in enumerate(encoded)
    ]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def run() -> None:
        for parts in buffers:
            os.writev(fd, parts)

    try:
        return timed(len(buffers), run)
    finally:
        os.close(fd)


def best_of(repeats: int, measure: Callable[[int], float]) -> float:
    return max(measure(attempt) for attempt in range(repeats))


def landing(
    directory: Path,
    fsync: str,
    contexts: list[TelemetryContext],
    payload: bytes,
    batch: int,
) -> float:
    group_commit = fsync == "group"
    write_behind = fsync == "write-behind"
    with LandingLog(
        directory,
        LandingOptions(
            fsync="always" if group_commit else "never" if write_behind else fsync,
            group_commit=group_commit,
            write_behind=write_behind,
            segment_max_bytes=64 << 20,
        ),
    ) as log:
        if write_behind:
            # The collector's way: export (stage) each push, flush() once per read.
            def run() -> None:
                for start in range(0, len(contexts), batch):
                    for context in contexts[start : start + batch]:
                        log.export(context, payload)
                    log.flush()
        elif group_commit:
            # The collector's way: append each push, sync() once per read of requests.
            def run() -> None:
                for start in range(0, len(contexts), batch):
                    for context in contexts[start : start + batch]:
                        log.append(context, payload)
                    log.sync()
        elif batch == 1:

            def run() -> None:
                for context in contexts:
                    log.append(context, payload)
        else:

            def run() -> None:
                for start in range(0, len(contexts), batch):
                    log.append_many(
                        [(c, payload) for c in contexts[start : start + batch]]
                    )

        return timed(len(contexts), run)


def read_all(directory: Path, records: int) -> float:
    def run() -> None:
        count = sum(1 for _ in LandingReader(directory).read(0))
        assert count == records, count

    return timed(records, run)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument(
        "--always-records",
        type=int,
        default=300,
        help="records for fsync=always one by one (one fsync each)",
    )
    parser.add_argument("--payload-bytes", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    payload = os.urandom(args.payload_bytes)
    contexts = [context_for(i) for i in range(args.records)]
    record_bytes = 45 + len(encode_context(contexts[0])) + len(payload)

    def line(name: str, rate: float, unit: str = "appends/s") -> None:
        print(
            f"{name:<50} {rate:>10,.0f} {unit:<10} {rate * record_bytes / 1e6:7.1f} MB/s"
            f"   ratio to baseline {rate / base:.2f}"
        )

    with tempfile.TemporaryDirectory(prefix="bench-landing-") as root:
        base = best_of(
            args.repeats, lambda _: raw_writev(os.devnull, contexts, payload)
        )
        print(f"record {record_bytes} bytes, best of {args.repeats}")
        line("baseline: writev to /dev/null", base, "writes/s")
        line(
            "reference: writev to a file",
            best_of(
                args.repeats, lambda n: raw_writev(f"{root}/raw-{n}", contexts, payload)
            ),
            "writes/s",
        )
        cases = [  # (label, fsync mode, records, batch)
            ("fsync=never", "never", args.records, 1),
            ("fsync=never, write-behind, flush()/32", "write-behind", args.records, 32),
            ("fsync=interval", "interval", args.records, 1),
            ("fsync=always, append_many x100", "always", args.records, 100),
            ("fsync=always, group_commit, sync()/100", "group", args.records, 100),
            ("fsync=always, one by one", "always", args.always_records, 1),
        ]
        for index, (label, mode, records, batch) in enumerate(cases):

            def measure(
                n: int, i: int = index, m: str = mode, r: int = records, b: int = batch
            ) -> float:
                return landing(
                    Path(root) / f"case-{i}-{n}", m, contexts[:r], payload, b
                )

            rate = best_of(args.repeats, measure)
            line(f"LandingLog {label}", rate)
        line(
            "LandingReader.read",
            best_of(
                args.repeats, lambda _: read_all(Path(root) / "case-0-0", args.records)
            ),
            "records/s",
        )


if __name__ == "__main__":
    main()
