"""Client-metrics administration at the gateway, against the real Kafka 4.4.0 cluster.

The gateway terminates telemetry, so its subscription store decides what clients send:
CLIENT_METRICS resources in DescribeConfigs, IncrementalAlterConfigs and
ListConfigResources are the gateway's, every other resource the cluster's. Requests here are
Kafka's own wire requests (kio, harness/wire.py), sent through the gateway and directly to
the cluster, which has client-metrics subscriptions of its own (one with the same name as
one of the gateway's) so an answer from the wrong side shows:

* DescribeConfigs of a CLIENT_METRICS resource is answered from the gateway's store;
* IncrementalAlterConfigs on one changes the gateway's store (``ktc subscriptions
  describe --data-dir`` sees it) and never reaches the cluster (asked directly, its own
  client-metrics configs are unchanged);
* a request mixing TOPIC and CLIENT_METRICS resources gets every answer in request order:
  the TOPIC ones the cluster's (equal to its direct answer), the CLIENT_METRICS ones the
  gateway's (equal to its answer to them alone);
* ListConfigResources v1 lists the gateway's CLIENT_METRICS resources and the cluster's
  other resources, never the cluster's CLIENT_METRICS ones;
* ``ktc subscriptions alter --data-dir`` on a running gateway's data dir reaches clients:
  GetTelemetrySubscriptions through the gateway returns the new subscription;
* in front of an upstream without ListConfigResources (Tansu 0.6), the gateway answers it
  whole instead of forwarding it to an upstream that would close the connection.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.get_telemetry_subscriptions.v0.request import (
    GetTelemetrySubscriptionsRequest,
)
from kio.schema.get_telemetry_subscriptions.v0.response import (
    GetTelemetrySubscriptionsResponse,
)
from kio.schema.incremental_alter_configs.v1 import request as iac
from kio.schema.incremental_alter_configs.v1.response import (
    IncrementalAlterConfigsResponse,
)
from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest
from kio.schema.list_config_resources.v1.response import ListConfigResourcesResponse
from kio.schema.metadata.v12 import request as mr
from kio.schema.metadata.v12.response import MetadataResponse
from kio.static.primitive import i8

from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.harness.tansu import TansuBroker
from tests.gateway.harness.wire import exchange
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(300)]

TOPIC, BROKER, CLIENT_METRICS = i8(2), i8(4), i8(16)
SET, DELETE = i8(0), i8(1)
KTC = [str(Path(sys.executable).with_name("ktc"))]

# The gateway's subscription and the cluster's, under the same name: which side answered
# shows in the metrics.
SHARED = "shared-sub"
GATEWAY_METRICS = "org.apache.kafka.producer."
CLUSTER_METRICS = "org.apache.kafka.consumer.fetch.manager."
CLUSTER_ONLY = "cluster-only-sub"


@pytest.fixture(scope="module")
def topic(kafka_cluster: KafkaCluster) -> str:
    name = f"admin-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers()})
    admin.create_topics([NewTopic(name, 3, 3)])[name].result(timeout=60)
    kafka_cluster.wait_in_sync([name])
    # Every broker answers a topic's DescribeConfigs from its own metadata image, which
    # learns of the topic on its own schedule (UNKNOWN_TOPIC_OR_PARTITION until then), and
    # the gateway may forward to any of them.
    for node, ports in kafka_cluster.node_ports.items():

        def known(port: int = ports["PLAINTEXT"]) -> bool:
            (result,) = describe(port, (TOPIC, name)).results
            return bool(result.error_code == ErrorCode.none)

        eventually_sync(known, timeout_s=30, what=f"node {node} to know topic {name}")
    return name


@pytest.fixture(scope="module")
def direct(kafka_cluster: KafkaCluster) -> int:
    """A port of the cluster itself (node 1), with its own client-metrics subscriptions."""
    port = kafka_cluster.node_ports[1]["PLAINTEXT"]
    for name, metrics in (
        (SHARED, CLUSTER_METRICS),
        (CLUSTER_ONLY, "org.apache.kafka."),
    ):
        answer = alter(port, (client_metrics_change(name, metrics=metrics),))
        assert [r.error_code for r in answer.responses] == [ErrorCode.none]
    return port


@pytest.fixture(scope="module")
def gateway(
    kafka_cluster: KafkaCluster, direct: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    data_dir = tmp_path_factory.mktemp("gateway-admin") / "data"
    ConfigStore(data_dir).alter_subscription(
        SHARED, {"metrics": GATEWAY_METRICS, "interval.ms": "1000"}, []
    )
    with RunningGateway(data_dir, kafka_cluster.bootstrap_servers()) as running:
        yield running


def data_dir(gateway: RunningGateway) -> Path:
    return Path(gateway.config.data_dir)


# ---- requests ----------------------------------------------------------------------------


def describe(port: int, *resources: tuple[int, str], version: int = 4) -> Any:
    request_module = importlib.import_module(
        f"kio.schema.describe_configs.v{version}.request"
    )
    response_module = importlib.import_module(
        f"kio.schema.describe_configs.v{version}.response"
    )
    request = request_module.DescribeConfigsRequest(
        resources=tuple(
            request_module.DescribeConfigsResource(
                resource_type=t, resource_name=n, configuration_keys=None
            )
            for t, n in resources
        ),
        include_synonyms=True,
        **({"include_documentation": True} if version >= 3 else {}),
    )
    return exchange(port, request, response_module.DescribeConfigsResponse)[0]


def client_metrics_change(name: str, **values: str | None) -> iac.AlterConfigsResource:
    return iac.AlterConfigsResource(
        resource_type=CLIENT_METRICS,
        resource_name=name,
        configs=tuple(
            iac.AlterableConfig(
                name=key.replace("_", "."),
                config_operation=SET if value is not None else DELETE,
                value=value,
            )
            for key, value in values.items()
        ),
    )


def topic_change(name: str, key: str, value: str) -> iac.AlterConfigsResource:
    return iac.AlterConfigsResource(
        resource_type=TOPIC,
        resource_name=name,
        configs=(iac.AlterableConfig(name=key, config_operation=SET, value=value),),
    )


def alter(port: int, resources: tuple[Any, ...], version: int = 1) -> Any:
    """IncrementalAlterConfigs (``resources`` built with v1's classes, which v0 shares)."""
    request = iac.IncrementalAlterConfigsRequest(
        resources=resources, validate_only=False
    )
    if version == 0:
        from kio.schema.incremental_alter_configs.v0 import request as v0
        from kio.schema.incremental_alter_configs.v0 import response as v0_response

        request_v0 = v0.IncrementalAlterConfigsRequest(
            resources=tuple(
                v0.AlterConfigsResource(
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                    configs=tuple(
                        v0.AlterableConfig(
                            name=c.name,
                            config_operation=c.config_operation,
                            value=c.value,
                        )
                        for c in r.configs
                    ),
                )
                for r in resources
            ),
            validate_only=False,
        )
        return exchange(port, request_v0, v0_response.IncrementalAlterConfigsResponse)[
            0
        ]
    return exchange(port, request, IncrementalAlterConfigsResponse)[0]


def list_resources(port: int, *types: int) -> set[tuple[int, str]]:
    answer, _ = exchange(
        port,
        ListConfigResourcesRequest(resource_types=tuple(i8(t) for t in types)),
        ListConfigResourcesResponse,
    )
    assert answer.error_code == ErrorCode.none
    return {(int(r.resource_type), r.resource_name) for r in answer.config_resources}


def config(result: Any) -> dict[str, str | None]:
    assert result.error_code == ErrorCode.none, result
    return {c.name: c.value for c in result.configs}


def topic_config(port: int, name: str) -> dict[str, str | None]:
    (result,) = describe(port, (TOPIC, name)).results
    return config(result)


def ktc_describe(directory: Path, name: str) -> dict[str, str]:
    done = subprocess.run(
        [
            *KTC,
            "subscriptions",
            "describe",
            "--data-dir",
            str(directory),
            "--name",
            name,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    lines = [line.strip() for line in done.stdout.splitlines() if line.startswith("  ")]
    return dict(line.split("=", 1) for line in lines)


# ---- DescribeConfigs ---------------------------------------------------------------------


def test_describe_client_metrics_is_answered_from_the_gateways_store(
    gateway: RunningGateway, direct: int
) -> None:
    metadata = mr.MetadataRequest(
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    exchange(gateway.port, metadata, MetadataResponse)  # reveals the nodes
    ports = [gateway.port, *gateway.node_ports().values()]
    assert (
        len(ports) > 1
    )  # the node listeners answer the same (a Metadata revealed them)
    for port in ports:
        (result,) = describe(port, (CLIENT_METRICS, SHARED)).results
        assert (result.resource_type, result.resource_name) == (CLIENT_METRICS, SHARED)
        assert config(result)["metrics"] == GATEWAY_METRICS
        assert config(result)["interval.ms"] == "1000"
    # The cluster's own subscription of that name is another one.
    (kafka,) = describe(direct, (CLIENT_METRICS, SHARED)).results
    assert config(kafka)["metrics"] == CLUSTER_METRICS


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_mixed_describe_answers_each_resource_from_its_side_in_request_order(
    gateway: RunningGateway, direct: int, topic: str, version: int
) -> None:
    resources = [
        (CLIENT_METRICS, SHARED),
        (TOPIC, topic),
        (CLIENT_METRICS, CLUSTER_ONLY),
    ]
    for order in (resources, resources[::-1], [resources[1], resources[0]]):
        answer = describe(gateway.port, *order, version=version)
        assert [(r.resource_type, r.resource_name) for r in answer.results] == order
        for (kind, name), result in zip(order, answer.results, strict=True):
            if kind == TOPIC:
                (kafka,) = describe(direct, (TOPIC, topic), version=version).results
                assert result == kafka
            else:
                (own,) = describe(
                    gateway.port, (CLIENT_METRICS, name), version=version
                ).results
                assert result == own
    # A name only the cluster has is not the gateway's: its defaults, not the cluster's
    # metrics.
    (unknown,) = describe(gateway.port, (CLIENT_METRICS, CLUSTER_ONLY)).results
    assert not config(unknown)["metrics"]


# ---- IncrementalAlterConfigs -------------------------------------------------------------


def test_alter_client_metrics_changes_the_gateways_store_not_the_clusters(
    gateway: RunningGateway, direct: int
) -> None:
    kafka_before = {
        name: config(describe(direct, (CLIENT_METRICS, name)).results[0])
        for name in (SHARED, CLUSTER_ONLY)
    }
    kafka_names_before = list_resources(direct, CLIENT_METRICS)
    new = f"gw-{uuid.uuid4().hex[:6]}"
    answer = alter(
        gateway.port,
        (
            client_metrics_change(
                new, metrics="org.apache.kafka.consumer.", interval_ms="2000"
            ),
            client_metrics_change(SHARED, interval_ms="3000"),
        ),
    )
    assert [(r.resource_name, r.error_code) for r in answer.responses] == [
        (new, ErrorCode.none),
        (SHARED, ErrorCode.none),
    ]
    # The gateway's store, as its CLI reads it.
    assert ktc_describe(data_dir(gateway), new) == {
        "metrics": "org.apache.kafka.consumer.",
        "interval.ms": "2000",
        "match": "",
    }
    assert ktc_describe(data_dir(gateway), SHARED)["interval.ms"] == "3000"
    (mine,) = describe(gateway.port, (CLIENT_METRICS, new)).results
    assert config(mine)["interval.ms"] == "2000"
    # The cluster never saw it.
    kafka_after = {
        name: config(describe(direct, (CLIENT_METRICS, name)).results[0])
        for name in (SHARED, CLUSTER_ONLY)
    }
    assert kafka_after == kafka_before
    assert list_resources(direct, CLIENT_METRICS) == kafka_names_before
    assert (CLIENT_METRICS, new) not in kafka_names_before


@pytest.mark.parametrize("version", [0, 1])
def test_mixed_alter_applies_each_resource_on_its_side(
    gateway: RunningGateway, direct: int, topic: str, version: int
) -> None:
    new = f"gw-mixed-{uuid.uuid4().hex[:6]}"
    retention = str(7654321 + version)
    answer = alter(
        gateway.port,
        (
            topic_change(topic, "retention.ms", retention),
            client_metrics_change(new, metrics="org.apache.kafka.producer.record"),
        ),
        version,
    )
    assert [
        (r.resource_type, r.resource_name, r.error_code) for r in answer.responses
    ] == [
        (TOPIC, topic, ErrorCode.none),
        (CLIENT_METRICS, new, ErrorCode.none),
    ]
    eventually_sync(
        lambda: topic_config(direct, topic)["retention.ms"] == retention,
        timeout_s=30,
        what="the topic change on the cluster",
    )
    assert (
        ktc_describe(data_dir(gateway), new)["metrics"]
        == "org.apache.kafka.producer.record"
    )
    assert (CLIENT_METRICS, new) not in list_resources(direct, CLIENT_METRICS)
    # Each side's errors stay on its resources, in request order.
    answer = alter(
        gateway.port,
        (
            client_metrics_change(new, metrics=None, interval_ms=None, match=None),
            topic_change(topic, "cleanup.policy", "bogus"),
            client_metrics_change("", metrics="x"),
        ),
        version,
    )
    assert [
        (r.resource_type, r.resource_name, r.error_code) for r in answer.responses
    ] == [
        (CLIENT_METRICS, new, ErrorCode.none),
        (TOPIC, topic, ErrorCode.invalid_config),
        (CLIENT_METRICS, "", ErrorCode.invalid_request),
    ]
    assert new not in ktc_describe_names(
        data_dir(gateway)
    )  # every key deleted: removed
    assert topic_config(direct, topic)["cleanup.policy"] == "delete"


def ktc_describe_names(directory: Path) -> set[str]:
    done = subprocess.run(
        [*KTC, "subscriptions", "list", "--data-dir", str(directory)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return {line.strip() for line in done.stdout.splitlines() if line.strip()}


# ---- ListConfigResources -----------------------------------------------------------------


def test_list_config_resources_lists_the_gateways_client_metrics_and_the_clusters_rest(
    gateway: RunningGateway, direct: int, topic: str
) -> None:
    gateway_names = {
        (CLIENT_METRICS, name) for name in ktc_describe_names(data_dir(gateway))
    }
    assert (CLIENT_METRICS, SHARED) in gateway_names
    kafka_all = list_resources(direct)
    assert (CLIENT_METRICS, CLUSTER_ONLY) in kafka_all and (TOPIC, topic) in kafka_all
    kafka_rest = {entry for entry in kafka_all if entry[0] != CLIENT_METRICS}
    assert list_resources(gateway.port) == kafka_rest | gateway_names
    assert list_resources(gateway.port, CLIENT_METRICS) == gateway_names
    # A type named twice is still that type alone (an empty filter would mean every type).
    assert list_resources(gateway.port, CLIENT_METRICS, CLIENT_METRICS) == gateway_names
    assert list_resources(direct, CLIENT_METRICS, CLIENT_METRICS) == list_resources(
        direct, CLIENT_METRICS
    )
    assert (
        list_resources(gateway.port, TOPIC, CLIENT_METRICS)
        == {entry for entry in kafka_rest if entry[0] == TOPIC} | gateway_names
    )
    assert list_resources(gateway.port, TOPIC) == list_resources(direct, TOPIC)
    # v0 (KIP-714's ListClientMetricsResources) lists client-metrics resources only.
    from kio.schema.list_config_resources.v0 import request as v0
    from kio.schema.list_config_resources.v0 import response as v0_response

    answer, _ = exchange(
        gateway.port,
        v0.ListConfigResourcesRequest(),
        v0_response.ListConfigResourcesResponse,
    )
    assert {
        (CLIENT_METRICS, r.resource_name) for r in answer.config_resources
    } == gateway_names


# ---- the CLI on a running gateway's data dir ---------------------------------------------


def test_ktc_subscriptions_alter_reaches_clients_through_the_gateway(
    gateway: RunningGateway,
) -> None:
    client_id = f"cli-alter-{uuid.uuid4().hex[:6]}"
    metric = "org.apache.kafka.consumer.coordinator.commit.latency"

    def requested() -> tuple[str, ...]:
        answer, _ = exchange(
            gateway.port,
            GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)),
            GetTelemetrySubscriptionsResponse,
            client_id=client_id,
        )
        assert answer.error_code == ErrorCode.none
        return tuple(answer.requested_metrics)

    assert metric not in requested()
    subprocess.run(
        [
            *KTC,
            "subscriptions",
            "alter",
            "--data-dir",
            str(data_dir(gateway)),
            "--name",
            f"for-{client_id}",
            "--metrics",
            metric,
            "--match",
            f"client_id={client_id}",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    eventually_sync(
        lambda: metric in requested(), timeout_s=30, what="the new subscription"
    )
    # Only the client it matches.
    answer, _ = exchange(
        gateway.port,
        GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)),
        GetTelemetrySubscriptionsResponse,
        client_id="someone-else",
    )
    assert metric not in answer.requested_metrics


# ---- an upstream without ListConfigResources -----------------------------------------------


@pytest.fixture(scope="module")
def tansu_gateway(
    tansu_broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    data_dir = tmp_path_factory.mktemp("gateway-admin-tansu") / "data"
    ConfigStore(data_dir).alter_subscription(SHARED, {"metrics": GATEWAY_METRICS}, [])
    with RunningGateway(data_dir, tansu_broker.bootstrap_servers()) as running:
        yield running


def test_list_config_resources_in_front_of_an_upstream_without_it(
    tansu_gateway: RunningGateway, tansu_broker: TansuBroker
) -> None:
    """Tansu 0.6 does not list ListConfigResources (and closes a connection that sends it):
    the gateway lists it all the same, for client-metrics administration, and answers every
    ListConfigResources itself, as ``ktc serve`` does."""
    versions, _ = exchange(
        tansu_gateway.port,
        ApiVersionsRequest(
            client_software_name="ktc-admin-test", client_software_version="1"
        ),
        ApiVersionsResponse,
    )  # what a client asks first; the gateway learns what the upstream lists from it
    listed = {
        int(k.api_key): (int(k.min_version), int(k.max_version))
        for k in versions.api_keys
    }
    assert listed[74] == (0, 1)
    assert tansu_broker.port is not None
    direct, _ = exchange(
        tansu_broker.port,
        ApiVersionsRequest(
            client_software_name="ktc-admin-test", client_software_version="1"
        ),
        ApiVersionsResponse,
    )
    assert 74 not in {int(k.api_key) for k in direct.api_keys}
    mine = {(CLIENT_METRICS, SHARED)}
    assert list_resources(tansu_gateway.port) == mine
    assert list_resources(tansu_gateway.port, TOPIC, CLIENT_METRICS) == mine
    assert list_resources(tansu_gateway.port, TOPIC) == set()
    (result,) = describe(tansu_gateway.port, (CLIENT_METRICS, SHARED)).results
    assert config(result)["metrics"] == GATEWAY_METRICS
