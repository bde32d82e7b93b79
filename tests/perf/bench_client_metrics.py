"""/metrics/clients benchmark (docs/prometheus.md): the series budget under 100,000 client
instances over the wire, the push path's CPU with the endpoint on and off, and a scrape of
the whole budget against prometheus_client's own exposition of the same series.

1. **Over the wire.** ``ktc serve`` as a subprocess, twice in one run: with
   ``/metrics/clients`` (``prometheus.clients.max.series`` at its default, 25,000) and
   with ``prometheus.clients.enable: false``.  The load generator (tests/perf/loadgen.py)
   creates ``--instances`` client instances (100,000; the manager's cache is sized to keep
   them all) on 200 connections and pushes librdkafka-shaped payloads on a fixed schedule.
   While it runs the endpoint is scraped every 2 s: the series it shows never exceed the
   budget, and its time and the server's RSS are recorded.  Printed: CPU per push on and
   off and their ratio, the largest scrape, the scrape times, peak RSS on and off.
2. **In process.** A ClientSeries folded with enough instances to fill the budget twice
   over; the time to fold a push, and the time to build one exposition of the full budget
   (the cached page invalidated each time) against prometheus_client's ``generate_latest``
   over a collector yielding the same samples with the same labels (the library the
   collector's own /metrics uses): the ratio is printed.  And the fold's data points per
   CPU second on pushes to series that exist, against protobuf-python decoding the same
   payloads and reading every field the fold reads.

Run: ``.venv/bin/python tests/perf/bench_client_metrics.py`` (about five minutes on 2 cores;
``--quick``: 20,000 instances, shorter windows; ``make bench`` runs it with ``--check``).
``--check`` exits 1 when the page exceeded the budget, a scrape's p90 over the wire or the
in-process page of the whole budget took a second or more, or the collector's RSS (its
fold process included) with the endpoint was more than twice its RSS without it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.perf.loadgen import (
    OPEN,
    OPEN_PERIOD_FACTOR,
    producer_payload,
    run_load_blocking,
)

BUDGET = 25_000  # prometheus.clients.max.series, its default


def rss_mib(pid: int) -> float:
    """The resident memory of ``pid`` and its children (the fold process is one)."""
    total = 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) / 1024
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:  # it exited
        return total
    return total + sum(rss_mib(int(child)) for child in children)


def _wait_for_file(
    path: Path, proc: subprocess.Popen[bytes], timeout_s: float = 60
) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear")
        time.sleep(0.05)
    return path.read_text()


@contextlib.contextmanager
def collector(
    tmp: Path, endpoint_on: bool, instances: int, interval_ms: int
) -> Iterator[tuple[int, int, int]]:
    """``ktc serve``: (kafka port, http port, pid)."""
    from subscriptions.store import ConfigStore

    data_dir = tmp / "data"
    ConfigStore(data_dir).alter_subscription(
        "bench",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": str(interval_ms)},
        [],
    )
    config = tmp / "ktc.yaml"
    config.write_text(
        "listeners: PLAINTEXT://127.0.0.1:0\n"
        "http.listener: 127.0.0.1:0\n"
        f"data.dir: {data_dir}\n"
        "log.level: WARNING\n"
        "connection.max.inflight.requests: 100000\n"
        f"telemetry.instance.cache.max.size: {instances + 1000}\n"
        f"prometheus.clients.enable: {'true' if endpoint_on else 'false'}\n"
        f"prometheus.clients.max.series: {BUDGET}\n"
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
    try:
        info = json.loads(_wait_for_file(ready, proc))
        yield (
            int(next(iter(info["listeners"].values()))),
            int(info["http_port"]),
            proc.pid,
        )
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Scraper(threading.Thread):
    """Scrapes /metrics/clients every ``period_s`` until stopped; records series and time."""

    def __init__(self, http_port: int, pid: int, period_s: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{http_port}/metrics/clients"
        self.pid = pid
        self.period_s = period_s
        self.stop = threading.Event()
        self.scrapes: list[tuple[int, float, int]] = []  # (series, seconds, bytes)
        self.rss: list[float] = []

    def run(self) -> None:
        while not self.stop.wait(self.period_s):
            started = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=30) as response:
                body = response.read()
            elapsed = time.perf_counter() - started
            series = sum(
                1 for line in body.split(b"\n") if line and not line.startswith(b"#")
            )
            self.scrapes.append((series, elapsed, len(body)))
            self.rss.append(rss_mib(self.pid))


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.rss: list[float] = []

    def run(self) -> None:
        while not self.stop.wait(2.0):
            self.rss.append(rss_mib(self.pid))


def over_the_wire(args: argparse.Namespace, endpoint_on: bool) -> dict[str, object]:
    rate = args.rate
    interval_ms = int(args.instances / rate / OPEN_PERIOD_FACTOR * 1000)
    with (
        tempfile.TemporaryDirectory() as tmp,
        collector(Path(tmp), endpoint_on, args.instances, interval_ms) as (
            port,
            http_port,
            pid,
        ),
    ):
        sampler: Scraper | RssSampler = (
            Scraper(http_port, pid) if endpoint_on else RssSampler(pid)
        )
        sampler.start()
        try:
            result = run_load_blocking(
                "127.0.0.1", port, instances=args.instances, connections=200,
                interval_ms=interval_ms, duration_s=args.duration_s, warmup_s=1.0,
                mode=OPEN, workers=2, server_pid=pid,
            )  # fmt: skip
        finally:
            sampler.stop.set()
            sampler.join(60)
        out: dict[str, object] = {
            "endpoint": "on" if endpoint_on else "off",
            "instances": args.instances,
            "offered_pushes_per_s": round(result.offered_per_s),
            "pushes_ok": result.pushes_ok,
            "errors": result.errors,
            "server_cpu_us_per_push": round(result.server_cpu_us_per_push, 1),
            "peak_rss_mib": round(max(sampler.rss, default=float("nan")), 1),
        }
        if isinstance(sampler, Scraper) and sampler.scrapes:
            series = [s for s, _, _ in sampler.scrapes]
            seconds = sorted(t for _, t, _ in sampler.scrapes)
            out.update(
                scrapes=len(sampler.scrapes),
                max_series=max(series),
                budget=BUDGET,
                budget_held=max(series) <= BUDGET,
                scrape_s_median=round(statistics.median(seconds), 3),
                scrape_s_p90=round(seconds[int(0.9 * (len(seconds) - 1))], 3),
                scrape_s_max=round(seconds[-1], 3),
                largest_page_mib=round(
                    max(b for _, _, b in sampler.scrapes) / 2**20, 1
                ),
            )
        return out


def _data_points(payload: bytes) -> int:
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    return sum(
        len(getattr(metric, str(metric.WhichOneof("data"))).data_points)
        for resource in MetricsData.FromString(payload).resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    )


def _decode_every_field(payload: bytes) -> int:
    """protobuf-python's full decode of a push, and a read of every field the fold reads
    (what the fold did before it walked the bytes)."""
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    read = 0
    for resource in MetricsData.FromString(payload).resource_metrics:
        for attribute in resource.resource.attributes:
            read += len(attribute.key) + len(attribute.value.string_value)
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                read += len(metric.name) + len(metric.unit) + len(metric.description)
                if kind not in ("gauge", "sum"):
                    continue
                for point in getattr(metric, kind).data_points:
                    read += (
                        point.flags + point.time_unix_nano + point.start_time_unix_nano
                    )
                    read += int(point.as_double) + point.as_int
                    for attribute in point.attributes:
                        read += len(attribute.key) + len(attribute.value.string_value)
    return read


def in_process(args: argparse.Namespace) -> dict[str, object]:
    """Fold and render the full budget in this process, against prometheus_client."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.parser import text_string_to_metric_families

    from collector.telemetry.prometheus.client_series import (
        ClientSeries,
        ClientSeriesSettings,
    )
    from exporters.context import TelemetryContext

    payload = producer_payload(1)
    series = ClientSeries(
        ClientSeriesSettings.parse(BUDGET, None, None), lambda _: True
    )
    per_instance = 12  # producer_payload's series
    count = 2 * BUDGET // per_instance + 100
    batch = [
        (
            TelemetryContext(
                f"instance-{i:07d}", f"loadgen-{i % 200}", "loadgen", "1.0", "127.0.0.1", 1,
                "PLAINTEXT", "PLAINTEXT", "User:ANONYMOUS", 1000, False, i, 1, "c", 1, 0,
            ),
            payload,
        )
        for i in range(count)
    ]  # fmt: skip
    started = time.perf_counter()
    series._fold(batch)
    fold_us = (time.perf_counter() - started) / count * 1e6
    # The fold of pushes to series that exist (every later push of a client), against
    # protobuf-python decoding the same payloads and reading every field the fold reads:
    # data points per CPU second, the same payloads in the same process.
    fold_cpu = []
    for _ in range(args.repeats):
        started = time.process_time()
        series._fold(batch)
        fold_cpu.append(time.process_time() - started)
    decode_cpu = []
    for _ in range(args.repeats):
        started = time.process_time()
        for _, body in batch:
            _decode_every_field(body)
        decode_cpu.append(time.process_time() - started)
    points = count * _data_points(payload)
    renders = []
    body = b""
    for _ in range(args.repeats):
        series._generation += 1  # a change since the last page: build it again
        started = time.perf_counter()
        body = series._fold_and_render([], False)
        renders.append(time.perf_counter() - started)
    samples = [
        (s.name, s.labels, s.value, family.type)
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    ]

    class Same:
        def collect(self):
            families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
            for name, labels, value, kind in samples:
                family = families.get(name)
                if family is None:
                    keys = list(labels)
                    family = families[name] = (
                        CounterMetricFamily(name, "help", labels=keys)
                        if kind == "counter"
                        else GaugeMetricFamily(name, "help", labels=keys)
                    )
                family.add_metric(list(labels.values()), value)
            return iter(families.values())

    registry = CollectorRegistry()
    registry.register(Same())
    baseline = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        generate_latest(registry)
        baseline.append(time.perf_counter() - started)
    series.close()
    ours, theirs = statistics.median(renders), statistics.median(baseline)
    return {
        "instances_folded": count,
        "fold_us_per_push": round(fold_us, 1),
        "fold_points_per_cpu_s": round(points / statistics.median(fold_cpu)),
        "protobuf_decode_points_per_cpu_s": round(
            points / statistics.median(decode_cpu)
        ),
        "fold_vs_protobuf_decode": round(
            statistics.median(decode_cpu) / statistics.median(fold_cpu), 2
        ),
        "series_shown": len(samples),
        "budget": BUDGET,
        "scrape_s": round(ours, 3),
        "prometheus_client_s": round(theirs, 3),
        "ratio_vs_prometheus_client": round(ours / theirs, 2),
    }


# --check's bounds over the wire: the page never above the budget, its scrape's p90 under a
# second, and the collector's memory with the endpoint (its fold process included) at most
# twice its memory without it.
SCRAPE_P90_MAX_S = 1.0
RSS_ON_OVER_OFF_MAX = 2.0


def _wire_targets_met(on: dict[str, object], off: dict[str, object]) -> bool:
    p90, rss_on, rss_off = (
        on.get("scrape_s_p90"),
        on["peak_rss_mib"],
        off["peak_rss_mib"],
    )
    assert isinstance(rss_on, float) and isinstance(rss_off, float)
    checks = {
        "budget held": bool(on.get("budget_held", False)),
        f"scrape p90 {p90} s <= {SCRAPE_P90_MAX_S} s": isinstance(p90, float)
        and p90 <= SCRAPE_P90_MAX_S,
        f"RSS on/off {rss_on / rss_off:.2f} <= {RSS_ON_OVER_OFF_MAX}": rss_on
        <= RSS_ON_OVER_OFF_MAX * rss_off,
    }
    for check, met in checks.items():
        print(f"{'PASS' if met else 'MISS'}  {check}")
    return all(checks.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=2000.0, help="pushes/s offered")
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--skip-wire", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.instances, args.duration_s, args.repeats = 20_000, 15.0, 3
    report: dict[str, object] = {"in_process": in_process(args)}
    print(json.dumps(report["in_process"]), flush=True)
    if not args.skip_wire:
        runs = []
        for endpoint_on in (True, False):
            runs.append(over_the_wire(args, endpoint_on))
            print(json.dumps(runs[-1]), flush=True)
        on, off = runs
        on_us, off_us = on["server_cpu_us_per_push"], off["server_cpu_us_per_push"]
        assert isinstance(on_us, int | float) and isinstance(off_us, int | float)
        report["push_cpu_ratio_on_vs_off"] = round(on_us / off_us, 2)
        print(
            json.dumps({"push_cpu_ratio_on_vs_off": report["push_cpu_ratio_on_vs_off"]})
        )
        if args.check and not _wire_targets_met(on, off):
            return 1
    in_proc = report["in_process"]
    assert isinstance(in_proc, dict)
    if args.check and float(in_proc["scrape_s"]) >= 1.0:
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
