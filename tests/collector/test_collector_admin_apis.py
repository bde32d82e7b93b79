"""CLIENT_METRICS admin APIs over the wire, as kafka-client-metrics.sh drives them:
IncrementalAlterConfigs to create/alter/delete, ListConfigResources + DescribeConfigs to
describe.  (confluent-kafka's AdminClient has no CLIENT_METRICS resource type, so the
requests are built with proto's client codec.)"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from collector.app.server import CollectorServer
from collector.broker.admin_apis import AdminApis
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import (
    DescribeConfigsRequest,
    GetTelemetrySubscriptionsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
)
from proto.messages.describe_configs_request import DescribeConfigsResource
from proto.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from subscriptions.store import ConfigStore
from tests.collector.wire_client import WireClient

pytestmark = pytest.mark.timeout(60)

CLIENT_METRICS = 16
SET, DELETE, APPEND = 0, 1, 2


@pytest.fixture
async def wire(server: CollectorServer) -> AsyncIterator[WireClient]:
    client = await WireClient.connect(server.port(), "adminclient-1")
    yield client
    await client.close()


def alter(
    name: str,
    *configs: tuple[str, int, str | None],
    resource_type: int = CLIENT_METRICS,
    validate_only: bool = False,
) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=tuple(
                    AlterableConfig(name=k, config_operation=op, value=v)
                    for k, op, v in configs
                ),
            ),
        ),
        validate_only=validate_only,
    )


async def alter_error(
    wire: WireClient, request: IncrementalAlterConfigsRequest, version: int = 1
) -> int:
    response = await wire.request(ApiKeys.INCREMENTAL_ALTER_CONFIGS, version, request)
    (result,) = response.responses
    return result.error_code


async def describe(
    wire: WireClient, name: str, version: int = 4, **kwargs: object
) -> dict[str, tuple[str | None, int]]:
    request = DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(
                resource_type=CLIENT_METRICS,
                resource_name=name,
                configuration_keys=None,
            ),
        ),
        **kwargs,  # type: ignore[arg-type]
    )
    response = await wire.request(ApiKeys.DESCRIBE_CONFIGS, version, request)
    (result,) = response.results
    assert result.error_code == Errors.NONE
    return {c.name: (c.value, c.config_source) for c in result.configs}


async def test_alter_describe_list_delete_round_trip(
    server: CollectorServer, wire: WireClient
) -> None:
    request = alter(
        "producers",
        ("metrics", SET, "org.apache.kafka.producer."),
        ("interval.ms", SET, "5000"),
    )
    assert await alter_error(wire, request) == Errors.NONE
    listed = await wire.request(
        ApiKeys.LIST_CONFIG_RESOURCES,
        1,
        ListConfigResourcesRequest(resource_types=(CLIENT_METRICS,)),
    )
    assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [
        ("producers", CLIENT_METRICS)
    ]
    # Set keys come back with source 7, the unset one with its default and source 5 (Kafka 4.1+).
    assert await describe(wire, "producers") == {
        "metrics": ("org.apache.kafka.producer.", 7),
        "interval.ms": ("5000", 7),
        "match": ("", 5),
    }
    # The change is durable in the store and live in the manager.
    assert (
        ConfigStore(server.config.data_dir).describe("producers")["interval.ms"]
        == "5000"
    )
    get = await wire.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)),
    )
    assert (list(get.requested_metrics), get.push_interval_ms) == (
        ["org.apache.kafka.producer."],
        5000,
    )

    # kafka-client-metrics.sh --delete: DELETE every key removes the subscription.
    delete_all = alter(
        "producers", ("metrics", DELETE, None), ("interval.ms", DELETE, None)
    )
    assert await alter_error(wire, delete_all, version=0) == Errors.NONE
    listed = await wire.request(
        ApiKeys.LIST_CONFIG_RESOURCES, 0, ListConfigResourcesRequest()
    )
    assert listed.config_resources == ()


async def test_describe_unknown_name_returns_defaults(wire: WireClient) -> None:
    assert await describe(wire, "nothing-here", version=1) == {
        "metrics": ("", 5),
        "interval.ms": ("300000", 5),
        "match": ("", 5),
    }


async def test_describe_with_synonyms_and_documentation(wire: WireClient) -> None:
    await alter_error(wire, alter("s", ("metrics", SET, "*")))
    request = DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(
                resource_type=CLIENT_METRICS,
                resource_name="s",
                configuration_keys=("metrics",),
            ),
        ),
        include_synonyms=True,
        include_documentation=True,
    )
    (result,) = (await wire.request(ApiKeys.DESCRIBE_CONFIGS, 4, request)).results
    (config,) = result.configs
    assert (config.name, config.value, config.config_type) == ("metrics", "*", 7)
    assert [(s.name, s.value, s.source) for s in config.synonyms] == [
        ("metrics", "*", 7)
    ]
    assert config.documentation


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (alter("s", ("metrics", APPEND, "x")), Errors.INVALID_CONFIG),
        (
            alter("s", ("metrics", SET, None)),
            Errors.INVALID_REQUEST,
        ),  # ConfigAdminManager
        (alter("s", ("interval.ms", SET, "50")), Errors.INVALID_REQUEST),
        (alter("s", ("interval.ms", SET, "soon")), Errors.INVALID_CONFIG),
        (alter("s", ("match", SET, "client_id=[")), Errors.INVALID_CONFIG),
        (alter("s", ("colour", SET, "blue")), Errors.INVALID_REQUEST),
        (alter("", ("metrics", SET, "*")), Errors.INVALID_REQUEST),
        (  # a topic: what a broker answers for a topic it does not have
            alter("t", ("cleanup.policy", SET, "compact"), resource_type=2),
            Errors.UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (
            alter("s", ("metrics", SET, "a"), ("metrics", SET, "b")),
            Errors.INVALID_REQUEST,
        ),
    ],
)
async def test_alter_errors_are_kafkas(
    server: CollectorServer,
    wire: WireClient,
    request_: IncrementalAlterConfigsRequest,
    expected: Errors,
) -> None:
    assert await alter_error(wire, request_) == expected
    assert ConfigStore(server.config.data_dir).list_names() == []


async def test_validate_only_changes_nothing(
    server: CollectorServer, wire: WireClient
) -> None:
    assert (
        await alter_error(wire, alter("v", ("metrics", SET, "*"), validate_only=True))
        == Errors.NONE
    )
    assert ConfigStore(server.config.data_dir).list_names() == []


async def test_list_config_resources_type_rules(wire: WireClient) -> None:
    everything = await wire.request(
        ApiKeys.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest(resource_types=())
    )
    assert everything.error_code == Errors.NONE
    unknown = await wire.request(
        ApiKeys.LIST_CONFIG_RESOURCES,
        1,
        ListConfigResourcesRequest(resource_types=(99,)),
    )
    assert unknown.error_code == Errors.UNSUPPORTED_VERSION


@pytest.mark.parametrize(
    "api_key", [ApiKeys.DESCRIBE_CONFIGS, ApiKeys.INCREMENTAL_ALTER_CONFIGS]
)
def test_the_error_response_answers_every_resource(api_key: int) -> None:
    """What the dispatcher sends when a handler fails unexpectedly: each requested resource
    is echoed back with the error, in request order (Kafka's getErrorResponse)."""
    named = [(CLIENT_METRICS, "a"), (2, "t"), (CLIENT_METRICS, "b")]
    request: DescribeConfigsRequest | IncrementalAlterConfigsRequest
    if api_key == ApiKeys.DESCRIBE_CONFIGS:
        request = DescribeConfigsRequest(
            resources=tuple(
                DescribeConfigsResource(t, n, configuration_keys=None) for t, n in named
            )
        )
    else:
        request = IncrementalAlterConfigsRequest(
            resources=tuple(AlterConfigsResource(t, n, configs=()) for t, n in named)
        )
    api = AdminApis(store=None).table()[api_key]
    response = api.error_response(request, Errors.UNKNOWN_SERVER_ERROR)
    results = (
        response.results if api_key == ApiKeys.DESCRIBE_CONFIGS else response.responses
    )
    assert [(r.resource_type, r.resource_name) for r in results] == named
    assert {(r.error_code, r.error_message) for r in results} == {
        (Errors.UNKNOWN_SERVER_ERROR, None)
    }
