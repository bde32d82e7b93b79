"""The eight-level (user, client-id) precedence, row by row, and entity parsing."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from clock.testing import FakeClock
from quota import (
    DEFAULT,
    QUOTA_PRECEDENCE,
    ClientQuotaEntity,
    ClientQuotaManager,
    ClientQuotaManagerConfig,
    IpQuotaEntity,
    Metrics,
    Quota,
    QuotaType,
    parse_entity,
)
from quota.client_quota_manager import UNLIMITED

USER, CLIENT = "alice", "app-1"


@dataclass(frozen=True)
class StoreEntity:
    """The shape of the config store's QuotaEntity: (type, name or None) pairs."""

    entries: tuple[tuple[str, str | None], ...]


# Every level configured for (alice, app-1), each with its own limit; the metric tags the
# client's sensor gets at that level (Kafka's quotaMetricTags).
LEVELS = [
    # rank, entity,                                        limit,  (user tag, client-id tag)
    (1, ClientQuotaEntity(USER, CLIENT), 1000.0, (USER, CLIENT)),
    (2, ClientQuotaEntity(USER, DEFAULT), 2000.0, (USER, CLIENT)),
    (3, ClientQuotaEntity(USER, None), 3000.0, (USER, "")),
    (4, ClientQuotaEntity(DEFAULT, CLIENT), 4000.0, (USER, CLIENT)),
    (5, ClientQuotaEntity(DEFAULT, DEFAULT), 5000.0, (USER, CLIENT)),
    (6, ClientQuotaEntity(DEFAULT, None), 6000.0, (USER, "")),
    (7, ClientQuotaEntity(None, CLIENT), 7000.0, ("", CLIENT)),
    (8, ClientQuotaEntity(None, DEFAULT), 8000.0, ("", CLIENT)),
]


def test_the_table_is_kafkas_documented_order() -> None:
    assert [level.path for level in QUOTA_PRECEDENCE] == [
        "/config/users/<user>/clients/<client-id>",
        "/config/users/<user>/clients/<default>",
        "/config/users/<user>",
        "/config/users/<default>/clients/<client-id>",
        "/config/users/<default>/clients/<default>",
        "/config/users/<default>",
        "/config/clients/<client-id>",
        "/config/clients/<default>",
    ]
    assert [level.rank for level in QUOTA_PRECEDENCE] == list(range(1, 9))
    for level, (rank, entity, _limit, _tags) in zip(
        QUOTA_PRECEDENCE, LEVELS, strict=True
    ):
        assert level.rank == rank
        assert level.entity_key(USER, CLIENT) == entity.key


def make_manager(metrics: Metrics, clock: FakeClock) -> ClientQuotaManager:
    return ClientQuotaManager(
        ClientQuotaManagerConfig(), metrics, QuotaType.PRODUCE, clock.now_ms()
    )


def test_most_specific_level_wins_walking_down_all_eight(
    metrics: Metrics, clock: FakeClock
) -> None:
    manager = make_manager(metrics, clock)
    for _rank, entity, limit, _tags in LEVELS:
        manager.update_quota(entity, Quota.upper_bound(limit))
    for rank, entity, limit, tags in LEVELS:
        assert manager.quota(USER, CLIENT).bound == limit, f"rank {rank}"
        sensors = manager.get_or_create_quota_sensors(USER, CLIENT, clock.now_ms())
        assert sensors.metric_tags == tags, f"rank {rank}"
        (metric,) = sensors.quota_sensor.metrics
        assert metric.config.quota == Quota.upper_bound(limit), f"rank {rank}"
        manager.update_quota(entity, None)  # remove it: the next rank applies
    assert manager.quota(USER, CLIENT).bound == UNLIMITED
    assert not manager.quotas_enabled


@pytest.mark.parametrize(
    ("rank", "entity", "limit", "tags"), LEVELS, ids=[f"rank{r[0]}" for r in LEVELS]
)
def test_each_level_alone_applies_to_the_client(
    metrics: Metrics,
    clock: FakeClock,
    rank: int,
    entity: ClientQuotaEntity,
    limit: float,
    tags: tuple[str, str],
) -> None:
    manager = make_manager(metrics, clock)
    manager.update_quota(entity, Quota.upper_bound(limit))
    assert manager.quota(USER, CLIENT).bound == limit
    # With one kind of entity configured Kafka takes a fast path for the tags: the user tag
    # when users are configured, the client-id tag when client-ids are, both for pairs.
    sensors = manager.get_or_create_quota_sensors(USER, CLIENT, clock.now_ms())
    expected_tags = (
        USER if entity.user is not None else "",
        CLIENT if entity.client_id is not None else "",
    )
    assert sensors.metric_tags == expected_tags


@pytest.mark.parametrize(
    ("user", "client_id", "expected_limit", "expected_tags"),
    [
        ("alice", "app-1", 1000.0, ("alice", "app-1")),  # rank 1
        (
            "alice",
            "other",
            2000.0,
            ("alice", "other"),
        ),  # rank 2: alice's per-client default
        (
            "bob",
            "app-1",
            4000.0,
            ("bob", "app-1"),
        ),  # rank 4: any user with client app-1
        ("bob", "other", 5000.0, ("bob", "other")),  # rank 5
    ],
)
def test_defaults_apply_to_other_users_and_clients(
    metrics: Metrics,
    clock: FakeClock,
    user: str,
    client_id: str,
    expected_limit: float,
    expected_tags: tuple[str, str],
) -> None:
    manager = make_manager(metrics, clock)
    for _rank, entity, limit, _tags in LEVELS:
        manager.update_quota(entity, Quota.upper_bound(limit))
    assert manager.quota(user, client_id).bound == expected_limit
    assert (
        manager.get_or_create_quota_sensors(user, client_id, clock.now_ms()).metric_tags
        == expected_tags
    )


def test_user_names_are_sanitized_in_tags_and_keys_client_ids_are_not(
    metrics: Metrics, clock: FakeClock
) -> None:
    manager = make_manager(metrics, clock)
    user, client_id = "CN=alice,O=acme", "client@#$%"
    manager.update_quota(ClientQuotaEntity(user, client_id), Quota.upper_bound(10))
    sensors = manager.get_or_create_quota_sensors(user, client_id, clock.now_ms())
    assert sensors.metric_tags == ("CN%3Dalice%2CO%3Dacme", client_id)
    assert sensors.quota_sensor.name == "Produce-CN%3Dalice%2CO%3Dacme:client@#$%"
    assert manager.quota(user, client_id).bound == 10


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("users/alice", ClientQuotaEntity("alice", None)),
        ("users/<default>", ClientQuotaEntity(DEFAULT, None)),
        ("clients/app-1", ClientQuotaEntity(None, "app-1")),
        ("clients/<default>", ClientQuotaEntity(None, DEFAULT)),
        ("users/alice/clients/app-1", ClientQuotaEntity("alice", "app-1")),
        ("users/<default>/clients/<default>", ClientQuotaEntity(DEFAULT, DEFAULT)),
        ("/config/users/alice/clients/<default>", ClientQuotaEntity("alice", DEFAULT)),
        ("ips/10.0.0.7", IpQuotaEntity("10.0.0.7")),
        ("ips/0:0:0:0:0:0:0:1", IpQuotaEntity("::1")),
        ("ips/<default>", IpQuotaEntity(DEFAULT)),
        ({"user": "alice", "client-id": None}, ClientQuotaEntity("alice", DEFAULT)),
        ((("client-id", "app-1"),), ClientQuotaEntity(None, "app-1")),
        ({"ip": None}, IpQuotaEntity(DEFAULT)),
        # paths carry names URL-encoded (Kafka's Sanitizer); maps carry them plain
        ("users/CN%3Dalice%2CO%3Dacme", ClientQuotaEntity("CN=alice,O=acme", None)),
        ("users/%3Cdefault%3E", ClientQuotaEntity("<default>", None)),
        ({"user": "<default>"}, ClientQuotaEntity("<default>", None)),
        (
            StoreEntity((("user", None), ("client-id", "app-1"))),
            ClientQuotaEntity(DEFAULT, "app-1"),
        ),
    ],
)
def test_parse_entity(spec: object, expected: object) -> None:
    assert parse_entity(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("topics/t", "Unhandled client quota entity type: topics"),
        ("users", "is not one of"),
        ("ips/not-an-ip", "not a valid IP"),
        ({"ip": "10.0.0.1", "user": "alice"}, "Invalid quota entity combination"),
        ({}, "Invalid empty client quota entity"),
        ({"user": "a", "users": "b"}, "duplicate entity entry user"),
        (42, "not a quota entity"),
        ({"user": ""}, "Empty user not supported"),
        ("users/alice/clients/", "Empty client-id not supported"),
    ],
)
def test_parse_entity_rejects_bad_specs(spec: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_entity(spec)


def test_entity_paths_round_trip() -> None:
    odd_names = [
        ClientQuotaEntity("a/b", "c/clients/d"),
        ClientQuotaEntity("<default>", "50%"),
    ]
    for entity in [level[1] for level in LEVELS] + odd_names:
        assert parse_entity(entity.path) == entity
