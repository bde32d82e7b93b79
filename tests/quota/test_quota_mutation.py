"""Controller-mutation quotas: Kafka's StrictControllerMutationQuotaTest,
PermissiveControllerMutationQuotaTest and ControllerMutationQuotaManagerTest."""

from __future__ import annotations

import pytest

from clock.testing import FakeClock
from quota import (
    THROTTLING_QUOTA_EXCEEDED,
    ClientQuotaEntity,
    ClientQuotaManagerConfig,
    ControllerMutationQuotaManager,
    MetricConfig,
    MetricName,
    Metrics,
    PermissiveControllerMutationQuota,
    Quota,
    QuotaViolationError,
    Rate,
    StrictControllerMutationQuota,
    ThrottlingQuotaExceededError,
    TokenBucket,
    UnboundedControllerMutationQuota,
)
from quota.mutation_quota import mutation_throttle_time_ms
from quota.sensor import Sensor

RATE_PER_S = 10
SAMPLES = 10
BURST = RATE_PER_S * SAMPLES  # 10 samples of 1 s at 10/s: 100 tokens
USER, CLIENT = "ANONYMOUS", "test-client"


def bucket_sensor(metrics: Metrics, clock: FakeClock) -> Sensor:
    sensor = metrics.sensor(
        "sensor",
        clock.now_ms(),
        MetricConfig(
            quota=Quota.upper_bound(RATE_PER_S), time_window_ms=1000, samples=SAMPLES
        ),
    )
    sensor.add(MetricName("rate", "test-group"), TokenBucket())
    return sensor


def test_strict_quota_rejects_once_exhausted(
    metrics: Metrics, clock: FakeClock
) -> None:
    quota = StrictControllerMutationQuota(bucket_sensor(metrics, clock))
    assert not quota.is_exceeded
    quota.record(90, clock.now_ms())  # 100 -> 10 tokens: accepted
    assert not quota.is_exceeded and quota.throttle_time_ms(clock.now_ms()) == 0
    quota.record(
        90, clock.now_ms()
    )  # 10 -> -80: still accepted (bucket wasn't negative)
    assert not quota.is_exceeded and quota.throttle_time_ms(clock.now_ms()) == 0
    with pytest.raises(ThrottlingQuotaExceededError) as rejected:
        quota.record(90, clock.now_ms())  # negative: rejected, nothing recorded
    expected_ms = 80 * 1000 // RATE_PER_S  # 8000
    assert rejected.value.error_code == THROTTLING_QUOTA_EXCEEDED == 89
    assert rejected.value.throttle_time_ms == expected_ms
    assert quota.is_exceeded and quota.throttle_time_ms(clock.now_ms()) == expected_ms
    clock.advance(5000)  # the remembered throttle decays with time
    assert quota.throttle_time_ms(clock.now_ms()) == expected_ms - 5000


def test_permissive_quota_accepts_and_throttles(
    metrics: Metrics, clock: FakeClock
) -> None:
    quota = PermissiveControllerMutationQuota(bucket_sensor(metrics, clock))
    quota.record(90, clock.now_ms())  # 10 tokens left
    assert quota.throttle_time_ms(clock.now_ms()) == 0
    quota.record(90, clock.now_ms())  # -80: throttled 8 s at once
    assert quota.throttle_time_ms(clock.now_ms()) == 8000
    quota.record(90, clock.now_ms())  # -170: still accepted, 17 s
    assert not quota.is_exceeded  # never "exceeded": old clients can't handle the error
    assert quota.throttle_time_ms(clock.now_ms()) == 17_000
    clock.advance(5000)
    assert quota.throttle_time_ms(clock.now_ms()) == 12_000


@pytest.mark.parametrize(("tokens", "expected_ms"), [(0, 0), (-5, 500), (-10, 1000)])
def test_throttle_time_of_a_token_bucket_violation(
    metrics: Metrics, clock: FakeClock, tokens: float, expected_ms: int
) -> None:
    sensor = bucket_sensor(metrics, clock)
    (metric,) = sensor.metrics
    assert (
        mutation_throttle_time_ms(QuotaViolationError(metric, tokens, RATE_PER_S))
        == expected_ms
    )


def test_throttle_time_needs_a_token_bucket(metrics: Metrics, clock: FakeClock) -> None:
    sensor = metrics.sensor("rate-sensor", clock.now_ms())
    sensor.add(MetricName("rate", "g"), Rate())
    (metric,) = sensor.metrics
    with pytest.raises(ValueError, match="is not a TokenBucket metric"):
        mutation_throttle_time_ms(QuotaViolationError(metric, -1, 1))


def make_manager(metrics: Metrics, clock: FakeClock) -> ControllerMutationQuotaManager:
    return ControllerMutationQuotaManager(
        ClientQuotaManagerConfig(SAMPLES, 1), metrics, clock.now_ms()
    )


def test_manager_strict_accounting(metrics: Metrics, clock: FakeClock) -> None:
    manager = make_manager(metrics, clock)
    manager.update_quota(ClientQuotaEntity(USER, CLIENT), Quota.upper_bound(RATE_PER_S))

    def record(value: float) -> int:
        return manager.maybe_record_and_get_throttle_time_ms(
            USER, CLIENT, value, clock.now_ms()
        )

    for _ in range(10):  # exactly the refill rate: the bucket stays full
        assert record(RATE_PER_S) == 0
        clock.advance(1000)
    spike = 110
    assert record(spike) == 0  # checked before recording: accepted, bucket 100 -> -10
    assert record(spike) == 10 * 1000 // RATE_PER_S  # rejected: 1 s to refill 10 tokens
    manager.throttle(USER, CLIENT, object(), 1000, clock.now_ms())
    assert manager.queue.size("ControllerMutation") == 1
    clock.advance(1000)
    assert len(manager.queue.pop_expired(clock.now_ms())) == 1
    assert record(spike) == 0  # back at zero tokens: accepted again


def test_manager_returns_unbounded_quota_while_none_is_configured(
    metrics: Metrics, clock: FakeClock
) -> None:
    manager = make_manager(metrics, clock)
    now = clock.now_ms()
    assert isinstance(
        manager.new_strict_quota_for(USER, CLIENT, now),
        UnboundedControllerMutationQuota,
    )
    assert isinstance(
        manager.new_permissive_quota_for(USER, CLIENT, now),
        UnboundedControllerMutationQuota,
    )
    manager.update_quota(ClientQuotaEntity(USER, CLIENT), Quota.upper_bound(RATE_PER_S))
    assert isinstance(
        manager.new_strict_quota_for(USER, CLIENT, now), StrictControllerMutationQuota
    )
    assert isinstance(
        manager.new_permissive_quota_for(USER, CLIENT, now),
        PermissiveControllerMutationQuota,
    )


@pytest.mark.parametrize(
    ("api_version", "strict_since", "expected"),
    [
        (6, 6, StrictControllerMutationQuota),
        (7, 6, StrictControllerMutationQuota),
        (5, 6, PermissiveControllerMutationQuota),
    ],
)
def test_new_quota_for_picks_strictness_by_version(
    metrics: Metrics,
    clock: FakeClock,
    api_version: int,
    strict_since: int,
    expected: type,
) -> None:
    manager = make_manager(metrics, clock)
    manager.update_quota(ClientQuotaEntity(USER, None), Quota.upper_bound(RATE_PER_S))
    quota = manager.new_quota_for(
        USER, CLIENT, api_version, strict_since, clock.now_ms()
    )
    assert isinstance(quota, expected)


def test_manager_sensor_has_a_rate_and_the_token_bucket(
    metrics: Metrics, clock: FakeClock
) -> None:
    manager = make_manager(metrics, clock)
    manager.update_quota(ClientQuotaEntity(None, CLIENT), Quota.upper_bound(RATE_PER_S))
    manager.maybe_record_and_get_throttle_time_ms(USER, CLIENT, 30, clock.now_ms())
    tags = (("user", ""), ("client-id", CLIENT))
    tokens = metrics.metric(MetricName("tokens", "ControllerMutation", tags))
    rate = metrics.metric(MetricName("mutation-rate", "ControllerMutation", tags))
    assert tokens is not None and rate is not None
    assert tokens.measurable_value(clock.now_ms()) == BURST - 30
    assert rate.config.quota is None  # only the bucket enforces
