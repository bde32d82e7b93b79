"""Every OTLP kind real Kafka clients do not push (histograms, summaries, cumulative and
non-monotonic sums, unit suffixes, odd attribute names) shows on ``/metrics/clients`` as
the real OpenTelemetry Collector's Prometheus exporter shows the same pushes: a raw client
pushes crafted payloads over the wire to a collector that forwards them to otelcol, and
the two pages are compared series by series, value by value."""

from __future__ import annotations

import asyncio
import math
import uuid
from pathlib import Path

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric

from collector.telemetry.prometheus.points import STATE_FAMILIES
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import (
    ApiVersionsRequest,
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
)
from proto.streams_states import KAFKA_STREAMS_STATES
from subscriptions.kafka_uuid import kafka_uuid_to_str
from subscriptions.store import ConfigStore
from tests.collector.wire_client import WireClient
from tests.exporters.otelcol_process import OtelCollector
from tests.integration.collector_harness import RunningCollector
from tests.prometheus.otlp_build import (
    CUMULATIVE,
    gauge,
    histogram,
    payload,
    summary,
    total,
)
from tests.prometheus.test_client_metrics_endpoint import (
    forwarder_lag,
    http_get,
    of_instances,
    parse,
    projected,
)
from tests.waiting import eventually, eventually_sync

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

T0 = 1_800_000_000_000_000_000  # ns
NAMED_STATES = {family for family, _, _ in STATE_FAMILIES.values()}
S = 1_000_000_000


def pushes() -> list[list[Metric]]:
    """Three pushes: contiguous deltas, then a histogram restart and a misaligned one."""
    node = {"node.id": "1", "topic": "orders", "9th.attr": "x"}
    first = [
        histogram("rpc.duration", [1, 5, 10], [1, 2, 3, 4], 100.5, T0, T0 + S, unit="ms", labels=node),
        histogram("req.size", [100, 1000], [3, 1, 0], 900.0, T0, T0 + S, temporality=CUMULATIVE, unit="By"),
        histogram("restarted", [1, 2], [1, 1, 1], 4.0, T0, T0 + S),
        summary("rpc.latency", {0.5: 3.5, 0.99: 20.0}, 10, 55.0, T0 + S, unit="s"),
        total("org.apache.kafka.producer.record.send", 5, T0, T0 + S, labels=node),
        total("bytes.sent", 1000, T0, T0 + S, temporality=CUMULATIVE, unit="By"),
        total("queue.depth", 7, T0, T0 + S, temporality=CUMULATIVE, monotonic=False),
        total("delta.updown", 3, T0, T0 + S, monotonic=False),
        gauge("poll.idle", 0.75, T0 + S, unit="1"),
        gauge("io.rate", 123456789.0, T0 + S, unit="By/s"),
        gauge("weird..name--x", 1.0, T0 + S, unit="{requests}"),
        # Kafka Streams' state, an ordinal (2: RUNNING): shown as otelcol shows it, and
        # beside it, here only, one series per state name (docs/prometheus.md).
        gauge("org.apache.kafka.stream.client.state", 2.0, T0 + S, labels={"process_id": "p1"}),
    ]  # fmt: skip
    second = [
        histogram("rpc.duration", [1, 5, 10], [0, 1, 0, 2], 44.25, T0 + S, T0 + 2 * S, unit="ms", labels=node),
        histogram("req.size", [100, 1000], [4, 2, 1], 5000.0, T0, T0 + 2 * S, temporality=CUMULATIVE, unit="By"),
        histogram("restarted", [1, 2], [0, 0, 5], 50.0, T0 + 5 * S, T0 + 6 * S),
        summary("rpc.latency", {0.5: 4.0, 0.99: 25.0}, 20, 120.0, T0 + 2 * S, unit="s"),
        total("org.apache.kafka.producer.record.send", 3, T0 + S, T0 + 2 * S, labels=node),
        total("bytes.sent", 2500, T0, T0 + 2 * S, temporality=CUMULATIVE, unit="By"),
        gauge("poll.idle", 0.5, T0 + 2 * S, unit="1"),
    ]  # fmt: skip
    third = [
        # starts before the kept point ended: the exporter drops it, and so do we
        histogram("restarted", [1, 2], [9, 9, 9], 99.0, T0 + 5 * S, T0 + 7 * S),
        total("org.apache.kafka.producer.record.send", 2, T0 + 2 * S, T0 + 3 * S, labels=node),
    ]  # fmt: skip
    return [first, second, third]


async def push_all(client: WireClient) -> str:
    """The three pushes, on ``client``'s connection (left open: a closed connection takes
    its instance out of the cache, and its series with it)."""
    answer = await client.request(
        ApiKeys.API_VERSIONS, 3, ApiVersionsRequest("kinds-test", "1.0")
    )
    assert answer.error_code == Errors.NONE
    get = await client.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)),
    )
    assert get.error_code == Errors.NONE
    for metrics in pushes():
        request = PushTelemetryRequest(
            client_instance_id=get.client_instance_id,
            subscription_id=get.subscription_id,
            terminating=False,
            compression_type=0,
            metrics=payload(metrics),
        )

        loop = asyncio.get_running_loop()
        while True:
            response = await client.request(ApiKeys.PUSH_TELEMETRY, 0, request)
            if response.error_code == Errors.NONE:
                break
            # Before the push interval (100 ms, the collector's real clock) a push is
            # refused retriably: let the interval pass, then push again.
            assert response.error_code == Errors.THROTTLING_QUOTA_EXCEEDED
            retry_at = loop.time() + 0.1
            await eventually(
                lambda: loop.time() >= retry_at,  # noqa: B023 - awaited at once
                timeout_s=5,
                what="the push interval to pass",
            )
    return kafka_uuid_to_str(get.client_instance_id)


def test_every_kind_matches_the_otelcol_prometheus_exporter(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "all", {"metrics": "*", "interval.ms": "100"}, []
    )
    with OtelCollector(tmp_path / "otelcol") as otelcol:
        otlp = {"endpoint": otelcol.endpoint, "tls": {"insecure": True}}
        with RunningCollector(
            data_dir,
            **{"exporters.otlp": otlp, "prometheus.clients.enable": True},
        ) as collector:
            assert collector.server is not None

            async def pushed_and_compared() -> None:
                client = await WireClient.connect(collector.port, client_id="kinds")
                try:
                    instance = await push_all(client)
                    compare(instance)
                finally:
                    await client.close()

            def compare(instance: str) -> None:
                eventually_sync(
                    lambda: (
                        len(collector.landed()) == 3 and forwarder_lag(collector) == 0
                    ),
                    timeout_s=30,
                    what="three pushes landed and forwarded",
                )
                reference_url = f"http://127.0.0.1:{otelcol.prometheus_port}/metrics"
                eventually_sync(
                    lambda: of_instances(parse(http_get(reference_url)), {instance}),
                    timeout_s=10,
                    what="otelcol's exporter to show the pushes",
                )
                assert collector.server is not None
                url = f"http://127.0.0.1:{collector.server.http_port}/metrics/clients"
                page = projected(of_instances(parse(http_get(url)), {instance}))
                # The one deliberate difference: the named Streams states.
                named = {k: v for k, v in page.items() if k[0] in NAMED_STATES}
                mine = {k: v for k, v in page.items() if k not in named}
                assert {
                    dict(labels)["state"]: value for (_, labels), value in named.items()
                } == {name: float(name == "RUNNING") for name in KAFKA_STREAMS_STATES}
                theirs = projected(
                    of_instances(parse(http_get(reference_url)), {instance})
                )
                assert set(mine) == set(theirs), (
                    f"only here: {sorted(set(mine) - set(theirs))}\n"
                    f"only on otelcol: {sorted(set(theirs) - set(mine))}"
                )
                for key, value in mine.items():
                    assert math.isclose(value, theirs[key], rel_tol=1e-12), (
                        key,
                        value,
                        theirs[key],
                    )
                names = {name for name, _ in mine}
                # What the comparison covered: every kind, with its suffixes.
                assert {
                    "rpc_duration_milliseconds_bucket", "rpc_duration_milliseconds_sum",
                    "req_size_bytes_bucket", "restarted_bucket", "rpc_latency_seconds",
                    "rpc_latency_seconds_count", "org_apache_kafka_producer_record_send_total",
                    "bytes_sent_total", "queue_depth", "poll_idle_ratio",
                    "io_rate_bytes_per_second", "weird_name_x",
                    "org_apache_kafka_stream_client_state",
                } <= names  # fmt: skip
                assert "delta_updown" not in names

            asyncio.run(pushed_and_compared())
