"""The ACL APIs (29-31) and authorization of the admin APIs over the wire, on a PLAINTEXT
listener (principal User:ANONYMOUS); tests/gateway/test_java_acls.py drives the same with
the Java Admin over mTLS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from collector.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
)
from collector.security.acls import ResourceType as RT
from collector.security.acls_file import DurableAclStore
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import (
    AlterClientQuotasRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeConfigsRequest,
    GetTelemetrySubscriptionsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
)
from proto.messages.alter_client_quotas_request import EntityData, EntryData, OpData
from proto.messages.create_acls_request import AclCreation
from proto.messages.delete_acls_request import DeleteAclsFilter
from proto.messages.describe_configs_request import DescribeConfigsResource
from proto.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from tests.collector.collector_testkit import Start
from tests.collector.wire_client import WireClient

pytestmark = pytest.mark.timeout(60)

CLIENT_METRICS, CLUSTER, TOPIC = 16, 4, 2
LITERAL, PREFIXED, ANY, MATCH = 3, 4, 1, 2
ALLOW, DENY = 3, 2
ALTER_CONFIGS, DESCRIBE_CONFIGS, ALTER, DESCRIBE = 11, 10, 7, 8
ANONYMOUS = "User:ANONYMOUS"
DENIED = "Cluster authorization failed."

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
}


def creation(
    name: str = "kafka-cluster",
    principal: str = ANONYMOUS,
    operation: int = ALTER_CONFIGS,
    resource_type: int = CLUSTER,
    pattern: int = LITERAL,
    permission: int = ALLOW,
    host: str = "*",
) -> AclCreation:
    return AclCreation(
        resource_type=resource_type,
        resource_name=name,
        resource_pattern_type=pattern,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=permission,
    )


def describe_all(principal: str | None = None) -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=ANY,
        principal_filter=principal,
        host_filter=None,
        operation=1,
        permission_type=1,
    )


def alter_subscription(name: str = "prod") -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=CLIENT_METRICS,
                resource_name=name,
                configs=(
                    AlterableConfig(name="metrics", config_operation=0, value="*"),
                ),
            ),
        )
    )


async def test_without_an_authorizer_the_acl_apis_answer_security_disabled(
    start: Start,
) -> None:
    server = await start()
    wire = await WireClient.connect(server.port())
    for version in (1, 2, 3):
        described = await wire.request(ApiKeys.DESCRIBE_ACLS, version, describe_all())
        assert (described.error_code, described.error_message) == (
            Errors.SECURITY_DISABLED,
            "No Authorizer is configured on the broker",
        )
        created = await wire.request(
            ApiKeys.CREATE_ACLS, version, CreateAclsRequest(creations=(creation(),))
        )
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (Errors.SECURITY_DISABLED, "No Authorizer is configured.")
        ]
    # and nothing is checked: anyone alters subscriptions
    altered = await wire.request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, alter_subscription()
    )
    assert altered.responses[0].error_code == Errors.NONE
    await wire.close()


async def test_create_describe_delete_over_every_version(
    start: Start, tmp_path: Path
) -> None:
    server = await start(**AUTHORIZER, **{"super.users": ANONYMOUS})
    wire = await WireClient.connect(server.port())
    for version in (1, 2, 3):
        created = await wire.request(
            ApiKeys.CREATE_ACLS,
            version,
            CreateAclsRequest(
                creations=(
                    creation(principal="User:alice"),
                    creation(
                        principal="User:alice"
                    ),  # the same again: a success that adds nothing
                    creation(name="other"),
                    creation(resource_type=TOPIC, name="t"),
                    creation(operation=1),
                    creation(principal="alice"),
                    creation(pattern=MATCH),
                )
            ),
        )
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (Errors.NONE, ""),  # Kafka 4.4.0 words success as "" (ApiError.NONE)
            (Errors.NONE, ""),
            (
                Errors.INVALID_REQUEST,
                "The only valid name for the CLUSTER resource is kafka-cluster",
            ),
            (
                Errors.INVALID_REQUEST,
                "resource type TOPIC is not supported by the collector (only CLUSTER)",
            ),
            # What Kafka 4.4.0's controller answers (tests/compat checks it): no message for
            # an ANY operation or a MATCH pattern, its own words for a principal.
            (Errors.UNKNOWN_SERVER_ERROR, None),
            (
                Errors.INVALID_REQUEST,
                "Could not parse principal from `alice` (no colon is present separating "
                "the principal type from the principal name)",
            ),
            (Errors.UNKNOWN_SERVER_ERROR, None),
        ]
        described = await wire.request(ApiKeys.DESCRIBE_ACLS, version, describe_all())
        assert described.error_code == Errors.NONE
        assert [
            (r.resource_type, r.resource_name, r.pattern_type)
            for r in described.resources
        ] == [(CLUSTER, "kafka-cluster", LITERAL)]
        assert [
            (a.principal, a.host, a.operation, a.permission_type)
            for a in described.resources[0].acls
        ] == [("User:alice", "*", ALTER_CONFIGS, ALLOW)]
        # MATCH on the cluster's name, and a principal filter that matches nothing
        match = await wire.request(
            ApiKeys.DESCRIBE_ACLS,
            version,
            DescribeAclsRequest(
                resource_type_filter=CLUSTER,
                resource_name_filter="kafka-cluster",
                pattern_type_filter=MATCH,
                principal_filter=None,
                host_filter=None,
                operation=1,
                permission_type=ALLOW,
            ),
        )
        assert len(match.resources) == 1
        assert not (
            await wire.request(ApiKeys.DESCRIBE_ACLS, version, describe_all("User:bob"))
        ).resources
        # durable: in the file, and read back by a new store
        assert DurableAclStore(tmp_path / "data").bindings() == (
            AclBinding(
                RT.CLUSTER,
                "kafka-cluster",
                PatternType.LITERAL,
                "User:alice",
                "*",
                AclOperation.ALTER_CONFIGS,
                AclPermissionType.ALLOW,
            ),
        )
        deleted = await wire.request(
            ApiKeys.DELETE_ACLS,
            version,
            DeleteAclsRequest(
                filters=(
                    DeleteAclsFilter(
                        resource_type_filter=CLUSTER,
                        resource_name_filter=None,
                        pattern_type_filter=ANY,
                        principal_filter="User:alice",
                        host_filter=None,
                        operation=1,
                        permission_type=1,
                    ),
                    DeleteAclsFilter(
                        resource_type_filter=1,
                        resource_name_filter=None,
                        pattern_type_filter=ANY,
                        principal_filter="User:nobody",
                        host_filter=None,
                        operation=1,
                        permission_type=1,
                    ),
                )
            ),
        )
        assert [
            [(m.principal, m.operation) for m in r.matching_acls]
            for r in deleted.filter_results
        ] == [[("User:alice", ALTER_CONFIGS)], []]
        assert not (
            await wire.request(ApiKeys.DESCRIBE_ACLS, version, describe_all())
        ).resources
        assert DurableAclStore(tmp_path / "data").bindings() == ()
    await wire.close()


@pytest.mark.parametrize(
    "request_",
    [
        (
            ApiKeys.DESCRIBE_ACLS,
            DescribeAclsRequest(
                resource_type_filter=0,
                resource_name_filter=None,
                pattern_type_filter=ANY,
                principal_filter=None,
                host_filter=None,
                operation=1,
                permission_type=1,
            ),
        ),
        (ApiKeys.CREATE_ACLS, CreateAclsRequest(creations=(creation(permission=0),))),
        (
            ApiKeys.DELETE_ACLS,
            DeleteAclsRequest(
                filters=(
                    DeleteAclsFilter(
                        resource_type_filter=CLUSTER,
                        resource_name_filter=None,
                        pattern_type_filter=99,
                        principal_filter=None,
                        host_filter=None,
                        operation=1,
                        permission_type=1,
                    ),
                )
            ),
        ),
    ],
    ids=["describe", "create", "delete"],
)
async def test_unknown_elements_close_the_connection(
    start: Start, request_: Any
) -> None:
    """Kafka cannot parse such a request (IllegalArgumentException in the constructor)."""
    server = await start(**AUTHORIZER, **{"super.users": ANONYMOUS})
    wire = await WireClient.connect(server.port())
    wire.send(request_[0], 2, request_[1])
    assert await wire.closed_by_server()


async def test_a_principal_without_acls_is_denied_what_kafka_checks(
    start: Start,
) -> None:
    server = await start(**AUTHORIZER)
    wire = await WireClient.connect(server.port())
    altered = await wire.request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, alter_subscription()
    )
    assert [(r.error_code, r.error_message) for r in altered.responses] == [
        (Errors.CLUSTER_AUTHORIZATION_FAILED, DENIED)
    ]
    assert server._store is not None
    assert server._store.list_names() == []
    described = await wire.request(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=CLIENT_METRICS,
                    resource_name="prod",
                    configuration_keys=None,
                ),
            )
        ),
    )
    assert [(r.error_code, r.error_message, r.configs) for r in described.results] == [
        (Errors.CLUSTER_AUTHORIZATION_FAILED, DENIED, ())
    ]
    listed = await wire.request(
        ApiKeys.LIST_CONFIG_RESOURCES,
        1,
        ListConfigResourcesRequest(resource_types=(CLIENT_METRICS,)),
    )
    assert listed.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    quotas = await wire.request(
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        1,
        DescribeClientQuotasRequest(components=(), strict=False),
    )
    assert (quotas.error_code, quotas.error_message) == (
        Errors.CLUSTER_AUTHORIZATION_FAILED,
        None,  # Kafka 4.4.0 gives no message here (tests/compat)
    )
    alter_quotas = await wire.request(
        ApiKeys.ALTER_CLIENT_QUOTAS,
        1,
        AlterClientQuotasRequest(
            entries=(
                EntryData(
                    entity=(EntityData("user", "bob"),),
                    ops=(OpData("request_percentage", 50.0, False),),
                ),
            ),
            validate_only=False,
        ),
    )
    assert [(e.error_code, e.error_message) for e in alter_quotas.entries] == [
        (Errors.CLUSTER_AUTHORIZATION_FAILED, DENIED)
    ]
    for api, request in (
        (ApiKeys.DESCRIBE_ACLS, describe_all()),
        (ApiKeys.CREATE_ACLS, CreateAclsRequest(creations=(creation(),))),
    ):
        answer = await wire.request(api, 3, request)
        error = answer if api == ApiKeys.DESCRIBE_ACLS else answer.results[0]
        assert error.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
        assert error.error_message.startswith(
            "Request Request(processor=0, connectionId="
        )
        assert "session=Session(User:ANONYMOUS,/127.0.0.1)" in error.error_message
        operation = "DESCRIBE" if api == ApiKeys.DESCRIBE_ACLS else "ALTER"
        assert error.error_message.endswith(f" needs {operation} permission.")
    # Telemetry is not authorized (KafkaApis.handleGetTelemetrySubscriptionsRequest).
    got = await wire.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, GetTelemetrySubscriptionsRequest()
    )
    assert got.error_code == Errors.NONE
    await wire.close()


async def test_acls_grant_what_they_name(start: Start, tmp_path: Path) -> None:
    store = DurableAclStore(tmp_path / "data")
    store.create(
        [
            AclBinding(
                RT.CLUSTER,
                "kafka-cluster",
                PatternType.LITERAL,
                ANONYMOUS,
                "*",
                AclOperation.ALTER_CONFIGS,
                AclPermissionType.ALLOW,
            ),
            AclBinding(
                RT.CLUSTER,
                "kafka-cluster",
                PatternType.LITERAL,
                "User:*",
                "10.9.9.9",
                AclOperation.ALTER,
                AclPermissionType.ALLOW,
            ),
        ]
    )
    server = await start(**AUTHORIZER)
    wire = await WireClient.connect(server.port())
    altered = await wire.request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, alter_subscription()
    )
    assert altered.responses[0].error_code == Errors.NONE
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    described = await wire.request(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=CLIENT_METRICS,
                    resource_name="prod",
                    configuration_keys=None,
                ),
            )
        ),
    )
    assert described.results[0].error_code == Errors.NONE
    # ALTER (CreateAcls) only from 10.9.9.9
    created = await wire.request(
        ApiKeys.CREATE_ACLS, 3, CreateAclsRequest(creations=(creation(),))
    )
    assert created.results[0].error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    # a DENY written into the file by hand is in force once reloaded (SIGHUP)
    store.create(
        [
            AclBinding(
                RT.CLUSTER,
                "kafka-cluster",
                PatternType.PREFIXED,
                ANONYMOUS,
                "*",
                AclOperation.ALTER_CONFIGS,
                AclPermissionType.DENY,
            )
        ]
    )
    server.reload()
    altered = await wire.request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, alter_subscription()
    )
    assert altered.responses[0].error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    await wire.close()
