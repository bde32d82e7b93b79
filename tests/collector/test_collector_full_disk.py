"""A full disk under the landing log, with a real librdkafka client pushing.

The landing directory is a small tmpfs this test mounts (we run as root; where mounting is
not allowed the test falls back to a size-limited directory: RLIMIT_FSIZE lowered to the
active segment's size, so writes past it fail with EFBIG, and says so in its output).
The test fills the file system, sees the client's pushes answered
THROTTLING_QUOTA_EXCEEDED (89), ``/readyz`` false and the ``ktc_landing_*`` series count it,
frees the space and sees the same client push again (it did not stop telemetry), with no
restart; every push the client saw accepted is in the log, which reads back whole.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import resource
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from exporters.landing import LandingReader, LandingRecord
from proto import ApiKeys
from proto.errors import Errors
from subscriptions.store import ConfigStore
from tests.integration.collector_harness import RunningCollector, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

CLIENT_ID = "full-disk-1"
INTERVAL_MS = "500"
TMPFS_BYTES = 2 << 20


class SmallFileSystem:
    """Where the landing log lives, and how this test fills and frees it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.mounted = False
        self._filler = directory / "filler"
        self._saved_limit: tuple[int, int] | None = None
        self._saved_handler: object = None

    def mount(self) -> None:
        self.directory.mkdir(parents=True)
        result = subprocess.run(
            [
                "mount",
                "-t",
                "tmpfs",
                "-o",
                f"size={TMPFS_BYTES}",
                "tmpfs",
                str(self.directory),
            ],
            capture_output=True,
            text=True,
        )
        self.mounted = result.returncode == 0
        if not self.mounted:
            print(
                f"cannot mount a tmpfs ({result.stderr.strip()}): size-limited directory instead"
            )

    def fill(self, active_segment: Path) -> None:
        if not self.mounted:
            # Fallback: no file may grow past what the active segment holds now.
            self._saved_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            self._saved_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
            size = active_segment.stat().st_size
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, self._saved_limit[1]))
            return
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT, 0o644)
        chunk = bytes(64 << 10)
        try:
            while True:
                os.write(fd, chunk)
        except OSError as error:
            assert error.errno == errno.ENOSPC, error
        finally:
            os.close(fd)

    def free(self) -> None:
        if self._saved_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, self._saved_limit)
            signal.signal(signal.SIGXFSZ, self._saved_handler)  # type: ignore[arg-type]
            self._saved_limit = None
        self._filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        self.free()
        if self.mounted:
            if subprocess.run(["umount", str(self.directory)]).returncode != 0:
                subprocess.run(["umount", "-l", str(self.directory)], check=True)
            self.mounted = False


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[SmallFileSystem]:
    # The landing log's parent: data/landing/node-1 then lives on the small file system,
    # the subscription store beside it on the ordinary one.
    fs = SmallFileSystem(tmp_path / "data" / "landing")
    fs.mount()
    try:
        yield fs
    finally:
        fs.unmount()


class ClientTelemetryLog(logging.Handler):
    """librdkafka's own account of its pushes (debug context ``telemetry``)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.succeeded = 0
        self.failed: list[str] = []
        self.stopped: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "PushTelemetryRequest succeeded" in message:
            self.succeeded += 1
        elif "PushTelemetryRequest failed" in message:
            self.failed.append(message)
        if "Stopping telemetry" in message or "non-retriable" in message:
            self.stopped.append(message)


def http(collector: RunningCollector, path: str) -> tuple[int, str]:
    assert collector.server is not None
    url = f"http://127.0.0.1:{collector.server.http_port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def series(collector: RunningCollector, name: str) -> float:
    _, text = http(collector, "/metrics")
    match = re.search(rf"^{name}(?:_total)? (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


def test_a_full_disk_refuses_pushes_with_89_and_recovers_without_restart(
    tmp_path: Path, small_fs: SmallFileSystem
) -> None:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "producers",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": INTERVAL_MS},
    )
    telemetry = ClientTelemetryLog()
    logger = logging.getLogger("full-disk-client")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(telemetry)
    # fsync_interval_ms paces the landing log's housekeeping, and so its probe.
    with RunningCollector(
        data_dir, landing={"fsync": "never", "fsync_interval_ms": 100}
    ) as c:
        client = Producer(
            {
                "bootstrap.servers": c.bootstrap,
                "client.id": CLIENT_ID,
                "enable.metrics.push": True,
                "debug": "telemetry",
                "logger": logger,
            }
        )

        def pushed(at_least: int) -> bool:
            client.poll(0)  # serves the client's log lines
            return telemetry.succeeded >= at_least

        def refused(at_least: int) -> bool:
            client.poll(0)
            return len(telemetry.failed) >= at_least

        try:
            wait_for(lambda: pushed(2), timeout_s=20, what="two accepted pushes")
            assert http(c, "/readyz")[0] == 200

            segments = LandingReader(c.landing_directory).segments()
            small_fs.fill(segments[-1].path)
            wait_for(lambda: refused(2), timeout_s=20, what="two refused pushes")
            # librdkafka's text for THROTTLING_QUOTA_EXCEEDED (89), on every refused push.
            assert all(
                "throttling quota" in line.lower() for line in telemetry.failed
            ), telemetry.failed
            status, body = http(c, "/readyz")
            assert status == 503, body
            assert "landing log cannot write" in json.loads(body)["checks"]["landing"]
            assert series(c, "ktc_landing_writable") == 0
            assert series(c, "ktc_landing_write_failures") >= 2
            assert series(c, "ktc_landing_records_refused") >= 2
            assert series(c, "ktc_landing_pushes_refused") >= len(telemetry.failed)

            # Space comes back: the probe makes the node ready again, and the same client,
            # same connection, same producer, pushes again: it never stopped telemetry.
            small_fs.free()
            wait_for(
                lambda: http(c, "/readyz")[0] == 200, timeout_s=10, what="ready again"
            )
            assert series(c, "ktc_landing_writable") == 1
            accepted_before = telemetry.succeeded
            wait_for(
                lambda: pushed(accepted_before + 2), timeout_s=20, what="pushes after"
            )
            assert telemetry.stopped == []
        finally:
            client.poll(0)
            client.close()
        accepted = telemetry.succeeded

        reader = LandingReader(c.landing_directory)
        records: list[LandingRecord] = list(reader.read(0))
        assert reader.corrupt_regions_skipped == 0  # no torn record anywhere
        # Failed writes took no offsets and left nothing behind.
        assert [r.offset for r in records] == list(range(len(records)))
        landed = [
            r
            for r in records
            if r.context.client_id == CLIENT_ID and not r.context.terminating
        ]
        # Every push the client saw accepted is in the log; at most one more (a push
        # answered while the client was closing, which it no longer logs).
        assert accepted <= len(landed) <= accepted + 1, (accepted, len(landed))
        assert len({r.context.client_instance_id for r in landed}) == 1


def test_only_answers_to_unlanded_pushes_of_the_connection_are_refused() -> None:
    from collector.core.session import Session
    from collector.net.flush import DurabilityGate, NotLanded, refused_push
    from exporters.context import TelemetryContext
    from proto import encode_response
    from proto.messages import AlterClientQuotasResponse, PushTelemetryResponse

    session = Session(1, "PLAINTEXT", "PLAINTEXT")
    session.client_source_address, session.client_source_port = "127.0.0.1", 40001

    def context(correlation_id: int, port: int = 40001) -> TelemetryContext:
        return TelemetryContext(
            client_instance_id="AAAAAAAAAAAAAAAAAAAAAA",
            client_id="c",
            client_software_name="t",
            client_software_version="1",
            client_source_address="127.0.0.1",
            client_source_port=port,
            listener_name="PLAINTEXT",
            security_protocol="PLAINTEXT",
            principal="User:ANONYMOUS",
            push_interval_ms=500,
            terminating=False,
            received_time_unix_nano=0,
            node_id=1,
            cluster_id="k",
            subscription_id=1,
            compression_type=0,
            correlation_id=correlation_id,
        )

    def push(correlation_id: int, error: Errors = Errors.NONE) -> bytes:
        return encode_response(
            ApiKeys.PUSH_TELEMETRY, 0, correlation_id, PushTelemetryResponse(0, error)
        )

    # An AlterClientQuotas v0 answer with no entries has a push answer's 16-byte layout.
    quotas = encode_response(
        ApiKeys.ALTER_CLIENT_QUOTAS, 0, 7, AlterClientQuotasResponse(0, ())
    )
    assert len(quotas) == len(push(7))
    answers = [
        push(5),
        push(6),
        quotas,
        push(8, Errors.UNKNOWN_SUBSCRIPTION_ID),
        push(9),
    ]
    assert refused_push(quotas) is not None  # the layout alone would rewrite it
    # 5 and 8 were pushes of this connection that did not land; 9 did not land on another
    # connection (the same correlation id there); 6 landed; 7 was not a push.
    error = NotLanded(
        OSError("No space left on device"),
        [(context(5), b""), (context(8), b""), (context(9, port=40002), b"")],
    )
    gate = DurabilityGate(None)
    refused = gate.refuse_pushes(answers, session, error)
    assert refused == [
        push(5, Errors.THROTTLING_QUOTA_EXCEEDED),
        push(6),
        quotas,
        push(8, Errors.UNKNOWN_SUBSCRIPTION_ID),
        push(9),
    ]
    assert gate.pushes_refused == 1
    # Any other failure: not the gate's to answer (the connection closes).
    assert gate.refuse_pushes(answers, session, ConnectionResetError()) is None


async def test_a_failed_group_commit_fsync_refuses_its_pushes_and_a_probe_reopens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.collector.test_collector_write_behind import (
        pushes,
        start_server,
        subscribed,
    )

    server = await start_server(tmp_path, {"fsync": "always", "group_commit": True})
    try:
        c, gets = await subscribed(server, 3)

        def eio(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", eio)
        for request in pushes(gets, b"not-durable"):
            c.send(ApiKeys.PUSH_TELEMETRY, 0, request)
        await c.writer.drain()
        answers = [(await c.receive()).error_code for _ in gets]
        assert answers == [Errors.THROTTLING_QUOTA_EXCEEDED] * 3
        landing = server.landing.exporter
        assert landing.unwritable_reason is not None  # type: ignore[union-attr]
        assert "landing log cannot write" in server.health.readiness()["landing"]
        monkeypatch.undo()
        assert landing.probe()  # type: ignore[union-attr]
        assert server.health.readiness()["landing"] == "ok"
        await c.close()
    finally:
        await server.stop()
