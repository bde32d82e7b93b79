"""Unit-level regressions for what the differential test against Apache Kafka 4.4.0
(tests/compat/test_kafka_differential.py) found: each answer here is what a 4.4.0 broker gave
to the same request, pinned without a JVM so it is checked on every run."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from collector.app.server import CollectorServer
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import (
    AlterClientQuotasRequest,
    ApiVersionsRequest,
    DescribeClientQuotasRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)
from proto.messages.alter_client_quotas_request import EntityData, EntryData, OpData
from proto.messages.describe_client_quotas_request import ComponentData
from proto.messages.describe_configs_request import DescribeConfigsResource
from proto.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from proto.messages.metadata_request import MetadataRequestTopic
from tests.collector.collector_testkit import collector_config, running
from tests.collector.wire_client import WireClient

pytestmark = pytest.mark.timeout(60)

CLIENT_METRICS, TOPIC = 16, 2
SET = 0


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[CollectorServer]:
    config = collector_config(
        tmp_path, **{"node.id": 3, "cluster.id": "Mg7dWnZRSHSpLyZOnnER-g"}
    )
    async with running(config) as node:
        yield node


@pytest.fixture
async def wire(server: CollectorServer) -> AsyncIterator[WireClient]:
    client = await WireClient.connect(server.port(), "ktc-test")
    yield client
    await client.close()


# ---------------------------------------------------------------- ApiVersions v5


async def test_api_versions_v5_is_served(wire: WireClient) -> None:
    answer = await wire.request(
        ApiKeys.API_VERSIONS, 5, ApiVersionsRequest("ktc", "1.0")
    )
    assert answer.error_code == Errors.NONE
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert ranges[ApiKeys.API_VERSIONS] == (0, 5)
    assert ranges[ApiKeys.METADATA] == (0, 13)


@pytest.mark.parametrize(
    ("cluster_id", "node_id", "error"),
    [
        ("Mg7dWnZRSHSpLyZOnnER-g", 3, Errors.NONE),  # this node
        (None, -1, Errors.NONE),  # a client that does not know yet
        ("Mg7dWnZRSHSpLyZOnnER-g", 4, Errors.REBOOTSTRAP_REQUIRED),  # another node
        ("AAAAAAAAAAAAAAAAAAAAAA", 3, Errors.REBOOTSTRAP_REQUIRED),  # another cluster
        ("", 3, Errors.REBOOTSTRAP_REQUIRED),  # "" is a cluster id, not "unknown"
        ("Mg7dWnZRSHSpLyZOnnER-g", -2, Errors.REBOOTSTRAP_REQUIRED),
        ("Mg7dWnZRSHSpLyZOnnER-g", -1, Errors.INVALID_REQUEST),  # one without the other
        (None, 3, Errors.INVALID_REQUEST),
        (None, -2, Errors.INVALID_REQUEST),
        ("", -1, Errors.INVALID_REQUEST),
    ],
)
async def test_api_versions_v5_checks_the_intended_cluster_and_node(
    wire: WireClient, cluster_id: str | None, node_id: int, error: Errors
) -> None:
    answer = await wire.request(
        ApiKeys.API_VERSIONS, 5, ApiVersionsRequest("ktc", "1.0", cluster_id, node_id)
    )
    assert answer.error_code == error
    assert bool(answer.api_keys) == (error == Errors.NONE)


async def test_api_versions_v5_checks_the_software_name_first(
    wire: WireClient,
) -> None:
    answer = await wire.request(
        ApiKeys.API_VERSIONS, 5, ApiVersionsRequest("-bad", "1", "elsewhere", 9)
    )
    assert answer.error_code == Errors.INVALID_REQUEST


# ---------------------------------------------------------------- CLIENT_METRICS


def _alter(
    name: str,
    *configs: tuple[str, int, str | None],
    resource_type: int = CLIENT_METRICS,
) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type,
                name,
                tuple(AlterableConfig(k, op, v) for k, op, v in configs),
            ),
        )
    )


async def test_empty_subscription_name_is_kafkas_message(wire: WireClient) -> None:
    altered = await wire.request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, _alter("", ("metrics", SET, "a"))
    )
    assert [(r.error_code, r.error_message) for r in altered.responses] == [
        (Errors.INVALID_REQUEST, "Subscription name can't be empty")
    ]
    described = await wire.request(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        DescribeConfigsRequest(
            resources=(DescribeConfigsResource(CLIENT_METRICS, "", None),)
        ),
    )
    assert [(r.error_code, r.error_message) for r in described.results] == [
        (Errors.INVALID_REQUEST, "Client metrics subscription name must not be empty")
    ]


@pytest.mark.parametrize(
    ("configs", "described"),
    [
        ((("metrics", SET, "a,a"),), {"metrics": "a"}),
        ((("match", SET, "client_id=a,client_id=a"),), {"match": "client_id=a"}),
        (
            (("metrics", SET, " a, b ,a"), ("interval.ms", SET, " 1000 ")),
            {"metrics": "a,b", "interval.ms": "1000"},
        ),
    ],
)
async def test_repeats_are_accepted_and_values_described_as_kafka_stores_them(
    wire: WireClient,
    configs: tuple[tuple[str, int, str | None], ...],
    described: dict[str, str],
) -> None:
    altered = await wire.request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, _alter("dup", *configs)
    )
    assert [(r.error_code, r.error_message) for r in altered.responses] == [
        (Errors.NONE, None)
    ]
    answer = await wire.request(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        DescribeConfigsRequest(
            resources=(DescribeConfigsResource(CLIENT_METRICS, "dup", None),)
        ),
    )
    (result,) = answer.results
    # java.util.HashMap order; "" is Kafka's success message
    assert (result.error_code, result.error_message) == (Errors.NONE, "")
    assert [c.name for c in result.configs] == ["interval.ms", "match", "metrics"]
    assert {
        c.name: c.value for c in result.configs if c.config_source == 7
    } == described


async def test_a_topic_resource_is_one_the_node_does_not_have(wire: WireClient) -> None:
    altered = await wire.request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        1,
        _alter("orders", ("cleanup.policy", SET, "compact"), resource_type=TOPIC),
    )
    assert [(r.error_code, r.error_message) for r in altered.responses] == [
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'orders' does not exist.")
    ]
    described = await wire.request(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        DescribeConfigsRequest(
            resources=(DescribeConfigsResource(TOPIC, "orders", None),)
        ),
    )
    assert [(r.error_code, r.error_message) for r in described.results] == [
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, "")
    ]


async def test_an_unknown_config_operation_fails_without_a_message(
    wire: WireClient,
) -> None:
    altered = await wire.request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, _alter("s", ("metrics", 9, "a"))
    )
    assert [(r.error_code, r.error_message) for r in altered.responses] == [
        (Errors.UNKNOWN_SERVER_ERROR, None)
    ]


# ---------------------------------------------------------------- Metadata


async def test_metadata_answers_names_in_hash_set_order_once_each(
    wire: WireClient,
) -> None:
    names = ("orders", "bad name!", "a" * 250, "a" * 249, "orders")
    answer = await wire.request(
        ApiKeys.METADATA,
        12,
        MetadataRequest(
            topics=tuple(MetadataRequestTopic(name=n) for n in names),
            allow_auto_topic_creation=False,
        ),
    )
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("a" * 250, Errors.INVALID_TOPIC_EXCEPTION),
        ("bad name!", Errors.INVALID_TOPIC_EXCEPTION),
        ("orders", Errors.UNKNOWN_TOPIC_OR_PARTITION),
        ("a" * 249, Errors.UNKNOWN_TOPIC_OR_PARTITION),
    ]


@pytest.mark.parametrize("version", [10, 11])
async def test_metadata_v10_v11_refuse_topic_ids(
    wire: WireClient, version: int
) -> None:
    topic_id = uuid.UUID(int=12345)
    answer = await wire.request(
        ApiKeys.METADATA,
        version,
        MetadataRequest(topics=(MetadataRequestTopic(topic_id=topic_id, name=None),)),
    )
    assert (answer.brokers, answer.cluster_id, answer.controller_id) == ((), None, -1)
    assert [(t.error_code, t.name, t.topic_id) for t in answer.topics] == [
        (Errors.INVALID_REQUEST, "", topic_id)
    ]


async def test_metadata_authorized_operations_without_an_authorizer(
    wire: WireClient,
) -> None:
    answer = await wire.request(
        ApiKeys.METADATA,
        10,
        MetadataRequest(
            topics=(MetadataRequestTopic(name="orders"),),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=True,
            include_topic_authorized_operations=True,
        ),
    )
    # every operation the resource type supports (AclEntry.supportedOperations)
    assert answer.cluster_authorized_operations == 8096
    assert answer.topics[0].topic_authorized_operations == 3576


# ---------------------------------------------------------------- client quotas


async def test_quota_entities_are_echoed_in_hash_map_order(wire: WireClient) -> None:
    entity = (EntityData("user", "alice"), EntityData("client-id", "app"))
    ops = (OpData("producer_byte_rate", 1024.0, False),)
    altered = await wire.request(
        ApiKeys.ALTER_CLIENT_QUOTAS,
        1,
        AlterClientQuotasRequest(entries=(EntryData(entity, ops),)),
    )
    (entry,) = altered.entries
    assert entry.error_code == Errors.NONE
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [
        ("client-id", "app"),
        ("user", "alice"),
    ]
    described = await wire.request(
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        1,
        DescribeClientQuotasRequest(components=(ComponentData("user", 0, "alice"),)),
    )
    assert (described.error_code, described.error_message) == (Errors.NONE, "")
    assert [(e.entity_type, e.entity_name) for e in described.entries[0].entity] == [
        ("client-id", "app"),
        ("user", "alice"),
    ]


async def test_quota_entity_type_twice_keeps_the_last_a_key_twice_is_refused(
    wire: WireClient,
) -> None:
    rate = OpData("producer_byte_rate", 1.0, False)
    altered = await wire.request(
        ApiKeys.ALTER_CLIENT_QUOTAS,
        1,
        AlterClientQuotasRequest(
            entries=(
                EntryData((EntityData("user", "x"), EntityData("user", "y")), (rate,)),
                EntryData((EntityData("user", "z"),), (rate, rate)),
            )
        ),
    )
    assert [
        (
            e.error_code,
            e.error_message,
            [(c.entity_type, c.entity_name) for c in e.entity],
        )
        for e in altered.entries
    ] == [
        (Errors.NONE, None, [("user", "y")]),
        (
            Errors.INVALID_REQUEST,
            "Ignoring duplicate entity ClientQuotaEntity(entries={user=z})",
            [("user", "z")],
        ),
    ]


async def test_quota_filter_messages_are_kafkas(wire: WireClient) -> None:
    for component, message in (
        (
            ComponentData("user", 0, None),
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (ComponentData("user", 7, "x"), "Unknown match type 7"),
    ):
        answer = await wire.request(
            ApiKeys.DESCRIBE_CLIENT_QUOTAS,
            1,
            DescribeClientQuotasRequest(components=(component,)),
        )
        assert (answer.error_code, answer.error_message) == (
            Errors.INVALID_REQUEST,
            message,
        )


async def test_metadata_refuses_topics_a_principal_may_not_describe(
    tmp_path: Path,
) -> None:
    """With an authorizer and no ACL, ANONYMOUS may not describe a topic: those names are
    answered TOPIC_AUTHORIZATION_FAILED first, in request order, whatever the name."""
    config = collector_config(
        tmp_path,
        **{
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        },
    )
    server = CollectorServer(config)
    await server.start()
    try:
        client = await WireClient.connect(server.port(), "ktc-test")
        answer = await client.request(
            ApiKeys.METADATA,
            12,
            MetadataRequest(
                topics=tuple(
                    MetadataRequestTopic(name=n)
                    for n in ("orders", "bad name!", "orders")
                ),
                allow_auto_topic_creation=False,
            ),
        )
        await client.close()
    finally:
        await server.stop()
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("orders", Errors.TOPIC_AUTHORIZATION_FAILED),
        ("bad name!", Errors.TOPIC_AUTHORIZATION_FAILED),
    ]
