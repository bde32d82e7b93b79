"""Apache Kafka trunk's answers to CLIENT_METRICS alterations and telemetry ids, over the
wire (proto's client codec; confluent-kafka's AdminClient has no CLIENT_METRICS type):

- ``match`` items, like ``metrics`` items, must not be empty (repeats are kept once);
- request-shape errors answer INVALID_REQUEST as ``ConfigAdminManager.preprocess`` does;
- a changed value over 32767 characters is INVALID_CONFIG (``ConfigurationControlManager``);
- a SET to the stored value changes nothing: no new version, no re-evaluation;
- the all-ones instance id is an ordinary id, as Kafka's ``Uuid`` reserves only 0 and 1.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from collector.app.cli import cli
from collector.app.server import CollectorServer
from collector.telemetry.client_metrics import ClientMetricsManager
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import (
    GetTelemetrySubscriptionsRequest,
    IncrementalAlterConfigsRequest,
    PushTelemetryRequest,
)
from proto.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from subscriptions.store import ConfigStore
from tests.collector.collector_testkit import (
    collector_config,
    make_session,
    otlp_payload,
    running,
)
from tests.collector.wire_client import WireClient

pytestmark = pytest.mark.timeout(60)

CLIENT_METRICS, TOPIC = 16, 2
SET, DELETE, APPEND = 0, 1, 2
ALL_ONES = uuid.UUID("ffffffff-ffff-ffff-ffff-ffffffffffff")
TOO_LONG = (
    "The configuration value cannot be added because it exceeds the maximum value "
    "size of 32767 bytes."
)


@pytest.fixture
def store(tmp_path: Path) -> ConfigStore:
    return ConfigStore(tmp_path / "data")


@pytest.fixture
async def server(tmp_path: Path, store: ConfigStore) -> AsyncIterator[CollectorServer]:
    async with running(collector_config(tmp_path), store=store) as node:
        yield node


@pytest.fixture
async def wire(server: CollectorServer) -> AsyncIterator[WireClient]:
    client = await WireClient.connect(server.port(), "adminclient-1")
    yield client
    await client.close()


def resource(
    name: str,
    *configs: tuple[str, int, str | None],
    resource_type: int = CLIENT_METRICS,
) -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=resource_type,
        resource_name=name,
        configs=tuple(
            AlterableConfig(name=k, config_operation=op, value=v)
            for k, op, v in configs
        ),
    )


async def alter(
    wire: WireClient, *resources: AlterConfigsResource
) -> list[tuple[str, int, str | None]]:
    """(resource name, error code, error message) per resource, in request order."""
    request = IncrementalAlterConfigsRequest(resources=resources, validate_only=False)
    response = await wire.request(ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, request)
    return [
        (r.resource_name, r.error_code, r.error_message) for r in response.responses
    ]


# ------------------------------------------------------------------ list items
@pytest.mark.parametrize(
    ("match", "message"),
    [
        ("client_id=a,", "Configuration 'match' values must not be empty."),
        (",client_id=a", "Configuration 'match' values must not be empty."),
    ],
)
async def test_match_items_must_not_be_empty(
    store: ConfigStore, wire: WireClient, match: str, message: str
) -> None:
    assert await alter(
        wire, resource("s", ("metrics", SET, "a."), ("match", SET, match))
    ) == [("s", Errors.INVALID_CONFIG, message)]
    assert store.list_names() == []


@pytest.mark.parametrize(
    ("configs", "described"),
    [
        ({"metrics": "a,a"}, {"metrics": "a"}),
        ({"match": "client_id=a,client_id=a"}, {"match": "client_id=a"}),
        ({"match": "client_id=a, client_id=a"}, {"match": "client_id=a"}),
    ],
)
async def test_repeated_list_items_are_accepted_once_like_kafka_4_4(
    store: ConfigStore,
    wire: WireClient,
    configs: dict[str, str],
    described: dict[str, str],
) -> None:
    """Kafka 4.4.0 answers 0 and keeps each item once (KAFKA-19112's refusal is not in
    4.4.0; tests/compat checks it against a 4.4.0 broker)."""
    ops = tuple((key, SET, value) for key, value in configs.items())
    assert await alter(wire, resource("s", *ops)) == [("s", Errors.NONE, None)]
    assert store.describe("s") == described


# ------------------------------------------------------------------ ConfigAdminManager.preprocess
async def test_a_null_value_is_refused_on_every_operation_but_delete(
    wire: WireClient,
) -> None:
    assert await alter(
        wire, resource("s", ("metrics", SET, None), ("match", APPEND, None))
    ) == [
        ("s", Errors.INVALID_REQUEST, "Null value not supported for : metrics, match")
    ]
    assert await alter(
        wire, resource("s", ("metrics", SET, "a."), ("match", DELETE, None))
    ) == [("s", Errors.NONE, None)]


async def test_a_resource_named_twice_fails_both_times_and_only_it(
    store: ConfigStore, wire: WireClient
) -> None:
    answers = await alter(
        wire,
        resource("twice", ("metrics", SET, "a.")),
        resource("once", ("metrics", SET, "b.")),
        resource("twice", ("interval.ms", SET, "60000")),
    )
    assert answers == [
        ("twice", Errors.INVALID_REQUEST, "Each resource must appear at most once."),
        ("once", Errors.NONE, None),
        ("twice", Errors.INVALID_REQUEST, "Each resource must appear at most once."),
    ]
    assert store.list_names() == ["once"]


async def test_a_config_key_named_twice_is_refused_before_null_values(
    wire: WireClient,
) -> None:
    assert await alter(
        wire, resource("s", ("metrics", SET, "a."), ("metrics", DELETE, None))
    ) == [("s", Errors.INVALID_REQUEST, "Error due to duplicate config keys")]
    assert await alter(
        wire, resource("s", ("match", SET, None), ("match", SET, None))
    ) == [("s", Errors.INVALID_REQUEST, "Error due to duplicate config keys")]


# ------------------------------------------------------------------ value size
async def test_a_value_of_32767_characters_is_accepted_over_the_wire(
    store: ConfigStore, wire: WireClient
) -> None:
    """A longer one cannot come over the wire: a string field is at most 32767 bytes in
    Kafka's codec, the collector's included (a longer one is a malformed request)."""
    at_limit = ",".join(f"p{i:05d}" for i in range(4681)) + "x"
    assert len(at_limit) == 32767
    assert await alter(wire, resource("s", ("metrics", SET, at_limit))) == [
        ("s", Errors.NONE, None)
    ]
    assert store.describe("s")["metrics"] == at_limit


def test_a_value_over_32767_characters_is_invalid_config_from_the_cli(
    tmp_path: Path,
) -> None:
    data = str(tmp_path / "data")
    result = CliRunner().invoke(
        cli,
        [
            "subscriptions",
            "alter",
            "--data-dir",
            data,
            "--name",
            "s",
            "--metrics",
            "m" * 32768,
        ],
    )
    assert result.exit_code == 1
    assert TOO_LONG in result.stderr and "INVALID_CONFIG" in result.stderr
    assert ConfigStore(data).list_names() == []


# ------------------------------------------------------------------ unchanged SET
async def test_setting_the_stored_value_again_changes_nothing(
    server: CollectorServer, store: ConfigStore, wire: WireClient
) -> None:
    configs = (
        ("metrics", SET, "org.apache.kafka.producer."),
        ("interval.ms", SET, "60000"),
    )
    assert await alter(wire, resource("s", *configs)) == [("s", Errors.NONE, None)]
    manager = server.manager
    assert manager is not None
    telemetry = await WireClient.connect(server.port(), "producer-1")
    try:
        get = GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0))
        first = await telemetry.request(ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, get)
        assert first.error_code == Errors.NONE
        instance_id = first.client_instance_id
        instance = manager.instance(instance_id)
        assert instance is not None
        version = store.version

        # The same values again: nothing written, the version kept, the instance not
        # re-evaluated, so a second Get inside the interval is still throttled.
        assert await alter(wire, resource("s", *configs)) == [("s", Errors.NONE, None)]
        assert store.version == version
        again = GetTelemetrySubscriptionsRequest(client_instance_id=instance_id)
        second = await telemetry.request(ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, again)
        assert second.error_code == Errors.THROTTLING_QUOTA_EXCEEDED
        assert manager.instance(instance_id) is instance
        assert instance.subscription_version == version

        # A real change is re-evaluated at once (the control).
        assert await alter(
            wire, resource("s", ("metrics", SET, "org.apache.kafka.consumer."))
        ) == [("s", Errors.NONE, None)]
        third = await telemetry.request(ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, again)
        assert third.error_code == Errors.NONE
        assert list(third.requested_metrics) == ["org.apache.kafka.consumer."]
        assert manager.instance(instance_id) is not instance
    finally:
        await telemetry.close()


# ------------------------------------------------------------------ all-ones instance id
def test_the_all_ones_instance_id_is_an_ordinary_id(
    manager: ClientMetricsManager,
) -> None:
    """Kafka's Get replaces only ZERO_UUID and its Push refuses only Uuid.RESERVED
    (ZERO_UUID, ONE_UUID = METADATA_TOPIC_ID); the all-ones id is neither."""
    session = make_session()
    got = manager.get_telemetry_subscriptions(ALL_ONES, session, "app-1", 0)
    assert got.error_code == Errors.NONE
    assert got.client_instance_id == ALL_ONES
    assert manager.instance(ALL_ONES) is not None
    pushed = manager.push_telemetry(
        PushTelemetryRequest(
            client_instance_id=ALL_ONES,
            subscription_id=got.subscription_id,
            terminating=False,
            compression_type=0,
            metrics=otlp_payload("org.apache.kafka.producer.record.send.rate"),
        ),
        session,
        "app-1",
        1,
        0,
    )
    assert pushed.error_code == Errors.NONE
