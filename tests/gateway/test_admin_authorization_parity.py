"""The admin APIs a node answers itself are authorized the same way in ``ktc serve`` and
``ktc gateway``: both modes answer them from the node's one admin API table, built with the
node's one authorizer (collector/app/node.py).

Two nodes with the same configuration (a SASL_PLAINTEXT listener, ``authorizer.class.name``
set, the same ACL file, the same subscription, SCRAM users alice and bob): ``ktc serve``,
and ``ktc gateway`` in front of the real Apache Kafka 4.4.0 cluster (its PLAINTEXT
listener: the gateway's own SASL listener authenticates the clients, with the node's SASL
gate and credential store, as serve's does).  The ACLs allow User:alice DESCRIBE_CONFIGS and
ALTER_CONFIGS on the cluster; bob has none.  Each user authenticates with SCRAM-SHA-512 on
a raw connection and sends the same client-metrics administration (DescribeConfigs,
IncrementalAlterConfigs and ListConfigResources v0 and v1 on CLIENT_METRICS resources):

* every answer is the same in both modes (throttle time aside), for alice and for bob,
  whether the gateway authenticated the client itself or the cluster did (passthrough);
* alice's succeed and her change reaches each node's store;
* bob's are denied with Kafka's CLUSTER_AUTHORIZATION_FAILED in both modes, and leave both
  stores as they were.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from collector.security.acls_file import DurableAclStore
from collector.security.credentials import (
    ScramMechanism,
    new_salt,
    salted_password,
)
from collector.security.credentials_file import DurableCredentialStore
from collector.security.scram_admin import (
    CredentialUpsertion,
    alter_credentials,
)
from proto import ApiKeys, ClientConnection
from proto.errors import Errors
from proto.messages import (
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from proto.messages.describe_configs_request import (
    DescribeConfigsResource,
)
from proto.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.integration.collector_harness import RunningCollector
from tests.security.sasl_client import ScramClient

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(300)]

CLIENT_METRICS = 16
SET = 0
SUBSCRIPTION = "parity-sub"
SCRAM_SHA_512 = ScramMechanism.SCRAM_SHA_512
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
}


def prepare(data_dir: Path, users: dict[str, str]) -> None:
    """The same ACLs, users and subscription in a node's data dir, before it starts."""
    DurableAclStore(data_dir).create(
        [
            AclBinding(
                ResourceType.CLUSTER,
                "kafka-cluster",
                PatternType.LITERAL,
                "User:alice",
                "*",
                operation,
                AclPermissionType.ALLOW,
            )
            for operation in (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)
        ]
    )
    upsertions = []
    for user, password in users.items():
        salt = new_salt()
        upsertions.append(
            CredentialUpsertion(
                user=user,
                mechanism_type=SCRAM_SHA_512.type_id,
                iterations=4096,
                salt=salt,
                salted_password=salted_password(SCRAM_SHA_512, password, salt, 4096),
            )
        )
    results = alter_credentials(DurableCredentialStore(data_dir), [], upsertions)
    assert [r.error for r in results] == [0] * len(users)
    ConfigStore(data_dir).alter_subscription(
        SUBSCRIPTION, {"metrics": "org.apache.kafka.", "interval.ms": "1000"}, []
    )


@pytest.fixture(scope="module")
def nodes(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, RunningCollector]]:
    """The node in each mode, configured alike: serve; the gateway authenticating clients on
    its own SASL listener (in front of the cluster's PLAINTEXT listener: a gateway SASL
    listener in front of a SASL one does not start); and the gateway on a PLAINTEXT
    listener in front of the cluster's SASL listener, the SASL exchange passed through (the
    cluster has the same users and passwords)."""
    users = dict(kafka_cluster.sasl_users)
    sasl = {
        **AUTHORIZER,
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    data_dirs = {
        mode: tmp_path_factory.mktemp(f"parity-{mode}") / "data"
        for mode in ("serve", "gateway", "passthrough")
    }
    for data_dir in data_dirs.values():
        prepare(data_dir, users)
    with (
        RunningCollector(data_dirs["serve"], **sasl) as serve,
        RunningGateway(
            data_dirs["gateway"], kafka_cluster.bootstrap_servers(), **sasl
        ) as gateway,
        RunningGateway(
            data_dirs["passthrough"],
            kafka_cluster.bootstrap_servers("SASL_PLAINTEXT"),
            **AUTHORIZER,
            # A PLAINTEXT listener: the clients' SASL passes through to the cluster.
            **{"gateway.upstream.security.protocol": "SASL_PLAINTEXT"},
        ) as passthrough,
    ):
        yield {"serve": serve, "gateway": gateway, "passthrough": passthrough}


class AuthenticatedClient:
    """A raw Kafka connection that authenticated with SCRAM-SHA-512 (SaslHandshake v1,
    SaslAuthenticate v2), then sends requests one at a time."""

    def __init__(self, port: int, user: str, password: str) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self._codec = ClientConnection(client_id=f"parity-{user}")
        handshake = self.request(
            ApiKeys.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512")
        )
        assert handshake.error_code == Errors.NONE
        scram = ScramClient("sha512", user, password)
        first = self.request(
            ApiKeys.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(scram.first())
        )
        assert first.error_code == Errors.NONE, first.error_message
        final = self.request(
            ApiKeys.SASL_AUTHENTICATE,
            2,
            SaslAuthenticateRequest(scram.final(first.auth_bytes)),
        )
        assert final.error_code == Errors.NONE, final.error_message
        assert scram.verify(final.auth_bytes)

    def request(self, api_key: int, version: int, message: Any) -> Any:
        self._sock.sendall(self._codec.send_request(api_key, version, message))
        while (frame := self._codec.next_response()) is None:
            data = self._sock.recv(65536)
            if not data:
                raise ConnectionError("the node closed the connection")
            self._codec.receive_data(data)
        return frame.message

    def close(self) -> None:
        self._sock.close()


def describe() -> DescribeConfigsRequest:
    return DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(
                resource_type=CLIENT_METRICS,
                resource_name=SUBSCRIPTION,
                configuration_keys=None,
            ),
        )
    )


def alter(interval_ms: str) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=CLIENT_METRICS,
                resource_name=SUBSCRIPTION,
                configs=(
                    AlterableConfig(
                        name="interval.ms", config_operation=SET, value=interval_ms
                    ),
                ),
            ),
        )
    )


def without_throttle(message: Any) -> Any:
    return dataclasses.replace(message, throttle_time_ms=0)


def administer(node: RunningCollector, user: str, password: str) -> list[Any]:
    """The same client-metrics administration as ``user``: every answer, in order."""
    client = AuthenticatedClient(node.port, user, password)
    try:
        answers = [
            client.request(ApiKeys.DESCRIBE_CONFIGS, 4, describe()),
            client.request(
                ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, alter(f"{len(user)}000")
            ),
            client.request(
                ApiKeys.LIST_CONFIG_RESOURCES, 0, ListConfigResourcesRequest()
            ),
            client.request(
                ApiKeys.LIST_CONFIG_RESOURCES,
                1,
                ListConfigResourcesRequest(resource_types=(CLIENT_METRICS,)),
            ),
        ]
    finally:
        client.close()
    return [without_throttle(answer) for answer in answers]


def error_codes(answers: list[Any]) -> list[int]:
    described, altered, listed_v0, listed_v1 = answers
    return [
        *(r.error_code for r in described.results),
        *(r.error_code for r in altered.responses),
        listed_v0.error_code,
        listed_v1.error_code,
    ]


def interval_ms(node: RunningCollector) -> str:
    configs = ConfigStore(Path(node.config.data_dir)).snapshot().subscription_configs
    return configs[SUBSCRIPTION]["interval.ms"]


def test_an_authorized_principal_gets_the_same_answers_in_both_modes(
    nodes: dict[str, RunningCollector], kafka_cluster: KafkaCluster
) -> None:
    password = kafka_cluster.sasl_users["alice"]
    answers = {
        mode: administer(node, "alice", password) for mode, node in nodes.items()
    }
    assert answers["gateway"] == answers["serve"]
    assert answers["passthrough"] == answers["serve"]
    assert error_codes(answers["serve"]) == [Errors.NONE] * 4
    listed = answers["serve"][3].config_resources
    assert [(r.resource_type, r.resource_name) for r in listed] == [
        (CLIENT_METRICS, SUBSCRIPTION)
    ]
    for node in nodes.values():
        assert interval_ms(node) == "5000"


def test_an_unauthorized_principal_is_denied_alike_in_both_modes(
    nodes: dict[str, RunningCollector], kafka_cluster: KafkaCluster
) -> None:
    password = kafka_cluster.sasl_users["bob"]
    before = {mode: interval_ms(node) for mode, node in nodes.items()}
    answers = {mode: administer(node, "bob", password) for mode, node in nodes.items()}
    assert answers["gateway"] == answers["serve"]
    assert answers["passthrough"] == answers["serve"]
    assert error_codes(answers["serve"]) == [Errors.CLUSTER_AUTHORIZATION_FAILED] * 4
    assert {mode: interval_ms(node) for mode, node in nodes.items()} == before
