"""``/metrics/clients`` counts what landed: its fold reads the landing log back, so a push
the landing refused (its flush failed, it was answered 89) never counts, and the client's
retry of the same delta counts once, as the forwarder and the lakehouse count it.

On the log directly (a failed ``writev`` injected at the system call, as
tests/exporters/test_landing_full_disk.py does), and with a real librdkafka client pushing
to ``ktc serve`` while its landing log's file system fills and frees (the small file
system of tests/collector/test_collector_full_disk.py)."""

from __future__ import annotations

import errno
import logging
import os
import signal
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from clock.testing import FakeClock
from collector.app.parts.telemetry import fold_process, landed_records
from collector.telemetry.prometheus import client_series
from collector.telemetry.prometheus.client_series import (
    ClientSeries,
    ClientSeriesSettings,
)
from collector.telemetry.prometheus.fold_process import FoldProcess
from collector.telemetry.prometheus.points import IDENTITY_LABELS
from exporters.landing import LandingError, LandingLog, LandingOptions, LandingReader
from subscriptions.store import ConfigStore
from tests.collector.test_collector_full_disk import (  # noqa: F401 (small_fs: a fixture)
    ClientTelemetryLog,
    SmallFileSystem,
    small_fs,
)
from tests.prometheus.otlp_build import gauge, payload, total
from tests.prometheus.test_client_metrics_endpoint import expected_from_landing, parse
from tests.prometheus.test_client_series import context
from tests.waiting import eventually, eventually_sync

INSTANCE = "AAAAAAAAAAAAAAAAAAAAAA"


def failing_writev(fd: int, buffers: list[bytes]) -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def samples(body: bytes) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def push(log: LandingLog, value: int, at: int) -> None:
    """A push as the collector lands it: exported (staged), then flushed; its delta runs
    from the previous push's time (``at - 1``) to ``at``."""
    metrics = [total("requests", value, at - 1, at), gauge("queue.depth", value, at)]
    assert log.export(context(INSTANCE, at_ns=at), payload(metrics)).ok


def folding(
    log: LandingLog, where: str, cached_ids: set[str] | None = None
) -> ClientSeries:
    """The fold of ``log``: in this process (a worker thread), or in a child process;
    ``cached_ids``: the instances the node's manager caches (default: INSTANCE)."""
    settings = ClientSeriesSettings(100_000)
    ids = {INSTANCE} if cached_ids is None else cached_ids
    cached = lambda instance: instance in ids  # noqa: E731
    if where == "thread":
        return ClientSeries(
            settings, cached, clock=FakeClock(1_000_000), landed=landed_records(log)
        )
    return fold_process(log, settings, cached, FakeClock(1_000_000))


@pytest.mark.parametrize("where", ["thread", "process"])
async def test_a_push_whose_flush_failed_is_not_counted_and_its_retry_counts_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    with LandingLog(tmp_path, LandingOptions(fsync="never"), housekeeping=False) as log:
        series = folding(log, where)
        try:
            push(log, 5, 1)
            log.flush()
            push(log, 7, 2)  # staged: not landed
            with monkeypatch.context() as patch:
                patch.setattr(os, "writev", failing_writev)
                with pytest.raises(LandingError):
                    log.flush()  # answered 89: the client pushes the same delta again
            assert samples(await series.scrape(False))["requests_total"] == 5
            push(log, 7, 2)  # the same push again
            log.flush()
            folded = samples(await series.scrape(False))
            assert (folded["requests_total"], folded["queue_depth"]) == (12, 7)
            assert (
                series.pushes_folded == 2 == len(list(LandingReader(tmp_path).read()))
            )

            # The terminating push takes the instance's series with it (from the log).
            assert log.export(context(INSTANCE, terminating=True, at_ns=3), b"").ok
            log.flush()
            assert samples(await series.scrape(False)) == {}
        finally:
            series.close()


@pytest.mark.parametrize("where", ["thread", "process"])
async def test_an_instance_the_node_no_longer_caches_loses_its_series(
    tmp_path: Path, where: str
) -> None:
    cached_ids = {INSTANCE}
    with LandingLog(tmp_path, LandingOptions(fsync="never"), housekeeping=False) as log:
        series = folding(log, where, cached_ids)
        try:
            push(log, 5, 1)
            log.flush()
            assert samples(await series.scrape(False))["requests_total"] == 5
            cached_ids.clear()  # its connection closed (or it expired, or was evicted)
            assert samples(await series.scrape(False)) == {}
        finally:
            series.close()


async def test_a_fold_process_that_died_is_restarted_and_folds_again_from_the_start(
    tmp_path: Path,
) -> None:
    with LandingLog(tmp_path, LandingOptions(fsync="never"), housekeeping=False) as log:
        series = folding(log, "process")
        assert isinstance(series, FoldProcess)
        try:
            push(log, 5, 1)
            log.flush()
            push(log, 7, 2)
            log.flush()
            assert samples(await series.scrape(False))["requests_total"] == 12
            os.kill(series.pid, signal.SIGKILL)
            await eventually(
                lambda: series.returncode is not None,
                timeout_s=10,
                what="the fold process to die",
            )
            assert samples(await series.scrape(False))["requests_total"] == 12
            assert series.restarts == 1
            own = {m.name: m.samples[0].value for m in series.collect()}
            assert own["ktc_prometheus_clients_fold_restarts"] == 1
            assert own["ktc_prometheus_clients_pushes_folded"] == 2
        finally:
            series.close()


@pytest.mark.parametrize("where", ["thread", "process"])
async def test_with_group_commit_only_what_is_fsynced_is_folded(
    tmp_path: Path, where: str
) -> None:
    options = LandingOptions(fsync="always", group_commit=True)
    with LandingLog(tmp_path, options, housekeeping=False) as log:
        series = folding(log, where)
        try:
            push(log, 5, 1)
            log.flush()  # written; its answer waits for the group-commit fsync
            assert samples(await series.scrape(False)) == {}
            log.sync()
            assert samples(await series.scrape(False))["requests_total"] == 5
        finally:
            series.close()


def http_get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return str(r.read().decode())


@pytest.mark.integration
@pytest.mark.timeout(90)
def test_refused_pushes_of_a_real_client_are_never_counted(
    tmp_path: Path,
    small_fs: SmallFileSystem,  # noqa: F811
) -> None:
    from tests.integration.collector_harness import RunningCollector, wait_for

    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}
    )
    telemetry = ClientTelemetryLog()
    logger = logging.getLogger("landed-fold-client")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(telemetry)
    with RunningCollector(
        data_dir,
        landing={"fsync": "never", "fsync_interval_ms": 100},
        **{"prometheus.clients.enable": True},
    ) as c:
        assert c.server is not None
        port = c.server.http_port
        assert port is not None
        # The fold runs in a process of its own, not in the node's (this one).
        fold = c.server.client_series
        assert isinstance(fold, FoldProcess)
        assert fold.pid != os.getpid()
        client = Producer(
            {
                "bootstrap.servers": c.bootstrap,
                "client.id": "landed-fold",
                "enable.metrics.push": True,
                "debug": "telemetry",
                "logger": logger,
            }
        )

        def pushed(at_least: int) -> bool:
            client.poll(0)
            return telemetry.succeeded >= at_least

        def refused(at_least: int) -> bool:
            client.poll(0)
            return len(telemetry.failed) >= at_least

        try:
            wait_for(lambda: pushed(2), timeout_s=20, what="two accepted pushes")
            small_fs.fill(LandingReader(c.landing_directory).segments()[-1].path)
            wait_for(lambda: refused(2), timeout_s=20, what="two refused pushes")
            small_fs.free()
            accepted = telemetry.succeeded
            wait_for(lambda: pushed(accepted + 2), timeout_s=20, what="pushes after")

            def folded_what_landed() -> bool:
                client.poll(0)
                landed = c.landed()
                page = parse(http_get(port, "/metrics/clients"))
                own = parse(http_get(port, "/metrics"))
                if len(c.landed()) != len(landed):
                    return False  # a push landed meanwhile: look again
                folded = own[
                    ("ktc_prometheus_clients_pushes_folded_total", frozenset())
                ]
                if folded != len(landed):
                    assert folded < len(landed), (folded, len(landed))  # never more
                    return False
                expected = expected_from_landing(landed)
                shown = {
                    (
                        dict(labels)["client_instance_id"],
                        name,
                        frozenset(
                            (k, v) for k, v in labels if k not in IDENTITY_LABELS
                        ),
                    ): value
                    for (name, labels), value in page.items()
                }
                assert shown == expected
                return True

            eventually_sync(
                folded_what_landed,
                timeout_s=20,
                what="the page to fold every landed push",
            )
            assert telemetry.stopped == []
        finally:
            client.poll(0)
            client.close()
    assert fold.returncode == 0  # the node's stop ended it


def test_a_scrape_folds_for_its_catch_up_time_and_the_next_fold_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scrape's fold is bounded in time (SCRAPE_CATCH_UP_S in the fold process): it
    reads one batch at least, then answers with what is folded; the next fold reads the
    rest, so nothing landed is lost or counted twice."""
    monkeypatch.setattr(client_series, "CATCH_UP_BATCH_BYTES", 1)  # a record a batch
    with LandingLog(tmp_path, LandingOptions(fsync="never"), housekeeping=False) as log:
        series = folding(log, "thread")
        try:
            for at in range(1, 4):
                push(log, 5, at)
            log.flush()
            page = samples(series._fold_and_render((), False, catch_up_s=0.0))
            assert (page["requests_total"], series.pushes_folded) == (5, 1)
            series._fold_all((), 1_000_000)  # the next fold: all the rest
            page = samples(series._fold_and_render((), False, catch_up_s=0.0))
            assert (page["requests_total"], series.pushes_folded) == (15, 3)
        finally:
            series.close()
