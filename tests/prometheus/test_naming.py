"""OTLP names as Prometheus's otlptranslator names them (MetricNamer with suffixes, no
UTF-8; its own test table, metric_namer_test.go, where it applies), and the exporter's
label normalization."""

from __future__ import annotations

import pytest

from collector.telemetry.prometheus.naming import MetricType, label_name, metric_name

G, C, H, S = (
    MetricType.GAUGE,
    MetricType.COUNTER,
    MetricType.HISTOGRAM,
    MetricType.SUMMARY,
)


@pytest.mark.parametrize(
    ("name", "unit", "metric_type", "expected"),
    [
        # otlptranslator's metric_namer_test.go (UTF8Allowed false, WithMetricSuffixes true)
        ("requests", "", C, "requests_total"),
        ("cpu_usage", "1", G, "cpu_usage_ratio"),
        ("items", "1", C, "items_total"),
        ("response_time", "ms", G, "response_time_milliseconds"),
        ("requests", "1/s", G, "requests_per_second"),
        ("throughput", "By/s", G, "throughput_bytes_per_second"),
        ("custom_metric", "custom_unit", G, "custom_metric_custom_unit"),
        ("custom_metric", "{custom}", G, "custom_metric"),
        ("custom_metric", "By/{custom}", G, "custom_metric_bytes"),
        ("requests_total", "", C, "requests_total"),
        ("cpu_usage_ratio", "1", G, "cpu_usage_ratio"),
        ("response_time_seconds", "s", G, "response_time_seconds"),
        # dots and runs of separators become one underscore; a leading digit gets "_"
        ("org.apache.kafka.producer.record.queue.time.avg", "", G,
         "org_apache_kafka_producer_record_queue_time_avg"),
        ("org.apache.kafka.consumer.fetch.manager.fetch.latency.max", "ms", G,
         "org_apache_kafka_consumer_fetch_manager_fetch_latency_max_milliseconds"),
        ("a..b__c-d", "", G, "a_b_c_d"),
        ("1st.metric", "", G, "_1st_metric"),
        ("total.requests", "", C, "requests_total"),  # "total" moves to the end
        ("http.duration", "s", H, "http_duration_seconds"),
        ("rpc.latency", "ms", S, "rpc_latency_milliseconds"),
        ("ratio.x", "1", C, "ratio_x_total"),  # ratio only for gauges
        ("used", "%", G, "used_percent"),
        ("...", "", G, ""),
    ],
)  # fmt: skip
def test_metric_names(
    name: str, unit: str, metric_type: MetricType, expected: str
) -> None:
    assert metric_name(name, unit, metric_type) == expected


@pytest.mark.parametrize(
    ("attribute", "expected"),
    [
        ("node.id", "node_id"),
        ("topic", "topic"),
        ("client-id", "client_id"),
        ("9lives", "key_9lives"),
        ("_private", "key_private"),
        ("__reserved", "__reserved"),
        ("", ""),
        ("...", ""),
    ],
)
def test_label_names(attribute: str, expected: str) -> None:
    assert label_name(attribute) == expected
