"""The backoff schedule, as the Collector computes it (cenkalti ExponentialBackOff)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from exporters.otlp.config import RetryConfig
from exporters.otlp.retry import ExponentialBackoff


@given(
    initial_ms=st.integers(1, 10_000),
    cap_factor=st.integers(1, 20),
    multiplier=st.floats(1.0, 4.0),
    factor=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32),
)
def test_every_wait_is_the_nominal_interval_plus_minus_the_factor(
    initial_ms: int, cap_factor: int, multiplier: float, factor: float, seed: int
) -> None:
    config = RetryConfig.model_validate(
        {
            "initial_interval": f"{initial_ms}ms",
            "max_interval": f"{initial_ms * cap_factor}ms",
            "multiplier": multiplier,
            "randomization_factor": factor,
            "max_elapsed_time": "0",
        }
    )
    backoff = ExponentialBackoff(config, random.Random(seed))
    nominal_s = initial_ms / 1000
    cap_s = initial_ms * cap_factor / 1000
    for _ in range(30):
        wait_s = backoff.next_delay_s()
        assert (
            nominal_s * (1 - factor) - 1e-9 <= wait_s <= nominal_s * (1 + factor) + 1e-9
        )
        nominal_s = min(nominal_s * multiplier, cap_s)


def test_the_default_schedule_in_numbers() -> None:
    # randomization_factor 0 makes the Collector's nominal schedule visible: 5s x1.5, cap 30s.
    backoff = ExponentialBackoff(RetryConfig(randomization_factor=0))
    assert [round(backoff.next_delay_s(), 4) for _ in range(8)] == [
        5.0,
        7.5,
        11.25,
        16.875,
        25.3125,
        30.0,
        30.0,
        30.0,
    ]
