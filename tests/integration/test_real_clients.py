"""Real librdkafka clients (confluent-kafka) against a running collector.

The clients' timings are real: every wait polls the landing log with a deadline.
Subscriptions use 500 ms intervals so each test takes a few seconds.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.landing import LandingRecord
from subscriptions.store import ConfigStore
from tests.integration.collector_harness import RunningCollector, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

INTERVAL_MS = 500


def metric_names(record: LandingRecord) -> set[str]:
    data = MetricsData.FromString(record.payload)
    return {
        metric.name
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


def from_client(collector: RunningCollector, client_id: str) -> list[LandingRecord]:
    return [r for r in collector.landed() if r.context.client_id == client_id]


def subscribe(
    data_dir: Path,
    name: str,
    metrics: str,
    match: str = "",
    interval_ms: int = INTERVAL_MS,
) -> None:
    configs = {"metrics": metrics, "interval.ms": str(interval_ms)}
    if match:
        configs["match"] = match
    ConfigStore(data_dir).alter_subscription(name, configs, [])


def producer(collector: RunningCollector, client_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": collector.bootstrap,
            "client.id": client_id,
            "enable.metrics.push": True,
            "debug": "telemetry",
            "log_level": 3,  # keep pytest output quiet; debug still drives the telemetry code
        }
    )


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_producer_handshake_periodic_pushes_and_terminating_push(
    data_dir: Path,
) -> None:
    subscribe(
        data_dir, "producers", "org.apache.kafka.producer.", match="client_id=orders-.*"
    )
    with RunningCollector(data_dir) as collector:
        client = producer(collector, "orders-1")
        try:
            records = wait_for(
                lambda: (
                    len(from_client(collector, "orders-1")) >= 3
                    and from_client(collector, "orders-1")
                ),
                timeout_s=15,
                what="three pushes from orders-1",
            )
        finally:
            client.close()
        final = wait_for(
            lambda: [
                r for r in from_client(collector, "orders-1") if r.context.terminating
            ],
            timeout_s=10,
            what="the terminating push",
        )
        assert len(final) == 1

        context = records[0].context
        assert context.client_software_name == "confluent-kafka-python"
        assert context.client_software_version.startswith("2.")
        assert context.client_source_address == "127.0.0.1"
        assert context.push_interval_ms == INTERVAL_MS
        assert context.listener_name == "PLAINTEXT"
        assert context.cluster_id == collector.server.cluster_id  # type: ignore[union-attr]
        assert len({r.context.client_instance_id for r in records}) == 1
        for record in records:
            names = metric_names(record)
            assert names, "a push with no metrics"
            assert all(n.startswith("org.apache.kafka.producer.") for n in names), names
        # The server's gate keeps pushes at least one interval apart (after the first).
        stamps = [r.context.received_time_unix_nano for r in records[1:]]
        gaps_ms = [(b - a) / 1e6 for a, b in itertools.pairwise(stamps)]
        assert all(gap >= INTERVAL_MS * 0.9 for gap in gaps_ms), gaps_ms


def test_each_client_gets_only_what_matches_it(data_dir: Path) -> None:
    subscribe(
        data_dir,
        "consumers",
        "org.apache.kafka.consumer.",
        match="client_id=billing-.*",
    )
    with RunningCollector(data_dir) as collector:
        consumer = Consumer(
            {
                "bootstrap.servers": collector.bootstrap,
                "client.id": "billing-7",
                "group.id": "billing",
                "enable.metrics.push": True,
                "log_level": 3,
            }
        )
        lonely = producer(collector, "lonely-1")
        try:
            records = wait_for(
                lambda: (
                    len(from_client(collector, "billing-7")) >= 2
                    and from_client(collector, "billing-7")
                ),
                timeout_s=15,
                what="two pushes from the consumer",
            )
            for record in records:
                names = metric_names(record)
                assert names and all(
                    n.startswith("org.apache.kafka.consumer.") for n in names
                ), names

            def lonely_instances() -> list[tuple[str, ...]]:
                assert collector.server is not None
                manager = collector.server.manager
                assert manager is not None
                return collector.call(
                    lambda: [
                        i.metrics
                        for i in manager.instances()
                        if i.metadata.client_id == "lonely-1"
                    ]
                )

            # The unmatched producer did its handshake and was told: nothing.
            assert wait_for(
                lonely_instances, timeout_s=10, what="the lonely producer's Get"
            ) == [()]
            assert from_client(collector, "lonely-1") == []
        finally:
            lonely.close()
            consumer.close()


def test_subscription_change_reaches_a_running_client(data_dir: Path) -> None:
    subscribe(data_dir, "narrow", "org.apache.kafka.producer.record.queue")
    with RunningCollector(data_dir) as collector:
        client = producer(collector, "changing-1")
        try:
            first = wait_for(
                lambda: from_client(collector, "changing-1"),
                timeout_s=15,
                what="a first push",
            )
            assert all(
                n.startswith("org.apache.kafka.producer.record.queue")
                for n in metric_names(first[0])
            )

            # Like `ktc subscriptions alter` in another process: the server's store watcher
            # picks the file change up; no restart, no new client.
            subscribe(
                data_dir, "narrow", "org.apache.kafka.producer.connection.creation"
            )

            def pushes_with_new_set() -> list[LandingRecord]:
                return [
                    r
                    for r in from_client(collector, "changing-1")
                    if metric_names(r)
                    and all(
                        n.startswith("org.apache.kafka.producer.connection.creation")
                        for n in metric_names(r)
                    )
                ]

            changed = wait_for(
                pushes_with_new_set, timeout_s=15, what="a push with the new metric set"
            )
            assert (
                changed[0].context.subscription_id != first[0].context.subscription_id
            )
            assert (
                changed[0].context.client_instance_id
                == first[0].context.client_instance_id
            )
        finally:
            client.close()
