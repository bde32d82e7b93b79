"""SampledStat, Rate and TokenBucket: Kafka's own test cases (SampledStatTest, RateTest,
TokenBucketTest) plus the windowed stats' basic behaviour."""

from __future__ import annotations

import math

import pytest

from clock.testing import FakeClock
from quota import (
    Avg,
    Max,
    MetricConfig,
    Quota,
    Rate,
    SampledStat,
    TokenBucket,
    WindowedCount,
    WindowedSum,
)
from quota.sampled_stat import Sample

SECOND_MS = 1000


class SampleCount(SampledStat):
    """measure() returns the number of live samples (SampledStatTest.SampleCount)."""

    def __init__(self) -> None:
        super().__init__(0.0)

    def update(
        self, sample: Sample, config: MetricConfig, value: float, now_ms: int
    ) -> None:
        sample.value = 1.0

    def combine(
        self, samples: list[Sample], config: MetricConfig, now_ms: int
    ) -> float:
        return sum(sample.value for sample in samples)


def complete_sample(stat: SampledStat, config: MetricConfig, clock: FakeClock) -> None:
    """Events at the start and the end of one window; the clock ends just past it."""
    stat.record(config, 1, clock.now_ms())
    clock.advance(config.time_window_ms - 1)
    stat.record(config, 1, clock.now_ms())
    clock.advance(1)


# -- SampledStatTest --------------------------------------------------------------------------

TWO_ONE_SECOND_SAMPLES = MetricConfig(
    samples=2, time_window_ms=SECOND_MS
)  # monitors 2 s


def test_sample_is_purged_if_it_does_not_overlap_the_window(clock: FakeClock) -> None:
    stat = SampleCount()
    complete_sample(stat, TWO_ONE_SECOND_SAMPLES, clock)
    clock.advance(2500)  # last event at 999; 999 + 2000 < now
    assert stat.measure(TWO_ONE_SECOND_SAMPLES, clock.now_ms()) == 0


def test_sample_is_kept_if_it_overlaps_the_window(clock: FakeClock) -> None:
    stat = SampleCount()
    complete_sample(stat, TWO_ONE_SECOND_SAMPLES, clock)
    clock.advance(1500)
    assert stat.measure(TWO_ONE_SECOND_SAMPLES, clock.now_ms()) == 1


def test_overlapping_sample_is_kept_as_the_extra_n_plus_1th(clock: FakeClock) -> None:
    stat = SampleCount()
    complete_sample(stat, TWO_ONE_SECOND_SAMPLES, clock)
    clock.advance(100)
    complete_sample(stat, TWO_ONE_SECOND_SAMPLES, clock)
    clock.advance(100)
    stat.record(TWO_ONE_SECOND_SAMPLES, 1, clock.now_ms())
    # 2.2 s after the start: both complete samples and the current one are live (N + 1 = 3).
    assert stat.measure(TWO_ONE_SECOND_SAMPLES, clock.now_ms()) == 3


def test_ring_reuses_its_n_plus_1_slots(clock: FakeClock) -> None:
    stat = WindowedSum()
    config = MetricConfig(samples=3, time_window_ms=SECOND_MS)
    for _ in range(10):
        stat.record(config, 1, clock.now_ms())
        clock.advance(SECOND_MS)
    assert len(stat.samples) == config.samples + 1


def test_event_window_closes_a_sample_after_that_many_events(clock: FakeClock) -> None:
    stat = SampleCount()
    config = MetricConfig(samples=5, time_window_ms=60 * SECOND_MS, event_window=2)
    for _ in range(6):  # 6 events, 2 per sample, same instant
        stat.record(config, 1, clock.now_ms())
    assert stat.measure(config, clock.now_ms()) == 3


@pytest.mark.parametrize(
    ("stat", "values", "expected"),
    [
        (WindowedSum(), [1.0, 2.5, 4.0], 7.5),
        (WindowedCount(), [10.0, 20.0, 30.0], 3.0),
        (Avg(), [1.0, 2.0, 6.0], 3.0),
        (Max(), [3.0, 9.0, 4.0], 9.0),
    ],
    ids=["sum", "count", "avg", "max"],
)
def test_windowed_stats_combine_their_samples(
    clock: FakeClock, stat: SampledStat, values: list[float], expected: float
) -> None:
    config = MetricConfig(samples=4, time_window_ms=SECOND_MS)
    for value in values:  # one value per window
        stat.record(config, value, clock.now_ms())
        clock.advance(SECOND_MS)
    assert stat.measure(config, clock.now_ms()) == expected


@pytest.mark.parametrize("stat", [Avg(), Max()], ids=["avg", "max"])
def test_avg_and_max_of_nothing_is_nan(clock: FakeClock, stat: SampledStat) -> None:
    assert math.isnan(stat.measure(MetricConfig(), clock.now_ms()))


# -- RateTest ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("num_samples", "window_s"), [(1, 1), (1, 11), (11, 1), (11, 11)]
)
def test_rate_with_no_prior_available_samples(
    clock: FakeClock, num_samples: int, window_s: int
) -> None:
    config = MetricConfig(samples=num_samples, time_window_ms=window_s * SECOND_MS)
    rate = Rate()
    sample_value = 50.0
    rate.record(config, sample_value, clock.now_ms())
    measurement_time_ms = window_s * SECOND_MS - 1  # almost the end of the first window
    clock.advance(measurement_time_ms)
    observed = rate.measure(config, clock.now_ms())
    # The algorithm assumes N - 1 empty windows before the first sample.
    assumed_prior_windows = num_samples - 1
    window_size_s = measurement_time_ms / SECOND_MS + assumed_prior_windows * window_s
    assert observed == pytest.approx(sample_value / window_size_s, abs=1e-6)


def test_rate_is_consistent_after_the_first_window(clock: FakeClock) -> None:
    config = MetricConfig(samples=2, time_window_ms=SECOND_MS)
    rate = Rate()
    # One event every ~100 ms: 0, 99, 199, ..., 999 within a window; the rate is 10-11/s.
    steps_ms = [0, 99, 100, 100, 100, 100, 100, 100, 100, 100, 100]
    for step_ms in steps_ms:
        clock.advance(step_ms)
        rate.record(config, 1, clock.now_ms())
    clock.advance(101)  # a gap between the windows
    for step_ms in steps_ms:
        clock.advance(step_ms)
        rate.record(config, 1, clock.now_ms())
        observed = rate.measure(config, clock.now_ms())
        assert 10 <= observed <= 11
        assert rate.measure(config, clock.now_ms()) == observed  # repeatable


@pytest.mark.parametrize(
    ("elapsed_ms", "expected_window_ms"),
    [
        (0, 10_000),  # nothing elapsed: padded to N - 1 = 10 whole windows
        (999, 10_999),  # 0 full windows: 999 + 10 windows
        (4_500, 10_500),  # 4 full windows: 4500 + 6 windows
        (10_000, 10_000),  # 10 full windows: no padding
        (10_999, 10_999),  # the oldest sample overlaps the span: W may exceed (N-1)·W
    ],
)
def test_rate_window_is_padded_to_n_minus_1_windows(
    clock: FakeClock, elapsed_ms: int, expected_window_ms: int
) -> None:
    config = MetricConfig(samples=11, time_window_ms=SECOND_MS)
    rate = Rate()
    rate.record(config, 1, clock.now_ms())
    clock.advance(elapsed_ms)
    assert rate.window_size(config, clock.now_ms()) == expected_window_ms


# -- TokenBucketTest --------------------------------------------------------------------------

# Rate 5 units/s, 10 samples of 2 s: burst = 10 · 2 · 5 = 100 units.
BUCKET_RATE = 5
BUCKET_CONFIG = MetricConfig(
    quota=Quota.upper_bound(BUCKET_RATE), time_window_ms=2 * SECOND_MS, samples=10
)
BURST = BUCKET_CONFIG.samples * 2 * BUCKET_RATE


def test_token_bucket_record(clock: FakeClock) -> None:
    bucket = TokenBucket()
    assert bucket.measure(BUCKET_CONFIG, clock.now_ms()) == pytest.approx(BURST)
    bucket.record(BUCKET_CONFIG, 60, clock.now_ms())
    assert bucket.measure(BUCKET_CONFIG, clock.now_ms()) == pytest.approx(BURST - 60)
    clock.advance(2000)  # refills 2 s · 5/s = 10
    bucket.record(BUCKET_CONFIG, 5, clock.now_ms())
    assert bucket.measure(BUCKET_CONFIG, clock.now_ms()) == pytest.approx(
        BURST - 60 + 10 - 5
    )
    clock.advance(2000)
    bucket.record(BUCKET_CONFIG, 60, clock.now_ms())
    assert bucket.measure(BUCKET_CONFIG, clock.now_ms()) == pytest.approx(45 + 10 - 60)


def test_token_bucket_unrecord_never_exceeds_the_burst(clock: FakeClock) -> None:
    bucket = TokenBucket()
    bucket.record(BUCKET_CONFIG, -60, clock.now_ms())
    assert bucket.measure(BUCKET_CONFIG, clock.now_ms()) == pytest.approx(BURST)
    clock.advance(2000)
    bucket.record(BUCKET_CONFIG, 60, clock.now_ms())
    assert bucket.measure(BUCKET_CONFIG, clock.now_ms()) == pytest.approx(
        BURST - 60 + 0
    )
    clock.advance(2000)
    bucket.record(BUCKET_CONFIG, -60, clock.now_ms())
    assert bucket.measure(BUCKET_CONFIG, clock.now_ms()) == pytest.approx(BURST)


def test_token_bucket_without_quota_is_unbounded(clock: FakeClock) -> None:
    bucket = TokenBucket()
    bucket.record(MetricConfig(), 1e9, clock.now_ms())
    assert bucket.measure(MetricConfig(), clock.now_ms()) == float(2**63 - 1)
