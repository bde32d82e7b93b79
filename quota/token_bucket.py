"""``TokenBucket``: continuously refilled credits, for bursty workloads (KIP-599).

Follows ``clients/.../common/metrics/stats/TokenBucket.java``.

The quota bound Q is the refill rate (per second); the bucket holds at most
B = samples × window × Q credits.  ``record`` refills first, then spends, and the balance
may go negative: that is how a single large request is admitted and then paid back.
The sensor treats the quota as exhausted while the balance is below zero.

Why not the sampled ``Rate``?  KIP-599's example: Q = 5/s, S = 100 samples, W = 1 s, so
B = 500.  A burst of 560 leaves −60 tokens, paid back in 60 / 5 = 12 s.  The sampled rate
sees 560 / 100 s = 5.6 > 5 and stays above the quota until the burst's sample expires,
which takes the whole S·W = 100 s.

Starting balance: Kafka starts with 0 tokens and ``lastUpdateMs = 0`` (the epoch), so the
first refill, against a wall-clock "now" of ~1.7e12 ms, always fills the bucket.  Our clock
is monotonic and may start near zero, so the first refill fills the bucket explicitly.
"""

from __future__ import annotations

from quota.metric_config import MetricConfig
from quota.rate import MS_PER_SECOND

__all__ = ["UNBOUNDED_TOKENS", "TokenBucket"]

# What Kafka's TokenBucket.measure returns when no quota is configured (Long.MAX_VALUE).
UNBOUNDED_TOKENS = float(2**63 - 1)


class TokenBucket:
    __slots__ = ("_last_update_ms", "_unit_ms", "tokens")

    def __init__(self, unit_ms: float = MS_PER_SECOND) -> None:
        self._unit_ms = unit_ms
        self.tokens = 0.0
        self._last_update_ms: int | None = None

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        if config.quota is None:
            return UNBOUNDED_TOKENS
        self._refill(config.quota.bound, self._burst(config), now_ms)
        return self.tokens

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        if config.quota is None:
            return
        burst = self._burst(config)
        self._refill(config.quota.bound, burst, now_ms)
        self.tokens = min(burst, self.tokens - value)

    def _refill(self, quota: float, burst: float, now_ms: int) -> None:
        if self._last_update_ms is None:
            self.tokens = burst  # see "Starting balance" above
        else:
            elapsed_units = (now_ms - self._last_update_ms) / self._unit_ms
            self.tokens = min(burst, self.tokens + quota * elapsed_units)
        self._last_update_ms = now_ms

    def _burst(self, config: MetricConfig) -> float:
        assert config.quota is not None
        return (
            config.samples
            * (config.time_window_ms / self._unit_ms)
            * config.quota.bound
        )
