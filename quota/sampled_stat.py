"""Windowed statistics: a ring of samples, each covering one time (or event-count) window.

Follows ``clients/.../common/metrics/stats/{SampledStat,WindowedSum,WindowedCount,Avg,Max}.java``.

How the ring behaves (``samples`` = N, window = W):

* ``record`` adds to the current sample; once the current sample is W old (or holds
  ``event_window`` events) the ring advances and the next slot is reset and reused.
* The ring holds N + 1 slots, one more than configured: the extra one is the sample that
  *overlaps* the start of the monitored N·W span.  It started before the span but still has
  events inside it, so dropping it would under-count (Kafka's "overlapping sample").
* ``purge_obsolete_samples`` resets every sample whose *last event* is N·W or more in the
  past.  Example, N = 2, W = 1000 ms: a sample with events at 0 and 999 survives a
  measurement at 2998 (2998 − 999 < 2000) and is purged at 2999.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

from mypy_extensions import mypyc_attr

from quota.metric_config import MetricConfig

__all__ = ["Avg", "Max", "Sample", "SampledStat", "WindowedCount", "WindowedSum"]


class Sample:
    """One window of a sampled stat (mutable: samples are recycled, never reallocated)."""

    __slots__ = (
        "event_count",
        "initial_value",
        "last_event_ms",
        "start_time_ms",
        "value",
    )

    def __init__(self, initial_value: float, now_ms: int) -> None:
        self.initial_value = initial_value
        self.event_count = 0
        self.start_time_ms = now_ms
        self.last_event_ms = now_ms
        self.value = initial_value

    def reset(self, now_ms: int) -> None:
        self.event_count = 0
        self.start_time_ms = now_ms
        self.last_event_ms = now_ms
        self.value = self.initial_value

    def is_complete(self, now_ms: int, config: MetricConfig) -> bool:
        return (
            now_ms - self.start_time_ms >= config.time_window_ms
            or self.event_count >= config.event_window
        )

    def __repr__(self) -> str:
        return (
            f"Sample(value={self.value}, event_count={self.event_count}, "
            f"start_time_ms={self.start_time_ms}, last_event_ms={self.last_event_ms})"
        )


# Kafka's own tests define sampled stats of their own (SampledStatTest.SampleCount); ours
# do too, so the compiled class accepts interpreted subclasses.
@mypyc_attr(allow_interpreted_subclasses=True)
class SampledStat(ABC):
    """A scalar measured over a ring of samples; subclasses say how to update and combine."""

    __slots__ = (
        "_current",
        "_initial_value",
        "_known_config",
        "_known_oldest_start_ms",
        "_known_purge_due_ms",
        "_known_total_at_most",
        "samples",
    )

    def __init__(self, initial_value: float) -> None:
        self._initial_value = initial_value
        self._current = 0
        self.samples: list[Sample] = []
        # What the last full measurement of a windowed sum learned (Rate.measure sets it,
        # Rate.record_within uses it): valid while _known_config is the config in use, no
        # sample was reset since and every sample and recorded value is non-negative.  The
        # total then only grows by what is recorded after it.
        self._known_config: MetricConfig | None = None
        self._known_total_at_most = 0.0
        self._known_oldest_start_ms = 0
        self._known_purge_due_ms = 0

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        sample = self.current(now_ms)
        if sample.is_complete(now_ms, config):
            sample = self._advance(config, now_ms)
        self.update(sample, config, value, now_ms)
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def _advance(self, config: MetricConfig, now_ms: int) -> Sample:
        self._known_config = (
            None  # a sample restarts: what was known about them is stale
        )
        # N + 1 slots: the extra one keeps the sample overlapping the monitored span.
        max_samples = config.samples + 1
        self._current = (self._current + 1) % max_samples
        if self._current >= len(self.samples):
            sample = Sample(self._initial_value, now_ms)
            self.samples.append(sample)
            return sample
        sample = self.samples[self._current]
        sample.reset(now_ms)
        return sample

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.purge_obsolete_samples(config, now_ms)
        return self.combine(self.samples, config, now_ms)

    def current(self, now_ms: int) -> Sample:
        if not self.samples:
            self.samples.append(Sample(self._initial_value, now_ms))
        return self.samples[self._current]

    def oldest(self, now_ms: int) -> Sample:
        """The sample with the earliest start (the first one on ties, as Kafka)."""
        if not self.samples:
            self.samples.append(Sample(self._initial_value, now_ms))
        oldest = self.samples[0]
        for sample in self.samples:
            if sample.start_time_ms < oldest.start_time_ms:
                oldest = sample
        return oldest

    def purge_obsolete_samples(self, config: MetricConfig, now_ms: int) -> None:
        """Reset samples with no event inside the monitored ``samples × window`` span.

        A sample that started before the span but has events inside it is kept.
        """
        self._known_config = None
        expire_age_ms = config.samples * config.time_window_ms
        for sample in self.samples:
            if now_ms - sample.last_event_ms >= expire_age_ms:
                sample.reset(now_ms)

    @abstractmethod
    def update(
        self, sample: Sample, config: MetricConfig, value: float, now_ms: int
    ) -> None: ...

    @abstractmethod
    def combine(
        self, samples: list[Sample], config: MetricConfig, now_ms: int
    ) -> float: ...


class WindowedSum(SampledStat):
    """The sum of the values recorded inside the monitored span."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0.0)

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        """``SampledStat.record`` with ``update`` = add, inlined (the quota hot path); it also
        keeps the upper bound of the total that ``Rate.record_within`` relies on."""
        samples = self.samples
        if not samples:
            samples.append(Sample(self._initial_value, now_ms))
        sample = samples[self._current]
        if (
            now_ms - sample.start_time_ms >= config.time_window_ms
            or sample.event_count >= config.event_window
        ):
            sample = self._advance(config, now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms
        if value >= 0:
            self._known_total_at_most += value
        else:  # a negative value (an unrecord): back to full measurements, see Rate
            self._known_config = None

    def update(
        self, sample: Sample, config: MetricConfig, value: float, now_ms: int
    ) -> None:
        sample.value += value

    def combine(
        self, samples: list[Sample], config: MetricConfig, now_ms: int
    ) -> float:
        total = 0.0
        for sample in samples:
            total += sample.value
        return total


class WindowedCount(WindowedSum):
    """The number of ``record`` calls inside the span (each counts as 1, whatever its value)."""

    __slots__ = ()

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        # Not the inlined sum: update() counts instead of adding.
        SampledStat.record(self, config, value, now_ms)

    def update(
        self, sample: Sample, config: MetricConfig, value: float, now_ms: int
    ) -> None:
        sample.value += 1.0


class Avg(SampledStat):
    """The mean of the values recorded inside the span; NaN when there are none."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0.0)

    def update(
        self, sample: Sample, config: MetricConfig, value: float, now_ms: int
    ) -> None:
        sample.value += value

    def combine(
        self, samples: list[Sample], config: MetricConfig, now_ms: int
    ) -> float:
        total = 0.0
        count = 0
        for sample in samples:
            total += sample.value
            count += sample.event_count
        return math.nan if count == 0 else total / count


class Max(SampledStat):
    """The largest value recorded inside the span; NaN when there are none."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(-math.inf)

    def update(
        self, sample: Sample, config: MetricConfig, value: float, now_ms: int
    ) -> None:
        sample.value = max(sample.value, value)

    def combine(
        self, samples: list[Sample], config: MetricConfig, now_ms: int
    ) -> float:
        largest = -math.inf
        count = 0
        for sample in samples:
            largest = max(largest, sample.value)
            count += sample.event_count
        return math.nan if count == 0 else largest
