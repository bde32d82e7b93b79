"""Property tests: the optimised Rate against a line-by-line model of Kafka's algorithm, the
precedence table against Kafka's nested ifs, and throttle-time invariants (never negative
once violated; waiting it out clears a bucket)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from quota import (
    DEFAULT,
    ClientQuotaEntity,
    ClientQuotaManager,
    ClientQuotaManagerConfig,
    MetricConfig,
    MetricName,
    Metrics,
    Quota,
    QuotaType,
    QuotaViolationError,
    Rate,
    TokenBucket,
    throttle_time_ms,
    token_bucket_throttle_time_ms,
)
from quota.client_quota_manager import UNLIMITED
from quota.sampled_stat import Sample, SampledStat


@dataclass
class ModelSample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0
    count: int = 0


@dataclass
class KafkaRateModel:
    """Rate(WindowedSum) exactly as Rate.java / SampledStat.java spell it, with no shortcuts."""

    samples: list[ModelSample] = field(default_factory=list)
    current: int = 0

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        if not self.samples:
            self.samples.append(ModelSample(now_ms, now_ms))
        sample = self.samples[self.current]
        if (
            now_ms - sample.start_ms >= config.time_window_ms
            or sample.count >= config.event_window
        ):
            self.current = (self.current + 1) % (config.samples + 1)
            if self.current >= len(self.samples):
                sample = ModelSample(now_ms, now_ms)
                self.samples.append(sample)
            else:
                sample = self.samples[self.current]
                sample.start_ms, sample.last_event_ms, sample.value, sample.count = (
                    now_ms,
                    now_ms,
                    0.0,
                    0,
                )
        sample.value += value
        sample.count += 1
        sample.last_event_ms = now_ms

    def purge(self, config: MetricConfig, now_ms: int) -> None:
        for sample in self.samples:
            if now_ms - sample.last_event_ms >= config.samples * config.time_window_ms:
                sample.start_ms, sample.last_event_ms, sample.value, sample.count = (
                    now_ms,
                    now_ms,
                    0.0,
                    0,
                )

    def window_size(self, config: MetricConfig, now_ms: int) -> int:
        self.purge(config, now_ms)
        if not self.samples:
            self.samples.append(ModelSample(now_ms, now_ms))
        oldest = self.samples[0]
        for sample in self.samples[1:]:
            if sample.start_ms < oldest.start_ms:
                oldest = sample
        elapsed = now_ms - oldest.start_ms
        full = elapsed // config.time_window_ms
        if full < config.samples - 1:
            elapsed += (config.samples - 1 - full) * config.time_window_ms
        return max(elapsed, 1)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.purge(config, now_ms)
        total = 0.0
        for sample in self.samples:
            total += sample.value
        return total / (self.window_size(config, now_ms) / 1000)


configs = st.builds(
    MetricConfig,
    samples=st.integers(1, 12),
    time_window_ms=st.integers(1, 3000),
    event_window=st.one_of(st.just(MetricConfig().event_window), st.integers(1, 5)),
)
# (ms since the previous step, value recorded or None for "only measure")
steps = st.lists(
    st.tuples(
        st.integers(0, 5000),
        st.one_of(st.none(), st.floats(-1e6, 1e9, allow_nan=False)),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(config=configs, steps=steps)
def test_rate_matches_kafkas_algorithm(
    config: MetricConfig, steps: list[tuple[int, float | None]]
) -> None:
    rate, model = Rate(), KafkaRateModel()
    now_ms = 1_700_000_000_000
    for elapsed_ms, value in steps:
        now_ms += elapsed_ms
        if value is not None:
            rate.record(config, value, now_ms)
            model.record(config, value, now_ms)
        assert rate.measure(config, now_ms) == model.measure(config, now_ms)
        assert rate.window_size(config, now_ms) == model.window_size(config, now_ms)


class PlainSum(SampledStat):
    """A WindowedSum that takes the generic (un-fused) code path of Rate."""

    def __init__(self) -> None:
        super().__init__(0.0)

    def update(
        self, sample: Sample, config: MetricConfig, value: float, now_ms: int
    ) -> None:
        sample.value += value

    def combine(
        self, samples: list[Sample], config: MetricConfig, now_ms: int
    ) -> float:
        total = 0.0  # summed in order, as WindowedSum.combine (and Kafka) sum
        for sample in samples:
            total += sample.value
        return total


@settings(max_examples=200, deadline=None)
@given(config=configs, steps=steps)
def test_fused_and_generic_rate_paths_agree(
    config: MetricConfig, steps: list[tuple[int, float | None]]
) -> None:
    fused, generic = Rate(), Rate(PlainSum())
    now_ms = 1_700_000_000_000
    for elapsed_ms, value in steps:
        now_ms += elapsed_ms
        if value is not None:
            fused.record(config, value, now_ms)
            generic.record(config, value, now_ms)
        assert fused.measure(config, now_ms) == generic.measure(config, now_ms)


@settings(max_examples=200, deadline=None)
@given(
    quota=st.floats(0.1, 1e6),
    samples=st.integers(2, 20),
    records=st.lists(
        st.tuples(st.integers(0, 2000), st.floats(0, 1e7)), min_size=1, max_size=40
    ),
)
def test_a_violated_rate_never_throttles_negatively(
    quota: float, samples: int, records: list[tuple[int, float]]
) -> None:
    metrics = Metrics()
    now_ms = 1_700_000_000_000
    sensor = metrics.sensor(
        "s",
        now_ms,
        MetricConfig(
            quota=Quota.upper_bound(quota), samples=samples, time_window_ms=1000
        ),
    )
    sensor.add(MetricName("rate", "g"), Rate())
    for elapsed_ms, value in records:
        now_ms += elapsed_ms
        try:
            sensor.record(value, now_ms)
        except QuotaViolationError as violation:
            assert violation.value > violation.bound
            assert throttle_time_ms(violation, now_ms) >= 0


@settings(max_examples=200, deadline=None)
@given(
    rate_per_s=st.floats(0.5, 1000),
    samples=st.integers(1, 20),
    records=st.lists(
        st.tuples(st.integers(0, 3000), st.floats(0, 5000)), min_size=1, max_size=30
    ),
)
def test_waiting_out_a_bucket_throttle_makes_it_non_negative(
    rate_per_s: float, samples: int, records: list[tuple[int, float]]
) -> None:
    config = MetricConfig(
        quota=Quota.upper_bound(rate_per_s), samples=samples, time_window_ms=1000
    )
    bucket = TokenBucket()
    now_ms = 1_700_000_000_000
    for elapsed_ms, permits in records:
        now_ms += elapsed_ms
        bucket.record(config, permits, now_ms)
        tokens = bucket.measure(config, now_ms)
        if tokens < 0:
            wait_ms = token_bucket_throttle_time_ms(tokens, rate_per_s)
            assert wait_ms >= 0
            # Math.round may round the wait half a millisecond short: allow that one ms.
            # (Measured on a copy: measuring refills, and the sequence goes on from now_ms.)
            assert copy.deepcopy(bucket).measure(config, now_ms + wait_ms + 1) >= 0


# -- entity resolution: the table against Kafka's nested ifs ---------------------------------

_D = "<default>"


def kafka_quota_metric_tags(
    overridden: dict[tuple[str | None, str | None], float],
    enabled: int,
    user: str,
    client_id: str,
) -> tuple[str, str]:
    """DefaultQuotaCallback.quotaMetricTags, transcribed (entities keyed by (user, client))."""
    if enabled in (0, 1):
        return ("", client_id)
    if enabled == 2:
        return (user, "")
    if enabled == 4:
        return (user, client_id)
    if (user, client_id) in overridden:
        return (user, client_id)
    if (user, _D) in overridden:
        return (user, client_id)
    if (user, None) in overridden:
        return (user, "")
    if (_D, client_id) in overridden:
        return (user, client_id)
    if (_D, _D) in overridden:
        return (user, client_id)
    if (_D, None) in overridden:
        return (user, "")
    return ("", client_id)


def kafka_quota_limit(
    overridden: dict[tuple[str | None, str | None], float], user: str, client_id: str
) -> float | None:
    """DefaultQuotaCallback.quotaLimit / findQuota, transcribed."""
    candidates: tuple[tuple[str | None, str | None], ...] = ()
    if user and client_id:
        candidates = ((user, client_id), (user, _D), (_D, client_id), (_D, _D))
    elif user:
        candidates = ((user, None), (_D, None))
    elif client_id:
        candidates = ((None, client_id), (None, _D))
    for key in candidates:
        if key in overridden:
            return overridden[key]
    return None


NAMES = st.sampled_from(["alice", "bob", "app-1", "app-2"])
ENTITY_SIDES = st.one_of(st.none(), st.just(_D), NAMES)
ENTITIES = st.tuples(ENTITY_SIDES, ENTITY_SIDES).filter(lambda e: e != (None, None))


@settings(max_examples=300, deadline=None)
@given(
    configured=st.dictionaries(ENTITIES, st.integers(1, 10_000), max_size=8),
    clients=st.lists(st.tuples(NAMES, NAMES), min_size=1, max_size=5),
)
def test_precedence_table_matches_kafkas_nested_ifs(
    configured: dict[tuple[str | None, str | None], int], clients: list[tuple[str, str]]
) -> None:
    def side(name: str | None) -> object:
        return DEFAULT if name == _D else name

    manager = ClientQuotaManager(
        ClientQuotaManagerConfig(), Metrics(), QuotaType.PRODUCE, 0
    )
    for (user, client_id), limit in configured.items():
        entity = ClientQuotaEntity(side(user), side(client_id))  # type: ignore[arg-type]
        manager.update_quota(entity, Quota.upper_bound(limit))
    kinds = {
        (u is not None) * 2 + (c is not None) for u, c in configured
    }  # 1 c, 2 u, 3 u+c
    enabled = 0
    for kind in kinds:
        enabled |= {1: 1, 2: 2, 3: 4}[kind]
    assert manager.quota_types_enabled == enabled
    overridden = {key: float(limit) for key, limit in configured.items()}
    for user, client_id in clients:
        tags = kafka_quota_metric_tags(overridden, enabled, user, client_id)
        expected = kafka_quota_limit(overridden, *tags)
        sensors = manager.get_or_create_quota_sensors(user, client_id, 0)
        assert sensors.metric_tags == tags
        assert manager.quota(user, client_id).bound == (
            UNLIMITED if expected is None else expected
        )


# (ms since the previous step, value, what the step does): "check" is Sensor.record with
# its quota check (the path Rate.record_within shortcuts), "record" is an unchecked record
# (unrecord and record_no_throttle use it), "measure" only measures.
sensor_steps = st.lists(
    st.tuples(
        st.integers(0, 2500),
        st.one_of(
            st.floats(-1e4, 1e6, allow_nan=False),
            st.integers(0, 10_000).map(float),
            # magnitudes whose cancellation would dwarf the total's rounding
            st.sampled_from([1e16, -1e16, 3.0e15, 0.1, -0.1]),
        ),
        st.sampled_from(["check", "check", "check", "record", "measure"]),
    ),
    min_size=1,
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(config=configs, bound=st.floats(0, 2e6, allow_nan=False), steps=sensor_steps)
def test_quota_sensor_shortcut_decides_and_leaves_samples_as_kafka(
    config: MetricConfig, bound: float, steps: list[tuple[int, float, str]]
) -> None:
    """Sensor.record on a quota sensor skips the pass over the samples when an upper bound
    of the rate is within the quota (Rate.record_within). Step by step it must raise
    exactly when Kafka's record-then-measure would, with the same measured value, and
    leave every sample as Kafka's algorithm does (purges included)."""
    quota = Quota.upper_bound(bound)
    quota_config = MetricConfig(
        samples=config.samples,
        time_window_ms=config.time_window_ms,
        event_window=config.event_window,
        quota=quota,
    )
    now_ms = 1_700_000_000_000
    sensor = Metrics().sensor("quota-sensor", now_ms)
    rate = Rate()
    sensor.add(MetricName("byte-rate", "Produce"), rate, quota_config)
    model = KafkaRateModel()
    for elapsed_ms, value, action in steps:
        now_ms += elapsed_ms
        if action == "measure":
            assert rate.measure(quota_config, now_ms) == model.measure(
                quota_config, now_ms
            )
        elif action == "record":
            sensor.record(value, now_ms, check_quotas=False)
            model.record(quota_config, value, now_ms)
        else:
            model.record(quota_config, value, now_ms)
            expected = model.measure(quota_config, now_ms)
            try:
                sensor.record(value, now_ms)
            except QuotaViolationError as violation:
                assert not expected <= bound
                assert violation.value == expected
            else:
                assert expected <= bound
        state = [
            (s.start_time_ms, s.last_event_ms, s.value, s.event_count)
            for s in rate.stat.samples
        ]
        assert state == [
            (s.start_ms, s.last_event_ms, s.value, s.count) for s in model.samples
        ]
