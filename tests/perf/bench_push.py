"""Push-path benchmark: the full collector against a minimal baseline, in one run.

Both servers run as subprocesses for the whole run: ``ktc serve`` (landing log on, default
fsync policy, every check, metrics and quotas as shipped) and baseline_server.py (same
process model: one uvloop process that frames, decompresses, parses the OTLP payload and
acks).  The load generator (tests/perf/loadgen.py) runs in its own worker processes.
Each round measures, alternating between the two servers so that drifting load from
other jobs on the machine hits both alike:

1. **Peak throughput.** Closed-loop load with more instances than either server can take
   (each instance pushes one interval after its answer), so each runs at its peak.
   Target: full collector >= 0.6 x baseline (median of the rounds' ratios).
2. **Latency at one offered rate.** Open-loop load (instances push on a fixed schedule,
   answers or not) at the same rate for both servers, 20,000 pushes/s (``--latency-rate``),
   with the server alone on one core and the load generator on the other
   (``--no-pin`` shares them).  Target: the collector's p99 <= 2 x the baseline's p99
   (median of the rounds' ratios; each round measures both, back to back).  The rate is
   one both servers sustain with room to spare, so the tail measures each server's own
   time per push rather than queueing on a saturated core; each server's CPU per push and
   core use in this phase are printed to show how far from saturation it ran.
3. **Memory.** 16,384 client instances created in a ClientMetricsManager in this process,
   measured with tracemalloc.  Target: <= 2 KiB per instance, cache bookkeeping included.

Besides pushes/s it prints each server's CPU time per push (from /proc, over the measured
window): its capacity on an idle core, which other jobs on a shared machine do not move.

``--clients-endpoint`` adds a third server to every round: the full collector with
``prometheus.clients.enable: true`` (``/metrics/clients`` folding every push,
docs/prometheus.md), the first one then runs with it ``false`` in its config, so the
endpoint's cost per push is measured side by side with it off.  ``--compare "KEY: VALUE"``
adds a third server the same way, with that line added to the shipped config (e.g.
``--compare "clients.inventory.enable: false"``).

Run: ``.venv/bin/python tests/perf/bench_push.py`` (about four minutes; ``--quick`` for a
short smoke run; ``--check`` exits 1 when a target is missed).  On 2 cores the servers
share the machine with the load generator, so absolute numbers depend on the machine;
the ratios are the point.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
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

from tests.perf.loadgen import (
    CLOSED,
    OPEN,
    OPEN_PERIOD_FACTOR,
    LoadResult,
    process_cpu_s,
    run_load_blocking,
)

INTERVAL_MS = 100
TARGET_RATIO = 0.6
TARGET_P99_RATIO = 2.0
LATENCY_RATE = 20_000
TARGET_BYTES_PER_INSTANCE = 2048
CACHE_INSTANCES = 16_384


def _wait_for_file(
    path: Path, proc: subprocess.Popen[bytes], timeout_s: float = 30
) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            raise RuntimeError(
                f"server exited with {proc.returncode} before it was ready"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {timeout_s} s")
        time.sleep(0.05)
    return path.read_text()


@contextlib.contextmanager
def _serving(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def full_collector_process(
    tmp: Path, extra_config: str = ""
) -> Iterator[tuple[int, int]]:
    """``ktc serve`` with a subscription every load instance matches: (port, pid).
    ``extra_config``: more lines of its YAML config (each ending in a newline)."""
    from subscriptions.store import ConfigStore

    tmp.mkdir(parents=True, exist_ok=True)
    data_dir = tmp / "data"
    ConfigStore(data_dir).alter_subscription(
        "bench",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": str(INTERVAL_MS)},
        [],
    )
    config = tmp / "ktc.yaml"
    config.write_text(
        "listeners: PLAINTEXT://127.0.0.1:0\n"
        "http.listener: null\n"
        f"data.dir: {data_dir}\n"
        "log.level: WARNING\n"
        "connection.max.inflight.requests: 100000\n" + extra_config
    )
    ready = tmp / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "collector.app.cli",
            "serve",
            "--config",
            str(config),
            "--ready-file",
            str(ready),
        ],
        cwd=ROOT,
    )
    with _serving(proc):
        info = json.loads(_wait_for_file(ready, proc))
        yield int(next(iter(info["listeners"].values()))), proc.pid


@contextlib.contextmanager
def full_collector(tmp: Path) -> Iterator[int]:
    """The collector's port only (what bench_push_quotas.py uses)."""
    with full_collector_process(tmp) as (port, _):
        yield port


@contextlib.contextmanager
def baseline_process(tmp: Path) -> Iterator[tuple[int, int]]:
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
    with _serving(proc):
        yield int(_wait_for_file(ready, proc)), proc.pid


def measure_peak(port: int, pid: int, args: argparse.Namespace) -> LoadResult:
    return run_load_blocking(
        "127.0.0.1",
        port,
        instances=args.peak_instances,
        connections=args.connections,
        interval_ms=INTERVAL_MS,
        duration_s=args.duration_s,
        mode=CLOSED,
        workers=args.workers,
        server_pid=pid,
    )


def _children_cpu_s(pid: int) -> float:
    """User + system CPU seconds of the processes ``pid`` started (Linux /proc)."""
    total = 0.0
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            children = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
            for child in children:
                with contextlib.suppress(OSError, IndexError, ValueError):
                    total += process_cpu_s(int(child))
    return total


def _runqueue_wait_s(pid: int) -> float:
    """Seconds the server's event loop (its main thread: both servers run their loop there)
    has spent runnable but waiting for a CPU: the second field of
    /proc/<pid>/task/<pid>/schedstat, 0 where there is none.  Only the loop's wait delays
    answers; the collector's helper threads (file watchers, the landing log's housekeeper)
    share its core and wait for the loop to yield it, which is their wait, not the loop's."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        return (
            int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[1]) / 1e9
        )
    return 0.0


# pid -> run-queue wait per second of the last measure_at_rate on that server.
RUNQUEUE_WAIT_MS_PER_S: dict[int, list[float]] = {}


def measure_at_rate(
    port: int, pid: int, rate_per_s: float, args: argparse.Namespace
) -> LoadResult:
    """Open loop at ``rate_per_s``: instances / period pushes per second, the period being
    1.25 x the push interval (loadgen.OPEN_PERIOD_FACTOR).  Also records how long the
    server waited for its CPU, per second of the run (its own core taken by other jobs)."""
    period_s = INTERVAL_MS / 1000.0 * OPEN_PERIOD_FACTOR
    wait_before, started = _runqueue_wait_s(pid), time.monotonic()
    try:
        return _run_at_rate(port, pid, rate_per_s, period_s, args)
    finally:
        waited = _runqueue_wait_s(pid) - wait_before
        RUNQUEUE_WAIT_MS_PER_S.setdefault(pid, []).append(
            1000.0 * waited / (time.monotonic() - started)
        )


def _run_at_rate(
    port: int, pid: int, rate_per_s: float, period_s: float, args: argparse.Namespace
) -> LoadResult:
    with _cores_apart(pid, args):
        return run_load_blocking(
            "127.0.0.1",
            port,
            instances=max(args.connections, round(rate_per_s * period_s)),
            connections=args.connections,
            interval_ms=INTERVAL_MS,
            duration_s=args.duration_s,
            mode=OPEN,
            workers=args.latency_workers,
            server_pid=pid,
        )


def _threads(pid: int) -> list[int]:
    """Every thread of a process (Linux applies affinity and scheduling per thread)."""
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]


def _place(
    pid: int, cpus: set[int], *, realtime: bool = False, niceness: int = 0
) -> bool:
    """Every thread of ``pid`` on ``cpus``, SCHED_RR (priority 1) or SCHED_OTHER at
    ``niceness``; False when the kernel refused the scheduling part (no CAP_SYS_NICE)."""
    applied = True
    for tid in _threads(pid):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(tid, cpus)
            try:
                if realtime:
                    os.sched_setscheduler(tid, os.SCHED_RR, os.sched_param(1))
                else:
                    os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                    os.setpriority(os.PRIO_PROCESS, tid, niceness)
            except PermissionError:
                applied = False
    return applied


# How the last latency phase ran: "SCHED_RR", "nice -10", "shared cores", ...
PLACEMENT: list[str] = []


@contextlib.contextmanager
def _cores_apart(server_pid: int, args: argparse.Namespace) -> Iterator[None]:
    """For the latency phase, a core of its own for the server: every thread of it alone
    on the last CPU, this process and the load workers it spawns (they inherit the mask
    and the niceness) on the others, as a latency test runs its load generator off the
    cores of the system under test.  Unpinned, on 2 cores, the scheduler time-slices the
    server with the load processes, and their slices (ms long) are what the p99 measures.

    On a machine other jobs share, pinning alone does not keep them off the server's core,
    and their slices set the tail instead (the bench prints how long the server waited for
    its CPU).  So the server runs SCHED_RR (``--no-realtime``: at ``--niceness``), which
    no ordinary job preempts; the kernel's real-time throttling still leaves others 5 % of
    that core, and the server uses a fraction of it at the offered rate.  The load runs at
    ``--niceness``.  Both servers get the same treatment; without Linux's
    sched_setaffinity, or with one CPU, nothing is pinned.  The peak phase stays
    unpinned (one core of load could not saturate either server)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
    if args.no_pin or len(cpus) < 2:
        PLACEMENT.append("shared cores")
        yield
        return
    realtime = not args.no_realtime
    server_ok = _place(
        server_pid, {cpus[-1]}, realtime=realtime, niceness=args.niceness
    )
    load_ok = _place(os.getpid(), set(cpus[:-1]), niceness=args.niceness)
    PLACEMENT.append(
        "server on a core of its own"
        + (
            f", {'SCHED_RR' if realtime else f'nice {args.niceness}'}"
            if server_ok
            else ""
        )
        + (f", load at nice {args.niceness}" if load_ok else "")
    )
    try:
        yield
    finally:
        _place(os.getpid(), set(cpus))
        _place(server_pid, set(cpus))


def memory_per_instance(count: int = CACHE_INSTANCES) -> float:
    """Bytes allocated per cached instance (instance, metadata, subscription, LRU and
    expiry-heap bookkeeping, and the landing log's remembered context part), measured with
    tracemalloc."""
    from collector.core.session import Session
    from collector.telemetry.client_metrics import ClientMetricsManager
    from exporters.base import ExportResult
    from exporters.context import TelemetryContext
    from exporters.landing.format import encode_context
    from subscriptions.effective import resolve
    from subscriptions.kafka_uuid import kafka_uuid_to_str
    from subscriptions.model import Subscription

    subscriptions = [
        Subscription.from_configs(
            "bench",
            {"metrics": "org.apache.kafka.producer.", "interval.ms": str(INTERVAL_MS)},
        )
    ]

    class Source:
        version = 1

        def resolve(self, metadata, instance_id, proposed=None):
            return resolve(
                subscriptions if proposed is None else proposed, metadata, instance_id
            )

    class NullExporter:
        def export(self, context, payload):
            return ExportResult.success()

        def close(self) -> None:
            pass

    def session(connection_id: int) -> Session:
        return Session(
            connection_id,
            "PLAINTEXT",
            "PLAINTEXT",
            client_software_name="confluent-kafka-python",
            client_software_version="2.16.1-rdkafka-2.16.0",
            client_source_address="10.1.2.3",
            client_source_port=40000 + connection_id % 20000,
        )

    # One connection per instance, as librdkafka clients have (the worst case for us).
    connections = [session(i) for i in range(count)]
    client_ids = [f"app-{i % 500}" for i in range(count)]
    ids = iter([uuid.uuid4() for _ in range(count)])
    manager = ClientMetricsManager(
        subscriptions=Source(),
        exporter=NullExporter(),
        instance_id_to_str=kafka_uuid_to_str,
        new_instance_id=lambda: next(ids),
        cache_max_size=count,
    )
    zero = uuid.UUID(int=0)
    manager.get_telemetry_subscriptions(
        uuid.uuid4(), connections[0], "warm-up", 0
    )  # lazy caches
    manager.connection_closed(0)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(count):
        response = manager.get_telemetry_subscriptions(
            zero, connections[i], client_ids[i], i
        )
        # What the landing log keeps per instance: the encoded constant part of its context
        # (exporters/landing/format.py), remembered at the instance's first push.
        instance = manager.instance(response.client_instance_id)
        assert instance is not None
        encode_context(
            TelemetryContext(
                instance.instance_id_str,
                client_ids[i],
                connections[i].client_software_name,
                connections[i].client_software_version,
                connections[i].client_source_address,
                connections[i].client_source_port,
                connections[i].listener_name,
                connections[i].security_protocol,
                connections[i].principal,
                instance.push_interval_ms,
                False,
                1_763_750_000_000_000_000 + i,
                1,
                "bench-cluster",
                instance.subscription_id,
                4,
                i,
            )
        )
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert manager.instance_count == count
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return grown / count


def _cpu_ticks() -> tuple[int, int]:
    """(steal, all) jiffies of the whole machine, from /proc/stat (Linux; (0, 0) elsewhere).
    Steal is time the hypervisor gave this VM's virtual CPUs to someone else: a virtual
    CPU that is not running stalls every process on it, which no server can hide."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0, 0
    ticks = [int(value) for value in fields]
    return (ticks[7] if len(ticks) > 7 else 0), sum(ticks[:8])


def _median(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="one short round (smoke test)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    # At most the collector's default instance cache (telemetry.instance.cache.max.size,
    # 16,384 as in Kafka): with more instances than that pushing in turn, the LRU evicts
    # each one before its next push and every push re-creates its instance, which is the
    # cache working as designed for a too-small setting, not the push path's cost.  16,000
    # instances at a 100 ms interval offer 160,000 pushes/s, more than either server takes.
    parser.add_argument("--peak-instances", type=int, default=16_000)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--duration-s", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=2, help="load processes at peak")
    parser.add_argument(
        "--latency-rate",
        type=float,
        default=LATENCY_RATE,
        help="pushes/s offered to both servers in the latency phase",
    )
    parser.add_argument(
        "--latency-workers",
        type=int,
        default=2,
        help="load processes in the latency phase",
    )
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="latency phase: leave the server and the load on shared cores (see _cores_apart)",
    )
    parser.add_argument(
        "--no-realtime",
        action="store_true",
        help="latency phase: leave the server SCHED_OTHER at --niceness (see _cores_apart)",
    )
    parser.add_argument(
        "--niceness",
        type=int,
        default=-10,
        help="latency phase: the load generator's nice value (below 0 needs CAP_SYS_NICE)",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when a target is missed"
    )
    parser.add_argument(
        "--clients-endpoint",
        action="store_true",
        help="also measure the full collector with prometheus.clients.enable: true "
        "(the first one then sets it false)",
    )
    parser.add_argument(
        "--compare",
        metavar="'KEY: VALUE'",
        help="also measure the full collector with this line added to its config",
    )
    parser.add_argument("--json", type=Path, help="also write the full report here")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.peak_instances, args.duration_s = 1, 8000, 2.0

    rounds: list[dict[str, LoadResult]] = []
    steal_before, ticks_before = _cpu_ticks()
    with tempfile.TemporaryDirectory(prefix="ktc-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with contextlib.ExitStack() as stack:
            full = stack.enter_context(
                full_collector_process(
                    tmp,
                    "prometheus.clients.enable: false\n"
                    if args.clients_endpoint
                    else "",
                )
            )
            base = stack.enter_context(baseline_process(tmp))
            servers = {"full": full, "baseline": base}
            if args.clients_endpoint or args.compare:
                other = (
                    "prometheus.clients.enable: true"
                    if args.clients_endpoint
                    else args.compare
                )
                servers["clients"] = stack.enter_context(
                    full_collector_process(tmp / "clients", other + "\n")
                )
            for index in range(args.rounds):
                # Alternate which server goes first, so a trend in machine load is shared.
                order: tuple[str, ...] = tuple(servers)
                if index % 2:
                    order = order[::-1]
                results: dict[str, LoadResult] = {}
                for name in order:
                    port, pid = servers[name]
                    results[f"{name}_peak"] = measure_peak(port, pid, args)
                for name in order:
                    port, pid = servers[name]
                    results[f"{name}_rate"] = measure_at_rate(
                        port, pid, args.latency_rate, args
                    )
                rounds.append(results)
                full_rate, base_rate = results["full_rate"], results["baseline_rate"]
                print(
                    f"round {index + 1}: peak full {results['full_peak'].pushes_per_s:,.0f}/s "
                    f"baseline {results['baseline_peak'].pushes_per_s:,.0f}/s; p99 at "
                    f"{args.latency_rate:,.0f}/s full {full_rate.percentile_ms(0.99):.2f} ms "
                    f"baseline {base_rate.percentile_ms(0.99):.2f} ms"
                    + (
                        f"; collector errors {full_rate.errors}"
                        if full_rate.errors
                        else ""
                    ),
                    flush=True,
                )
                if "clients_peak" in results:
                    print(
                        f"         {other}: peak "
                        f"{results['clients_peak'].pushes_per_s:,.0f}/s, p99 "
                        f"{results['clients_rate'].percentile_ms(0.99):.2f} ms",
                        flush=True,
                    )
            if args.clients_endpoint:
                # The fold runs in a child of the node (docs/prometheus.md): its CPU is
                # not the server's above; over the whole run, per push answered.
                fold_cpu_s = _children_cpu_s(servers["clients"][1])
                pushes = sum(
                    r[f"clients_{phase}"].pushes_ok
                    for r in rounds
                    for phase in ("peak", "rate")
                )
                print(
                    f"         fold process CPU: {fold_cpu_s:.1f} s over the run, "
                    f"{1e6 * fold_cpu_s / max(pushes, 1):.1f} us per push answered",
                    flush=True,
                )
    steal_after, ticks_after = _cpu_ticks()
    steal_percent = (
        100.0 * (steal_after - steal_before) / (ticks_after - ticks_before)
        if ticks_after > ticks_before
        else 0.0
    )
    per_instance = memory_per_instance()

    def med(key: str, fn) -> float:
        return _median([fn(r[key]) for r in rounds])

    def ratio_of(numerator: str, denominator: str, fn) -> float:
        """The median over rounds of each round's ratio (both measured minutes apart)."""
        return _median(
            [
                fn(r[numerator]) / fn(r[denominator])
                for r in rounds
                if fn(r[denominator])
            ]
        )

    def pushes_per_s(result: LoadResult) -> float:
        return result.pushes_per_s

    def p99(result: LoadResult) -> float:
        return result.percentile_ms(0.99)

    peak_full = med("full_peak", pushes_per_s)
    peak_base = med("baseline_peak", pushes_per_s)
    ratio = ratio_of("full_peak", "baseline_peak", pushes_per_s)
    cpu_full = med("full_peak", lambda r: r.server_cpu_us_per_push)
    cpu_base = med("baseline_peak", lambda r: r.server_cpu_us_per_push)
    p99_ratio = ratio_of("full_rate", "baseline_rate", p99)
    rate_errors = sum(sum(r["full_rate"].errors.values()) for r in rounds)

    checks = [
        (
            "peak pushes/s ratio",
            f"{ratio:.2f}",
            f">= {TARGET_RATIO}",
            ratio >= TARGET_RATIO,
        ),
        (
            f"p99 at {args.latency_rate:,.0f} pushes/s, collector / baseline",
            f"{p99_ratio:.2f}x",
            f"<= {TARGET_P99_RATIO:g}x",
            p99_ratio <= TARGET_P99_RATIO,
        ),
        (
            "memory per cached instance",
            f"{per_instance:.0f} B",
            f"<= {TARGET_BYTES_PER_INSTANCE} B",
            per_instance <= TARGET_BYTES_PER_INSTANCE,
        ),
        (
            f"push errors at {args.latency_rate:,.0f}/s",
            str(rate_errors),
            "0",
            rate_errors == 0,
        ),
    ]

    def both(
        label: str, fn, fmt: str, ratio_value: str = ""
    ) -> tuple[str, str, str, str]:
        return (
            label,
            format(med("full_rate", fn), fmt),
            format(med("baseline_rate", fn), fmt),
            ratio_value,
        )

    rate = f"{args.latency_rate:,.0f}/s"
    rows = [
        (
            "peak pushes/s (closed loop)",
            f"{peak_full:,.0f}",
            f"{peak_base:,.0f}",
            f"{ratio:.2f}",
        ),
        (
            "server CPU us per push at peak",
            f"{cpu_full:.1f}",
            f"{cpu_base:.1f}",
            f"{cpu_full / cpu_base:.2f}",
        ),
        both(f"pushes/s answered at {rate} (open loop)", pushes_per_s, ",.0f"),
        both(
            f"p50 ms at {rate}",
            lambda r: r.percentile_ms(0.50),
            ".2f",
            f"{ratio_of('full_rate', 'baseline_rate', lambda r: r.percentile_ms(0.50)):.2f}",
        ),
        both(f"p99 ms at {rate}", p99, ".2f", f"{p99_ratio:.2f}"),
        both(
            f"p999 ms at {rate}",
            lambda r: r.percentile_ms(0.999),
            ".2f",
            f"{ratio_of('full_rate', 'baseline_rate', lambda r: r.percentile_ms(0.999)):.2f}",
        ),
        both(
            f"server CPU us per push at {rate}",
            lambda r: r.server_cpu_us_per_push,
            ".1f",
        ),
        both(f"server core busy at {rate} %", lambda r: r.server_busy_percent, ".0f"),
        both(
            "load generator send lag p99 ms",
            lambda r: r.summary()["send_lag_p99_ms"],
            ".2f",
        ),
        (
            "server event loop waited for its CPU, ms/s",
            f"{_median(RUNQUEUE_WAIT_MS_PER_S.get(servers['full'][1], [])):.1f}",
            f"{_median(RUNQUEUE_WAIT_MS_PER_S.get(servers['baseline'][1], [])):.1f}",
            "",
        ),
    ]
    print(
        f"\nmedians of {len(rounds)} round(s), {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}, CPU stolen by the hypervisor "
        f"{steal_percent:.0f}%; latency phase: {', '.join(sorted(set(PLACEMENT)))}"
    )
    print(f"{'':42}{'full collector':>16}{'baseline':>12}{'ratio':>8}")
    for label, full_value, base_value, ratio_value in rows:
        print(f"{label:42}{full_value:>16}{base_value:>12}{ratio_value:>8}")
    if args.clients_endpoint or args.compare:
        # The same collector with /metrics/clients folding every push beside it off, or
        # with the --compare line beside it as shipped.
        heads = (
            ("endpoint off", "on", "on/off")
            if args.clients_endpoint
            else ("as shipped", "compared", "ratio")
        )
        if args.compare:
            print(f"\ncompared: {args.compare}")
        print(f"\n{'':42}{heads[0]:>16}{heads[1]:>12}{heads[2]:>8}")
        for label, key, fn, fmt in (
            ("peak pushes/s (closed loop)", "peak", pushes_per_s, ",.0f"),
            (
                "server CPU us per push at peak",
                "peak",
                lambda r: r.server_cpu_us_per_push,
                ".1f",
            ),
            (f"p99 ms at {rate}", "rate", p99, ".2f"),
            (
                f"server CPU us per push at {rate}",
                "rate",
                lambda r: r.server_cpu_us_per_push,
                ".1f",
            ),
        ):
            off, on = med(f"full_{key}", fn), med(f"clients_{key}", fn)
            print(
                f"{label:42}{format(off, fmt):>16}{format(on, fmt):>12}"
                f"{on / off if off else float('nan'):>8.2f}"
            )
    print()
    for label, value, target, ok in checks:
        print(f"{'PASS' if ok else 'MISS'}  {label}: {value} (target {target})")

    report = {
        "rounds": [{k: v.summary() for k, v in r.items()} for r in rounds],
        "throughput_ratio_full_over_baseline": round(ratio, 3),
        "latency_rate_per_s": args.latency_rate,
        "p99_ratio_full_over_baseline": round(p99_ratio, 3),
        "p99_ms": {
            "full": round(med("full_rate", p99), 3),
            "baseline": round(med("baseline_rate", p99), 3),
        },
        "server_cpu_us_per_push": {
            "full": round(cpu_full, 2),
            "baseline": round(cpu_base, 2),
        },
        "bytes_per_cached_instance": round(per_instance),
        "cpu_count": os.cpu_count(),
        "cpu_steal_percent": round(steal_percent, 1),
        "checks": {label: ok for label, _, _, ok in checks},
    }
    if args.clients_endpoint or args.compare:
        report["server_cpu_us_per_push_compared"] = {
            "off": round(cpu_full, 2),
            "on": round(med("clients_peak", lambda r: r.server_cpu_us_per_push), 2),
        }
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 1 if args.check and not all(ok for *_, ok in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
