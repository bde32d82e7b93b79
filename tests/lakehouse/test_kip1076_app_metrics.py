"""KIP-1076 application metrics: a kafka-clients 4.4.0 producer registers its own metric
for the subscription (``Producer.registerMetricForSubscription``: a CumulativeSum
``orders-sent`` in group ``app-feeder-metrics``, tagged ``region=eu``, recorded 7 times).
The Java client pushes it as the Sum ``org.apache.kafka.app.feeder.orders.sent``; with a
subscription of ``org.apache.kafka.app.`` it lands, is forwarded to a real OpenTelemetry
Collector, shows on ``/metrics/clients`` with its tag as a label (as on otelcol's
Prometheus exporter), and after ``ktc ingest`` is a row of ``metrics_sum``."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData
from prometheus_client.parser import text_string_to_metric_families

from subscriptions.store import ConfigStore
from tests.exporters.otelcol_process import OtelCollector
from tests.integration.collector_harness import RunningCollector, wait_for
from tests.ktc_process import ktc
from tests.lakehouse.conftest import require_lake_jars
from tests.prometheus.java_producer import java_producer

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]

CLIENT_ID = "feeder"
APP_METRIC = "org.apache.kafka.app.feeder.orders.sent"
# Prometheus's OTLP translation of a monotonic Sum: the name, then _total.
SERIES = "org_apache_kafka_app_feeder_orders_sent_total"
RECORDED = 7


def app_series(url: str) -> list[tuple[dict[str, str], float]]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == SERIES
    ]


def points_of(payload: bytes) -> list[tuple[str, dict[str, str], float]]:
    data = MetricsData.FromString(payload)
    return [
        (
            metric.name,
            {a.key: a.value.string_value for a in point.attributes},
            point.as_double,
        )
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.WhichOneof("data") == "sum"
        for point in metric.sum.data_points
    ]


def test_an_application_metric_lands_forwards_shows_and_is_ingested(
    tmp_path: Path,
) -> None:
    require_lake_jars()
    data = tmp_path / "data"
    ConfigStore(data).alter_subscription(
        "apps", {"metrics": "org.apache.kafka.app.", "interval.ms": "1000"}, []
    )
    with OtelCollector(tmp_path / "otelcol") as otelcol:
        with RunningCollector(
            data,
            **{
                "exporters.otlp": {
                    "endpoint": otelcol.endpoint,
                    "tls": {"insecure": True},
                },
                "prometheus.clients.enable": True,
            },
        ) as collector:
            assert collector.server is not None
            endpoint = f"http://127.0.0.1:{collector.server.http_port}/metrics/clients"
            with java_producer(
                collector.bootstrap, CLIENT_ID, tmp_path, "--app-metric", str(RECORDED)
            ):
                pushed = wait_for(
                    lambda: [
                        point
                        for record in collector.landed()
                        if record.context.client_id == CLIENT_ID
                        for point in points_of(record.payload)
                        if point[0] == APP_METRIC
                    ],
                    timeout_s=60,
                    what="a push carrying the application metric",
                )
                assert {name for name, _, _ in pushed} == {APP_METRIC}
                assert all(
                    attributes == {"region": "eu"} for _, attributes, _ in pushed
                )

                shown = wait_for(
                    lambda: app_series(endpoint), timeout_s=30, what="its series"
                )
                ((labels, value),) = shown
                assert labels["region"] == "eu" and labels["client_id"] == CLIENT_ID
                assert value == RECORDED
                forwarded = wait_for(
                    lambda: app_series(
                        f"http://127.0.0.1:{otelcol.prometheus_port}/metrics"
                    ),
                    timeout_s=30,
                    what="the series on otelcol's Prometheus exporter",
                )
                assert [v for _, v in forwarded] == [RECORDED]
                assert all(lbl["region"] == "eu" for lbl, _ in forwarded)

    ingest = ktc("ingest", "--once", "--data-dir", str(data), "--master", "local[1]")
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    sql = ktc(
        "sql",
        "SELECT metric_name, attributes, value FROM metrics "
        f"WHERE metric_type = 'sum' AND metric_name = '{APP_METRIC}'",
        "--format",
        "json",
        "--engine",
        "duckdb",
        "--data-dir",
        str(data),
    )
    assert sql.returncode == 0, sql.stderr[-3000:]
    rows = [json.loads(line) for line in sql.stdout.splitlines()]
    assert rows, sql.stdout

    from pyiceberg.catalog import load_catalog

    from exporters.lakehouse.session import LakehouseConfig

    config = LakehouseConfig.for_data_dir(data)
    iceberg = load_catalog("lake", **config.pyiceberg_properties())
    sums = [
        row
        for row in iceberg.load_table(("ktc", "metrics_sum"))
        .scan()
        .to_arrow()
        .to_pylist()
        if row["metric_name"] == APP_METRIC
    ]
    assert sums and all(row["client_id"] == CLIENT_ID for row in sums)
    # Delta or cumulative, what the rows add up to is what was recorded.
    values = [row["as_double"] for row in sums]
    assert RECORDED in (max(values), sum(values)), values
