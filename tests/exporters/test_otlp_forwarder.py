"""The forwarder end to end: a real landing log, a real gRPC receiver, real retries.

Every wait the forwarder makes goes through its injected ``Clock``, so no test sleeps to let
time pass: ``StepClock`` records waits and jumps ahead (tests about the *length* of a wait),
``FastForwardClock`` lets a threaded forwarder live through seconds of backoff in
milliseconds (outages), ``StandstillClock`` never lets a wait end by itself (shutdown).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from prometheus_client import CollectorRegistry

from clock.testing import FakeClock
from exporters.context import TelemetryContext
from exporters.landing import ConsumerPositions, LandingLog, LandingOptions
from exporters.otlp import (
    CONSUMER_NAME,
    ForwardStats,
    OtlpExporterConfig,
    OtlpForwarder,
    consumer_name_for,
)
from tests.exporters.otlp_receiver import (
    Fail,
    OtlpReceiver,
    PartialSuccess,
    Slow,
    point_values,
    resource_attributes,
    sample_context,
    sample_metrics_data,
)
from tests.waiting import eventually_sync

POINTS_PER_PUSH = 3  # sample_metrics_data(gauges=2): two gauge points and one sum point


class StepClock(FakeClock):
    """A clock whose waits take no time: each wait is recorded, then time jumps ahead."""

    def __init__(self) -> None:
        super().__init__(1_000_000)
        self.on_wait: Callable[[float], None] | None = None

    def time_ns(self) -> int:
        return time.time_ns()  # compared with the landing log's wall-clock append times

    def wait(self, stop: threading.Event, timeout_s: float) -> bool:
        self.waits_s.append(timeout_s)
        if self.on_wait is not None:
            self.on_wait(timeout_s)
        self.advance(timeout_s * 1000)
        return stop.is_set()


class FastForwardClock(FakeClock):
    """Time that moves only when the forwarder waits: a wait jumps it ahead by the whole
    timeout but takes at most ``_REAL_PAUSE_S`` of real time, so a forwarder thread goes
    through a 200 ms max_elapsed_time in a few milliseconds, without spinning a core."""

    _REAL_PAUSE_S = 0.001

    def __init__(self) -> None:
        super().__init__(1_000_000)  # read and advanced by the one consumer thread only

    def time_ns(self) -> int:
        return time.time_ns()  # compared with the landing log's wall-clock append times

    def wait(self, stop: threading.Event, timeout_s: float) -> bool:
        self.advance(timeout_s * 1000)
        return stop.wait(min(timeout_s, self._REAL_PAUSE_S))


class StandstillClock(FakeClock):
    """Time that never moves: a wait ends only when ``stop`` is set.  ``wait_began`` tells
    the test the forwarder is waiting (without guessing how long that takes to happen)."""

    def __init__(self) -> None:
        super().__init__(1_000_000)
        self.wait_began = threading.Event()

    def time_ns(self) -> int:
        return time.time_ns()

    def wait(self, stop: threading.Event, timeout_s: float) -> bool:
        self.wait_began.set()
        return super().wait(
            stop, timeout_s
        )  # nothing advances it: only ``stop`` ends it


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture
def landing_dir(tmp_path: Path) -> Path:
    return tmp_path / "landing" / "node-1"


def land(directory: Path, pushes: list[tuple[TelemetryContext, bytes]]) -> None:
    with LandingLog(
        directory, LandingOptions(fsync="never"), housekeeping=False
    ) as log:
        for context, payload in pushes:
            log.append(context, payload)


def push(client: int, seq: int) -> tuple[TelemetryContext, bytes]:
    """Client ``client``'s push number ``seq``: its points are seq*3 .. seq*3+2."""
    context = sample_context(
        client_instance_id=f"client-{client:016d}", client_id=f"c{client}"
    )
    return context, sample_metrics_data(
        start_value=seq * POINTS_PER_PUSH
    ).SerializeToString()


def config(target: str, **overrides: object) -> OtlpExporterConfig:
    settings: dict[str, object] = {
        "endpoint": target,
        "tls": {"insecure": True},
        "retry_on_failure": {
            "initial_interval": "1s",
            "max_interval": "4s",
            "max_elapsed_time": "60s",
        },
    }
    settings.update(overrides)
    return OtlpExporterConfig.model_validate(settings)


def forwarder(
    dirs: list[Path], cfg: OtlpExporterConfig, **kwargs: object
) -> OtlpForwarder:
    return OtlpForwarder(dirs, cfg, rng=random.Random(7), **kwargs)  # type: ignore[arg-type]


def per_client_values(receiver: OtlpReceiver) -> dict[str, list[int]]:
    seen: dict[str, list[int]] = {}
    for rm in receiver.resource_metrics():
        seen.setdefault(resource_attributes(rm)["client_instance_id"], []).extend(
            point_values([rm])
        )
    return seen


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, {"exporter": "otlp", **labels})
    return 0.0 if value is None else value


# ---------------------------------------------------------------------- the happy path


def test_everything_landed_arrives_enriched_in_order_and_is_committed(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(client=seq % 2, seq=seq) for seq in range(6)])
    registry = CollectorRegistry()
    fwd = forwarder([landing_dir], config(receiver.target), registry=registry)
    try:
        stats = fwd.run_once()
    finally:
        fwd.close()
    assert stats == ForwardStats(records_committed=6, points_sent=18)
    assert len(receiver.received) == 6  # no batching configured: one request per push
    assert per_client_values(receiver) == {
        "client-0000000000000000": [0, 1, 2, 6, 7, 8, 12, 13, 14],
        "client-0000000000000001": [3, 4, 5, 9, 10, 11, 15, 16, 17],
    }
    first = receiver.received[0].request.resource_metrics[0]
    assert resource_attributes(first)["client_id"] == "c0"
    assert resource_attributes(first)["kafka.broker.id"] == "1"
    assert ConsumerPositions(landing_dir, CONSUMER_NAME).load() == 6
    assert sample(registry, "otelcol_exporter_sent_metric_points_total") == 18
    assert sample(registry, "otelcol_exporter_send_failed_metric_points_total") == 0
    assert sample(registry, "ktc_forwarder_lag_records") == 0
    assert sample(registry, "otelcol_exporter_queue_size") == 0
    assert sample(registry, "otelcol_exporter_queue_capacity") == 1000


def test_configured_headers_reach_the_receiver(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, 0)])
    fwd = forwarder(
        [landing_dir], config(receiver.target, headers={"Authorization": "Bearer t"})
    )
    try:
        fwd.run_once()
    finally:
        fwd.close()
    assert receiver.received[0].metadata["authorization"] == "Bearer t"


def test_batching_joins_pushes_up_to_max_size(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, seq) for seq in range(7)])
    cfg = config(
        receiver.target, sending_queue={"batch": {"min_size": 6, "max_size": 9}}
    )
    fwd = forwarder([landing_dir], cfg)
    try:
        stats = fwd.run_once()
    finally:
        fwd.close()
    # 3 points a push, at most 9 a request: 3 + 3 + 1 pushes.
    assert [len(e.request.resource_metrics) for e in receiver.received] == [3, 3, 1]
    assert per_client_values(receiver)["client-0000000000000000"] == list(range(21))
    assert stats.records_committed == 7


@pytest.mark.parametrize(
    ("queue", "held"),
    [
        ({"queue_size": 2}, 2),  # sizer requests: two pushes
        (
            {"queue_size": 7, "sizer": "items"},
            6,
        ),  # two 3-point pushes; a third would be 9
        ({"queue_size": 1, "sizer": "items"}, 3),  # one push always fits, however large
    ],
)
def test_read_ahead_is_bounded_by_queue_size(
    receiver: OtlpReceiver, landing_dir: Path, queue: dict[str, object], held: int
) -> None:
    land(landing_dir, [push(0, seq) for seq in range(5)])
    receiver.script(Fail(grpc.StatusCode.UNAVAILABLE))
    clock, registry = StepClock(), CollectorRegistry()
    seen: list[float] = []
    clock.on_wait = lambda _: seen.append(
        sample(registry, "otelcol_exporter_queue_size")
    )
    fwd = forwarder(
        [landing_dir],
        config(receiver.target, sending_queue=queue),
        clock=clock,
        registry=registry,
    )
    try:
        assert fwd.run_once().records_committed == 5
    finally:
        fwd.close()
    assert seen == [
        held
    ]  # what was in memory while the first push waited for its retry
    assert sample(registry, "otelcol_exporter_queue_capacity") == queue["queue_size"]
    assert sample(registry, "otelcol_exporter_queue_size") == 0


def test_a_push_that_is_not_otlp_is_skipped_and_counted(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(
        landing_dir,
        [push(0, 0), (sample_context(), b"\xff\xff\xff not protobuf"), push(0, 1)],
    )
    registry = CollectorRegistry()
    fwd = forwarder([landing_dir], config(receiver.target), registry=registry)
    try:
        stats = fwd.run_once()
    finally:
        fwd.close()
    assert per_client_values(receiver)["client-0000000000000000"] == [0, 1, 2, 3, 4, 5]
    assert stats == ForwardStats(records_committed=3, points_sent=6, records_dropped=1)
    assert (
        sample(registry, "ktc_forwarder_dropped_records_total", reason="undecodable")
        == 1
    )
    assert ConsumerPositions(landing_dir, CONSUMER_NAME).load() == 3


def test_two_named_exporters_keep_separate_positions(
    tmp_path: Path, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, seq) for seq in range(2)])
    with OtlpReceiver() as primary, OtlpReceiver() as backup:
        first = OtlpForwarder([landing_dir], config(primary.target))
        second = OtlpForwarder(
            [landing_dir], config(backup.target), exporter_name="otlp/backup"
        )
        try:
            assert first.run_once().records_committed == 2
            assert (
                second.run_once().records_committed == 2
            )  # not skipped by the first's commit
        finally:
            first.close()
            second.close()
    assert ConsumerPositions(landing_dir, "otlp-forwarder").load() == 2
    assert ConsumerPositions(landing_dir, "otlp-forwarder.backup").load() == 2
    assert len(backup.received) == 2


@pytest.mark.parametrize(
    ("name", "consumer"),
    [
        ("otlp", "otlp-forwarder"),
        ("otlp/eu", "otlp-forwarder.eu"),
        ("otlp_grpc", "otlp-forwarder"),
    ],
)
def test_consumer_names_follow_exporter_names(name: str, consumer: str) -> None:
    assert consumer_name_for(name) == consumer


def test_a_non_otlp_exporter_name_is_refused() -> None:
    with pytest.raises(ValueError, match="must be 'otlp' or 'otlp/<name>'"):
        consumer_name_for("lakehouse")


# ---------------------------------------------------------------------- retries


def test_unavailable_is_retried_with_jittered_exponential_backoff(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, 0)])
    receiver.script(Fail(grpc.StatusCode.UNAVAILABLE, times=4))
    clock, registry = StepClock(), CollectorRegistry()
    fwd = forwarder(
        [landing_dir], config(receiver.target), clock=clock, registry=registry
    )
    try:
        stats = fwd.run_once()
    finally:
        fwd.close()
    assert stats.points_sent == 3
    assert len(receiver.attempts) == 5 and len(receiver.received) == 1
    # initial 1s, x1.5, capped at 4s, each +-50%: nominal 1, 1.5, 2.25, 3.375.
    nominal = [1.0, 1.5, 2.25, 3.375]
    assert len(clock.waits_s) == 4
    for wait, expected in zip(clock.waits_s, nominal, strict=True):
        assert expected * 0.5 <= wait <= expected * 1.5
    assert sample(registry, "ktc_forwarder_retries_total") == 4


def test_a_slow_receiver_times_out_per_attempt_and_the_push_is_retried(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, 0)])
    receiver.script(Slow(30.0))  # released when the fixture stops the receiver
    clock, registry = StepClock(), CollectorRegistry()
    fwd = forwarder(
        [landing_dir],
        config(receiver.target, timeout="100ms"),
        clock=clock,
        registry=registry,
    )
    started = time.monotonic()
    try:
        stats = fwd.run_once()
    finally:
        fwd.close()
    assert time.monotonic() - started < 5  # the 30 s answer was not waited for
    assert stats == ForwardStats(records_committed=1, points_sent=3)
    assert len(clock.waits_s) == 1
    assert sample(registry, "ktc_forwarder_retries_total") == 1
    assert len(receiver.received) == 1


def test_resource_exhausted_with_retry_info_waits_as_long_as_the_server_asks(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, 0)])
    receiver.script(Fail(grpc.StatusCode.RESOURCE_EXHAUSTED, retry_delay_s=42.0))
    clock = StepClock()
    fwd = forwarder([landing_dir], config(receiver.target), clock=clock)
    try:
        fwd.run_once()
    finally:
        fwd.close()
    assert clock.waits_s == [42.0]  # the server's delay beats the 0.5-1.5 s backoff
    assert len(receiver.received) == 1


def test_resource_exhausted_without_retry_info_is_permanent(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, 0), push(0, 1)])
    receiver.script(Fail(grpc.StatusCode.RESOURCE_EXHAUSTED))
    clock = StepClock()
    fwd = forwarder([landing_dir], config(receiver.target), clock=clock)
    try:
        stats = fwd.run_once()
    finally:
        fwd.close()
    assert clock.waits_s == []
    assert stats == ForwardStats(
        records_committed=2, points_sent=3, points_failed=3, records_dropped=1
    )


def test_invalid_argument_is_dropped_counted_and_never_retried(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, 0), push(0, 1)])
    receiver.script(Fail(grpc.StatusCode.INVALID_ARGUMENT))
    clock, registry = StepClock(), CollectorRegistry()
    fwd = forwarder(
        [landing_dir], config(receiver.target), clock=clock, registry=registry
    )
    try:
        stats = fwd.run_once()
    finally:
        fwd.close()
    assert [a.outcome for a in receiver.attempts] == ["INVALID_ARGUMENT", "accepted"]
    assert clock.waits_s == []
    assert per_client_values(receiver)["client-0000000000000000"] == [3, 4, 5]
    assert stats == ForwardStats(
        records_committed=2, points_sent=3, points_failed=3, records_dropped=1
    )
    assert sample(registry, "otelcol_exporter_send_failed_metric_points_total") == 3
    assert (
        sample(registry, "ktc_forwarder_dropped_records_total", reason="rejected") == 1
    )
    assert (
        ConsumerPositions(landing_dir, CONSUMER_NAME).load() == 2
    )  # moved past the rejected one


def test_partial_success_counts_the_rejected_points(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, 0)])
    receiver.script(PartialSuccess(rejected_data_points=2))
    registry = CollectorRegistry()
    fwd = forwarder([landing_dir], config(receiver.target), registry=registry)
    try:
        stats = fwd.run_once()
    finally:
        fwd.close()
    assert stats == ForwardStats(records_committed=1, points_sent=1, points_failed=2)
    assert sample(registry, "otelcol_exporter_sent_metric_points_total") == 1
    assert sample(registry, "otelcol_exporter_send_failed_metric_points_total") == 2


def test_past_max_elapsed_time_nothing_is_dropped_and_retries_go_on_at_max_interval(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    """Where the Collector would drop the batch, the forwarder keeps it: the log is durable."""
    land(landing_dir, [push(0, 0)])
    receiver.script(Fail(grpc.StatusCode.UNAVAILABLE, times=20))
    clock, registry = StepClock(), CollectorRegistry()
    gauge_during_waits: list[float] = []
    clock.on_wait = lambda _: gauge_during_waits.append(
        sample(registry, "ktc_forwarder_batches_past_max_elapsed_time")
    )
    cfg = config(
        receiver.target,
        retry_on_failure={
            "initial_interval": "1s",
            "max_interval": "2s",
            "max_elapsed_time": "5s",
        },
    )
    fwd = forwarder([landing_dir], cfg, clock=clock, registry=registry)
    try:
        stats = fwd.run_once()
    finally:
        fwd.close()
    assert stats == ForwardStats(records_committed=1, points_sent=3)
    assert len(receiver.attempts) == 21 and len(receiver.received) == 1
    assert sum(clock.waits_s) > 5 * 5  # far beyond max_elapsed_time
    past = [
        w
        for w, flag in zip(clock.waits_s, gauge_during_waits, strict=True)
        if flag == 1
    ]
    assert len(past) >= 15
    assert all(1.0 <= w <= 3.0 for w in past)  # max_interval 2s, +-50%
    assert (
        sample(registry, "ktc_forwarder_batches_past_max_elapsed_time") == 0
    )  # cleared
    assert sample(registry, "otelcol_exporter_send_failed_metric_points_total") == 0


def test_with_retry_disabled_a_retryable_failure_drops_as_the_collector_does(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, 0)])
    receiver.script(Fail(grpc.StatusCode.UNAVAILABLE))
    registry = CollectorRegistry()
    fwd = forwarder(
        [landing_dir],
        config(receiver.target, retry_on_failure={"enabled": False}),
        registry=registry,
        clock=StepClock(),
    )
    try:
        stats = fwd.run_once()
    finally:
        fwd.close()
    assert stats == ForwardStats(
        records_committed=1, points_failed=3, records_dropped=1
    )
    assert (
        sample(registry, "ktc_forwarder_dropped_records_total", reason="retry_disabled")
        == 1
    )


# ---------------------------------------------------------------------- outages, restarts


def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """For the forwarder's threads and the receiver's gRPC server (not a time window)."""
    try:
        eventually_sync(predicate, timeout_s=timeout_s, what="the forwarder's progress")
    except AssertionError:
        return False
    return True


def _serve_in_thread(fwd: OtlpForwarder) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=fwd.serve, args=(stop,), daemon=True)
    thread.start()
    return stop, thread


def test_a_receiver_outage_loses_nothing_and_duplicates_nothing(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    cfg = config(
        receiver.target,
        retry_on_failure={
            "initial_interval": "20ms",
            "max_interval": "100ms",
            "max_elapsed_time": "200ms",
        },
    )
    log = LandingLog(landing_dir, LandingOptions(fsync="never"), housekeeping=False)
    registry = CollectorRegistry()
    fwd = forwarder(
        [landing_dir],
        cfg,
        poll_interval_s=0.01,
        registry=registry,
        commit_interval_s=0.01,
        clock=FastForwardClock(),
    )
    stop, thread = _serve_in_thread(fwd)
    sequence = {client: 0 for client in range(3)}

    def land_round() -> None:
        for client, seq in sequence.items():
            log.append(*push(client, seq))
            sequence[client] = seq + 1

    try:
        for _ in range(2):
            land_round()
        assert receiver.wait_for_points(2 * 3 * POINTS_PER_PUSH)
        # Let the last acknowledgement reach the forwarder first: cutting the server while
        # a response is on its way makes the forwarder resend that batch (at-least-once),
        # which is not the outage this test is about.
        assert wait_until(
            lambda: ConsumerPositions(landing_dir, CONSUMER_NAME).load() == 6
        )
        receiver.stop()  # the outage: pushes keep landing
        for _ in range(5):
            land_round()
        # Outlast max_elapsed_time while down: the forwarder says so on its gauge.
        assert wait_until(
            lambda: sample(registry, "ktc_forwarder_batches_past_max_elapsed_time") == 1
        )
        receiver.start()  # same port
        land_round()
        assert receiver.wait_for_points(8 * 3 * POINTS_PER_PUSH)
    finally:
        stop.set()
        thread.join(5)
        fwd.close()
        log.close()
    assert not thread.is_alive()
    seen = per_client_values(receiver)
    # Every client's points, exactly once, in the order the client pushed them.
    assert {client: values for client, values in seen.items()} == {
        f"client-{client:016d}": [seq * 3 + i for seq in range(8) for i in range(3)]
        for client in range(3)
    }
    assert ConsumerPositions(landing_dir, CONSUMER_NAME).load() == 24
    assert sample(registry, "ktc_forwarder_retries_total") >= 3  # the outage was felt
    assert sample(registry, "otelcol_exporter_send_failed_metric_points_total") == 0


def test_a_restarted_forwarder_resumes_from_its_committed_position(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, seq) for seq in range(3)])
    first = forwarder([landing_dir], config(receiver.target))
    try:
        assert first.run_once().records_committed == 3
    finally:
        first.close()
    land(landing_dir, [push(0, seq) for seq in range(3, 5)])
    second = forwarder([landing_dir], config(receiver.target))
    try:
        assert second.run_once().records_committed == 2
    finally:
        second.close()
    assert per_client_values(receiver)["client-0000000000000000"] == list(range(15))


def test_positions_are_written_once_per_commit_interval_and_on_shutdown(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, seq) for seq in range(4)])
    fwd = forwarder(
        [landing_dir],
        config(receiver.target),
        poll_interval_s=0.01,
        commit_interval_s=3600,
    )
    stop, thread = _serve_in_thread(fwd)
    try:
        assert receiver.wait_for_points(4 * POINTS_PER_PUSH)
        # The first delivery is committed at once, the rest wait for the interval ...
        assert ConsumerPositions(landing_dir, CONSUMER_NAME).load() == 1
    finally:
        stop.set()
        thread.join(5)
        fwd.close()
    # ... or for shutdown, which commits everything delivered.
    assert ConsumerPositions(landing_dir, CONSUMER_NAME).load() == 4


def test_a_batch_interrupted_in_backoff_is_not_committed_and_is_sent_after_restart(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, 0), push(0, 1)])
    receiver.script(Fail(grpc.StatusCode.UNAVAILABLE, times=3))
    stop = threading.Event()
    clock = StepClock()
    clock.on_wait = lambda _: stop.set()  # shut down during the first backoff
    first = forwarder([landing_dir], config(receiver.target), clock=clock)
    try:
        assert first.run_once(stop) == ForwardStats()
    finally:
        first.close()
    assert ConsumerPositions(landing_dir, CONSUMER_NAME).load() == 0
    second = forwarder([landing_dir], config(receiver.target), clock=StepClock())
    try:
        assert second.run_once().records_committed == 2
    finally:
        second.close()
    assert per_client_values(receiver)["client-0000000000000000"] == list(range(6))


def test_each_node_log_is_forwarded_in_its_own_order(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    dirs = [tmp_path / "landing" / f"node-{n}" for n in (1, 2)]
    for node, directory in enumerate(dirs, start=1):
        land(
            directory,
            [
                (
                    sample_context(client_instance_id=f"client-{node}", node_id=node),
                    sample_metrics_data(start_value=seq * 3).SerializeToString(),
                )
                for seq in range(4)
            ],
        )
    fwd = forwarder(
        dirs,
        config(receiver.target, sending_queue={"num_consumers": 2}),
        poll_interval_s=0.01,
    )
    stop, thread = _serve_in_thread(fwd)
    try:
        assert receiver.wait_for_points(2 * 4 * POINTS_PER_PUSH)
    finally:
        stop.set()
        thread.join(5)
        fwd.close()
    assert per_client_values(receiver) == {
        "client-1": list(range(12)),
        "client-2": list(range(12)),
    }
    brokers = {
        resource_attributes(rm)["client_instance_id"]: resource_attributes(rm)[
            "kafka.broker.id"
        ]
        for rm in receiver.resource_metrics()
    }
    assert brokers == {"client-1": "1", "client-2": "2"}


def test_tailing_holds_a_small_batch_for_flush_timeout_then_sends_it_whole(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    landed_at_s = time.monotonic()
    land(landing_dir, [push(0, seq) for seq in range(3)])  # 9 points < min_size 8192
    cfg = config(receiver.target, sending_queue={"batch": {"flush_timeout": "150ms"}})
    fwd = forwarder([landing_dir], cfg, poll_interval_s=0.01)
    stop, thread = _serve_in_thread(fwd)
    try:
        assert receiver.wait_for_points(9)
    finally:
        stop.set()
        thread.join(5)
        fwd.close()
    (export,) = receiver.received
    assert len(export.request.resource_metrics) == 3
    assert export.arrived_monotonic_s - landed_at_s >= 0.15


# ---------------------------------------------------------------------- shutdown


def test_shutdown_interrupts_a_pending_backoff_at_once(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, 0)])
    receiver.script(Fail(grpc.StatusCode.UNAVAILABLE, times=100))
    cfg = config(
        receiver.target,
        retry_on_failure={
            "initial_interval": "30s",
            "max_interval": "30s",
            "max_elapsed_time": "300s",
        },
    )
    clock = StandstillClock()
    fwd = forwarder([landing_dir], cfg, clock=clock)
    stop, thread = _serve_in_thread(fwd)
    try:
        assert receiver.wait_for_attempts(1)
        assert clock.wait_began.wait(10)  # in a backoff that will not end by itself
        assert len(clock.waits_s) == 1 and 15.0 <= clock.waits_s[0] <= 45.0
        stopped_at = time.monotonic()
        stop.set()
        thread.join(5)
        took_s = time.monotonic() - stopped_at
    finally:
        fwd.close()
    assert not thread.is_alive()
    assert took_s < 1.0
    assert len(receiver.attempts) == 1
    assert ConsumerPositions(landing_dir, CONSUMER_NAME).load() == 0  # still owed


async def test_async_run_stops_promptly_when_the_event_is_set(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    land(landing_dir, [push(0, 0)])
    receiver.script(Fail(grpc.StatusCode.UNAVAILABLE, times=100))
    cfg = config(
        receiver.target,
        retry_on_failure={
            "initial_interval": "30s",
            "max_interval": "30s",
            "max_elapsed_time": "300s",
        },
    )
    fwd = forwarder([landing_dir], cfg)
    stop_event = asyncio.Event()
    task = asyncio.create_task(fwd.run(stop_event))
    try:
        assert await asyncio.to_thread(receiver.wait_for_attempts, 1)
        stop_event.set()
        await asyncio.wait_for(task, timeout=1.0)
    finally:
        fwd.close()
    assert ConsumerPositions(landing_dir, CONSUMER_NAME).load() == 0


# ---------------------------------------------------------------------- the forwarder's series


def test_during_an_outage_the_lag_grows_with_every_landed_push_and_returns_to_zero(
    receiver: OtlpReceiver, landing_dir: Path
) -> None:
    """``ktc_forwarder_lag_records`` is what operators alert on during an outage: while the
    forwarder sits in its backoff, pushes keep landing and the lag must count each of them
    (landed minus committed), not the value it had when the receiver went away.  The other
    series are read at the same moments: nothing counts as sent, every retry counts."""
    land(landing_dir, [push(0, 0)])
    receiver.script(Fail(grpc.StatusCode.UNAVAILABLE, times=5))
    clock, registry = StepClock(), CollectorRegistry()
    during: list[tuple[float, float, float, float]] = []
    landed = 1

    def one_more_push_lands(_: float) -> None:
        nonlocal landed
        land(landing_dir, [push(0, landed)])
        landed += 1
        during.append(
            (
                sample(registry, "ktc_forwarder_lag_records"),
                sample(registry, "otelcol_exporter_sent_metric_points_total"),
                sample(registry, "ktc_forwarder_retries_total"),
                sample(registry, "otelcol_exporter_queue_size"),
            )
        )

    clock.on_wait = one_more_push_lands
    fwd = forwarder(
        [landing_dir], config(receiver.target), clock=clock, registry=registry
    )
    try:
        assert sample(registry, "ktc_forwarder_lag_records") == 1  # before any send
        stats = fwd.run_once()
    finally:
        fwd.close()
    assert [lag for lag, _, _, _ in during] == [2, 3, 4, 5, 6]  # one more per backoff
    assert [sent for _, sent, _, _ in during] == [0] * 5
    assert [retries for _, _, retries, _ in during] == [1, 2, 3, 4, 5]
    assert all(size == 1 for _, _, _, size in during)  # the one request held for retry
    # run_once drains to the end it saw when it began; the six pushes go out on the next.
    assert stats == ForwardStats(records_committed=1, points_sent=3)
    assert sample(registry, "ktc_forwarder_lag_records") == 5
    registry = CollectorRegistry()
    fwd = forwarder(
        [landing_dir], config(receiver.target), clock=clock, registry=registry
    )
    assert (
        sample(registry, "ktc_forwarder_lag_records") == 5
    )  # read from the log itself
    try:
        stats = fwd.run_once()
    finally:
        fwd.close()
    assert stats == ForwardStats(records_committed=5, points_sent=15)
    assert sample(registry, "ktc_forwarder_lag_records") == 0
    assert per_client_values(receiver)["client-0000000000000000"] == list(range(18))
