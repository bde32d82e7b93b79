"""``Rate``: a windowed total divided by the elapsed time it was observed over.

Follows ``clients/.../common/metrics/stats/Rate.java``.

The denominator is padded.  With N samples of W each, a fresh sensor that saw 50 bytes
100 ms ago did not really run at 500 B/s; Kafka assumes the N − 1 windows before the
oldest sample existed and were empty.  So the window is "elapsed since the oldest sample,
but at least N − 1 whole windows":

    N = 11, W = 1000 ms, 50 B recorded at t = 0, measured at t = 999:
        elapsed = 999 ms -> 0 full windows < N − 1 = 10 -> window = 999 + 10·1000 = 10 999 ms
        rate    = 50 / 10.999 s = 4.55 B/s

Once N − 1 windows have really elapsed the padding stops and the window is the true
elapsed time, which can exceed N·W when the oldest kept sample overlaps the span's start.
"""

from __future__ import annotations

from quota.metric_config import MetricConfig
from quota.sampled_stat import SampledStat, WindowedSum

__all__ = ["MS_PER_SECOND", "Rate"]

MS_PER_SECOND = 1000.0
# record_within's safety margins: relative 1e-9 on each side, a million times the rounding
# error of the sums involved, so "certainly within the bound" holds for the exact sum too.
_UPPER_MARGIN = 1.0 + 1e-9
_LOWER_MARGIN = 1.0 - 1e-9


class Rate:
    """Per-``unit`` rate of a sampled stat (a ``WindowedSum`` of values by default)."""

    __slots__ = ("_sums", "_unit_ms", "stat")

    def __init__(
        self, stat: SampledStat | None = None, unit_ms: float = MS_PER_SECOND
    ) -> None:
        self.stat: SampledStat = stat if stat is not None else WindowedSum()
        # A sum (WindowedSum/WindowedCount) gets the one-pass measurement below.
        self._sums = isinstance(self.stat, WindowedSum)
        # Milliseconds per rate unit: 1000 for "per second" (Kafka's TimeUnit.SECONDS).
        self._unit_ms = unit_ms

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.stat.record(config, value, now_ms)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        # Kafka purges inside stat.measure() and again inside windowSize(); the second purge
        # at the same instant is a no-op (purged samples restart at now_ms), so purge once.
        stat = self.stat
        if not self._sums:
            stat.purge_obsolete_samples(config, now_ms)
            total = stat.combine(stat.samples, config, now_ms)
            oldest_start_ms = stat.oldest(now_ms).start_time_ms
        else:
            # The same three steps in one pass (see _measure_sum).
            if not stat.samples:
                stat.current(now_ms)
            return self._measure_sum(config, now_ms)
        return total / (
            _padded_window_ms(config, now_ms - oldest_start_ms) / self._unit_ms
        )

    def _measure_sum(self, config: MetricConfig, now_ms: int) -> float:
        """Kafka's measure for a windowed sum: purge, sum, find the oldest start, in one
        pass (this runs on every request that has a byte-rate or request quota).  It also
        notes what record_within may rely on until a sample is next reset.
        (Starting the search for the oldest start at now_ms assumes time never runs
        backwards, which the monotonic clock guarantees.)"""
        stat = self.stat
        window_ms = config.time_window_ms
        span_ms = config.samples * window_ms
        obsolete_at_or_before_ms = now_ms - span_ms
        total = 0.0
        oldest_start_ms = now_ms
        last_event_ms = now_ms
        negative = False
        for sample in stat.samples:
            if sample.last_event_ms <= obsolete_at_or_before_ms:
                sample.reset(now_ms)
            value = sample.value
            total += value
            if value < 0:
                negative = True
            start_ms = sample.start_time_ms
            if start_ms < oldest_start_ms:
                oldest_start_ms = start_ms
            if sample.last_event_ms < last_event_ms:
                last_event_ms = sample.last_event_ms
        # With a negative sample the partial sums can dwarf the total, and so can their
        # rounding: no upper bound is kept then (every check measures in full, as Kafka).
        stat._known_config = None if negative else config
        stat._known_total_at_most = total
        stat._known_oldest_start_ms = oldest_start_ms
        stat._known_purge_due_ms = (
            last_event_ms + span_ms
        )  # no sample is obsolete before
        # _padded_window_ms, inlined (elapsed is not negative here)
        elapsed_ms = now_ms - oldest_start_ms
        missing_windows = config.samples - 1 - elapsed_ms // window_ms
        if missing_windows > 0:
            elapsed_ms += missing_windows * window_ms
        return total / ((elapsed_ms if elapsed_ms > 1 else 1) / self._unit_ms)

    def record_within(
        self, config: MetricConfig, value: float, now_ms: int, bound: float
    ) -> float | None:
        """``record``, then None if the rate is certainly at most ``bound``, else the rate
        as ``measure`` gives it: what a quota sensor does on every request (Sensor.record,
        then checkQuotas), for a windowed sum.

        Kafka re-sums every sample on every request to compare the rate with the quota.
        While no sample was reset since the last full measurement and nothing negative was
        recorded (samples and values non-negative, so partial sums never exceed the total
        and neither does their rounding), that sum can only have grown by what was recorded
        since, so an upper bound of the total (with a margin far above float rounding)
        decides most requests without the pass over the samples.  When it is not certainly
        within the bound, or a sample is due to be purged or was reset, the full
        measurement runs, with the same result, purges and rounding as Kafka's.  The samples end up exactly as ``record`` + ``measure``
        leave them (a test compares the two step by step)."""
        stat = self.stat
        # The windowed sum's record: it also adds a non-negative value to the known total,
        # and forgets what was known when a sample restarts or the value is negative.
        stat.record(config, value, now_ms)
        if stat._known_config is config and now_ms < stat._known_purge_due_ms:
            total = stat._known_total_at_most
            window_ms = config.time_window_ms
            elapsed_ms = now_ms - stat._known_oldest_start_ms
            missing_windows = config.samples - 1 - elapsed_ms // window_ms
            if missing_windows > 0:
                elapsed_ms += missing_windows * window_ms
            rate_at_most = (
                total
                * _UPPER_MARGIN
                / ((elapsed_ms if elapsed_ms > 1 else 1) / self._unit_ms)
            )
            if rate_at_most <= bound * _LOWER_MARGIN:
                return None
        return self._measure_sum(config, now_ms)

    def window_size(self, config: MetricConfig, now_ms: int) -> int:
        """The padded elapsed time in ms the rate is computed over (see the module doc)."""
        self.stat.purge_obsolete_samples(config, now_ms)
        return _padded_window_ms(
            config, now_ms - self.stat.oldest(now_ms).start_time_ms
        )


def _padded_window_ms(config: MetricConfig, total_elapsed_ms: int) -> int:
    """Elapsed time since the oldest sample, but at least N − 1 whole windows (and >= 1 ms)."""
    window_ms = config.time_window_ms
    # Java's int division truncates toward zero; elapsed time is never negative here
    # unless the caller's clock went backwards, and then truncation is what Kafka does.
    if total_elapsed_ms >= 0:
        num_full_windows = total_elapsed_ms // window_ms
    else:
        num_full_windows = -(-total_elapsed_ms // window_ms)
    min_full_windows = config.samples - 1
    if num_full_windows < min_full_windows:
        total_elapsed_ms += (min_full_windows - num_full_windows) * window_ms
    # A measurement at the very start of an empty first window would divide by zero.
    return max(total_elapsed_ms, 1)
