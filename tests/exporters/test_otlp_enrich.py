"""Enrichment: the ten client labels land on every resource, the two upstream ones when the
context has them (gateway mode); nothing else changes."""

from __future__ import annotations

from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    MetricsData,
)

from exporters.otlp.enrich import (
    RESOURCE_ATTRIBUTES,
    UPSTREAM_RESOURCE_ATTRIBUTES,
    count_data_points,
    enrich,
)
from tests.exporters.otlp_receiver import (
    resource_attributes,
    sample_context,
    sample_metrics_data,
)

EXPECTED = {
    "client_instance_id": "AAAAAAAAAAAAAAAAAAAAAQ",
    "client_id": "producer-1",
    "client_software_name": "confluent-kafka-python",
    "client_software_version": "2.16.1-rdkafka-2.16.0",
    "client_source_address": "127.0.0.1",
    "client_source_port": "50123",
    "principal": "User:ANONYMOUS",
    "kafka.principal": "User:ANONYMOUS",
    "kafka.broker.id": "1",
    "kafka.cluster.id": "ktc-cluster-0001",
}


def test_the_key_set_is_the_confluent_reporters() -> None:
    assert [key for key, _ in RESOURCE_ATTRIBUTES] == list(EXPECTED)


def test_an_empty_resource_gets_exactly_the_client_labels_as_strings() -> None:
    metrics = sample_metrics_data()
    enrich(metrics, sample_context())
    (rm,) = metrics.resource_metrics
    assert resource_attributes(rm) == EXPECTED
    assert all(
        kv.value.WhichOneof("value") == "string_value" for kv in rm.resource.attributes
    )


def test_a_gateway_push_also_gets_the_upstream_cluster_and_broker() -> None:
    assert [key for key, _ in UPSTREAM_RESOURCE_ATTRIBUTES] == [
        "kafka.upstream.cluster.id",
        "kafka.upstream.broker.id",
    ]
    metrics = sample_metrics_data()
    enrich(
        metrics,
        sample_context(
            upstream_cluster_id="Yw3dJ2xXQ6qRbtJmPMOxZw", upstream_node_id=0
        ),
    )
    (rm,) = metrics.resource_metrics
    assert resource_attributes(rm) == EXPECTED | {
        "kafka.upstream.cluster.id": "Yw3dJ2xXQ6qRbtJmPMOxZw",
        "kafka.upstream.broker.id": "0",
    }
    keys = [kv.key for kv in rm.resource.attributes]
    assert keys[-2:] == ["kafka.upstream.cluster.id", "kafka.upstream.broker.id"]


def test_an_upstream_attribute_without_a_value_is_omitted() -> None:
    """The gateway's bootstrap listener stands for no broker: cluster id only."""
    metrics = sample_metrics_data()
    enrich(metrics, sample_context(upstream_cluster_id="Yw3dJ2xXQ6qRbtJmPMOxZw"))
    attributes = resource_attributes(metrics.resource_metrics[0])
    assert attributes["kafka.upstream.cluster.id"] == "Yw3dJ2xXQ6qRbtJmPMOxZw"
    assert "kafka.upstream.broker.id" not in attributes


def test_attributes_the_client_set_are_not_overwritten() -> None:
    metrics = sample_metrics_data(
        resource_attributes={"client_id": "from-client", "service.name": "svc"}
    )
    enrich(metrics, sample_context())
    attributes = resource_attributes(metrics.resource_metrics[0])
    assert attributes["client_id"] == "from-client"
    assert attributes["service.name"] == "svc"
    assert attributes["client_instance_id"] == EXPECTED["client_instance_id"]
    keys = [kv.key for kv in metrics.resource_metrics[0].resource.attributes]
    assert len(keys) == len(set(keys)) == len(EXPECTED) + 1  # no duplicate keys


def test_every_resource_of_a_push_is_enriched() -> None:
    metrics = sample_metrics_data()
    metrics.resource_metrics.append(sample_metrics_data().resource_metrics[0])
    enrich(metrics, sample_context(node_id=7))
    assert [
        resource_attributes(rm)["kafka.broker.id"] for rm in metrics.resource_metrics
    ] == ["7", "7"]


def test_a_null_client_id_becomes_the_empty_string() -> None:
    metrics = sample_metrics_data()
    enrich(metrics, sample_context(client_id=None))
    assert resource_attributes(metrics.resource_metrics[0])["client_id"] == ""


def test_points_temporality_and_monotonicity_are_untouched() -> None:
    original = sample_metrics_data(gauges=3, points_per_metric=4)
    enriched = MetricsData()
    enriched.CopyFrom(original)
    enrich(enriched, sample_context())
    for rm in (original, enriched):
        sum_metric = rm.resource_metrics[0].scope_metrics[0].metrics[-1]
        assert sum_metric.sum.is_monotonic
        assert sum_metric.sum.aggregation_temporality == (
            AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
        )
    assert (
        enriched.resource_metrics[0].scope_metrics
        == original.resource_metrics[0].scope_metrics
    )
    enriched.resource_metrics[0].resource.Clear()
    assert enriched == original


def test_points_are_counted_across_metric_kinds() -> None:
    metrics = sample_metrics_data(gauges=3, points_per_metric=4)
    assert count_data_points(metrics.resource_metrics) == 3 * 4 + 1
