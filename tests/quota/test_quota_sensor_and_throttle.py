"""Sensor (SensorTest) and the throttle math (QuotaUtilsTest), with the seeds' numbers:
KIP-13's 2 s delay, KIP-599's 12 s token-bucket throttle vs the sampled rate's 100 s."""

from __future__ import annotations

import pytest

from clock.testing import FakeClock
from quota import (
    Avg,
    MetricConfig,
    MetricName,
    Metrics,
    Quota,
    QuotaViolationError,
    Rate,
    TokenBucket,
    WindowedSum,
    bounded_throttle_time_ms,
    max_value_in_quota_window,
    rate_throttle_time_ms,
    throttle_time_ms,
    token_bucket_throttle_time_ms,
)
from quota.metric import KafkaMetric
from quota.sensor import Sensor
from quota.stat import CumulativeSum

SECOND_MS = 1000


def strict_record(sensor: Sensor, value: float, now_ms: int) -> None:
    """Check first, then record unchecked (the strict mutation quota's order)."""
    sensor.check_quotas(now_ms)
    sensor.record(value, now_ms, check_quotas=False)


# -- SensorTest -------------------------------------------------------------------------------


def test_expired_sensor_accepts_no_new_metric(
    metrics: Metrics, clock: FakeClock
) -> None:
    inactive_ms = 60 * SECOND_MS
    sensor = metrics.sensor(
        "sensor", clock.now_ms(), inactive_expiration_ms=inactive_ms
    )
    assert sensor.add(MetricName("test1", "grp1"), Avg(), now_ms=clock.now_ms())
    clock.advance(inactive_ms + SECOND_MS)
    assert sensor.has_expired(clock.now_ms())
    assert not sensor.add(MetricName("test3", "grp1"), Avg(), now_ms=clock.now_ms())


def test_idempotent_add(metrics: Metrics, clock: FakeClock) -> None:
    sensor = metrics.sensor("sensor", clock.now_ms())
    name = MetricName("test-metric", "test-group")
    assert sensor.add(name, Avg())
    assert sensor.add(name, Avg())  # same name, same sensor: no-op
    other = metrics.sensor("another-sensor", clock.now_ms())
    with pytest.raises(ValueError, match="already exists"):
        other.add(name, Avg())
    assert sensor.add(
        name, WindowedSum()
    )  # a different stat under the same name: no-op too
    assert len(sensor.metrics) == 1
    assert isinstance(sensor.metrics[0].stat, Avg)


def test_presence_of_metrics(metrics: Metrics, clock: FakeClock) -> None:
    sensor = metrics.sensor("sensor", clock.now_ms())
    assert not sensor.has_metrics
    sensor.add(MetricName("name1", "group1"), WindowedSum())
    assert sensor.has_metrics


def test_strict_quota_enforcement_with_rate(metrics: Metrics, clock: FakeClock) -> None:
    quota_per_s, samples = 2, 11
    sensor = metrics.sensor(
        "sensor",
        clock.now_ms(),
        MetricConfig(
            quota=Quota.upper_bound(quota_per_s),
            time_window_ms=SECOND_MS,
            samples=samples,
        ),
    )
    name = MetricName("rate", "test-group")
    sensor.add(name, Rate())
    rate_metric = metrics.metric(name)
    assert rate_metric is not None
    burst = 30
    strict_record(sensor, burst, clock.now_ms())
    padded_window_s = samples - 1
    assert rate_metric.measurable_value(clock.now_ms()) == pytest.approx(
        burst / padded_window_s
    )
    # In theory ((30 / 10) - 2) / 2 * 10 = 5 s brings the rate back to 2; but 5 s later the
    # padded window is still 10 s, the rate still 3, and the next record is refused.
    clock.advance(5000)
    assert rate_metric.measurable_value(clock.now_ms()) == pytest.approx(3)
    with pytest.raises(QuotaViolationError):
        strict_record(sensor, burst, clock.now_ms())


def test_strict_quota_enforcement_with_token_bucket(
    metrics: Metrics, clock: FakeClock
) -> None:
    quota_per_s, samples = 2, 10
    sensor = metrics.sensor(
        "sensor",
        clock.now_ms(),
        MetricConfig(
            quota=Quota.upper_bound(quota_per_s),
            time_window_ms=SECOND_MS,
            samples=samples,
        ),
    )
    name = MetricName("credits", "test-group")
    sensor.add(name, TokenBucket())
    tokens = metrics.metric(name)
    assert tokens is not None
    burst = samples * quota_per_s  # 20
    strict_record(sensor, 30, clock.now_ms())
    assert tokens.measurable_value(clock.now_ms()) == pytest.approx(burst - 30)
    clock.advance(5000)  # -10 tokens refill at 2/s: zero after 5 s, exactly as computed
    assert tokens.measurable_value(clock.now_ms()) == pytest.approx(0)
    strict_record(sensor, 30, clock.now_ms())
    assert tokens.measurable_value(clock.now_ms()) == pytest.approx(-30)


def test_each_stat_is_recorded_and_checked_with_its_own_config(
    metrics: Metrics, clock: FakeClock
) -> None:
    sensor = metrics.sensor("sensor", clock.now_ms())
    low = MetricName("low", "g")
    high = MetricName("high", "g")
    sensor.add(low, CumulativeSum(), MetricConfig(quota=Quota.upper_bound(5)))
    sensor.add(high, CumulativeSum(), MetricConfig(quota=Quota.upper_bound(10)))
    with pytest.raises(QuotaViolationError) as violation:
        sensor.record(7, clock.now_ms())
    assert violation.value.metric.metric_name == low
    assert (violation.value.value, violation.value.bound) == (7, 5)


def test_updating_the_metric_config_is_reflected_in_the_sensor(
    metrics: Metrics, clock: FakeClock
) -> None:
    sensor = metrics.sensor("sensor", clock.now_ms())
    name = MetricName("stat", "g")
    sensor.add(name, CumulativeSum(), MetricConfig(quota=Quota.upper_bound(5)))
    with pytest.raises(QuotaViolationError):
        sensor.record(10, clock.now_ms())
    metric = metrics.metric(name)
    assert metric is not None
    metric.config = MetricConfig(quota=Quota.upper_bound(30))
    sensor.record(10, clock.now_ms())  # 20 <= 30: the new bound applies, usage kept
    assert metric.measurable_value(clock.now_ms()) == 20


def test_violation_keeps_the_recorded_value_and_unrecord_takes_it_back(
    metrics: Metrics, clock: FakeClock
) -> None:
    sensor = metrics.sensor(
        "sensor", clock.now_ms(), MetricConfig(quota=Quota.upper_bound(5))
    )
    name = MetricName("total", "g")
    sensor.add(name, CumulativeSum())
    with pytest.raises(QuotaViolationError):
        sensor.record(8, clock.now_ms())
    metric = metrics.metric(name)
    assert metric is not None and metric.measurable_value(clock.now_ms()) == 8
    sensor.unrecord(8, clock.now_ms())
    assert metric.measurable_value(clock.now_ms()) == 0


def test_expire_inactive_sensors_removes_sensor_and_metrics(
    metrics: Metrics, clock: FakeClock
) -> None:
    hour_ms = 3600 * SECOND_MS
    idle = metrics.sensor("idle", clock.now_ms(), inactive_expiration_ms=hour_ms)
    idle.add(MetricName("idle-rate", "g"), Rate())
    busy = metrics.sensor("busy", clock.now_ms(), inactive_expiration_ms=hour_ms)
    busy.add(MetricName("busy-rate", "g"), Rate())
    forever = metrics.sensor("forever", clock.now_ms())
    clock.advance(hour_ms)
    busy.record(1, clock.now_ms())
    clock.advance(1)  # idle is now 1 ms past its hour, busy 1 ms into a new one
    assert metrics.expire_inactive_sensors(clock.now_ms()) == ["idle"]
    assert metrics.get_sensor("idle") is None
    assert metrics.metric(MetricName("idle-rate", "g")) is None
    assert (
        metrics.get_sensor("busy") is busy and metrics.get_sensor("forever") is forever
    )


# -- QuotaUtilsTest ---------------------------------------------------------------------------

MAX_THROTTLE_TIME_MS = 500


def violation_on_rate(
    observed: float, quota: float, num_samples: int, now_ms: int
) -> QuotaViolationError:
    """A violation on a fresh 1 s-window Rate: its window is (num_samples - 1) s."""
    config = MetricConfig(
        quota=Quota.upper_bound(quota), samples=num_samples, time_window_ms=SECOND_MS
    )
    metric = KafkaMetric(MetricName("test-metric", "groupA"), Rate(), config)
    return QuotaViolationError(metric, observed, quota)


@pytest.mark.parametrize("num_samples", [10, 11])
def test_throttle_time_is_zero_at_the_quota(clock: FakeClock, num_samples: int) -> None:
    observed = 16.5
    violation = violation_on_rate(observed, observed, num_samples, clock.now_ms())
    assert throttle_time_ms(violation, clock.now_ms()) == 0
    assert (
        bounded_throttle_time_ms(violation, MAX_THROTTLE_TIME_MS, clock.now_ms()) == 0
    )


@pytest.mark.parametrize("num_samples", [10, 11])
def test_throttle_time_is_negative_below_the_quota(
    clock: FakeClock, num_samples: int
) -> None:
    violation = violation_on_rate(16.5, 20.4, num_samples, clock.now_ms())
    assert throttle_time_ms(violation, clock.now_ms()) < 0
    assert bounded_throttle_time_ms(violation, MAX_THROTTLE_TIME_MS, clock.now_ms()) < 0


@pytest.mark.parametrize(
    ("observed", "quota", "num_samples", "expected_ms"),
    [
        # X = (O - T) / T * W with W = (num_samples - 1) s
        (100.0, 50.0, 3, (100 - 50) / 50 * 2 * SECOND_MS),  # 2000
        (55.0, 50.0, 2, (55 - 50) / 50 * 1 * SECOND_MS),  # 100
    ],
)
def test_throttle_time_above_the_quota(
    clock: FakeClock,
    observed: float,
    quota: float,
    num_samples: int,
    expected_ms: float,
) -> None:
    violation = violation_on_rate(observed, quota, num_samples, clock.now_ms())
    assert throttle_time_ms(violation, clock.now_ms()) == expected_ms


def test_bounded_throttle_time_is_capped(clock: FakeClock) -> None:
    violation = violation_on_rate(100.0, 50.0, 10, clock.now_ms())  # unbounded: 9000 ms
    assert throttle_time_ms(violation, clock.now_ms()) == 9000
    assert (
        bounded_throttle_time_ms(violation, MAX_THROTTLE_TIME_MS, clock.now_ms())
        == MAX_THROTTLE_TIME_MS
    )


def test_throttle_time_needs_a_rate_metric(clock: FakeClock) -> None:
    metric = KafkaMetric(
        MetricName("test-metric", "groupA"), CumulativeSum(), MetricConfig()
    )
    violation = QuotaViolationError(metric, 10.0, 20.0)
    with pytest.raises(ValueError, match="is not a Rate metric"):
        throttle_time_ms(violation, clock.now_ms())
    with pytest.raises(ValueError, match="is not a Rate metric"):
        bounded_throttle_time_ms(violation, MAX_THROTTLE_TIME_MS, clock.now_ms())


@pytest.mark.parametrize(
    ("observed", "target", "window_ms", "expected_ms"),
    [
        (6.0, 5.0, 10_000, 2000),  # KIP-13: 60 MB over 10 s against 5 MB/s
        (5.0, 5.0, 10_000, 0),
        (4.0, 5.0, 10_000, -2000),
        (0.75, 0.5, 5, 3),  # 2.5 ms rounds half up like Math.round (Python's round: 2)
        (1.0, 0.0, 1000, 2**31 - 1),  # a zero quota: infinite, saturated at INT32
        (0.0, 0.0, 1000, 0),  # 0/0 is NaN; Math.round(NaN) is 0
    ],
)
def test_rate_throttle_formula(
    observed: float, target: float, window_ms: int, expected_ms: int
) -> None:
    assert rate_throttle_time_ms(observed, target, window_ms) == expected_ms


@pytest.mark.parametrize(
    ("tokens", "rate_per_s", "expected_ms"),
    [(0, 10, 0), (-5, 10, 500), (-10, 10, 1000), (-60, 5, 12_000)],
)
def test_token_bucket_throttle_formula(
    tokens: float, rate_per_s: float, expected_ms: int
) -> None:
    assert token_bucket_throttle_time_ms(tokens, rate_per_s) == expected_ms


def test_max_value_in_quota_window() -> None:
    limit, samples, window_s = 10.0, 4, 1  # 3 whole windows
    assert (
        max_value_in_quota_window(limit, samples, window_s)
        == limit * (samples - 1) * window_s
    )


# -- The seeds' worked examples ---------------------------------------------------------------

MB = 1_000_000


def test_kip13_burst_after_nine_seconds_at_quota_gives_two_seconds(
    metrics: Metrics, clock: FakeClock
) -> None:
    """KIP-13: 5 MB/s over a 10 s window; 9 s at 5 MB/s, then 15 MB: (60 - 50) / 5 = 2 s."""
    quota_bytes_per_s = 5 * MB
    samples = 11  # quota.window.num: 10 whole windows + the current one
    sensor = metrics.sensor(
        "Produce-:client",
        clock.now_ms(),
        MetricConfig(
            quota=Quota.upper_bound(quota_bytes_per_s),
            samples=samples,
            time_window_ms=SECOND_MS,
        ),
    )
    sensor.add(MetricName("byte-rate", "Produce"), Rate())
    for _ in range(9):  # nine seconds exactly at the quota: never throttled
        sensor.record(quota_bytes_per_s, clock.now_ms())
        clock.advance(SECOND_MS)
    burst = 15 * MB
    with pytest.raises(QuotaViolationError) as violation:
        sensor.record(burst, clock.now_ms())
    observed = (9 * quota_bytes_per_s + burst) / 10  # over the padded 10 s window
    assert violation.value.value == pytest.approx(observed)
    expected_ms = (observed - quota_bytes_per_s) / quota_bytes_per_s * 10 * SECOND_MS
    assert throttle_time_ms(violation.value, clock.now_ms()) == expected_ms == 2000


KIP599_QUOTA = 5.0  # mutations per second
KIP599_SAMPLES = 100
KIP599_BURST_MUTATIONS = 560


def test_kip599_token_bucket_throttles_twelve_seconds(
    metrics: Metrics, clock: FakeClock
) -> None:
    config = MetricConfig(
        quota=Quota.upper_bound(KIP599_QUOTA),
        samples=KIP599_SAMPLES,
        time_window_ms=SECOND_MS,
    )
    sensor = metrics.sensor("mutations", clock.now_ms(), config)
    name = MetricName("tokens", "ControllerMutation")
    sensor.add(name, TokenBucket())
    sensor.record(KIP599_BURST_MUTATIONS, clock.now_ms(), check_quotas=False)
    burst_capacity = KIP599_QUOTA * KIP599_SAMPLES * 1  # B = Q·S·W = 500
    tokens_left = burst_capacity - KIP599_BURST_MUTATIONS
    assert tokens_left == -60
    with pytest.raises(QuotaViolationError) as violation:
        sensor.check_quotas(clock.now_ms())
    assert violation.value.value == pytest.approx(tokens_left)
    throttle_ms = token_bucket_throttle_time_ms(violation.value.value, KIP599_QUOTA)
    assert throttle_ms == 12_000
    clock.advance(throttle_ms)
    sensor.check_quotas(clock.now_ms())  # back to zero tokens: allowed again


def test_kip599_sampled_rate_holds_the_client_for_the_whole_window(
    metrics: Metrics, clock: FakeClock
) -> None:
    config = MetricConfig(
        quota=Quota.upper_bound(KIP599_QUOTA),
        samples=KIP599_SAMPLES,
        time_window_ms=SECOND_MS,
    )
    sensor = metrics.sensor("mutations", clock.now_ms(), config)
    sensor.add(MetricName("rate", "ControllerMutation"), Rate())
    start_ms = clock.now_ms()
    sensor.record(KIP599_BURST_MUTATIONS, start_ms, check_quotas=False)
    whole_span_ms = KIP599_SAMPLES * SECOND_MS  # S·W = 100 s
    for waited_ms in (12_000, 50_000, whole_span_ms - 1):
        with pytest.raises(QuotaViolationError):
            sensor.check_quotas(start_ms + waited_ms)
    sensor.check_quotas(
        start_ms + whole_span_ms
    )  # only once the burst's sample expires


@pytest.mark.parametrize("check", ["record", "check_quotas"])
def test_a_nan_measurement_violates_as_in_java(
    metrics: Metrics, clock: FakeClock, check: str
) -> None:
    """Quota.acceptable(NaN) is false in Java (every comparison with NaN is)."""
    sensor = metrics.sensor(
        "s", clock.now_ms(), MetricConfig(quota=Quota.upper_bound(5))
    )
    sensor.add(MetricName("avg", "g"), Avg())  # an Avg of nothing is NaN
    with pytest.raises(QuotaViolationError):
        if check == "record":
            sensor.record(float("nan"), clock.now_ms())
        else:
            sensor.check_quotas(clock.now_ms())
