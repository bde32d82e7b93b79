"""Soak: the real collector under steady load, churn and subscription changes for a long time,
watched for growth.

What runs:

* ``ktc serve`` as a subprocess with a fresh data dir (so the resident memory and open files
  sampled are the server's alone), landing log with its shipped defaults;
* the load generator (tests/perf/loadgen.py) in open mode at a **fixed offered rate**
  (``--rate`` pushes/s, default 200: a few per cent of one core, so the run measures growth,
  not saturation) over a fixed set of connections for the whole run;
* real librdkafka clients (confluent-kafka producers and consumers with
  ``enable.metrics.push``): ``--clients`` of them alive at any time, the oldest closed and a
  new one created every ``--churn-s`` seconds, each with a client id of its own;
* every ``--alter-s`` seconds a CLIENT_METRICS subscription is altered over the wire with
  IncrementalAlterConfigs, as ``kafka-client-metrics.sh`` does (a 4-step cycle: interval
  1 s, interval 2 s, a second subscription created, then deleted by deleting its keys).
  The altered subscriptions match only the librdkafka clients (``client_id=soak-.*``), so
  the load generator, which never re-asks for its subscription, keeps pushing.

Every ``--sample-s`` seconds it reads the server's VmRSS (/proc/<pid>/status) and open file
descriptors (/proc/<pid>/fd).  At the end it stops the server (SIGTERM drains), reads the
landing log back with ``exporters.landing.LandingReader`` and compares, per librdkafka
client id and for the load generator as a whole, the pushes that landed with the pushes the
clients saw acknowledged (librdkafka logs "PushTelemetryRequest succeeded" for each with
``debug=telemetry``; the load generator counts every push answered without error).

Pass/fail (exit 1 on a failure, 0 otherwise; the figures come from a linear least-squares
fit of the samples in the second half of the run, the first half being warm-up: caches fill,
the allocator settles, the instance cache reaches its steady size):

* **RSS**: fails when the slope exceeds ``RSS_SLOPE_BOUND_MIB_PER_H`` (16 MiB/h) *and* the
  fitted line rises more than ``RSS_WINDOW_GROWTH_BOUND_MIB`` (4 MiB) across the window.  A
  leak on the push path keeps at least one small object per push (>= 64 bytes in CPython):
  at 200 pushes/s that is >= 44 MiB/h, which the 30-minute run (a 15-minute fit, where
  4 MiB is 16 MiB/h: both bounds agree) fails by a factor of almost three, while a settled
  process's allocator noise stays within a MiB or two.  In the 2-minute run (a 1-minute fit,
  where one 1 MiB arena step reads as 60 MiB/h) the window bound decides: it fails on a
  leak of about 350 bytes per push or more.  So CI catches gross leaks and the documented
  run the small ones.
* **open files**: fails when the slope exceeds ``FD_SLOPE_BOUND_PER_H`` (30/h) *and* the
  fitted line rises more than ``FD_WINDOW_GROWTH_BOUND`` (8) across the window.  The
  collector holds one descriptor per connection, the active landing segment and a few
  fixed ones; a leak (one per closed connection, per rolled segment every 10 s, per
  subscription change) adds tens per minute.  The live connection count moves by a few as
  clients churn, which the window bound absorbs.
* once every client has left, the open files are back to the start's, within
  ``FD_DRAINED_MARGIN`` (the active landing segment is opened at the first push).
* landed >= acknowledged for every librdkafka client id and for the load generator.
  (Landed may exceed acknowledged: a push in flight when its client closes lands unseen.)
* the server exits 0 on SIGTERM and does not die during the run.

Errors are counted and printed (client push failures by reason, librdkafka error callbacks,
load-generator error codes, admin errors, server log lines at WARNING and above).  A push
refused with UNKNOWN_SUBSCRIPTION_ID after a subscription change is the protocol working (the
client asks again), and so is a push refused as too early within ``AFTER_CHANGE_S`` of a
change; both are counted apart from failures at other times.

Run: ``.venv/bin/python tests/perf/soak.py --minutes 30 --plot docs/images/soak-rss.png``
(documented run); CI runs ``--minutes 2`` (tests/integration/test_soak_ci.py).  Prints a
summary and, last, one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import logging
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer

from exporters.landing import LandingReader, landing_directory
from proto import ApiKeys, ClientConnection
from proto.messages import IncrementalAlterConfigsRequest
from proto.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from subscriptions.store import ConfigStore
from tests.perf.loadgen import (
    OPEN,
    OPEN_PERIOD_FACTOR,
    LoadResult,
    process_cpu_s,
    run_load_blocking,
)

# -- bounds (why: the module docstring) -------------------------------------------------
RSS_SLOPE_BOUND_MIB_PER_H = 16.0
RSS_WINDOW_GROWTH_BOUND_MIB = 4.0
FD_SLOPE_BOUND_PER_H = 30.0
FD_WINDOW_GROWTH_BOUND = 8.0
FD_DRAINED_MARGIN = 2
DRAIN_TIMEOUT_S = 15.0

# -- the workload -----------------------------------------------------------------------
LOAD_INTERVAL_MS = (
    500  # the load generator's subscription (it pushes every 1.25 x this)
)
LOAD_CONNECTIONS = 10
CLIENT_INTERVALS_MS = (1000, 2000)  # the librdkafka clients' subscription alternates
# Instances idle this long leave the cache (Kafka's default is 60 s): short enough that the
# cache of churned clients reaches its steady size within the warm-up of a 2-minute run.
INSTANCE_EXPIRY_MS = 15_000
CLIENT_METRICS = 16  # ConfigResource type
SET, DELETE = 0, 1
# librdkafka's text for UNKNOWN_SUBSCRIPTION_ID (117), as its error string table has it.
UNKNOWN_SUBSCRIPTION_ID = "invalid or outdated subscription ID"
# A push refused this soon after a subscription change is the change's doing: the refused
# push (UNKNOWN_SUBSCRIPTION_ID) counts as the instance's last push, so the client's next
# push, scheduled from its new Get with librdkafka's jitter, can come under one interval
# after it (THROTTLING_QUOTA_EXCEEDED, as Kafka's ClientMetricsInstance gates it).
AFTER_CHANGE_S = 3 * max(CLIENT_INTERVALS_MS) / 1000
TICK_S = 0.1  # how often the clients' logs are served and the schedule looked at
READY_POLL_S = 0.05


@dataclasses.dataclass
class Sample:
    t_s: float
    rss_kib: int
    fds: int
    cpu_s: float


@dataclasses.dataclass
class ClientCounts:
    acked: int = 0
    resubscribed: int = (
        0  # refused with UNKNOWN_SUBSCRIPTION_ID after a change: expected
    )
    failed: list[tuple[float, str]] = dataclasses.field(
        default_factory=list
    )  # (when, why)
    errors: list[str] = dataclasses.field(
        default_factory=list
    )  # error_cb and log >= WARNING


class _ClientLog(logging.Handler):
    """Counts one librdkafka client's telemetry outcomes from its debug log."""

    def __init__(self, counts: ClientCounts) -> None:
        super().__init__(logging.DEBUG)
        self.counts = counts

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "PushTelemetryRequest succeeded" in message:
            self.counts.acked += 1
        elif "PushTelemetryRequest failed" in message:
            if UNKNOWN_SUBSCRIPTION_ID in message:
                self.counts.resubscribed += 1
            else:
                reason = message.rpartition("failed")[2].strip(": ")
                self.counts.failed.append((time.monotonic(), reason))
        elif record.levelno >= logging.WARNING:
            self.counts.errors.append(message)


class SoakClient:
    """One librdkafka producer or consumer with its own client id and counters."""

    def __init__(self, bootstrap: str, index: int) -> None:
        kind = "consumer" if index % 3 == 2 else "producer"
        self.client_id = f"soak-{kind}-{index}"
        self.counts = ClientCounts()
        logger = logging.Logger(
            self.client_id
        )  # not registered: dropped with the client
        logger.addHandler(_ClientLog(self.counts))
        logger.propagate = False
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": self.client_id,
            "enable.metrics.push": True,
            "debug": "telemetry",
            "logger": logger,
            "error_cb": lambda error: self.counts.errors.append(str(error)),
        }
        if kind == "consumer":
            config["group.id"] = "soak"
            self.handle: Producer | Consumer = Consumer(config)
        else:
            self.handle = Producer(config)

    def poll(self) -> None:
        self.handle.poll(0)

    def close(self) -> None:
        self.poll()  # serve the log lines of pushes answered so far
        self.handle.close()


class Admin:
    """IncrementalAlterConfigs on CLIENT_METRICS resources over the wire (confluent-kafka's
    AdminClient has no CLIENT_METRICS resource type), one short connection per change."""

    STEPS = ("interval 1 s", "interval 2 s", "create soak-extra", "delete soak-extra")

    def __init__(self, port: int) -> None:
        self.port = port
        self.changes = 0
        self.changed_at: list[float] = []  # time.monotonic() of each change
        self.errors: list[str] = []

    def step(self) -> None:
        step = self.changes % len(self.STEPS)
        self.changes += 1
        self.changed_at.append(time.monotonic())
        configs: list[tuple[str, int, str | None]]
        if step < 2:
            configs = [("interval.ms", SET, str(CLIENT_INTERVALS_MS[step]))]
            name = "soak-clients"
        elif step == 2:
            name = "soak-extra"
            configs = [
                ("metrics", SET, "org.apache.kafka.producer.record"),
                ("interval.ms", SET, "1500"),
                ("match", SET, "client_id=soak-producer-.*"),
            ]
        else:
            name = "soak-extra"
            configs = [
                (key, DELETE, None) for key in ("metrics", "interval.ms", "match")
            ]
        request = IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=CLIENT_METRICS,
                    resource_name=name,
                    configs=tuple(
                        AlterableConfig(name=k, config_operation=op, value=v)
                        for k, op, v in configs
                    ),
                ),
            ),
            validate_only=False,
        )
        try:
            response = self._request(ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, request)
        except OSError as exc:
            self.errors.append(f"{self.STEPS[step]}: {exc}")
            return
        for result in response.responses:
            if result.error_code:
                self.errors.append(f"{self.STEPS[step]}: error {result.error_code}")

    def _request(self, api_key: int, version: int, message: Any) -> Any:
        codec = ClientConnection(client_id="soak-admin")
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(codec.send_request(api_key, version, message))
            while True:
                frame = codec.next_response()
                if frame is not None:
                    return frame.message
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("server closed the admin connection")
                codec.receive_data(data)


# -- the server -----------------------------------------------------------------------
def _ktc_command() -> list[str]:
    script = Path(sys.executable).with_name("ktc")
    return (
        [str(script)]
        if script.exists()
        else [sys.executable, "-m", "collector.app.cli"]
    )


@contextlib.contextmanager
def running_server(tmp: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """``ktc serve`` on 127.0.0.1:0 with a fresh data dir: (process, port, data dir)."""
    data_dir = tmp / "data"
    store = ConfigStore(data_dir)
    store.alter_subscription(
        "soak-load",
        {
            "metrics": "org.apache.kafka.producer.",
            "interval.ms": str(LOAD_INTERVAL_MS),
            "match": "client_id=loadgen-.*",
        },
        [],
    )
    store.alter_subscription(
        "soak-clients",
        {
            "metrics": "org.apache.kafka.",
            "interval.ms": str(CLIENT_INTERVALS_MS[0]),
            "match": "client_id=soak-.*",
        },
        [],
    )
    config = tmp / "ktc.yaml"
    config.write_text(
        "listeners: PLAINTEXT://127.0.0.1:0\n"
        "http.listener: 127.0.0.1:0\n"
        f"data.dir: {data_dir}\n"
        "log.level: WARNING\n"
        f"telemetry.instance.cache.expiry.ms: {INSTANCE_EXPIRY_MS}\n"
    )
    ready = tmp / "ready.json"
    log = (tmp / "server.log").open("wb")
    proc = subprocess.Popen(
        [*_ktc_command(), "serve", "--config", str(config), "--ready-file", str(ready)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"ktc serve exited with {proc.returncode} before ready"
                )
            if time.monotonic() > deadline:
                raise TimeoutError("ktc serve did not write its ready file in 60 s")
            time.sleep(READY_POLL_S)
        port = int(next(iter(json.loads(ready.read_text())["listeners"].values())))
        yield proc, port, data_dir
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def sample(pid: int, t0: float) -> Sample:
    rss_kib = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kib = int(line.split()[1])
    return Sample(
        t_s=time.monotonic() - t0,
        rss_kib=rss_kib,
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        cpu_s=process_cpu_s(pid),
    )


def drained_sample(pid: int, t0: float, start_fds: int) -> Sample:
    """A sample once the server has seen every client go (it closes their sockets when it
    reads their EOF, which takes a moment): polled until the open files are back within the
    margin of the start, or the deadline."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while True:
        now = sample(pid, t0)
        if now.fds <= start_fds + FD_DRAINED_MARGIN or time.monotonic() > deadline:
            return now
        time.sleep(TICK_S)


# -- analysis ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Fit:
    slope_per_h: float
    window_growth: float  # the fitted line's rise across the window
    first: float
    last: float


def fit(times_s: list[float], values: list[float]) -> Fit:
    slope, _ = statistics.linear_regression(times_s, values)
    return Fit(
        slope_per_h=slope * 3600,
        window_growth=slope * (times_s[-1] - times_s[0]),
        first=values[0],
        last=values[-1],
    )


def machine() -> dict[str, object]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem_kib = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    return {"nproc": os.cpu_count(), "cpu": model, "ram_gib": round(mem_kib / 2**20, 1)}


def plot(
    samples: list[Sample], warmup_s: float, rss: Fit, fds: Fit, path: Path, title: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s.t_s / 60 for s in samples]
    figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(9, 6), dpi=100)
    fitted = [s for s in samples if s.t_s >= warmup_s]
    for axis, values, result, label, unit in (
        (top, [s.rss_kib / 1024 for s in samples], rss, "RSS (MiB)", "MiB"),
        (bottom, [float(s.fds) for s in samples], fds, "open files", "files"),
    ):
        axis.plot(minutes, values, linewidth=1)
        axis.axvspan(0, warmup_s / 60, color="0.9", label="warm-up (not fitted)")
        if fitted:
            x0, x1 = fitted[0].t_s, fitted[-1].t_s
            mean_t = statistics.fmean(s.t_s for s in fitted)
            mean_v = statistics.fmean(values[len(samples) - len(fitted) :])
            slope_s = result.slope_per_h / 3600
            axis.plot(
                [x0 / 60, x1 / 60],
                [mean_v + slope_s * (x0 - mean_t), mean_v + slope_s * (x1 - mean_t)],
                color="tab:red",
                linewidth=1.5,
                label=f"fit after warm-up: {result.slope_per_h:+.2f} {unit}/h",
            )
        axis.set_ylabel(label)
        axis.legend(loc="lower right", fontsize=8)
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    bottom.set_xlabel("minutes")
    top.set_title(title, fontsize=9)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)


# -- the run ----------------------------------------------------------------------------
def soak(args: argparse.Namespace) -> dict[str, Any]:
    duration_s = args.minutes * 60
    warmup_s = duration_s / 2
    with tempfile.TemporaryDirectory(prefix="ktc-soak-") as tmp_name:
        tmp = Path(tmp_name)
        with running_server(tmp) as (proc, port, data_dir):
            bootstrap = f"127.0.0.1:{port}"
            load_result: list[LoadResult] = []
            load_error: list[BaseException] = []
            period_s = LOAD_INTERVAL_MS / 1000 * OPEN_PERIOD_FACTOR

            def load() -> None:
                try:
                    load_result.append(
                        run_load_blocking(
                            "127.0.0.1",
                            port,
                            instances=max(
                                LOAD_CONNECTIONS, round(args.rate * period_s)
                            ),
                            connections=LOAD_CONNECTIONS,
                            interval_ms=LOAD_INTERVAL_MS,
                            # Its workers start a few seconds after the soak's clock, so its window
                            # runs past the last sample: the load is steady in every sample.
                            duration_s=duration_s,
                            warmup_s=0.0,
                            mode=OPEN,
                            workers=1,
                        )
                    )
                except BaseException as exc:  # reported by the main thread
                    load_error.append(exc)

            loader = threading.Thread(target=load, name="loadgen", daemon=True)
            t0 = time.monotonic()
            loader.start()
            admin = Admin(port)
            live: collections.deque[SoakClient] = collections.deque()
            done: list[SoakClient] = []
            created = 0
            samples = [sample(proc.pid, t0)]
            next_sample = args.sample_s
            next_churn = args.churn_s
            next_alter = args.alter_s
            died = None
            while True:
                now = time.monotonic() - t0
                if proc.poll() is not None:
                    died = proc.returncode
                    break
                if now >= duration_s:
                    break
                while len(live) < args.clients:
                    live.append(SoakClient(bootstrap, created))
                    created += 1
                if now >= next_churn:
                    next_churn += args.churn_s
                    oldest = live.popleft()
                    oldest.close()
                    done.append(oldest)
                if now >= next_alter:
                    next_alter += args.alter_s
                    admin.step()
                for client in live:
                    client.poll()
                if now >= next_sample:
                    next_sample += args.sample_s
                    samples.append(sample(proc.pid, t0))
                time.sleep(TICK_S)
            for client in live:
                client.close()
                done.append(client)
            loader.join(120)
            drained = None
            if died is None:
                drained = drained_sample(proc.pid, t0, samples[0].fds)
                proc.send_signal(signal.SIGTERM)
                try:
                    exit_code: int | None = proc.wait(60)
                except subprocess.TimeoutExpired:
                    exit_code = None
            else:
                exit_code = died
        server_log = (tmp / "server.log").read_text(errors="replace").splitlines()
        landed: collections.Counter[str] = collections.Counter()
        records = 0
        for record in LandingReader(landing_directory(data_dir, 1)).read(0):
            landed[record.context.client_id or ""] += 1
            records += 1

    return analyse(
        args,
        samples,
        drained,
        warmup_s,
        done,
        admin,
        load_result,
        load_error,
        landed,
        records,
        died,
        exit_code,
        server_log,
    )


def analyse(
    args: argparse.Namespace,
    samples: list[Sample],
    drained: Sample | None,
    warmup_s: float,
    clients: list[SoakClient],
    admin: Admin,
    load_result: list[LoadResult],
    load_error: list[BaseException],
    landed: collections.Counter[str],
    records: int,
    died: int | None,
    exit_code: int | None,
    server_log: list[str],
) -> dict[str, Any]:
    failures: list[str] = []
    window = [s for s in samples if s.t_s >= warmup_s]
    if len(window) < 3:
        raise SystemExit(
            "too few samples after warm-up: lengthen --minutes or shorten --sample-s"
        )
    times = [s.t_s for s in window]
    rss = fit(times, [s.rss_kib / 1024 for s in window])
    fds = fit(times, [float(s.fds) for s in window])
    if (
        rss.slope_per_h > RSS_SLOPE_BOUND_MIB_PER_H
        and rss.window_growth > RSS_WINDOW_GROWTH_BOUND_MIB
    ):
        failures.append(
            f"RSS grows {rss.slope_per_h:.1f} MiB/h ({rss.window_growth:.1f} MiB over the fitted "
            f"window): bounds {RSS_SLOPE_BOUND_MIB_PER_H} MiB/h and "
            f"{RSS_WINDOW_GROWTH_BOUND_MIB} MiB"
        )
    if (
        fds.slope_per_h > FD_SLOPE_BOUND_PER_H
        and fds.window_growth > FD_WINDOW_GROWTH_BOUND
    ):
        failures.append(
            f"open files grow {fds.slope_per_h:.1f}/h ({fds.window_growth:.1f} over the window): "
            f"bounds {FD_SLOPE_BOUND_PER_H}/h and {FD_WINDOW_GROWTH_BOUND}"
        )

    if drained is not None and drained.fds > samples[0].fds + FD_DRAINED_MARGIN:
        failures.append(
            f"{drained.fds} open files once every client left, {samples[0].fds} at the start "
            f"(margin {FD_DRAINED_MARGIN})"
        )

    short: list[str] = []
    client_acked = client_landed = resubscribed = 0
    client_failed: collections.Counter[str] = collections.Counter()
    after_change: collections.Counter[str] = collections.Counter()
    client_errors: list[str] = []
    for client in clients:
        got = landed.get(client.client_id, 0)
        client_acked += client.counts.acked
        client_landed += got
        resubscribed += client.counts.resubscribed
        for when, reason in client.counts.failed:
            near = any(0 <= when - t <= AFTER_CHANGE_S for t in admin.changed_at)
            (after_change if near else client_failed)[reason] += 1
        client_errors += [f"{client.client_id}: {e}" for e in client.counts.errors]
        if got < client.counts.acked:
            short.append(
                f"{client.client_id}: landed {got} < acked {client.counts.acked}"
            )
    load = load_result[0] if load_result else None
    load_landed = sum(n for cid, n in landed.items() if cid.startswith("loadgen-"))
    load_acked = load.acked_total if load else 0
    if load_error:
        failures.append(f"load generator failed: {load_error[0]!r}")
    if load is not None and load_landed < load_acked:
        short.append(f"load generator: landed {load_landed} < acked {load_acked}")
    failures += [f"landed < acked: {s}" for s in short]
    if client_acked == 0 or load_acked == 0:
        failures.append("no acknowledged pushes from the clients or the load generator")
    if died is not None:
        failures.append(f"the server died during the run (exit {died})")
    elif exit_code != 0:
        failures.append(f"the server exited {exit_code} on SIGTERM")
    noisy = [
        line
        for line in server_log
        if any(level in line for level in ("WARNING", "ERROR", "CRITICAL", "Traceback"))
    ]

    duration_s = samples[-1].t_s
    cpu_percent = 100 * (samples[-1].cpu_s - samples[0].cpu_s) / max(duration_s, 1e-9)
    summary: dict[str, Any] = {
        "minutes": args.minutes,
        "machine": machine(),
        "offered_rate_per_s": args.rate,
        "clients_alive": args.clients,
        "clients_created": len(clients),
        "subscription_changes": admin.changes,
        "samples": len(samples),
        "warmup_s": round(warmup_s),
        "rss_mib": {
            "start": round(samples[0].rss_kib / 1024, 1),
            "after_warmup": round(rss.first, 1),
            "end": round(rss.last, 1),
            "max": round(max(s.rss_kib for s in samples) / 1024, 1),
            "slope_mib_per_h": round(rss.slope_per_h, 2),
            "window_growth_mib": round(rss.window_growth, 2),
        },
        "open_files": {
            "start": samples[0].fds,
            "after_warmup": int(fds.first),
            "end": int(fds.last),
            "max": max(s.fds for s in samples),
            "slope_per_h": round(fds.slope_per_h, 2),
            "window_growth": round(fds.window_growth, 2),
            "after_load": drained.fds if drained else None,
        },
        "rss_mib_after_load": round(drained.rss_kib / 1024, 1) if drained else None,
        "server_cpu_percent": round(cpu_percent, 1),
        "landed_records": records,
        "load": {
            "acked": load_acked,
            "landed": load_landed,
            "pushes_per_s": round(load.pushes_per_s, 1) if load else None,
            "errors": {str(k): v for k, v in sorted(load.errors.items())}
            if load
            else None,
            "p99_ms": round(load.percentile_ms(0.99), 2) if load else None,
        },
        "clients": {
            "acked": client_acked,
            "landed": client_landed,
            "resubscribed_after_change": resubscribed,
            "push_failures_after_change": dict(after_change),
            "push_failures": dict(client_failed),
            "errors": len(client_errors),
        },
        "admin_errors": admin.errors,
        "server_log_warnings": len(noisy),
        "bounds": {
            "rss_slope_mib_per_h": RSS_SLOPE_BOUND_MIB_PER_H,
            "rss_window_growth_mib": RSS_WINDOW_GROWTH_BOUND_MIB,
            "fd_slope_per_h": FD_SLOPE_BOUND_PER_H,
            "fd_window_growth": FD_WINDOW_GROWTH_BOUND,
            "fd_drained_margin": FD_DRAINED_MARGIN,
        },
        "failures": failures,
        "passed": not failures,
    }
    if args.plot:
        m = summary["machine"]
        plot(
            samples,
            warmup_s,
            rss,
            fds,
            Path(args.plot),
            f"ktc serve, {args.minutes:g} min soak: {args.rate:g} pushes/s offered, "
            f"{args.clients} librdkafka clients churning, subscription change every "
            f"{args.alter_s:g} s\n{m['nproc']} x {m['cpu']}, {m['ram_gib']} GiB, shared",
        )
    for line in client_errors[:10] + noisy[:10]:
        print("  note:", line[:200])
    return summary


def report(summary: dict[str, Any]) -> None:
    rss, fds, load, clients = (
        summary[k] for k in ("rss_mib", "open_files", "load", "clients")
    )
    print(
        f"soak: {summary['minutes']:g} min, {summary['offered_rate_per_s']:g} pushes/s offered, "
        f"{summary['clients_created']} librdkafka clients ({summary['clients_alive']} alive), "
        f"{summary['subscription_changes']} subscription changes, "
        f"server CPU {summary['server_cpu_percent']} % of a core"
    )
    print(
        f"  RSS MiB: start {rss['start']}, after warm-up {rss['after_warmup']}, end {rss['end']},"
        f" max {rss['max']}; slope {rss['slope_mib_per_h']:+} MiB/h "
        f"({rss['window_growth_mib']:+} MiB over the fitted window)"
    )
    print(
        f"  open files: start {fds['start']}, after warm-up {fds['after_warmup']}, end "
        f"{fds['end']}, max {fds['max']}; slope {fds['slope_per_h']:+}/h "
        f"({fds['window_growth']:+} over the window); once every client left "
        f"{fds['after_load']} (RSS {summary['rss_mib_after_load']} MiB)"
    )
    print(
        f"  load generator: acked {load['acked']}, landed {load['landed']}, "
        f"{load['pushes_per_s']} pushes/s, p99 {load['p99_ms']} ms, errors {load['errors']}"
    )
    print(
        f"  librdkafka clients: acked {clients['acked']}, landed {clients['landed']}, "
        f"re-subscribed after a change {clients['resubscribed_after_change']}, other push "
        f"failures within {AFTER_CHANGE_S:g} s of a change "
        f"{clients['push_failures_after_change']}, push failures at other times "
        f"{clients['push_failures']}, error callbacks/warnings {clients['errors']}"
    )
    print(
        f"  admin errors {len(summary['admin_errors'])}, server log warnings "
        f"{summary['server_log_warnings']}, landed records {summary['landed_records']}"
    )
    print(
        "  PASS" if summary["passed"] else "  FAIL: " + "; ".join(summary["failures"])
    )
    print(json.dumps(summary))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument(
        "--rate",
        type=float,
        default=200.0,
        help="load generator pushes/s, a fixed open-loop rate",
    )
    parser.add_argument(
        "--clients", type=int, default=6, help="librdkafka clients alive"
    )
    parser.add_argument(
        "--churn-s",
        type=float,
        default=5.0,
        help="close the oldest client and start a new one this often",
    )
    parser.add_argument(
        "--alter-s", type=float, default=15.0, help="one subscription change this often"
    )
    parser.add_argument("--sample-s", type=float, default=2.0)
    parser.add_argument("--plot", help="write the RSS and open-files plot here (PNG)")
    args = parser.parse_args()
    summary = soak(args)
    report(summary)
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
