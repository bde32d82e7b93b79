"""The conformance view: what a push's shape tells (``push_shape.read_shape``), what the
push path samples of it on an instance, and the rows of ``GET /v1/clients/conformance``
and ``ktc clients --conformance`` built from them.  Real managers and real OTLP payloads
on a clock the test moves (``now_ms``); the real franz-go side is
tests/gateway/test_gateway_franz_go.py."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from clock.testing import FakeClock
from collector.app.cli import cli
from collector.app.conformance import (
    FIELDS,
    KNOWN_QUIRKS,
    conformance,
    conformance_rows,
)
from collector.core.session import Session
from collector.telemetry.client_metrics import (
    GAP_SAMPLES,
    SHAPE_SAMPLE_EVERY,
    ClientMetricsManager,
    shape_sampled,
)
from collector.telemetry.push_shape import (
    REQUIRED_CONSUMER_METRICS,
    REQUIRED_METRIC_BITS,
    REQUIRED_PRODUCER_METRICS,
    ROLE_CONSUMER,
    ROLE_PRODUCER,
    TEMPORALITY_BITS,
    read_shape,
)
from exporters.landing import LandingLog
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import ApiVersionsRequest, PushTelemetryRequest
from subscriptions.kafka_uuid import ZERO_UUID
from subscriptions.store import ConfigStore
from tests.collector.collector_testkit import (
    MemorySubscriptions,
    Start,
    make_manager,
    make_session,
    otlp_payload,
    subscription,
)
from tests.collector.test_live_clients_endpoint import SECRET, get, http
from tests.collector.wire_client import WireClient

pytestmark = pytest.mark.timeout(60)

INTERVAL = 1000
PRODUCER = "org.apache.kafka.producer."
KGO = make_session(2, client_software_name="kgo", client_software_version="v1.22.3")
JAVA = make_session(
    3, client_software_name="apache-kafka-java", client_software_version="4.4.0"
)


def sum_metric(name: str, temporality: Any) -> Metric:
    """A monotonic Sum; ``temporality`` None leaves the field out (proto3's 0)."""
    data = Sum(data_points=[NumberDataPoint(as_int=3)], is_monotonic=True)
    if temporality is not None:
        data.aggregation_temporality = temporality
    return Metric(name=name, sum=data)


def payload(*metrics: Metric, scopes: int = 1) -> bytes:
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(
                scope_metrics=[ScopeMetrics(metrics=list(metrics))] * scopes
            )
        ]
    ).SerializeToString()


def gauge(name: str) -> Metric:
    return Metric(name=name, gauge=Gauge(data_points=[NumberDataPoint(as_double=1.5)]))


# ----------------------------------------------------------------------------- the walk
DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


@pytest.mark.parametrize(
    ("data", "metrics", "required", "roles", "temporalities"),
    [
        (b"", 0, set(), 0, set()),
        (payload(), 0, set(), 0, set()),
        (payload(scopes=3), 0, set(), 0, set()),
        (
            payload(gauge(REQUIRED_PRODUCER_METRICS[0]), gauge(PRODUCER + "x.rate")),
            2,
            {REQUIRED_PRODUCER_METRICS[0]},
            ROLE_PRODUCER,
            set(),
        ),
        (
            payload(
                sum_metric(PRODUCER + "connection.creation.total", DELTA),
                gauge(REQUIRED_CONSUMER_METRICS[4]),
            ),
            2,
            {REQUIRED_CONSUMER_METRICS[4]},
            ROLE_PRODUCER | ROLE_CONSUMER,
            {"delta"},
        ),
        (
            payload(
                sum_metric("org.apache.kafka.stream.x", CUMULATIVE),
                sum_metric("app.y", None),  # proto3 leaves 0 (unspecified) out
                Metric(
                    name="h",
                    histogram=Histogram(
                        data_points=[HistogramDataPoint(count=1)],
                        aggregation_temporality=DELTA,
                    ),
                ),
            ),
            3,
            set(),
            0,
            {"cumulative", "unspecified", "delta"},
        ),
        # Every required name, each in a scope of its own, names of multi-byte lengths.
        (
            payload(
                *(
                    gauge(n)
                    for n in REQUIRED_PRODUCER_METRICS + REQUIRED_CONSUMER_METRICS
                ),
                gauge("x" * 300),
                scopes=2,
            ),
            2 * 14,
            set(REQUIRED_PRODUCER_METRICS + REQUIRED_CONSUMER_METRICS),
            ROLE_PRODUCER | ROLE_CONSUMER,
            set(),
        ),
    ],
)
def test_a_push_shape_tells_names_roles_and_temporalities(
    data: bytes,
    metrics: int,
    required: set[str],
    roles: int,
    temporalities: set[str],
) -> None:
    MetricsData.FromString(data)  # what the push path has already checked
    # Unknown fields of every wire type, before and after, are skipped.
    unknown = b"\x18\x96\x01" + b"\x21" + b"\0" * 8 + b"\x2d" + b"\0" * 4
    for variant in (data, unknown + data, data + unknown):
        shape = read_shape(variant)
        assert shape.metrics == metrics
        assert shape.required == sum(REQUIRED_METRIC_BITS[n.encode()] for n in required)
        assert shape.roles == roles
        assert shape.temporalities == sum(TEMPORALITY_BITS[t] for t in temporalities)


def test_a_name_that_only_starts_like_a_required_one_is_not_it() -> None:
    shape = read_shape(payload(gauge(REQUIRED_PRODUCER_METRICS[0] + ".extra")))
    assert shape.required == 0 and shape.roles == ROLE_PRODUCER


# ----------------------------------------------------------------------------- the sample
def test_the_sample_is_pushes_0_1_2_4_8_then_one_in_16() -> None:
    sampled = [n for n in range(100) if shape_sampled(n)]
    assert sampled == [0, 1, 2, 4, 8, 16, 32, 48, 64, 80, 96]
    assert SHAPE_SAMPLE_EVERY == 16


def handshake(
    manager: ClientMetricsManager, session: Session, now_ms: int, client_id: str = "c-1"
) -> Any:
    answer = manager.get_telemetry_subscriptions(ZERO_UUID, session, client_id, now_ms)
    assert answer.error_code == Errors.NONE
    return answer


def push(
    manager: ClientMetricsManager,
    session: Session,
    answer: Any,
    now_ms: int,
    metrics: bytes,
    *,
    terminating: bool = False,
    client_id: str = "c-1",
) -> Errors:
    request = PushTelemetryRequest(
        client_instance_id=answer.client_instance_id,
        subscription_id=answer.subscription_id,
        terminating=terminating,
        compression_type=0,
        metrics=metrics,
    )
    response = manager.push_telemetry(request, session, client_id, 1, now_ms)
    return Errors(response.error_code)


def run_client(
    manager: ClientMetricsManager,
    session: Session,
    pushes: list[bytes],
    *,
    gap_ms: int = INTERVAL,
    start_ms: int = 0,
    terminate: bool = False,
) -> uuid.UUID:
    """A client's Get, then one push per payload every ``gap_ms`` (the first after half an
    interval, jittered as clients do), then a terminating push if asked."""
    answer = handshake(manager, session, start_ms)
    now = start_ms + INTERVAL // 2
    for data in pushes:
        assert push(manager, session, answer, now, data) == Errors.NONE
        now += gap_ms
    if terminate:
        assert push(manager, session, answer, now, b"", terminating=True) == Errors.NONE
    instance_id: uuid.UUID = answer.client_instance_id
    return instance_id


@pytest.fixture
def subs() -> MemorySubscriptions:
    return MemorySubscriptions(subscription("everything", "*", INTERVAL))


def test_the_push_path_records_the_sampled_shapes_gaps_and_terminating(
    manager: ClientMetricsManager, subs: MemorySubscriptions
) -> None:
    queue_time = otlp_payload(REQUIRED_PRODUCER_METRICS[4])  # only in push 3 (unread)
    pushes = [otlp_payload(REQUIRED_PRODUCER_METRICS[0])] * 3 + [queue_time]
    pushes += [otlp_payload(REQUIRED_PRODUCER_METRICS[1])] * 20
    instance_id = run_client(manager, JAVA, pushes, gap_ms=1500, terminate=True)
    instance = manager.instance(instance_id)
    assert instance is not None
    # Pushes 0, 1, 2, 4, 8 and 16 of 24 were read.
    assert instance.shapes_read == 6 and instance.metrics_read == 6
    assert instance.required_seen == (
        REQUIRED_METRIC_BITS[REQUIRED_PRODUCER_METRICS[0].encode()]
        | REQUIRED_METRIC_BITS[REQUIRED_PRODUCER_METRICS[1].encode()]
    )
    assert instance.roles_seen == ROLE_PRODUCER
    # A gap on each sampled push but the first, in thousandths of the interval.
    assert instance.push_gaps == [1500] * 5
    assert instance.terminating_pushes == 1
    assert instance.pushes_accepted == 25


def test_the_gaps_kept_are_the_newest_few(manager: ClientMetricsManager) -> None:
    instance_id = run_client(
        manager, JAVA, [otlp_payload("a")] * (SHAPE_SAMPLE_EVERY * 20), gap_ms=1000
    )
    instance = manager.instance(instance_id)
    assert instance is not None and instance.push_gaps is not None
    assert len(instance.push_gaps) == GAP_SAMPLES


def test_a_re_created_instance_keeps_what_was_sampled(
    manager: ClientMetricsManager, subs: MemorySubscriptions
) -> None:
    instance_id = run_client(
        manager, KGO, [otlp_payload(REQUIRED_PRODUCER_METRICS[0])] * 3
    )
    subs.set(subscription("everything", "*", 2 * INTERVAL))  # a newer store version
    again = manager.get_telemetry_subscriptions(instance_id, KGO, "c-1", 10_000)
    assert again.error_code == Errors.NONE
    instance = manager.instance(instance_id)
    assert instance is not None
    assert instance.push_interval_ms == 2 * INTERVAL
    assert instance.shapes_read == 3 and instance.roles_seen == ROLE_PRODUCER
    assert instance.push_gaps == [1000, 1000]


# ----------------------------------------------------------------------------- the rows
def rows_by_software(manager: ClientMetricsManager) -> dict[str, dict[str, Any]]:
    return {r["client_software_name"]: r for r in conformance_rows(manager.instances())}


def test_a_row_per_library_and_version_with_what_it_sent_and_lacks(
    manager: ClientMetricsManager,
) -> None:
    everything = [
        gauge(n) for n in REQUIRED_PRODUCER_METRICS + REQUIRED_CONSUMER_METRICS
    ]
    java = payload(*everything, sum_metric(PRODUCER + "record.send.total", DELTA))
    for _ in range(2):
        run_client(manager, JAVA, [java] * 4, terminate=True)
    kgo = payload(*(gauge(n) for n in REQUIRED_PRODUCER_METRICS[:2]))
    run_client(manager, KGO, [kgo] * 9, gap_ms=2000)
    rows = rows_by_software(manager)

    assert rows["apache-kafka-java"] == {
        "client_software_name": "apache-kafka-java",
        "client_software_version": "4.4.0",
        "role": "producer+consumer",
        "instances": 2,
        "pushes": 10,
        "empty_pushes": 0,
        "shapes_read": 6,  # pushes 0, 1 and 2 of each (3 is not read)
        "metrics_per_push": 14.0,
        "required_sent": list(REQUIRED_PRODUCER_METRICS + REQUIRED_CONSUMER_METRICS),
        "required_lacking": [],
        "temporality_asked": "delta",
        "temporalities_used": ["delta"],
        "terminating_pushes": 2,
        "push_intervals_ms": [INTERVAL],
        "gaps_sampled": 4,
        "interval_kept": 1.0,
        "errors": {},
        "series_capped": 0,
        "flags": ["java-ignores-telemetry-max-bytes"],
    }
    assert list(rows["apache-kafka-java"]) == list(FIELDS)  # the CSV's columns
    kgo_row = rows["kgo"]
    assert kgo_row["role"] == "producer"
    assert kgo_row["required_sent"] == list(REQUIRED_PRODUCER_METRICS[:2])
    assert kgo_row["required_lacking"] == list(REQUIRED_PRODUCER_METRICS[2:])
    # Gaps sampled on pushes 1, 2, 4 and 8: two intervals each.
    assert kgo_row["gaps_sampled"] == 4 and kgo_row["interval_kept"] == 2.0
    assert kgo_row["flags"] == [
        "kgo-wildcard-as-a-name",
        "kgo-skips-required-metrics",
        "kgo-interval-floor-1s",
        "required-metrics-lacking",
        "interval-not-kept",
    ]


def test_the_median_interval_is_over_every_instance_of_the_row(
    manager: ClientMetricsManager,
) -> None:
    run_client(manager, JAVA, [otlp_payload("a")] * 3, gap_ms=1000)  # gaps 1.0, 1.0
    run_client(manager, JAVA, [otlp_payload("a")] * 2, gap_ms=1200)  # gap 1.2
    run_client(manager, JAVA, [otlp_payload("a")] * 5, gap_ms=3000)  # 3.0, 3.0, 3.0
    row = rows_by_software(manager)["apache-kafka-java"]
    assert row["gaps_sampled"] == 6
    assert row["interval_kept"] == 2.1  # median of 1.0, 1.0, 1.2, 3.0, 3.0, 3.0
    assert "interval-not-kept" in row["flags"]


def test_empty_pushes_are_flagged_for_any_library(
    manager: ClientMetricsManager,
) -> None:
    """Under ``*`` a library that sends nothing is flagged from the data, known or not."""
    unknown = make_session(
        4, client_software_name="new-client", client_software_version="0.1.0"
    )
    run_client(manager, unknown, [payload()] * 3)
    row = rows_by_software(manager)["new-client"]
    assert row["empty_pushes"] == 3 and row["shapes_read"] == 3
    assert row["metrics_per_push"] == 0.0
    assert row["role"] == "" and row["required_lacking"] == []
    assert row["flags"] == ["empty-pushes"]
    answer = conformance(manager.instances())
    assert answer["quirks"]["empty-pushes"]["evidence"] == "observed"


def test_instances_at_their_series_cap_are_counted_and_flagged(
    manager: ClientMetricsManager,
) -> None:
    """/metrics/clients names the instances it holds at their series cap; their rows
    count them and carry the flag."""
    run_client(manager, JAVA, [otlp_payload("a")] * 2)
    run_client(manager, JAVA, [otlp_payload("a")] * 2)
    capped = next(iter(manager.instances())).instance_id_str
    answer = conformance(manager.instances(), capped_ids=[capped])
    (row,) = answer["libraries"]
    assert row["instances"] == 2 and row["series_capped"] == 1
    assert "series-capped" in row["flags"]
    assert answer["quirks"]["series-capped"]["evidence"] == "observed"
    (uncapped,) = conformance(manager.instances())["libraries"]
    assert uncapped["series_capped"] == 0 and "series-capped" not in uncapped["flags"]


def test_the_role_of_an_instance_that_sent_nothing_is_its_client_ids(
    manager: ClientMetricsManager,
) -> None:
    streams_id = "app-StreamThread-1-restore-consumer"
    answer = handshake(manager, JAVA, 0, client_id=streams_id)
    assert push(manager, JAVA, answer, 500, payload(), client_id=streams_id) == (
        Errors.NONE
    )
    row = rows_by_software(manager)["apache-kafka-java"]
    assert row["role"] == "consumer"
    assert row["required_lacking"] == list(REQUIRED_CONSUMER_METRICS)
    assert "required-metrics-lacking" in row["flags"]


def test_only_the_required_metrics_asked_for_are_graded(tmp_path: Path) -> None:
    from exporters.landing import LandingOptions

    node_latency = "org.apache.kafka.producer.node."
    subs = MemorySubscriptions(subscription("nodes", node_latency, INTERVAL))
    landing = LandingLog(
        tmp_path / "landing", LandingOptions(write_behind=False), housekeeping=False
    )
    try:
        manager = make_manager(subs, landing)
        run_client(manager, JAVA, [otlp_payload(REQUIRED_PRODUCER_METRICS[0])])
        row = rows_by_software(manager)["apache-kafka-java"]
    finally:
        landing.close()
    assert row["required_sent"] == [REQUIRED_PRODUCER_METRICS[0]]
    assert row["required_lacking"] == [REQUIRED_PRODUCER_METRICS[1]]


def test_cumulative_sums_where_delta_was_asked_are_flagged(
    manager: ClientMetricsManager,
) -> None:
    run_client(manager, JAVA, [payload(sum_metric(PRODUCER + "x.total", CUMULATIVE))])
    row = rows_by_software(manager)["apache-kafka-java"]
    assert row["temporalities_used"] == ["cumulative"]
    assert "temporality-not-asked" in row["flags"]


def test_errors_answered_are_counted_by_name(manager: ClientMetricsManager) -> None:
    answer = handshake(manager, JAVA, 0)
    assert push(manager, JAVA, answer, 10, otlp_payload("a")) == Errors.NONE
    assert push(manager, JAVA, answer, 20, otlp_payload("a")) == (
        Errors.THROTTLING_QUOTA_EXCEEDED
    )
    assert push(manager, JAVA, answer, 30, b"not otlp", terminating=True) == (
        Errors.INVALID_RECORD
    )
    row = rows_by_software(manager)["apache-kafka-java"]
    assert row["errors"] == {"INVALID_RECORD": 1, "THROTTLING_QUOTA_EXCEEDED": 1}


@pytest.mark.parametrize(
    ("name", "version", "flags"),
    [
        ("kgo", "v1.22.3", {"kgo-wildcard-as-a-name", "kgo-skips-required-metrics"}),
        ("kgo", "v1.22.4", set()),  # newer than the last checked: the data decides
        ("kgo", "devel", set()),
        ("kgo", "v1.18.0", set()),  # before its KIP-714 support
        ("librdkafka", "2.10.0", {"librdkafka-null-metrics"}),
        ("confluent-kafka-python", "2.6.0-rdkafka-2.6.0", {"librdkafka-null-metrics"}),
        ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0", set()),
        ("librdkafka", "2.4.0", set()),
        ("apache-kafka-java", "4.4.0", {"java-ignores-telemetry-max-bytes"}),
        ("apache-kafka-java", "3.6.0", set()),
    ],
)
def test_known_quirks_apply_to_their_versions(
    name: str, version: str, flags: set[str]
) -> None:
    applying = {q.flag for q in KNOWN_QUIRKS if q.applies(name, version)}
    assert flags <= applying
    assert not applying - flags - {"kgo-interval-floor-1s"}


# ----------------------------------------------------------------------------- endpoint, CLI
async def test_the_endpoint_and_the_cli_show_the_rows(
    start: Start, tmp_path: Path
) -> None:
    ConfigStore(tmp_path / "data").alter_subscription(
        "everything", {"metrics": "*", "interval.ms": "1000"}
    )
    clock = FakeClock(1_000_000, wall_ns=1_700_000_000_000_000_000)
    server = await start(clock, **{"http.admin.secret": SECRET})
    client = await WireClient.connect(server.port(), client_id="orders-producer")
    versions = ApiVersionsRequest("kgo", "v1.22.3")
    assert (await client.request(ApiKeys.API_VERSIONS, 3, versions)).error_code == 0
    answer = await get(client)
    for _ in range(2):
        clock.advance(INTERVAL)
        request = PushTelemetryRequest(
            client_instance_id=answer.client_instance_id,
            subscription_id=answer.subscription_id,
            terminating=False,
            compression_type=0,
            metrics=payload(),
        )
        pushed = await client.request(ApiKeys.PUSH_TELEMETRY, 0, request)
        assert pushed.error_code == Errors.NONE

    status, body = await http(server, "GET", "/v1/clients/conformance")
    assert status == 401  # the same guard as /v1/clients
    bearer = {"Authorization": f"Bearer {SECRET}"}
    status, body = await http(server, "GET", "/v1/clients/conformance", headers=bearer)
    assert status == 200
    (row,) = body["libraries"]
    assert (row["client_software_name"], row["client_software_version"]) == (
        "kgo",
        "v1.22.3",
    )
    assert row["pushes"] == 2 and row["empty_pushes"] == 2
    assert row["role"] == "producer"  # from the client id: its pushes held nothing
    assert row["flags"] == [
        "kgo-wildcard-as-a-name",
        "kgo-skips-required-metrics",
        "kgo-interval-floor-1s",
        "empty-pushes",
        "required-metrics-lacking",
    ]
    assert set(body["quirks"]) == set(row["flags"])
    status, body = await http(
        server, "GET", "/v1/clients/conformance?x=1", headers=bearer
    )
    assert status == 400 and body == {
        "error": "this endpoint takes no query parameters"
    }

    url = f"http://127.0.0.1:{server.http_port}"
    runner = CliRunner()

    def ktc(*args: str) -> Any:
        return runner.invoke(
            cli,
            ["clients", "--conformance", "--server", url, "--admin-secret", SECRET]
            + list(args),
        )

    as_json = await asyncio.to_thread(ktc, "--format", "json")
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["libraries"] == [row]
    as_csv = await asyncio.to_thread(ktc, "--format", "csv")
    assert as_csv.exit_code == 0, as_csv.output
    (line,) = csv.DictReader(io.StringIO(as_csv.stdout))
    assert line["empty_pushes"] == "2" and line["flags"] == ";".join(row["flags"])
    assert line["required_lacking"] == ";".join(REQUIRED_PRODUCER_METRICS)
    table = await asyncio.to_thread(ktc)
    assert table.exit_code == 0, table.output
    header, entry = table.stdout.splitlines()
    assert header.split()[:3] == ["SOFTWARE", "ROLE", "INSTANCES"]
    assert entry.startswith("kgo v1.22.3") and "0/6" in entry
    assert "1 client library" in table.stderr


def test_the_cli_refuses_conformance_with_filters_or_inventory(
    tmp_path: Path,
) -> None:
    for extra in (["--filter", "client_id=x"], ["--inventory"]):
        result = CliRunner().invoke(cli, ["clients", "--conformance", *extra])
        assert result.exit_code == 2
        assert (
            result.output.strip().splitlines()[-1]
            == "Error: --conformance takes neither --filter nor --inventory"
        )


def test_an_unreachable_server_is_one_line() -> None:
    result = CliRunner().invoke(
        cli, ["clients", "--conformance", "--server", "http://127.0.0.1:9"]
    )
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert result.output.startswith(
        "Error: http://127.0.0.1:9/v1/clients/conformance: "
    )


# ----------------------------------------------------------------------------- /metrics
def test_empty_push_series_are_bounded_per_library() -> None:
    """ktc_client_empty_pushes_total: one series per library and version up to
    MAX_EMPTY_PUSH_LIBRARIES, the rest under other/other."""
    from prometheus_client import generate_latest

    from collector.telemetry.stats import MAX_EMPTY_PUSH_LIBRARIES, ClientMetricsStats

    stats = ClientMetricsStats()
    for n in range(MAX_EMPTY_PUSH_LIBRARIES + 5):
        stats.record_empty_push(f"lib-{n}", "1.0")
    stats.record_empty_push("lib-0", "1.0")  # a library with a series keeps it
    text = generate_latest(stats.registry).decode()
    series = [
        line
        for line in text.splitlines()
        if line.startswith("ktc_client_empty_pushes_total{")
    ]
    assert len(series) == MAX_EMPTY_PUSH_LIBRARIES + 1
    assert (
        'ktc_client_empty_pushes_total{client_software_name="other",'
        'client_software_version="other"} 5.0' in series
    )
    assert (
        'ktc_client_empty_pushes_total{client_software_name="lib-0",'
        'client_software_version="1.0"} 2.0' in series
    )


def test_with_both_views_off_the_push_path_reads_nothing_for_them(
    subs: MemorySubscriptions, landing: LandingLog
) -> None:
    """``clients.conformance.enable`` / ``clients.applications.enable`` false: no shape,
    gap or application is read (what bench_push's ``--compare`` measures against)."""
    manager = make_manager(subs, landing, read_shapes=False, read_applications=False)
    pushes = [otlp_payload(REQUIRED_PRODUCER_METRICS[0])] * 3
    instance = manager.instance(run_client(manager, JAVA, pushes, terminate=True))
    assert instance is not None and instance.pushes_accepted == 4
    assert instance.shapes_read == 0 and instance.push_gaps is None
    assert instance.application is None
    assert instance.terminating_pushes == 1  # counted, not read


async def test_a_view_that_is_off_answers_404(start: Start, tmp_path: Path) -> None:
    server = await start(
        FakeClock(1_000_000),
        **{"clients.conformance.enable": False, "clients.applications.enable": False},
    )
    for path, key in (
        ("/v1/clients/conformance", "clients.conformance.enable"),
        ("/v1/applications", "clients.applications.enable"),
    ):
        status, body = await http(server, "GET", path)
        assert status == 404 and key in body["error"]
