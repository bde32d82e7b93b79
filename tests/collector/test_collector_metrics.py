"""The client-metrics series: aggregate by default, per instance only when asked; request
and connection counts beside them on the server's registry."""

from __future__ import annotations

from prometheus_client import generate_latest

from collector.pipeline.request_metrics import RequestMetrics
from collector.telemetry.stats import ClientMetricsStats


def scrape(metrics: ClientMetricsStats | RequestMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_aggregate_series_by_default() -> None:
    metrics = ClientMetricsStats()
    requests = RequestMetrics(
        metrics.registry, api_names=lambda k: {72: "PUSH_TELEMETRY"}.get(k, str(k))
    )
    metrics.instance_count = lambda: 3
    metrics.record_plugin_export("AAAAAAAAAAAAAAAAAAAAAA", 0.0002)
    metrics.record_plugin_export("BBBBBBBBBBBBBBBBBBBBBB", 0.002)
    metrics.record_plugin_error("AAAAAAAAAAAAAAAAAAAAAA")
    metrics.record_throttle("AAAAAAAAAAAAAAAAAAAAAA")
    metrics.record_unknown_subscription()
    requests.observe(72, 0)
    requests.observe(72, 0)
    requests.observe(72, 89)
    requests.connection_opened("PLAINTEXT")
    text = scrape(metrics)
    assert "kafka_server_client_metrics_instance_count 3.0" in text
    assert "kafka_server_client_metrics_plugin_export_total 2.0" in text
    assert "kafka_server_client_metrics_plugin_error_total 1.0" in text
    assert "kafka_server_client_metrics_throttle_total 1.0" in text
    assert "kafka_server_client_metrics_unknown_subscription_request_total 1.0" in text
    assert (
        'kafka_server_client_metrics_plugin_export_time_seconds_bucket{le="0.00025"} 1.0'
        in text
    )
    assert (
        'kafka_server_client_metrics_plugin_export_time_seconds_bucket{le="+Inf"} 2.0'
        in text
    )
    assert "kafka_server_client_metrics_plugin_export_time_seconds_count 2.0" in text
    assert 'ktc_requests_total{api="PUSH_TELEMETRY",error_code="0"} 2.0' in text
    assert 'ktc_requests_total{api="PUSH_TELEMETRY",error_code="89"} 1.0' in text
    assert 'ktc_connections{listener="PLAINTEXT"} 1.0' in text
    assert "client_instance_id" not in text


def test_per_instance_labels_are_opt_in_and_removed_with_the_instance() -> None:
    metrics = ClientMetricsStats(instance_labels=True)
    metrics.record_plugin_export("AAAAAAAAAAAAAAAAAAAAAA", 0.001)
    metrics.record_throttle("BBBBBBBBBBBBBBBBBBBBBB")
    text = scrape(metrics)
    assert (
        'kafka_server_client_metrics_plugin_export_total{client_instance_id="AAAAAAAAAAAAAAAAAAAAAA"} 1.0'
        in text
    )
    assert (
        'kafka_server_client_metrics_throttle_total{client_instance_id="BBBBBBBBBBBBBBBBBBBBBB"} 1.0'
        in text
    )
    metrics.instance_removed("AAAAAAAAAAAAAAAAAAAAAA")
    assert "AAAAAAAAAAAAAAAAAAAAAA" not in scrape(metrics)


def test_each_server_has_its_own_registry() -> None:
    first, second = ClientMetricsStats(), ClientMetricsStats()
    first.record_unknown_subscription()
    assert "unknown_subscription_request_total 0.0" in scrape(second)
