"""The bounds that keep one client from taking ``/metrics/clients`` from the fleet
(docs/prometheus.md, "Bounds per instance"), with real parts.

* A cardinality bomb: a real ``ktc serve`` process (budget 2,000, per-instance cap 500),
  four real librdkafka clients (confluent-kafka) pushing every second, and one raw client
  pushing a gauge with 10,000 distinct attribute values a push (new ones every push).  At
  every scrape the page holds at most 2,000 series and the bomb at most 500; the four keep
  every series they pushed (as the landing log says), and the bomb is flagged.
* Expiry: a collector on a fake clock (in process), a raw client that keeps pushing one
  series and stops pushing another: the other is gone once the expiry passed, not before.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)
from prometheus_client.parser import text_string_to_metric_families

from clock.testing import FakeClock
from collector.app.config import load_config
from collector.app.server import CollectorServer
from collector.telemetry.prometheus.naming import MetricType, metric_name
from collector.telemetry.prometheus.points import IDENTITY_LABELS, REFUSED_FAMILY
from exporters.landing import LandingReader
from exporters.landing.layout import node_directories
from proto import ApiKeys, ClientConnection, compress
from proto.errors import Errors
from proto.messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from subscriptions.kafka_uuid import kafka_uuid_to_str
from subscriptions.store import ConfigStore
from tests.collector.wire_client import WireClient
from tests.integration.collector_harness import wait_for
from tests.prometheus.otlp_build import gauge, payload
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 2_000
CAP = 500
BOMB_VALUES = 10_000
INTERVAL_MS = 1000
ZSTD = 4

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Series:
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def of_instance(series: Series, instance: str) -> set[tuple[str, frozenset]]:
    """(name, attribute labels) of one instance's series."""
    return {
        (name, frozenset((k, v) for k, v in labels if k not in IDENTITY_LABELS))
        for name, labels in series
        if dict(labels).get("client_instance_id") == instance
    }


def bomb_payload(push: int) -> bytes:
    points = [
        NumberDataPoint(
            as_double=float(n),
            time_unix_nano=push,
            attributes=[KeyValue(key="v", value=AnyValue(string_value=f"{push}-{n}"))],
        )
        for n in range(BOMB_VALUES)
    ]
    metric = Metric(name="bomb.gauge", gauge=Gauge(data_points=points))
    data = MetricsData(
        resource_metrics=[
            ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[metric])])
        ]
    )
    return data.SerializeToString()


class Bomb:
    """A raw client (the project's codec over a socket): subscribes, then pushes a new
    10,000-value gauge whenever its push interval has passed."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.codec = ClientConnection(client_id="bomb")
        get = self.request(
            ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
            GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)),
        )
        self.instance_id = get.client_instance_id
        self.subscription_id = get.subscription_id
        self.interval_s = get.push_interval_ms / 1000
        self.due = time.monotonic()
        self.pushes = 0

    def request(self, api_key: int, message: object) -> Any:
        # The answer's message class depends on api_key (proto decodes by it at run time).
        self.sock.sendall(self.codec.send_request(api_key, 0, message))
        while True:
            frame = self.codec.next_response()
            if frame is not None:
                return frame.message
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.codec.receive_data(data)

    def push_if_due(self) -> None:
        if time.monotonic() < self.due:
            return
        self.pushes += 1
        body = compress(ZSTD, bomb_payload(self.pushes))
        push = PushTelemetryRequest(
            self.instance_id, self.subscription_id, False, ZSTD, body
        )
        error = self.request(ApiKeys.PUSH_TELEMETRY, push).error_code  # type: ignore[attr-defined]
        if error == Errors.NONE:
            self.due = time.monotonic() + self.interval_s
        else:  # too early on the server's clock: again shortly
            assert error == Errors.THROTTLING_QUOTA_EXCEEDED, error
            self.pushes -= 1
            self.due = time.monotonic() + 0.1


def landed_series(data_dir: Path) -> dict[str, set[tuple[str, frozenset]]]:
    """instance -> (Prometheus name, attribute labels) of every series it pushed, from
    the landing log (independently of the fold); the bomb's pushes are skipped."""
    found: dict[str, set[tuple[str, frozenset]]] = {}
    for directory in node_directories(data_dir):
        for record in LandingReader(directory).read(0):
            if record.context.terminating or record.context.client_id == "bomb":
                continue
            keys = found.setdefault(record.context.client_instance_id, set())
            for resource in MetricsData.FromString(record.payload).resource_metrics:
                resource_labels = {
                    a.key.replace(".", "_"): a.value.string_value
                    for a in resource.resource.attributes
                }
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        kind = metric.WhichOneof("data")
                        if kind == "gauge":
                            points, metric_type = (
                                metric.gauge.data_points,
                                MetricType.GAUGE,
                            )
                        elif kind == "sum":
                            if metric.sum.aggregation_temporality == 1 and not (
                                metric.sum.is_monotonic
                            ):
                                continue
                            metric_type = (
                                MetricType.COUNTER
                                if metric.sum.is_monotonic
                                else MetricType.GAUGE
                            )
                            points = metric.sum.data_points
                        else:
                            raise AssertionError(f"librdkafka pushes no {kind}")
                        name = metric_name(metric.name, metric.unit, metric_type)
                        for point in points:
                            labels = {
                                **resource_labels,
                                **{
                                    a.key.replace(".", "_"): a.value.string_value
                                    or str(a.value.int_value)
                                    for a in point.attributes
                                },
                            }
                            keys.add((name, frozenset(labels.items())))
    return found


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[int, int, Path]]:
    """``ktc serve`` as a process: (Kafka port, HTTP port, data dir)."""
    data = tmp_path / "data"
    ConfigStore(data).alter_subscription(
        "everything", {"metrics": "*", "interval.ms": str(INTERVAL_MS)}, []
    )
    config = tmp_path / "ktc.yaml"
    config.write_text(
        "listeners: PLAINTEXT://127.0.0.1:0\nhttp.listener: 127.0.0.1:0\n"
        f"data.dir: {data}\nlanding: {{fsync: never}}\n"
        "prometheus.clients.enable: true\n"
        f"prometheus.clients.max.series: {BUDGET}\n"
        f"prometheus.clients.max.series.per.instance: {CAP}\n"
    )
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector.app.cli", "serve", "--config", str(config)]
        + ["--ready-file", str(ready)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(ready.exists, timeout_s=30, what="the ready file")
        info = json.loads(ready.read_text())
        yield info["listeners"]["PLAINTEXT"], info["http_port"], data
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_a_cardinality_bomb_does_not_blind_the_fleet_view(
    serve: tuple[int, int, Path],
) -> None:
    port, http_port, data = serve
    page = f"http://127.0.0.1:{http_port}/metrics/clients"
    common = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "enable.metrics.push": True,
        "log_level": 0,
    }
    producers = [Producer({**common, "client.id": f"orders-{i}"}) for i in range(2)]
    consumers = [
        Consumer({**common, "client.id": f"billing-{i}", "group.id": "billing"})
        for i in range(2)
    ]
    for consumer in consumers:
        consumer.subscribe(["billing"])
    bomb = Bomb(port)
    bomb_id = kafka_uuid_to_str(bomb.instance_id)
    scrapes = 0
    try:

        def fleet_intact() -> bool:
            nonlocal scrapes
            for producer in producers:
                producer.poll(0)
            for consumer in consumers:
                consumer.poll(0)
            bomb.push_if_due()
            pushed = landed_series(data)
            series = scrape(page)
            scrapes += 1
            by_instance: dict[str, int] = {}
            for _, labels in series:
                instance = dict(labels)["client_instance_id"]
                by_instance[instance] = by_instance.get(instance, 0) + 1
            # At every scrape, whatever the others have pushed so far.
            assert len(series) <= BUDGET, len(series)
            assert by_instance.get(bomb_id, 0) <= CAP, by_instance
            return (
                bomb.pushes >= 3
                and len(pushed) == 4
                and all(of_instance(series, i) == keys for i, keys in pushed.items())
                and by_instance.get(bomb_id) == CAP
            )

        eventually_sync(
            fleet_intact,
            timeout_s=120,
            what="four librdkafka clients beside the bomb, each with all its series",
        )
        series = scrape(page)
        instances = {dict(labels)["client_instance_id"] for _, labels in series}
        assert "overflow" not in instances  # nothing folded into an aggregate
        bomb_series = [
            (name, labels)
            for name, labels in series
            if dict(labels)["client_id"] == "bomb"
        ]
        assert len(bomb_series) == CAP
        refused = {
            value
            for (name, labels), value in series.items()
            if name == REFUSED_FAMILY and dict(labels)["client_id"] == "bomb"
        }
        assert len(refused) == 1 and refused.pop() >= 3 * BOMB_VALUES - CAP
        # Only the bomb is flagged.
        assert {
            dict(labels)["client_id"]
            for name, labels in series
            if name == REFUSED_FAMILY
        } == {"bomb"}
        own = scrape(f"http://127.0.0.1:{http_port}/metrics")
        assert own[("ktc_prometheus_clients_capped_instances", frozenset())] == 1
        assert own[("ktc_prometheus_clients_series_refused_total", frozenset())] > 0
        assert (
            own[("ktc_prometheus_clients_series_limit_per_instance", frozenset())]
            == CAP
        )
        # The conformance view flags the bomb's library (the scrape named it capped).
        with urllib.request.urlopen(
            f"http://127.0.0.1:{http_port}/v1/clients/conformance", timeout=30
        ) as response:
            libraries = json.load(response)["libraries"]
        (capped,) = [row for row in libraries if row["series_capped"]]
        assert capped["series_capped"] == 1 and "series-capped" in capped["flags"]
        print(f"{scrapes} scrapes, {len(series)} series on the last; bomb {bomb_id}")
    finally:
        bomb.sock.close()
        for producer in producers:
            producer.flush(5)
        for consumer in consumers:
            consumer.close()


async def test_a_series_not_refreshed_expires(tmp_path: Path) -> None:
    """Series expiry 5 s, push interval 1 s, on a fake clock: the client pushes ``kept``
    every second and ``stale`` only once; ``stale`` is shown until 5 s after its push and
    gone after, while the instance (still pushing) keeps ``kept``."""
    data = tmp_path / "data"
    ConfigStore(data).alter_subscription(
        "everything", {"metrics": "*", "interval.ms": str(INTERVAL_MS)}, []
    )
    config = load_config(
        environ={},
        overrides={
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "http.listener": "127.0.0.1:0",
            "data.dir": str(data),
            "landing": {"fsync": "never"},
            "prometheus.clients.enable": True,
            "prometheus.clients.series.expiry.ms": 5000,
        },
    )
    clock = FakeClock(1_000_000)
    server = CollectorServer(config, clock=clock)
    await server.start()
    client = await WireClient.connect(server.port(), "expiring")
    try:
        assert server.client_series is not None
        get = await client.request(
            ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
            0,
            GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)),
        )
        instance = get.client_instance_id

        async def push(*metrics: Metric) -> None:
            body = compress(ZSTD, payload(metrics))
            answer = await client.request(
                ApiKeys.PUSH_TELEMETRY,
                0,
                PushTelemetryRequest(instance, get.subscription_id, False, ZSTD, body),
            )
            assert answer.error_code == Errors.NONE

        async def names() -> set[str]:
            body = await server.client_series.scrape(False)  # type: ignore[union-attr]
            return {
                family.name for family in text_string_to_metric_families(body.decode())
            }

        await push(gauge("kept", 1, 1), gauge("stale", 1, 1))
        assert await names() == {"kept", "stale"}
        for second in range(2, 7):
            clock.advance(INTERVAL_MS)
            await push(gauge("kept", second, second))
            # stale was set 1,000 x (second - 1) ms ago: shown up to 5,000 ms.
            assert await names() == {"kept", "stale"}, second
        clock.advance(1)  # 5,001 ms since stale's push
        assert await names() == {"kept"}
        own = {
            s.name: s.value for m in server.client_series.collect() for s in m.samples
        }
        assert own["ktc_prometheus_clients_series_expired_total"] == 1
    finally:
        await client.close()
        await server.stop()
