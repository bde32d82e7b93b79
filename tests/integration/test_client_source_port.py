"""KAFKA-15811: a client's real source port, on a PLAINTEXT listener, in what lands and in
``client_source_port`` match selectors.

A real confluent-kafka producer runs in this process, so the test reads the producer's own
sockets to the collector (psutil) and requires the landed port to be one of them.
"""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from confluent_kafka import Producer
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.landing import LandingRecord
from subscriptions.store import ConfigStore
from tests.integration.collector_harness import RunningCollector, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

INTERVAL_MS = "500"
CLIENT_ID = "port-probe-1"
BY_PORT = "org.apache.kafka.producer.connection.creation"
OTHER_PORT = "org.apache.kafka.producer.record.queue"


def metric_names(record: LandingRecord) -> set[str]:
    data = MetricsData.FromString(record.payload)
    return {
        m.name
        for r in data.resource_metrics
        for s in r.scope_metrics
        for m in s.metrics
    }


def client_ports(server_port: int) -> set[int]:
    """Local ports of this process's connections to the collector: the producer's sockets
    (the collector's own accepted sockets have the server port as their local port)."""
    return {
        c.laddr.port
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr
        and c.raddr.port == server_port
        and c.status == psutil.CONN_ESTABLISHED
    }


def test_the_real_source_port_lands_and_selects_the_client(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    store = ConfigStore(data_dir)
    store.alter_subscription(
        "base", {"metrics": "org.apache.kafka.producer.", "interval.ms": INTERVAL_MS}
    )
    with RunningCollector(data_dir) as collector:
        client = Producer(
            {
                "bootstrap.servers": collector.bootstrap,
                "client.id": CLIENT_ID,
                "enable.metrics.push": True,
                "log_level": 3,
            }
        )
        try:

            def from_client() -> list[LandingRecord]:
                return [
                    r for r in collector.landed() if r.context.client_id == CLIENT_ID
                ]

            first = wait_for(from_client, timeout_s=20, what="a first push")[0]
            port = first.context.client_source_port
            assert port != 0
            assert port in client_ports(collector.port), (
                port,
                client_ports(collector.port),
            )

            # Only a subscription matching that port applies; one on a port no client of
            # this test has (1 is never an ephemeral port) does not.
            ConfigStore(data_dir).alter_subscription(
                "by-port",
                {
                    "metrics": BY_PORT,
                    "interval.ms": INTERVAL_MS,
                    "match": f"client_source_port={port}",
                },
            )
            ConfigStore(data_dir).alter_subscription(
                "other-port",
                {
                    "metrics": OTHER_PORT,
                    "interval.ms": INTERVAL_MS,
                    "match": "client_source_port=1",
                },
            )
            ConfigStore(data_dir).delete_subscription("base")

            def instance_metrics() -> list[tuple[str, ...]]:
                assert collector.server is not None
                manager = collector.server.manager
                assert manager is not None
                return collector.call(
                    lambda: [
                        i.metrics
                        for i in manager.instances()
                        if i.metadata.client_id == CLIENT_ID
                    ]
                )

            # Re-evaluated at the client's first request after the changes: by-port alone.
            wait_for(
                lambda: instance_metrics() == [(BY_PORT,)],
                timeout_s=20,
                what="the client re-evaluated to the by-port subscription alone",
            )

            def pushes_by_port() -> list[LandingRecord]:
                return [
                    r
                    for r in from_client()
                    if r.context.received_time_unix_nano
                    > first.context.received_time_unix_nano
                    and metric_names(r)
                    and all(n.startswith(BY_PORT) for n in metric_names(r))
                ]

            pushed = wait_for(
                pushes_by_port, timeout_s=20, what="a push of the by-port metrics"
            )
            assert pushed[0].context.client_source_port == port
            assert not any(
                n.startswith(OTHER_PORT) for r in pushed for n in metric_names(r)
            )
        finally:
            client.close()
