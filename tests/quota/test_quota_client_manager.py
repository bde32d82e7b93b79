"""ClientQuotaManager: Kafka's ClientQuotaManagerTest and ClientRequestQuotaManagerTest, the
fast path, dynamic limit changes that keep usage, sensor expiry and the delay queue."""

from __future__ import annotations

import pytest

from clock.testing import FakeClock
from quota import (
    DEFAULT,
    ClientQuotaEntity,
    ClientQuotaManager,
    ClientQuotaManagerConfig,
    ClientRequestQuotaManager,
    MetricName,
    Metrics,
    Quota,
    QuotaType,
)
from quota.client_quota_manager import UNLIMITED
from quota.request_quota import NANOS_TO_PERCENTAGE_PER_SECOND

CONFIG = ClientQuotaManagerConfig()  # 11 samples of 1 s
SECOND_MS = 1000


def make_manager(
    metrics: Metrics,
    clock: FakeClock,
    config: ClientQuotaManagerConfig = CONFIG,
    quota_type: QuotaType = QuotaType.PRODUCE,
) -> ClientQuotaManager:
    return ClientQuotaManager(config, metrics, quota_type, clock.now_ms())


def maybe_record(
    manager: ClientQuotaManager,
    clock: FakeClock,
    user: str,
    client_id: str,
    value: float,
) -> int:
    return manager.maybe_record_and_get_throttle_time_ms(
        user, client_id, value, clock.now_ms()
    )


def queue_size(metrics: Metrics, group: str) -> float:
    metric = metrics.metric(MetricName("queue-size", group))
    assert metric is not None
    return metric.measurable_value(0)


# -- testQuotaParsing for client-id, user and (user, client-id) entities ----------------------

PARSING_CASES = {
    # case: entity1, client1 (user, client-id), entity2, client2, a random client, default entity
    "client-id": (
        ClientQuotaEntity(None, "p1"),
        ("ANONYMOUS", "p1"),
        ClientQuotaEntity(None, "p2"),
        ("ANONYMOUS", "p2"),
        ("ANONYMOUS", "random-client-id"),
        ClientQuotaEntity(None, DEFAULT),
    ),
    "user": (
        ClientQuotaEntity("User1", None),
        ("User1", "p1"),
        ClientQuotaEntity("User2", None),
        ("User2", "p2"),
        ("RandomUser", "random-client-id"),
        ClientQuotaEntity(DEFAULT, None),
    ),
    "user-client-id": (
        ClientQuotaEntity("User1", "p1"),
        ("User1", "p1"),
        ClientQuotaEntity("User2", "p2"),
        ("User2", "p2"),
        ("RandomUser", "random-client-id"),
        ClientQuotaEntity(DEFAULT, DEFAULT),
    ),
}


@pytest.mark.parametrize("case", list(PARSING_CASES))
def test_quota_parsing(metrics: Metrics, clock: FakeClock, case: str) -> None:
    entity1, client1, entity2, client2, random_client, default_entity = PARSING_CASES[
        case
    ]
    manager = make_manager(metrics, clock)
    samples = CONFIG.num_quota_samples

    manager.update_quota(entity1, Quota.upper_bound(2000))
    manager.update_quota(entity2, Quota.upper_bound(4000))
    assert manager.quota(*random_client).bound == UNLIMITED
    assert manager.quota(*client1).bound == 2000
    assert manager.quota(*client2).bound == 4000

    # client1 is throttled against its own 2000/s
    assert maybe_record(manager, clock, *client1, 2500 * samples) > 0

    # raising the limit applies to the existing sensor, usage kept: 2500·11/10 = 2750 < 3000
    manager.update_quota(entity1, Quota.upper_bound(3000))
    assert manager.quota(*client1).bound == 3000
    assert maybe_record(manager, clock, *client1, 0) == 0

    # lowering it throttles again on the same usage
    manager.update_quota(entity1, Quota.upper_bound(500))
    assert manager.quota(*client1).bound == 500
    assert maybe_record(manager, clock, *client1, 0) > 0

    # removing client1's quota in favour of a high default: not throttled
    manager.update_quota(entity1, None)
    manager.update_quota(default_entity, Quota.upper_bound(4000))
    assert manager.quota(*client1).bound == 4000
    assert maybe_record(manager, clock, *client1, 1000 * samples) == 0


# -- testQuotaConfigPrecedence ----------------------------------------------------------------


def check_quota(
    manager: ClientQuotaManager,
    clock: FakeClock,
    user: str,
    client_id: str,
    expected_bound: float,
    value: float,
    expect_throttle: bool,
) -> None:
    assert manager.quota(user, client_id).bound == expected_bound
    max_value = manager.max_value_in_quota_window(user, client_id, clock.now_ms())
    if expected_bound < UNLIMITED:
        expected_max = (
            CONFIG.quota_window_size_seconds
            * (CONFIG.num_quota_samples - 1)
            * expected_bound
        )
        assert max_value == pytest.approx(expected_max)
    else:
        assert max_value == float("inf")
    throttle_ms = maybe_record(
        manager, clock, user, client_id, value * CONFIG.num_quota_samples
    )
    if expect_throttle:
        assert throttle_ms > 0, (user, client_id)
    else:
        assert throttle_ms == 0, (user, client_id)


def test_quota_config_precedence(metrics: Metrics, clock: FakeClock) -> None:
    m = make_manager(metrics, clock)

    def q(user: object, client_id: object, bound: float | None) -> None:
        m.update_quota(
            ClientQuotaEntity(user, client_id),  # type: ignore[arg-type]
            None if bound is None else Quota.upper_bound(bound),
        )

    q(DEFAULT, None, 1000)
    q(None, DEFAULT, 2000)
    q(DEFAULT, DEFAULT, 3000)
    q("userA", None, 4000)
    q("userA", "client1", 5000)
    q("userB", None, 6000)
    q("userB", "client1", 7000)
    q("userB", DEFAULT, 8000)
    q("userC", None, 10000)
    q(None, "client1", 9000)

    def check(
        user: str, client_id: str, bound: float, value: float, throttle: bool
    ) -> None:
        check_quota(m, clock, user, client_id, bound, value, throttle)

    check("userA", "client1", 5000, 4500, False)  # <user, client> wins over <user>
    check(
        "userA", "client2", 4000, 4500, True
    )  # <user> wins over <client> and defaults
    check(
        "userA", "client3", 4000, 0, True
    )  # <user> is shared across the user's clients
    check("userA", "client1", 5000, 0, False)  # <user, client> is its own

    check("userB", "client1", 7000, 8000, True)
    check(
        "userB", "client2", 8000, 7000, False
    )  # per-client default: each pair its own
    check("userB", "client3", 8000, 7000, False)

    check("userD", "client1", 3000, 3500, True)  # default <user, client>
    check("userD", "client2", 3000, 2500, False)
    check("userE", "client1", 3000, 2500, False)

    q(DEFAULT, DEFAULT, None)  # back to the <user> default
    check("userD", "client1", 1000, 0, False)  # new metric tags: a fresh counter
    check("userE", "client4", 1000, 1500, True)
    check(
        "userF", "client4", 1000, 800, False
    )  # <user> default shared by the user's clients
    check("userF", "client5", 1000, 800, True)

    q(DEFAULT, None, None)  # back to the <client-id> default
    check("userF", "client4", 2000, 0, False)  # shared by that client-id across users
    check("userF", "client5", 2000, 0, False)
    check("userF", "client5", 2000, 2500, True)
    check("userG", "client5", 2000, 0, True)

    q("userA", None, 8000)
    q("userA", "client1", 10000)
    check("userA", "client2", 8000, 0, False)
    check("userA", "client2", 8000, 4500, True)  # the new and earlier values add up
    check("userA", "client1", 10000, 0, False)
    check("userA", "client1", 10000, 6000, True)
    q("userA", "client1", None)
    check("userA", "client6", 8000, 0, True)  # shared user quota
    q("userA", "client6", 11000)
    check("userA", "client6", 11000, 8500, False)
    q("userA", DEFAULT, 12000)
    q("userA", "client6", None)
    check("userA", "client6", 12000, 4000, True)  # the new and earlier values add up


@pytest.mark.parametrize(
    "entity",
    [
        ClientQuotaEntity(DEFAULT, None),
        ClientQuotaEntity("userA", None),
        ClientQuotaEntity("userA", "client1"),
    ],
    ids=["default-user", "user", "user-client"],
)
def test_set_and_remove_quota(
    metrics: Metrics, clock: FakeClock, entity: ClientQuotaEntity
) -> None:
    manager = make_manager(metrics, clock)
    check_quota(manager, clock, "userA", "client1", UNLIMITED, 1000, False)
    manager.update_quota(entity, Quota.upper_bound(10))
    check_quota(manager, clock, "userA", "client1", 10, 1000, True)
    manager.update_quota(entity, None)
    check_quota(manager, clock, "userA", "client1", UNLIMITED, 1000, False)
    assert (
        not manager.quotas_enabled
    )  # the last quota of its kind turns the fast path back on


def test_max_value_in_quota_window_with_non_default_window(
    metrics: Metrics, clock: FakeClock
) -> None:
    full_windows = 3
    manager = make_manager(
        metrics,
        clock,
        ClientQuotaManagerConfig(num_quota_samples=full_windows + 1),
        QuotaType.FETCH,
    )
    assert manager.max_value_in_quota_window(
        "userA", "client1", clock.now_ms()
    ) == float("inf")
    manager.update_quota(ClientQuotaEntity(DEFAULT, None), Quota.upper_bound(10))
    assert (
        manager.max_value_in_quota_window("userA", "client1", clock.now_ms())
        == 10 * full_windows
    )


# -- testQuotaViolation -----------------------------------------------------------------------


def test_quota_violation_and_delay_queue(metrics: Metrics, clock: FakeClock) -> None:
    manager = make_manager(metrics, clock)
    quota_bytes_per_s = 500
    manager.update_quota(
        ClientQuotaEntity(None, DEFAULT), Quota.upper_bound(quota_bytes_per_s)
    )
    for _ in range(10):  # 400 B/s for ten seconds: under the quota
        assert maybe_record(manager, clock, "ANONYMOUS", "unknown", 400) == 0
        clock.advance(SECOND_MS)
    assert queue_size(metrics, "Produce") == 0

    # A spike half-way into the 11th window: (400·10 + 2300) / 10.5 s = 600 B/s, and
    # X = (600 - 500) / 500 · 10.5 s = 2100 ms.
    clock.advance(500)
    spike = 2300
    observed = (400 * 10 + spike) / 10.5
    expected_ms = round((observed - quota_bytes_per_s) / quota_bytes_per_s * 10_500)
    throttle_ms = maybe_record(manager, clock, "ANONYMOUS", "unknown", spike)
    assert throttle_ms == expected_ms == 2100

    channel = object()
    manager.throttle("ANONYMOUS", "unknown", channel, throttle_ms, clock.now_ms())
    assert queue_size(metrics, "Produce") == 1
    assert manager.queue.pop_expired(clock.now_ms()) == []  # not before the delay
    clock.advance(throttle_ms)
    (expired,) = manager.queue.pop_expired(clock.now_ms())
    assert expired.channel is channel and expired.throttle_time_ms == throttle_ms
    assert queue_size(metrics, "Produce") == 0

    # The burst keeps throttling until its sample has rolled out of the window.
    for _ in range(10):
        maybe_record(manager, clock, "ANONYMOUS", "unknown", 400)
        clock.advance(SECOND_MS)
    assert maybe_record(manager, clock, "ANONYMOUS", "unknown", 0) == 0


def test_throttle_records_the_throttle_time_sensor(
    metrics: Metrics, clock: FakeClock
) -> None:
    manager = make_manager(metrics, clock)
    manager.update_quota(ClientQuotaEntity(None, DEFAULT), Quota.upper_bound(500))
    for throttle_ms in (100, 300):
        manager.throttle("ANONYMOUS", "c1", object(), throttle_ms, clock.now_ms())
    metric = metrics.metric(
        MetricName("throttle-time", "Produce", (("user", ""), ("client-id", "c1")))
    )
    assert metric is not None
    assert metric.measurable_value(clock.now_ms()) == 200  # Avg of 100 and 300


# -- sensors: fast path, expiry, re-creation --------------------------------------------------


def test_no_quota_means_no_sensor_work(metrics: Metrics, clock: FakeClock) -> None:
    manager = make_manager(metrics, clock)
    sensors_before = set(metrics.sensors)
    assert maybe_record(manager, clock, "alice", "app", 10**12) == 0
    assert set(metrics.sensors) == sensors_before


@pytest.mark.parametrize(
    "removed",
    [
        ("ProduceThrottleTime-:client1",),
        ("ProduceThrottleTime-:client1", "Produce-:client1"),
    ],
)
def test_removed_sensors_are_recreated(
    metrics: Metrics, clock: FakeClock, removed: tuple[str, ...]
) -> None:
    manager = make_manager(metrics, clock)
    manager.update_quota(ClientQuotaEntity(None, DEFAULT), Quota.upper_bound(500))
    maybe_record(manager, clock, "ANONYMOUS", "client1", 100)
    for name in removed:
        metrics.remove_sensor(name)
    assert maybe_record(manager, clock, "ANONYMOUS", "client1", 10_000) > 0
    assert metrics.get_sensor("ProduceThrottleTime-:client1") is not None
    assert metrics.get_sensor("Produce-:client1") is not None


def test_sensors_expire_after_an_hour_of_inactivity(
    metrics: Metrics, clock: FakeClock
) -> None:
    manager = make_manager(metrics, clock)
    manager.update_quota(ClientQuotaEntity(None, DEFAULT), Quota.upper_bound(500))
    maybe_record(manager, clock, "ANONYMOUS", "idle", 100)
    hour_ms = 3600 * SECOND_MS
    clock.advance(hour_ms)
    assert (
        metrics.expire_inactive_sensors(clock.now_ms()) == []
    )  # exactly an hour: kept
    clock.advance(1)
    assert set(metrics.expire_inactive_sensors(clock.now_ms())) == {
        "Produce-:idle",
        "ProduceThrottleTime-:idle",
    }
    # A returning client starts a fresh window.
    assert maybe_record(manager, clock, "ANONYMOUS", "idle", 100) == 0
    assert metrics.get_sensor("Produce-:idle") is not None


# -- dynamic limits keep usage ----------------------------------------------------------------


def test_limit_change_mid_window_keeps_recorded_usage(
    metrics: Metrics, clock: FakeClock
) -> None:
    manager = make_manager(metrics, clock)
    entity = ClientQuotaEntity(None, "app")
    manager.update_quota(entity, Quota.upper_bound(1000))
    recorded = 5000  # over the padded 10 s window: 500 B/s, under 1000
    assert maybe_record(manager, clock, "u", "app", recorded) == 0
    clock.advance(400)  # mid-window
    manager.update_quota(entity, Quota.upper_bound(250))
    rate = metrics.metric(
        MetricName("byte-rate", "Produce", (("user", ""), ("client-id", "app")))
    )
    assert rate is not None
    assert rate.measurable_value(clock.now_ms()) == pytest.approx(recorded / 10.4)
    # The usage recorded before the change now violates the lower limit:
    # X = (5000 / 10.4 - 250) / 250 · 10.4 s = 9600 ms.
    assert maybe_record(manager, clock, "u", "app", 0) == round(
        (recorded / 10.4 - 250) / 250 * 10_400
    )


def test_unrecord_takes_a_throttled_fetch_back(
    metrics: Metrics, clock: FakeClock
) -> None:
    manager = make_manager(metrics, clock, quota_type=QuotaType.FETCH)
    manager.update_quota(ClientQuotaEntity(None, "c"), Quota.upper_bound(100))
    assert maybe_record(manager, clock, "u", "c", 5000) > 0
    manager.unrecord("u", "c", 5000, clock.now_ms())
    assert maybe_record(manager, clock, "u", "c", 0) == 0


# -- ClientRequestQuotaManagerTest ------------------------------------------------------------


def millis_to_percent(millis: float) -> float:
    return millis * 1_000_000 * NANOS_TO_PERCENTAGE_PER_SECOND


def test_request_percentage_quota_violation(metrics: Metrics, clock: FakeClock) -> None:
    manager = ClientRequestQuotaManager(CONFIG, metrics, clock.now_ms())
    manager.update_quota(
        ClientQuotaEntity("ANONYMOUS", "test-client"), Quota.upper_bound(1)
    )  # 10 ms/s

    def record(millis: float) -> int:
        return maybe_record(
            manager, clock, "ANONYMOUS", "test-client", millis_to_percent(millis)
        )

    for _ in range(10):
        assert record(4) == 0
        clock.advance(SECOND_MS)
    assert queue_size(metrics, "Request") == 0

    # (4·10 + 67.1) ms / 10.5 s = 10.2 ms per s; X = (10.2 - 10) / 10 · 10.5 s = 210 ms
    clock.advance(500)
    throttle_ms = record(67.1)
    assert throttle_ms == 210
    manager.throttle("ANONYMOUS", "test-client", object(), throttle_ms, clock.now_ms())
    assert queue_size(metrics, "Request") == 1
    clock.advance(throttle_ms)
    assert len(manager.queue.pop_expired(clock.now_ms())) == 1

    for _ in range(11):
        record(4)
        clock.advance(SECOND_MS)
    assert record(0) == 0

    # A single 500 ms request would need 40 s; the request quota never holds longer than one
    # window (quota.window.size.seconds = 1 s), however long the excess takes to drain.
    window_ms = CONFIG.quota_window_size_seconds * SECOND_MS
    assert record(500) == window_ms
    for _ in range(10):
        clock.advance(SECOND_MS)
        assert record(0) == window_ms
    clock.advance(SECOND_MS)
    assert record(0) == 0


def test_request_time_is_recorded_in_nanoseconds_and_network_time_unchecked(
    metrics: Metrics, clock: FakeClock
) -> None:
    manager = ClientRequestQuotaManager(CONFIG, metrics, clock.now_ms())
    manager.update_quota(ClientQuotaEntity(None, "c"), Quota.upper_bound(1))
    ten_ms_ns = 10_000_000
    assert (
        manager.maybe_record_request_time_ns("u", "c", ten_ms_ns, clock.now_ms()) == 0
    )
    manager.record_network_thread_time_ns("u", "c", 200 * ten_ms_ns, clock.now_ms())
    assert manager.maybe_record_request_time_ns("u", "c", 0, clock.now_ms()) == 1000
    manager.maybe_record_exempt_ns(ten_ms_ns, clock.now_ms())
    exempt = metrics.metric(MetricName("exempt-request-time", "Request"))
    assert exempt is not None
    # The exempt sensor has the registry's default config (2 samples of 30 s, as Kafka's
    # metrics.num.samples / metrics.sample.window.ms): 1 % over the padded 30 s window.
    default_window_s = metrics.default_config.time_window_ms / SECOND_MS
    assert exempt.measurable_value(clock.now_ms()) == pytest.approx(
        1.0 / default_window_s
    )
