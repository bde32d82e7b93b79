"""A real librdkafka client -> the collector -> the forwarder -> a real OpenTelemetry
Collector (built from tests/exporters/otelcol/builder-config.yaml by `make otelcol`).

What the receiving side shows is read from the Collector's own Prometheus exporter and its
debug exporter's log, never from ktc: every enrichment attribute that docs/otlp-forwarder.md
lists arrives as a label, and through a 20 s outage of the Collector nothing is lost.
"""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from exporters.otlp import count_data_points
from subscriptions.store import ConfigStore
from tests.exporters.otelcol_process import OtelCollector
from tests.integration.collector_harness import RunningCollector
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "otlp-forwarder.md"

# How long the receiver stays away (the operator scenario: a 20 s outage).
OUTAGE_S = 20.0


def documented_attributes() -> list[str]:
    """The attribute names in the docs' "What each push carries" table."""
    text = DOCS.read_text()
    section = text.split("## What each push carries", 1)[1].split("\n## ", 1)[0]
    names: list[str] = []
    for line in section.splitlines():
        if line.startswith("| `"):
            names += re.findall(r"`([a-z_.]+)`", line.split("|")[1])
    return names


def prometheus_label(attribute: str) -> str:
    """The Prometheus exporter's label for a resource attribute (dots become _)."""
    return attribute.replace(".", "_")


def client_series(otelcol: OtelCollector, instance_id: str) -> list[Sample]:
    return [
        sample
        for samples in otelcol.scrape().values()
        for sample in samples
        if sample.labels.get("client_instance_id") == instance_id
    ]


def ktc_lag(collector: RunningCollector) -> float:
    assert collector.server is not None
    url = f"http://127.0.0.1:{collector.server.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "ktc_forwarder_lag_records":
            return sum(sample.value for sample in family.samples)
    raise AssertionError("ktc_forwarder_lag_records is not exposed")


def points_landed(collector: RunningCollector) -> int:
    return sum(
        count_data_points(MetricsData.FromString(r.payload).resource_metrics)
        for r in collector.landed()
    )


def test_pushes_reach_a_real_otelcol_enriched_and_survive_its_outage(
    tmp_path: Path,
) -> None:
    attributes = documented_attributes()
    gateway_only = [a for a in attributes if a.startswith("kafka.upstream.")]
    assert len(attributes) >= 10 and len(gateway_only) == 2  # the table was read
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )
    with OtelCollector(tmp_path / "otelcol") as otelcol:
        otlp = {
            "endpoint": otelcol.endpoint,
            "tls": {"insecure": True},
            "retry_on_failure": {
                "initial_interval": "100ms",
                "max_interval": "1s",
                "max_elapsed_time": "5s",
            },
        }
        with RunningCollector(data_dir, **{"exporters.otlp": otlp}) as collector:
            server = collector.server
            assert server is not None
            client = Producer(
                {
                    "bootstrap.servers": collector.bootstrap,
                    "client.id": "orders-1",
                    "enable.metrics.push": True,
                    "log_level": 3,
                }
            )
            try:
                eventually_sync(
                    lambda: collector.landed(), timeout_s=20, what="a first push"
                )
                instance_id = collector.landed()[0].context.client_instance_id
                eventually_sync(
                    lambda: client_series(otelcol, instance_id),
                    timeout_s=20,
                    what="the client's series on otelcol's Prometheus exporter",
                )
                labels = client_series(otelcol, instance_id)[0].labels
                context = collector.landed()[0].context
                expected = {
                    "client_instance_id": instance_id,
                    "client_id": "orders-1",
                    "client_software_name": "confluent-kafka-python",
                    "client_software_version": context.client_software_version,
                    "client_source_address": "127.0.0.1",
                    "client_source_port": str(context.client_source_port),
                    "principal": "User:ANONYMOUS",
                    "kafka.principal": "User:ANONYMOUS",
                    "kafka.broker.id": str(collector.config.node_id),
                    "kafka.cluster.id": server.cluster_id,
                }
                assert sorted(expected) == sorted(
                    a for a in attributes if a not in gateway_only
                )
                for attribute, value in expected.items():
                    assert labels.get(prometheus_label(attribute)) == value, attribute
                for attribute in gateway_only:  # standalone: added only by a gateway
                    assert prometheus_label(attribute) not in labels

                # The receiver goes away for OUTAGE_S while the client keeps pushing.
                otelcol.stop()
                outage_began = time.monotonic()
                landed_at_stop = len(collector.landed())
                lags: list[tuple[float, float]] = []

                def outage_over() -> bool:
                    elapsed = time.monotonic() - outage_began
                    lags.append((elapsed, ktc_lag(collector)))
                    return elapsed >= OUTAGE_S

                eventually_sync(outage_over, timeout_s=OUTAGE_S + 10, what="the outage")
                landed_during = len(collector.landed()) - landed_at_stop
                assert landed_during >= 10  # a push every 500 ms kept landing
                # After the last acknowledged batch is committed (within 1 s), nothing is
                # delivered: the lag counts every push since.
                settled = [lag for elapsed, lag in lags if elapsed >= 2.0]
                assert settled == sorted(settled)
                assert settled[-1] - settled[0] >= 10
                assert lags[-1][1] >= landed_during - 2  # at most the one in flight

                otelcol.start()
                eventually_sync(
                    lambda: client_series(otelcol, instance_id),
                    timeout_s=20,
                    what="the client's series after otelcol came back",
                )
            finally:
                client.close()  # sends the terminating push
            eventually_sync(
                lambda: [r for r in collector.landed() if r.context.terminating],
                timeout_s=10,
                what="the terminating push to land",
            )
            eventually_sync(
                lambda: ktc_lag(collector) == 0, timeout_s=20, what="the lag to be 0"
            )
            landed_points = points_landed(collector)
            # Nothing lost: every data point landed reached the receiver (debug exporter).
            eventually_sync(
                lambda: otelcol.data_points_logged() >= landed_points,
                timeout_s=10,
                what=f"otelcol to log {landed_points} data points",
            )
            assert otelcol.data_points_logged() == landed_points  # and none twice
