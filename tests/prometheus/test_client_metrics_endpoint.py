"""``/metrics/clients`` with real clients, a real OpenTelemetry Collector and a real
Prometheus server (docs/prometheus.md).

A librdkafka producer and consumer (confluent-kafka) and a Java producer (kafka-clients
4.4.0) push to a collector that also forwards every push to otelcol (its Prometheus exporter
turns the same pushes into series, the reference).  Prometheus 2.42 scrapes both, and the
collector's own /metrics.  What must hold:

* every series ``/metrics/clients`` shows is one otelcol's exporter shows for the same
  pushes, same name, same labels (the identity labels the forwarder sends as resource
  attributes), same value, and the other way round;
* every value is what the landing log says the clients pushed (a gauge: its last value; a
  delta counter: the sum of every delta pushed);
* Prometheus scrapes it (OpenMetrics, negotiated) and holds the same series under both jobs;
* every query of the shipped Grafana dashboards (helm/ktc/files/grafana/) returns data from
  that Prometheus, and every variable has values;
* when the clients close (their terminating push) their series are gone, from the endpoint
  and from Prometheus.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import socket
import struct
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from collector.telemetry.prometheus.naming import MetricType, metric_name
from collector.telemetry.prometheus.points import IDENTITY_LABELS
from exporters.landing import LandingRecord
from subscriptions.store import ConfigStore
from tests.exporters.otelcol_process import OtelCollector
from tests.integration.collector_harness import RunningCollector
from tests.prometheus.java_producer import java_producer
from tests.prometheus.prometheus_server import PrometheusServer
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PUSH_INTERVAL_MS = 2000
# The identity labels otelcol shows too: the forwarder sends them as resource attributes
# of the same name (docs/otlp-forwarder.md); ``listener`` it does not send.
SHARED_IDENTITY = tuple(name for name in IDENTITY_LABELS if name != "listener")

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str, open_metrics: bool = False) -> Series:
    parser = openmetrics_families if open_metrics else text_string_to_metric_families
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in parser(text)
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def comparable(series: Series) -> dict[tuple[str, frozenset[tuple[str, str]]], object]:
    """NaN (Java's gauges before their first sample) compares equal to NaN."""
    return {key: "NaN" if math.isnan(value) else value for key, value in series.items()}


def http_get(url: str, accept: str | None = None) -> str:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.read().decode())


def of_instances(series: Series, instances: set[str]) -> Series:
    return {
        key: value
        for key, value in series.items()
        if dict(key[1]).get("client_instance_id") in instances
    }


def projected(series: Series) -> Series:
    """Labels cut to the data point's attributes and the shared identity labels."""
    drop = {"listener", "job", "instance"} | RESOURCE_LABELS
    return {
        (name, frozenset((k, v) for k, v in labels if k not in drop)): value
        for (name, labels), value in series.items()
    }


# Resource attributes the forwarder adds that /metrics/clients does not show as labels.
RESOURCE_LABELS = frozenset(
    {
        "client_source_address",
        "client_source_port",
        "kafka_principal",
        "kafka_broker_id",
        "kafka_cluster_id",
        "otel_scope_name",
        "otel_scope_version",
        "otel_scope_schema_url",
    }
)


def forwarder_lag(collector: RunningCollector) -> float:
    assert collector.server is not None
    text = http_get(f"http://127.0.0.1:{collector.server.http_port}/metrics")
    for family in text_string_to_metric_families(text):
        if family.name == "ktc_forwarder_lag_records":
            return sum(sample.value for sample in family.samples)
    raise AssertionError("ktc_forwarder_lag_records is not exposed")


def labels_of(attributes: Iterable[Any]) -> dict[str, str]:
    return {
        a.key.replace(".", "_"): a.value.string_value or str(a.value.int_value)
        for a in attributes
    }


def expected_from_landing(
    records: list[LandingRecord],
) -> dict[tuple[str, str, frozenset[tuple[str, str]]], float]:
    """(instance, Prometheus name, attribute labels) -> the value the pushes add up to: a
    gauge its last value, a monotonic delta sum every delta added, a cumulative sum its
    last value.  Computed from the landed payloads, independently of the fold."""
    expected: dict[tuple[str, str, frozenset[tuple[str, str]]], float] = {}
    for record in records:
        if record.context.terminating:
            continue
        instance = record.context.client_instance_id
        data = MetricsData.FromString(record.payload)
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    kind = metric.WhichOneof("data")
                    if kind == "gauge":
                        points, metric_type, delta = (
                            metric.gauge.data_points,
                            MetricType.GAUGE,
                            False,
                        )
                    elif kind == "sum":
                        monotonic = metric.sum.is_monotonic
                        delta = metric.sum.aggregation_temporality == 1
                        if delta and not monotonic:
                            continue
                        metric_type = (
                            MetricType.COUNTER if monotonic else MetricType.GAUGE
                        )
                        points = metric.sum.data_points
                    else:
                        raise AssertionError(f"real clients push no {kind}")
                    name = metric_name(metric.name, metric.unit, metric_type)
                    for point in points:
                        # The resource's attributes (librdkafka's consumer sends its
                        # group.id there), then the point's, which win.
                        attributes = frozenset(
                            {
                                **labels_of(resource.resource.attributes),
                                **labels_of(point.attributes),
                            }.items()
                        )
                        value = (
                            point.as_double
                            if point.WhichOneof("value") == "as_double"
                            else float(point.as_int)
                        )
                        key = (instance, name, attributes)
                        expected[key] = (
                            expected.get(key, 0.0) + value if delta else value
                        )
    return expected


CLIENT_IDS = ("orders-librdkafka", "orders-consumer", "orders-java")
GRAFANA = ROOT / "helm" / "ktc" / "files" / "grafana"
# The Kafka Streams dashboard's queries need a Streams application: they are run by
# tests/gateway/test_streams_alerts.py against a real one.
STREAMS_DASHBOARD = GRAFANA / "ktc-streams.json"
DASHBOARDS = sorted(set(GRAFANA.glob("*.json")) - {STREAMS_DASHBOARD})


@dataclass
class Fleet:
    collector: RunningCollector
    otelcol: OtelCollector
    prometheus: PrometheusServer
    producer: Producer
    consumer: Consumer
    instances: set[str]
    stop_java: Iterator[None]

    @property
    def endpoint(self) -> str:
        assert self.collector.server is not None
        return f"http://127.0.0.1:{self.collector.server.http_port}/metrics/clients"

    def poll(self) -> None:
        """librdkafka's callbacks (its telemetry runs on its own threads)."""
        self.producer.poll(0)
        self.consumer.poll(0)

    def close_clients(self) -> None:
        self.producer.flush(5)
        self.producer.close()  # the terminating push
        self.consumer.close()
        next(self.stop_java, None)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    tmp_path = tmp_path_factory.mktemp("fleet")
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "everything", {"metrics": "*", "interval.ms": str(PUSH_INTERVAL_MS)}, []
    )
    with OtelCollector(tmp_path / "otelcol") as otelcol:
        otlp = {"endpoint": otelcol.endpoint, "tls": {"insecure": True}}
        with RunningCollector(
            data_dir,
            **{"exporters.otlp": otlp, "prometheus.clients.enable": True},
        ) as collector:
            assert collector.server is not None
            http = f"127.0.0.1:{collector.server.http_port}"
            targets = {
                "ktc": (http, "/metrics/clients"),
                "ktc-self": (http, "/metrics"),
                "otelcol": (f"127.0.0.1:{otelcol.prometheus_port}", "/metrics"),
            }
            with PrometheusServer(tmp_path / "prometheus", targets) as prometheus:
                common = {
                    "bootstrap.servers": collector.bootstrap,
                    "enable.metrics.push": True,
                    "log_level": 0,
                }
                producer = Producer({**common, "client.id": CLIENT_IDS[0]})
                consumer = Consumer(
                    {**common, "client.id": CLIENT_IDS[1], "group.id": "orders"}
                )
                consumer.subscribe(["orders"])
                stop_java = _generator_of(
                    java_producer(collector.bootstrap, CLIENT_IDS[2], tmp_path)
                )
                next(stop_java)  # the JVM runs until the generator is advanced again
                # A client from before Kafka 0.10.1: ListOffsets v0, which Kafka 4 removed
                # (the inventory dashboard's removed-versions panel).
                send_list_offsets_v0(collector.port, "legacy-lister")
                fleet = Fleet(
                    collector, otelcol, prometheus, producer, consumer, set(), stop_java
                )

                def pushed_three_times() -> bool:
                    fleet.poll()
                    counts: dict[str, int] = {}
                    for record in collector.landed():
                        client = record.context.client_id or ""
                        counts[client] = counts.get(client, 0) + 1
                    return min(counts.get(c, 0) for c in CLIENT_IDS) >= 3

                try:
                    eventually_sync(
                        pushed_three_times,
                        timeout_s=90,
                        what="three pushes from each client",
                    )
                    fleet.instances = {
                        r.context.client_instance_id for r in collector.landed()
                    }
                    assert len(fleet.instances) == len(CLIENT_IDS)
                    yield fleet
                finally:
                    with contextlib.suppress(Exception):
                        fleet.close_clients()


def send_list_offsets_v0(port: int, client_id: str) -> None:
    """ListOffsets v0 (request header v1), hand-encoded over a socket; the collector does
    not serve ListOffsets and closes the connection, after its inventory counted it."""
    encoded = client_id.encode()
    header = struct.pack(">hhih", 2, 0, 1, len(encoded)) + encoded
    body = struct.pack(">ii", -1, 0)  # replica_id -1, no topics
    frame = header + body
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        with contextlib.suppress(OSError):
            sock.recv(64)  # the close


def _generator_of(manager: object) -> Iterator[None]:
    """The context manager entered now; advancing the iterator exits it."""
    with manager:  # type: ignore[attr-defined]
        yield


def consistent_snapshot(
    fleet: Fleet,
) -> tuple[Series, Series, Series, list[LandingRecord]] | None:
    """Both pages at a moment no push is in flight: the landed count is the same before and
    after, and otelcol has all of it."""
    collector = fleet.collector
    fleet.poll()
    before = len(collector.landed())
    if forwarder_lag(collector) != 0:
        return None
    ktc_text = parse(http_get(fleet.endpoint))
    ktc_open = parse(
        http_get(fleet.endpoint, "application/openmetrics-text;version=1.0.0"),
        open_metrics=True,
    )
    reference = parse(
        http_get(f"http://127.0.0.1:{fleet.otelcol.prometheus_port}/metrics")
    )
    landed = collector.landed()
    if len(landed) != before or forwarder_lag(collector) != 0:
        return None
    return ktc_text, ktc_open, reference, landed


def test_series_match_otelcol_and_the_landing_log(fleet: Fleet) -> None:
    snapshots: list[tuple[Series, Series, Series, list[LandingRecord]]] = []

    def snapshot_taken() -> bool:
        taken = consistent_snapshot(fleet)
        if taken is not None:
            snapshots.append(taken)
        return taken is not None

    eventually_sync(snapshot_taken, timeout_s=60, what="a snapshot between pushes")
    ktc, ktc_open, reference, landed = snapshots[0]
    ours = of_instances(ktc, fleet.instances)
    assert comparable(ktc_open) == comparable(ktc)  # the same series in both formats
    assert len(ours) >= 50
    for (_, labels), _value in ours.items():
        names = dict(labels)
        assert {"client_id", "client_instance_id", "client_software_name",
                "client_software_version", "principal", "listener"} <= set(names)  # fmt: skip
        assert names["listener"] == "PLAINTEXT"
        assert names["principal"] == "User:ANONYMOUS"
        assert "upstream_cluster_id" not in names  # serve mode
    software = {dict(labels)["client_software_name"] for (_, labels) in ours}
    assert software == {"confluent-kafka-python", "apache-kafka-java"}

    # The same series and values as otelcol's Prometheus exporter.
    theirs = projected(of_instances(reference, fleet.instances))
    mine = projected(ours)
    assert set(mine) == set(theirs), (
        f"only here: {sorted(set(mine) - set(theirs))[:5]}\n"
        f"only on otelcol: {sorted(set(theirs) - set(mine))[:5]}"
    )
    for key, value in mine.items():
        assert math.isclose(value, theirs[key], rel_tol=1e-9, abs_tol=1e-9) or (
            math.isnan(value) and math.isnan(theirs[key])
        ), key

    # The values the landing log says were pushed.
    expected = expected_from_landing(
        [r for r in landed if r.context.client_instance_id in fleet.instances]
    )
    for (name, labels), value in ours.items():
        attributes = frozenset((k, v) for k, v in labels if k not in IDENTITY_LABELS)
        pushed = (dict(labels)["client_instance_id"], name, attributes)
        assert pushed in expected, pushed
        assert math.isclose(value, expected[pushed], rel_tol=1e-9, abs_tol=1e-9) or (
            math.isnan(value) and math.isnan(expected[pushed])
        ), pushed
    per_client: dict[str, int] = {}
    for _, labels in ours:
        client = dict(labels)["client_id"]
        per_client[client] = per_client.get(client, 0) + 1
    print(f"series per instance: {per_client}")


def held(fleet: Fleet, job: str) -> set[tuple[str, frozenset[tuple[str, str]]]]:
    selector = "|".join(sorted(fleet.instances))
    ignored = RESOURCE_LABELS | {"__name__", "job", "instance", "listener"}
    return {
        (
            r["metric"]["__name__"],
            frozenset((k, v) for k, v in r["metric"].items() if k not in ignored),
        )
        for r in fleet.prometheus.query(
            f'{{job="{job}",client_instance_id=~"{selector}"}}'
        )
    }


def test_prometheus_holds_the_same_series_under_both_jobs(fleet: Fleet) -> None:
    def same() -> bool:
        fleet.poll()
        health = fleet.prometheus.targets_healthy()
        assert health == {"ktc": "up", "ktc-self": "up", "otelcol": "up"}, health
        ours, theirs = held(fleet, "ktc"), held(fleet, "otelcol")
        return len(ours) >= 50 and ours == theirs

    eventually_sync(same, timeout_s=30, what="the same series under both jobs")


def dashboard_queries(
    dashboards: Iterable[Path] = DASHBOARDS,
) -> list[tuple[str, str, str]]:
    """(dashboard, panel title, expression) of every target of every panel."""
    queries = []
    for path in dashboards:
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel["targets"]:
                queries.append((path.stem, panel["title"], target["expr"]))
    return queries


def with_variables_all(expr: str) -> str:
    """A Grafana variable set to "All" (its allValue ``.*``)."""
    return re.sub(r"\$(\w+)", ".*", expr)


@pytest.mark.parametrize(("dashboard", "title", "expr"), dashboard_queries())
def test_every_dashboard_query_returns_data(
    fleet: Fleet, dashboard: str, title: str, expr: str
) -> None:
    def answered() -> object:
        fleet.poll()
        return fleet.prometheus.query(with_variables_all(expr))

    eventually_sync(
        answered,
        timeout_s=30,
        what=f"{dashboard} / {title}: data for {expr}",
    )


def variable_queries(path: Path) -> list[tuple[str, str, str]]:
    """(variable, selector with the variables at "All", label) of a dashboard's query
    variables (``label_values(selector, label)``)."""
    found = []
    for variable in json.loads(path.read_text())["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.*), (\w+)\)", variable["query"]["query"])
        assert match, variable
        found.append(
            (variable["name"], with_variables_all(match.group(1)), match.group(2))
        )
    return found


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_dashboard_variable_has_values(fleet: Fleet, path: Path) -> None:
    for name, selector, label in variable_queries(path):
        values = fleet.prometheus.api(
            f"/api/v1/label/{label}/values", **{"match[]": selector}
        )
        assert values, (path.stem, name)


def test_series_go_with_their_clients(fleet: Fleet) -> None:
    selector = "|".join(sorted(fleet.instances))
    fleet.close_clients()

    def gone() -> bool:
        return not of_instances(parse(http_get(fleet.endpoint)), fleet.instances)

    eventually_sync(gone, timeout_s=30, what="the closed clients' series to go")
    eventually_sync(
        lambda: (
            not fleet.prometheus.query(
                f'{{job="ktc",client_instance_id=~"{selector}"}}'
            )
        ),
        timeout_s=30,
        what="prometheus to mark them stale",
    )
