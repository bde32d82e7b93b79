"""The fold, the budget and the exposition of /metrics/clients, on ClientSeries directly
(no sockets): pushes are recorded as the push path records them and scraped as the HTTP
route scrapes them.  The real clients' side, compared with otelcol's Prometheus exporter,
is test_client_metrics_endpoint.py; OTLP kinds real clients do not push (histograms,
summaries) are compared with otelcol in test_otlp_kinds_match_otelcol.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import Gauge, Metric, NumberDataPoint
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from clock.testing import FakeClock
from collector.app.clients_http import wants_open_metrics
from collector.app.config import ConfigError, load_config
from collector.telemetry.prometheus.budget import OVERFLOW_INSTANCE_ID
from collector.telemetry.prometheus.client_series import (
    DEFAULT_MAX_SERIES_PER_INSTANCE,
    DEFAULT_SERIES_EXPIRY_MS,
    ClientSeries,
    ClientSeriesClosed,
    ClientSeriesSettings,
)
from collector.telemetry.prometheus.points import REFUSED_FAMILY
from exporters.context import TelemetryContext
from proto.streams_states import KAFKA_STREAMS_STATES, STREAM_THREAD_STATES
from tests.prometheus.otlp_build import (
    CUMULATIVE,
    attributes,
    gauge,
    histogram,
    payload,
    summary,
    total,
)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def context(
    instance: str,
    *,
    client_id: str = "orders",
    software: str = "librdkafka",
    version: str = "2.16.0",
    terminating: bool = False,
    at_ns: int = 0,
    upstream: tuple[str, int] | None = None,
) -> TelemetryContext:
    return TelemetryContext(
        instance, client_id, software, version, "127.0.0.1", 50000, "PLAINTEXT",
        "PLAINTEXT", "User:ANONYMOUS", 1000, terminating, at_ns, 1, "cluster", 7, 0,
        upstream_cluster_id=upstream[0] if upstream else None,
        upstream_node_id=upstream[1] if upstream else None,
    )  # fmt: skip


class Harness:
    def __init__(
        self,
        max_series: int = 100_000,
        *,
        per_instance: int = 100_000,
        expiry_ms: int = DEFAULT_SERIES_EXPIRY_MS,
        **settings: str,
    ) -> None:
        self.cached: set[str] = set()
        self.time = FakeClock(1_000_000)
        self.series = ClientSeries(
            ClientSeriesSettings.parse(
                max_series,
                settings.get("labels"),
                settings.get("metrics"),
                max_series_per_instance=per_instance,
                series_expiry_ms=expiry_ms,
            ),
            lambda instance: instance in self.cached,
            clock=self.time,
        )
        self.clock = 0

    def push(self, instance: str, metrics: Iterable[Metric], **kwargs: object) -> None:
        """Recorded as the push path records it, and folded at the clock's time."""
        self.cached.add(instance)
        self.clock += 1
        self.series.record(
            context(instance, at_ns=self.clock, **kwargs),  # type: ignore[arg-type]
            payload(metrics),
        )
        folding = self.series.fold_soon()
        if folding is not None:
            folding.result(30)

    def own(self) -> dict[str, float]:
        """The collector's own series about the endpoint (as of the last scrape)."""
        return {s.name: s.value for m in self.series.collect() for s in m.samples}

    def text(self, open_metrics: bool = False) -> str:
        return asyncio.run(self.series.scrape(open_metrics)).decode()

    def samples(self) -> Samples:
        text_samples = _parse(self.text())
        assert _parse(self.text(open_metrics=True), open_metrics=True) == text_samples
        return text_samples


def _parse(text: str, open_metrics: bool = False) -> Samples:
    parser = openmetrics_families if open_metrics else text_string_to_metric_families
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in parser(text)
        for s in family.samples
    }


def values(samples: Samples, name: str) -> dict[str, float]:
    """client_instance_id -> value of ``name``."""
    return {
        dict(labels).get("client_instance_id", ""): value
        for (sample, labels), value in samples.items()
        if sample == name
    }


@pytest.fixture
def harness() -> Iterable[Harness]:
    h = Harness()
    yield h
    h.series.close()


def test_delta_sums_add_up_while_contiguous_and_restart_when_not(
    harness: Harness,
) -> None:
    harness.push("a", [total("org.apache.kafka.producer.record.send", 5, 100, 200)])
    harness.push("a", [total("org.apache.kafka.producer.record.send", 3, 200, 300)])
    assert values(harness.samples(), "org_apache_kafka_producer_record_send_total") == {
        "a": 8
    }
    # Not starting where the kept point ended: a restart, the new delta replaces it.
    harness.push("a", [total("org.apache.kafka.producer.record.send", 4, 1000, 1100)])
    assert values(harness.samples(), "org_apache_kafka_producer_record_send_total") == {
        "a": 4
    }
    # An older point is ignored.
    harness.push("a", [total("org.apache.kafka.producer.record.send", 9, 50, 60)])
    assert values(harness.samples(), "org_apache_kafka_producer_record_send_total") == {
        "a": 4
    }


def test_gauges_cumulative_and_non_monotonic_sums(harness: Harness) -> None:
    harness.push("a", [
        gauge("x.latency.avg", 2.5, 100, unit="ms"),
        total("x.bytes", 10, 0, 100, temporality=CUMULATIVE, unit="By"),
        total("x.queue", 7, 0, 100, temporality=CUMULATIVE, monotonic=False),
        total("x.dropped", 1, 0, 100, monotonic=False),  # delta, not monotonic: dropped
        gauge("x.idle", 0.25, 100, unit="1"),
    ])  # fmt: skip
    harness.push("a", [
        gauge("x.latency.avg", 1.5, 200, unit="ms"),
        total("x.bytes", 25, 0, 200, temporality=CUMULATIVE, unit="By"),
    ])  # fmt: skip
    samples = harness.samples()
    assert values(samples, "x_latency_avg_milliseconds") == {"a": 1.5}
    assert values(samples, "x_bytes_total") == {"a": 25}
    assert values(samples, "x_queue") == {"a": 7}
    assert values(samples, "x_idle_ratio") == {"a": 0.25}
    assert not values(samples, "x_dropped")
    text = harness.text()
    assert "# TYPE x_bytes_total counter" in text and "# TYPE x_queue gauge" in text
    assert "# HELP x_latency_avg_milliseconds x.latency.avg help" in text


def test_histograms_and_summaries(harness: Harness) -> None:
    harness.push("a", [
        histogram("rpc.duration", [1, 5, 10], [1, 2, 3, 4], 100.0, 0, 100, unit="ms"),
        summary("rpc.size", {0.5: 10, 0.99: 40}, 5, 75.0, 100, unit="By"),
    ])  # fmt: skip
    harness.push("a", [
        histogram("rpc.duration", [1, 5, 10], [1, 0, 0, 1], 30.0, 100, 200, unit="ms"),
        summary("rpc.size", {0.5: 12, 0.99: 30}, 6, 80.0, 200, unit="By"),
    ])  # fmt: skip
    samples = harness.samples()
    labels = {
        "client_id": "orders", "client_instance_id": "a",
        "client_software_name": "librdkafka", "client_software_version": "2.16.0",
        "principal": "User:ANONYMOUS", "listener": "PLAINTEXT",
    }  # fmt: skip

    def sample(name: str, **extra: str) -> float:
        return samples[(name, frozenset({**labels, **extra}.items()))]

    # Cumulative buckets of the summed deltas: [2, 2, 3, 5], count 12, sum 130.
    assert sample("rpc_duration_milliseconds_bucket", le="1") == 2
    assert sample("rpc_duration_milliseconds_bucket", le="5") == 4
    assert sample("rpc_duration_milliseconds_bucket", le="10") == 7
    assert sample("rpc_duration_milliseconds_bucket", le="+Inf") == 12
    assert sample("rpc_duration_milliseconds_count") == 12
    assert sample("rpc_duration_milliseconds_sum") == 130
    assert sample("rpc_size_bytes", quantile="0.5") == 12
    assert sample("rpc_size_bytes", quantile="0.99") == 30
    assert sample("rpc_size_bytes_count") == 6


def test_a_series_goes_with_its_client(harness: Harness) -> None:
    harness.push("a", [gauge("x", 1, 1)])
    harness.push("b", [gauge("x", 2, 1)])
    harness.push("c", [gauge("x", 3, 1)])
    assert values(harness.samples(), "x") == {"a": 1, "b": 2, "c": 3}
    harness.push("a", [gauge("x", 5, 2)], terminating=True)  # the terminating push
    harness.cached.discard("b")  # expired from the manager's cache
    assert values(harness.samples(), "x") == {"c": 3}


def test_identity_labels_allowlist_and_gateway_labels() -> None:
    h = Harness(
        labels="client_id,client_software_name,upstream_cluster_id,upstream_node_id"
    )
    h.push("a", [total("x", 1, 0, 1)], upstream=("kafka-cluster", 3))
    h.push("b", [total("x", 2, 0, 1)], upstream=("kafka-cluster", 3))
    samples = h.samples()
    # Without client_instance_id two instances are one identity: folded, counters added.
    assert samples == {
        ("x_total", frozenset({
            "client_id": "orders", "client_software_name": "librdkafka",
            "upstream_cluster_id": "kafka-cluster", "upstream_node_id": "3",
        }.items())): 3.0,
    }  # fmt: skip
    h.series.close()


def test_metric_name_prefix_allowlist() -> None:
    h = Harness(metrics="org.apache.kafka.producer.,org.apache.kafka.consumer.fetch")
    h.push("a", [
        gauge("org.apache.kafka.producer.x", 1, 1),
        gauge("org.apache.kafka.consumer.fetch.y", 1, 1),
        gauge("org.apache.kafka.consumer.coordinator.z", 1, 1),
    ])  # fmt: skip
    names = {name for name, _ in h.samples()}
    assert names == {"org_apache_kafka_producer_x", "org_apache_kafka_consumer_fetch_y"}
    h.series.close()


def test_the_budget_folds_the_least_recently_pushed_into_aggregates() -> None:
    h = Harness(max_series=100)
    # 30 instances of 2 client ids, 5 series each: 150 series for a budget of 100.
    for i in range(30):
        client_id = "orders" if i % 2 else "payments"
        h.push(f"i{i:02d}", [
            total("sent", 1 + i, 0, 1), gauge("latency", float(i), 1),
            gauge("a", 1, 1), gauge("b", 1, 1), gauge("c", 1, 1),
        ], client_id=client_id)  # fmt: skip
    samples = h.samples()
    assert len(samples) <= 100
    sent = values(samples, "sent_total")
    shown = {i for i in sent if i != OVERFLOW_INSTANCE_ID}
    # 90 % of the budget for instances one by one: 18, the most recently pushed.
    assert shown == {f"i{i:02d}" for i in range(12, 30)}
    aggregates = {
        dict(labels)["client_id"]: value
        for (name, labels), value in samples.items()
        if name == "sent_total"
        and dict(labels)["client_instance_id"] == OVERFLOW_INSTANCE_ID
    }
    # Overflowed: i00..i11; counters add up per client id, gauges take the largest.
    assert aggregates == {
        "payments": sum(1 + i for i in range(0, 12, 2)),
        "orders": sum(1 + i for i in range(1, 12, 2)),
    }
    latency = {
        dict(labels)["client_id"]: value
        for (name, labels), value in samples.items()
        if name == "latency"
        and dict(labels)["client_instance_id"] == OVERFLOW_INSTANCE_ID
    }
    assert latency == {"payments": 10.0, "orders": 11.0}
    # Aggregates carry no per-instance labels.
    for (_, labels), _value in samples.items():
        if dict(labels)["client_instance_id"] == OVERFLOW_INSTANCE_ID:
            assert set(dict(labels)) == {
                "client_id", "client_instance_id", "client_software_name",
                "client_software_version",
            }  # fmt: skip
    own = {m.name: m.samples[0].value for m in h.series.collect()}
    assert own["ktc_prometheus_clients_overflow_instances"] == 12
    assert own["ktc_prometheus_clients_series"] == len(samples)
    h.series.close()


def test_aggregates_that_do_not_fit_are_left_out_and_counted() -> None:
    h = Harness(max_series=20)
    for i in range(40):  # 40 client ids: 40 aggregates could never fit
        h.push(f"i{i:02d}", [gauge("a", 1, 1), gauge("b", 1, 1)], client_id=f"c{i}")
    samples = h.samples()
    assert len(samples) <= 20
    own = {m.name: m.samples[0].value for m in h.series.collect()}
    assert own["ktc_prometheus_clients_series_dropped"] > 0
    h.series.close()


def test_openmetrics_names_counters_without_total_and_ends_with_eof(
    harness: Harness,
) -> None:
    harness.push("a", [total("x.sent", 4, 0, 1), gauge("y", float("nan"), 1)])
    text = harness.text(open_metrics=True)
    assert "# TYPE x_sent counter\n" in text and "\nx_sent_total{" in text
    assert text.endswith("# EOF\n")
    assert " NaN\n" in harness.text()


def test_label_values_are_escaped(harness: Harness) -> None:
    harness.push("a", [gauge("x", 1, 1)], client_id='we"ird\\id\nline')
    assert values(harness.samples(), "x") == {"a": 1}
    assert dict(next(iter(harness.samples()))[1])["client_id"] == 'we"ird\\id\nline'


def test_accept_header_negotiation() -> None:
    prometheus = (
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
        "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    )
    assert wants_open_metrics(prometheus)
    assert not wants_open_metrics("")
    assert not wants_open_metrics("text/plain")
    assert not wants_open_metrics("text/plain,application/openmetrics-text;q=0.5")


def test_an_unknown_label_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError) as error:
        load_config(
            environ={}, overrides={"prometheus.clients.labels": "client_id,pod"}
        )
    message = str(error.value)
    assert "prometheus.clients.labels" in message and "pod" in message
    assert "\n" not in message


def test_pushes_wait_while_the_worker_is_busy_and_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker still folding gets no second batch; what waits meanwhile is bounded by
    PENDING_MAX_BYTES (pushes over it are counted and skipped)."""
    import concurrent.futures
    import threading

    from collector.telemetry.prometheus import client_series

    release = threading.Event()
    executor = concurrent.futures.ThreadPoolExecutor(1)
    executor.submit(release.wait)  # the worker is busy
    series = ClientSeries(
        ClientSeriesSettings.parse(1000, None, None), lambda _: True, executor=executor
    )
    body = payload([gauge("x", 1, 1)])
    monkeypatch.setattr(client_series, "PENDING_MAX_BYTES", 100 * len(body))
    series.record(context("a", at_ns=1), body)
    first = series.fold_soon()
    assert first is not None
    series.record(context("a", at_ns=2), body)
    assert series.fold_soon() is None  # the first batch is not folded yet
    limit = client_series.PENDING_MAX_BYTES // len(body)
    for i in range(limit + 10):
        series.record(context("b", at_ns=3 + i), body)
    assert series.pushes_skipped >= 10
    release.set()
    first.result(10)
    assert series.fold_soon() is not None
    assert values(_parse(asyncio.run(series.scrape(False)).decode()), "x") == {
        "a": 1,
        "b": 1,
    }
    executor.shutdown()


def test_a_scrape_after_shutdown_is_refused_not_crashed() -> None:
    h = Harness()
    h.push("a", [gauge("x", 1, 1)])
    h.series.close()
    with pytest.raises(ClientSeriesClosed):
        h.text()


# --------------------------------------------------------------------- bounds per instance
def ordinary(i: int) -> list[Metric]:
    """An ordinary client's push: 12 series (10 numbers, a 2-bound histogram's 5)."""
    return [
        *(gauge(f"client.g{n}", float(i), 10 + i) for n in range(5)),
        *(total(f"client.c{n}", 1, i, 10 + i) for n in range(2)),
        histogram("client.latency", [1, 5], [1, 1, 1], 6.0, i, 10 + i),
    ]


def bomb(push: int, values: int = 10_000) -> list[Metric]:
    """One gauge with ``values`` distinct attribute values, new ones every push."""
    return [
        Metric(
            name="bomb.gauge",
            gauge=Gauge(
                data_points=[
                    NumberDataPoint(
                        as_double=1.0,
                        time_unix_nano=push,
                        attributes=attributes({"v": f"{push}-{n}"}),
                    )
                    for n in range(values)
                ]
            ),
        )
    ]


def per_instance(samples: Samples) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, labels in samples:
        instance = dict(labels)["client_instance_id"]
        counts[instance] = counts.get(instance, 0) + 1
    return counts


def test_one_instance_cannot_take_the_page_from_the_fleet() -> None:
    """Budget 2,000, cap 500: a client pushing 10,000 distinct attribute values a push
    holds 500 series (499 of its own and its flag), the four ordinary clients beside it
    keep every one of theirs, and nothing overflows."""
    h = Harness(max_series=2_000, per_instance=500)
    for i in range(4):
        h.push(f"ordinary-{i}", ordinary(i), client_id=f"app-{i}")
    for push in range(1, 4):
        h.push("bomb", bomb(push), client_id="bomb")
        samples = h.samples()
        counts = per_instance(samples)
        assert len(samples) <= 2_000
        assert counts == {"bomb": 500, **{f"ordinary-{i}": 12 for i in range(4)}}
        refused = values(samples, REFUSED_FAMILY)
        assert refused == {"bomb": 10_000 * push - 499}
        own = h.own()
        assert own["ktc_prometheus_clients_capped_instances"] == 1
        assert own["ktc_prometheus_clients_series_refused_total"] == refused["bomb"]
        assert own["ktc_prometheus_clients_overflow_instances"] == 0
        assert own["ktc_prometheus_clients_series_limit_per_instance"] == 500
    text = h.text()
    assert f"# TYPE {REFUSED_FAMILY} counter" in text
    # A series the instance already holds is still updated at its cap.
    h.push(
        "bomb", [gauge("bomb.gauge", 7.0, 99, labels={"v": "1-0"})], client_id="bomb"
    )
    bomb_gauge = {
        dict(labels)["v"]: value
        for (name, labels), value in h.samples().items()
        if name == "bomb_gauge"
    }
    assert bomb_gauge["1-0"] == 7.0 and len(bomb_gauge) == 499
    h.series.close()


def test_the_cap_counts_histogram_samples_and_is_at_most_the_budget() -> None:
    # Cap 8: room for 7 samples of its own; a 2-bound histogram is 5, a second does not
    # fit, two gauges do.
    h = Harness(per_instance=8)
    h.push("a", [
        histogram("h1", [1, 5], [1, 1, 1], 6.0, 0, 1),
        histogram("h2", [1, 5], [1, 1, 1], 6.0, 0, 1),
        gauge("g1", 1, 1), gauge("g2", 1, 1), gauge("g3", 1, 1),
    ])  # fmt: skip
    samples = h.samples()
    assert len(samples) == 8
    assert values(samples, REFUSED_FAMILY) == {"a": 2}  # h2 and g3
    # h1 grown to 4 bounds (7 samples) would not fit either: the kept point stays.
    h.push("a", [histogram("h1", [1, 2, 3, 5], [1, 1, 1, 1, 1], 9.0, 1, 2)])
    samples = h.samples()
    assert len(samples) == 8
    assert values(samples, "h1_count") == {"a": 3}
    assert values(samples, REFUSED_FAMILY) == {"a": 3}
    h.series.close()
    # A cap over the budget is the budget.
    settings = ClientSeriesSettings.parse(10, None, None, max_series_per_instance=50)
    assert settings.instance_room == 9


def test_a_client_metric_named_like_the_flag_is_dropped(harness: Harness) -> None:
    harness.push("a", [total("ktc.client.series.refused", 5, 0, 1), gauge("x", 1, 1)])
    assert {name for name, _ in harness.samples()} == {"x"}


def test_the_overflow_walk_stops_at_the_first_instance_that_does_not_fit() -> None:
    """Budget 100 (90 for instances one by one): m2 (40) and m1 (45) fit, b (50) does not;
    s (2, pushed before b) would still fit, but from b on every older instance overflows:
    the instances shown one by one are always the most recently pushed ones."""
    h = Harness(max_series=100)

    def push(instance: str, count: int) -> None:
        h.push(
            instance, [gauge(f"g{n}", 1, 1) for n in range(count)], client_id=instance
        )

    push("s", 2)
    push("b", 50)
    push("m1", 45)
    push("m2", 40)
    shown = per_instance(h.samples())
    assert shown == {"m2": 40, "m1": 45, OVERFLOW_INSTANCE_ID: 2}  # s's aggregate
    assert h.own()["ktc_prometheus_clients_overflow_instances"] == 2
    h.series.close()


# ------------------------------------------------------------------------------ expiry
def test_a_series_not_refreshed_within_the_expiry_is_removed() -> None:
    h = Harness(expiry_ms=300_000)
    labels = {"node_id": "1"}
    h.push(
        "a", [gauge("x", 1, 10, labels=labels), gauge("y", 1, 10), gauge("z", 1, 10)]
    )
    h.time.advance(200_000)
    # y refreshed; z's point is older than the one kept: ignored, so not refreshed.
    h.push("a", [gauge("y", 2, 20), gauge("z", 5, 5)])
    h.time.advance(100_000)  # x and z: last set exactly 300 s ago, not yet expired
    assert set(values(h.samples(), "x")) == {"a"}
    assert h.own()["ktc_prometheus_clients_series_expired_total"] == 0
    h.time.advance(1)
    samples = h.samples()
    assert {name for name, _ in samples} == {"y"}
    assert values(samples, "y") == {"a": 2}
    assert h.own()["ktc_prometheus_clients_series_expired_total"] == 2
    # A new push brings a series back.
    h.push("a", [gauge("x", 3, 30, labels=labels)])
    assert values(h.samples(), "x") == {"a": 3}
    h.time.advance(300_001)
    assert h.samples() == {}  # everything expired; the instance is still cached
    assert h.own()["ktc_prometheus_clients_series"] == 0
    h.series.close()


def test_expiry_frees_a_capped_instance_and_its_flag_goes_once_it_stops() -> None:
    h = Harness(per_instance=10, expiry_ms=60_000)
    h.push("bomb", bomb(1, values=100))
    assert per_instance(h.samples()) == {"bomb": 10}
    h.time.advance(60_001)
    # The first push's series and its flag expired: the next push's take their room.
    h.push("bomb", bomb(2, values=5))
    samples = h.samples()
    assert {
        dict(labels)["v"] for (name, labels) in samples if name == "bomb_gauge"
    } == {f"2-{n}" for n in range(5)}
    assert not values(samples, REFUSED_FAMILY)
    assert h.own()["ktc_prometheus_clients_capped_instances"] == 0
    assert h.own()["ktc_prometheus_clients_series_expired_total"] == 10
    h.series.close()


# ------------------------------------------------------------------------------ config
def test_the_bounds_config_keys_env_overrides_and_defaults() -> None:
    defaults = load_config(environ={})
    assert (
        defaults.prometheus_clients_max_series_per_instance
        == DEFAULT_MAX_SERIES_PER_INSTANCE
    )
    assert defaults.prometheus_clients_series_expiry_ms == DEFAULT_SERIES_EXPIRY_MS
    assert DEFAULT_SERIES_EXPIRY_MS == 5 * 60 * 1000  # otelcol's metric_expiration
    config = load_config(
        environ={
            "KTC_PROMETHEUS_CLIENTS_MAX_SERIES_PER_INSTANCE": "500",
            "KTC_PROMETHEUS_CLIENTS_SERIES_EXPIRY_MS": "60000",
        }
    )
    assert config.prometheus_clients_max_series_per_instance == 500
    assert config.prometheus_clients_series_expiry_ms == 60_000
    for key in (
        "prometheus.clients.max.series.per.instance",
        "prometheus.clients.series.expiry.ms",
    ):
        with pytest.raises(ConfigError) as error:
            load_config(environ={}, overrides={key: 0})
        assert key in str(error.value) and "\n" not in str(error.value)


# ------------------------------------------------------------------ Streams' states, named
CLIENT_STATE = "org.apache.kafka.stream.client.state"
THREAD_STATE = "org.apache.kafka.stream.thread.thread.state"


def states_of(samples: Samples, family: str) -> dict[tuple[str, str], float]:
    """(thread_id or "", state) -> value of ``family``'s series."""
    return {
        (dict(labels).get("thread_id", ""), dict(labels)["state"]): value
        for (name, labels), value in samples.items()
        if name == family
    }


def test_streams_states_are_one_series_per_name_beside_the_ordinal(
    harness: Harness,
) -> None:
    process = {"process_id": "p1", "application_id": "wc"}
    harness.push("admin", [gauge(CLIENT_STATE, 2, 1, labels=process)])  # RUNNING
    harness.push("consumer", [
        gauge(THREAD_STATE, 4, 1, labels={**process, "thread_id": "t-1"}),  # RUNNING
        gauge(THREAD_STATE, 2, 1, labels={**process, "thread_id": "t-2"}),  # REVOKED
    ])  # fmt: skip
    samples = harness.samples()
    client = states_of(samples, "ktc_stream_client_state")
    assert client == {
        ("", name): float(name == "RUNNING") for name in KAFKA_STREAMS_STATES
    }
    thread = states_of(samples, "ktc_stream_thread_state")
    assert thread == {
        **{("t-1", n): float(n == "RUNNING") for n in STREAM_THREAD_STATES},
        **{("t-2", n): float(n == "PARTITIONS_REVOKED") for n in STREAM_THREAD_STATES},
    }
    # The ordinal stays, as the OpenTelemetry Collector's exporter shows it; the named
    # series carry its labels (identity and attributes) and ``state``.
    assert values(samples, "org_apache_kafka_stream_client_state") == {"admin": 2.0}
    named = next(
        dict(labels)
        for (name, labels), _ in samples.items()
        if name == "ktc_stream_client_state"
    )
    assert named["process_id"] == "p1" and named["application_id"] == "wc"
    assert named["client_instance_id"] == "admin"
    text = harness.text()
    assert "# TYPE ktc_stream_client_state gauge" in text
    # A new state moves the 1; an older point is ignored; an ordinal no state has is 0
    # everywhere (the ordinal still shows it).
    harness.push("admin", [gauge(CLIENT_STATE, 6, 3, labels=process)])  # ERROR
    harness.push("admin", [gauge(CLIENT_STATE, 1, 2, labels=process)])  # older
    client = states_of(harness.samples(), "ktc_stream_client_state")
    assert [name for (_, name), value in client.items() if value] == ["ERROR"]
    harness.push("admin", [gauge(CLIENT_STATE, 9, 4, labels=process)])
    samples = harness.samples()
    assert set(states_of(samples, "ktc_stream_client_state").values()) == {0.0}
    assert values(samples, "org_apache_kafka_stream_client_state") == {"admin": 9.0}


def test_the_named_states_count_against_the_cap_all_or_none() -> None:
    # Cap 10: room for 9 samples of its own.  The ordinal and its 7 named series take 8;
    # a second thread's ordinal fits (9), its 7 named series do not: refused together.
    h = Harness(per_instance=10)
    h.push("consumer", [
        gauge(THREAD_STATE, 4, 1, labels={"thread_id": "t-1"}),
        gauge(THREAD_STATE, 4, 1, labels={"thread_id": "t-2"}),
    ])  # fmt: skip
    samples = h.samples()
    assert len(samples) == 10  # 9 and the flag
    assert {t for t, _ in states_of(samples, "ktc_stream_thread_state")} == {"t-1"}
    assert values(samples, REFUSED_FAMILY) == {"consumer": 1}
    assert h.own()["ktc_prometheus_clients_series"] == 10
    h.series.close()


def test_a_client_metric_named_like_a_named_state_is_dropped(
    harness: Harness,
) -> None:
    harness.push("a", [gauge("ktc.stream.client.state", 1, 1), gauge("x", 1, 1)])
    assert {name for name, _ in harness.samples()} == {"x"}
