"""``/metrics/clients`` with real clients, a real OpenTelemetry Collector and a real
Prometheus server (docs/prometheus.md).

A librdkafka producer (confluent-kafka) and a Java producer (kafka-clients 4.4.0) push to a
collector that also forwards every push to otelcol (its Prometheus exporter turns the same
pushes into series, the reference).  Prometheus 2.42 scrapes both.  What must hold:

* every series ``/metrics/clients`` shows is one otelcol's exporter shows for the same
  pushes, same name, same labels (the identity labels the forwarder sends as resource
  attributes), same value, and the other way round;
* every value is what the landing log says the clients pushed (a gauge: its last value; a
  delta counter: the sum of every delta pushed);
* Prometheus scrapes it (OpenMetrics, negotiated) and holds the same series under both jobs;
* when the clients close (their terminating push) their series are gone, from the endpoint
  and from Prometheus.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from collector_harness import RunningCollector
from confluent_kafka import Producer
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData
from otelcol_process import OtelCollector
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_server import PrometheusServer
from waiting import eventually_sync

from collector.telemetry.prometheus.naming import MetricType, metric_name
from collector.telemetry.prometheus.points import IDENTITY_LABELS
from exporters.landing import LandingRecord
from subscriptions.store import ConfigStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gateway.golden import kafka_classpath

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HERE = Path(__file__).resolve().parent
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


def projected(series: Series, keep: tuple[str, ...] | None = None) -> Series:
    """Labels cut to the data point's attributes and the shared identity labels."""
    drop = {"listener", "job", "instance"}
    out: Series = {}
    for (name, labels), value in series.items():
        kept = frozenset(
            (k, v)
            for k, v in labels
            if k not in drop and (keep is None or k in keep or k not in RESOURCE_LABELS)
        )
        out[(name, kept)] = value
    return out


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
                        attributes = frozenset(
                            (
                                a.key.replace(".", "_"),
                                a.value.string_value or str(a.value.int_value),
                            )
                            for a in point.attributes
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


@contextmanager
def java_producer(
    bootstrap: str, client_id: str, work: Path
) -> Iterator[subprocess.Popen[str]]:
    classpath = kafka_classpath()
    if classpath is None:
        reason = "needs the kafka-clients 4.4.0 jars (make kafka-libs)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    process = subprocess.Popen(
        [
            "java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work}", "-cp", classpath,
            str(HERE / "java" / "TelemetryProducer.java"),
            "--bootstrap", bootstrap, "--client-id", client_id,
        ],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield process
    finally:
        try:  # closing its stdin closes the producer: the terminating push
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        assert "KTC error" not in out, f"{out}\n{err[-3000:]}"


def test_real_clients_series_match_otelcol_the_landing_log_and_prometheus(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "everything", {"metrics": "*", "interval.ms": str(PUSH_INTERVAL_MS)}, []
    )
    with OtelCollector(tmp_path / "otelcol") as otelcol:
        otlp = {"endpoint": otelcol.endpoint, "tls": {"insecure": True}}
        with RunningCollector(data_dir, **{"exporters.otlp": otlp}) as collector:
            assert collector.server is not None
            http_port = collector.server.http_port
            endpoint = f"http://127.0.0.1:{http_port}/metrics/clients"
            targets = {
                "ktc": (f"127.0.0.1:{http_port}", "/metrics/clients"),
                "otelcol": (f"127.0.0.1:{otelcol.prometheus_port}", "/metrics"),
            }
            with PrometheusServer(tmp_path / "prometheus", targets) as prometheus:
                librdkafka = Producer(
                    {
                        "bootstrap.servers": collector.bootstrap,
                        "client.id": "orders-librdkafka",
                        "enable.metrics.push": True,
                        "log_level": 3,
                    }
                )
                with java_producer(collector.bootstrap, "orders-java", tmp_path):

                    def pushed_three_times() -> set[str] | None:
                        librdkafka.poll(0)
                        counts: dict[str, int] = {}
                        for record in collector.landed():
                            client = record.context.client_id or ""
                            counts[client] = counts.get(client, 0) + 1
                        if (
                            min(
                                counts.get(c, 0)
                                for c in ("orders-librdkafka", "orders-java")
                            )
                            < 3
                        ):
                            return None
                        return {
                            r.context.client_instance_id for r in collector.landed()
                        }

                    instances = eventually_sync(
                        pushed_three_times,
                        timeout_s=90,
                        what="three pushes from each client",
                    )
                    assert len(instances) == 2

                    def consistent_snapshot() -> (
                        tuple[Series, Series, Series, list[LandingRecord]] | None
                    ):
                        """Both pages at a moment no push is in flight: the landed count
                        is the same before and after, and otelcol has all of it."""
                        librdkafka.poll(0)
                        before = len(collector.landed())
                        if forwarder_lag(collector) != 0:
                            return None
                        ktc_text = parse(http_get(endpoint))
                        ktc_open = parse(
                            http_get(
                                endpoint, "application/openmetrics-text;version=1.0.0"
                            ),
                            open_metrics=True,
                        )
                        reference = parse(
                            http_get(
                                f"http://127.0.0.1:{otelcol.prometheus_port}/metrics"
                            )
                        )
                        landed = collector.landed()
                        if len(landed) != before or forwarder_lag(collector) != 0:
                            return None
                        return ktc_text, ktc_open, reference, landed

                    ktc, ktc_open, reference, landed = eventually_sync(
                        consistent_snapshot,
                        timeout_s=60,
                        what="a snapshot between pushes",
                    )
                    ours = of_instances(ktc, instances)
                    assert ktc_open == ktc  # the two formats carry the same series
                    assert len(ours) >= 20
                    # Every series carries the identity labels (serve mode: no upstream).
                    for (_, labels), _value in ours.items():
                        names = dict(labels)
                        assert {"client_id", "client_instance_id", "client_software_name",
                                "client_software_version", "principal", "listener"} <= set(names)  # fmt: skip
                        assert names["listener"] == "PLAINTEXT"
                        assert names["principal"] == "User:ANONYMOUS"
                    software = {
                        dict(labels)["client_software_name"] for (_, labels) in ours
                    }
                    assert software == {"confluent-kafka-python", "apache-kafka-java"}

                    # 1. The same series and values as otelcol's Prometheus exporter.
                    theirs = projected(of_instances(reference, instances))
                    mine = projected(ours)
                    assert set(mine) == set(theirs), (
                        f"only here: {sorted(set(mine) - set(theirs))[:5]}\n"
                        f"only on otelcol: {sorted(set(theirs) - set(mine))[:5]}"
                    )
                    for key, value in mine.items():
                        assert math.isclose(
                            value, theirs[key], rel_tol=1e-9, abs_tol=1e-9
                        ), key

                    # 2. The values the landing log says were pushed.
                    expected = expected_from_landing(
                        [r for r in landed if r.context.client_instance_id in instances]
                    )
                    checked = 0
                    for (name, labels), value in ours.items():
                        attributes = frozenset(
                            (k, v) for k, v in labels if k not in IDENTITY_LABELS
                        )
                        key = (dict(labels)["client_instance_id"], name, attributes)
                        assert key in expected, key
                        assert math.isclose(
                            value, expected[key], rel_tol=1e-9, abs_tol=1e-9
                        ), key
                        checked += 1
                    assert checked == len(ours)

                    # 3. Prometheus scraped both and holds the same series under each job.
                    selector = "|".join(sorted(instances))

                    def same_in_prometheus() -> bool:
                        assert prometheus.targets_healthy() == {
                            "ktc": "up",
                            "otelcol": "up",
                        }
                        held = {
                            job: {
                                (
                                    r["metric"]["__name__"],
                                    frozenset(
                                        (k, v)
                                        for k, v in r["metric"].items()
                                        if k
                                        not in RESOURCE_LABELS
                                        | {"__name__", "job", "instance", "listener"}
                                    ),
                                )
                                for r in prometheus.query(
                                    f'{{job="{job}",client_instance_id=~"{selector}"}}'
                                )
                            }
                            for job in ("ktc", "otelcol")
                        }
                        return (
                            bool(held["ktc"])
                            and held["ktc"] == held["otelcol"]
                            and (
                                {name for name, _ in held["ktc"]}
                                == {name for name, _ in mine}
                            )
                        )

                    eventually_sync(
                        same_in_prometheus,
                        timeout_s=30,
                        what="the same series under both jobs",
                    )
                librdkafka.flush(5)
                librdkafka.close()  # its terminating push

                # 4. Gone with their clients: from the endpoint, then from Prometheus.
                def gone() -> bool:
                    return not of_instances(parse(http_get(endpoint)), instances)

                eventually_sync(
                    gone, timeout_s=30, what="the closed clients' series to go"
                )
                eventually_sync(
                    lambda: (
                        not prometheus.query(
                            f'{{job="ktc",client_instance_id=~"{selector}"}}'
                        )
                    ),
                    timeout_s=30,
                    what="prometheus to mark them stale",
                )
