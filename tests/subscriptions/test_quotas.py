"""Client quota entities and values: Kafka's validation messages, paths, filters, the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from proto.errors import Errors, KafkaError
from subscriptions.config_file import ConfigFileError
from subscriptions.quota_entities import ANY, QuotaEntity, QuotaFilterComponent
from subscriptions.store import ConfigStore

INVALID_REQUEST = Errors.INVALID_REQUEST


@pytest.fixture
def store(tmp_path: Path) -> ConfigStore:
    config_store = ConfigStore(tmp_path)
    config_store.load()
    return config_store


# (entity, set, delete, exact message) -- all INVALID_REQUEST, as ClientQuotaControlManager
REJECTED = [
    ({}, {"producer_byte_rate": 1.0}, [], "Invalid empty client quota entity"),
    (
        {"group": "g"},
        {"producer_byte_rate": 1.0},
        [],
        "Unhandled client quota entity type: group",
    ),
    ({"user": ""}, {"producer_byte_rate": 1.0}, [], "Empty user not supported"),
    (
        {"client-id": ""},
        {"producer_byte_rate": 1.0},
        [],
        "Empty client-id not supported",
    ),
    (
        {"ip": "10.0.0.1", "user": "a"},
        {"connection_creation_rate": 1.0},
        [],
        "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
    ),
    (
        {"ip": "not-an-ip"},
        {"connection_creation_rate": 1.0},
        [],
        "not-an-ip is not a valid IP or resolvable host.",
    ),
    (
        {"user": "a"},
        {"connection_creation_rate": 1.0},
        [],
        "Invalid configuration key connection_creation_rate",
    ),
    (
        {"ip": "10.0.0.1"},
        {"producer_byte_rate": 1.0},
        [],
        "Invalid configuration key producer_byte_rate",
    ),
    (
        {"user": "a"},
        {"producer_byte_rate": 0.0},
        [],
        "Quota producer_byte_rate must be greater than 0",
    ),
    (
        {"user": "a"},
        {"request_percentage": -1.0},
        [],
        "Quota request_percentage must be greater than 0",
    ),
    (
        {"user": "a"},
        {"producer_byte_rate": 1.5},
        [],
        "producer_byte_rate cannot be a fractional value.",
    ),
    (
        {"ip": None},
        {"connection_creation_rate": 2.5},
        [],
        "connection_creation_rate cannot be a fractional value.",
    ),
    (
        {"ip": None},
        {"connection_creation_rate": 2.0**31},
        [],
        "Proposed value for connection_creation_rate is too large for an INT.",
    ),
    (
        {"user": "a"},
        {"consumer_byte_rate": 2.0**64},
        [],
        "Proposed value for consumer_byte_rate is too large for a LONG.",
    ),
    (
        {"user": "a"},
        {"request_percentage": float("nan")},
        [],
        "Quota request_percentage must be a finite number",
    ),
    (
        {"user": "a"},
        {"producer_byte_rate": 10.0},
        ["producer_byte_rate"],
        "Duplicate quota key producer_byte_rate not updating quota for this entity user=a",
    ),
]


@pytest.mark.parametrize(("entity", "set_", "delete", "message"), REJECTED)
def test_rejected_alterations(
    store: ConfigStore,
    entity: dict[str, str | None],
    set_: dict[str, float],
    delete: list[str],
    message: str,
) -> None:
    with pytest.raises(KafkaError) as raised:
        store.alter_quotas(entity, set_, delete)
    assert raised.value.error_code == INVALID_REQUEST
    assert str(raised.value) == message
    assert dict(store.snapshot().quotas) == {}


def test_accepted_values() -> None:
    assert QuotaEntity.of({"ip": "::1"}).path == "ips/%3A%3A1"
    # DOUBLE keys take fractions; integral keys take whole doubles
    entity = QuotaEntity.of({"user": "a"})
    from subscriptions.quota_entities import validate_quota_value

    assert validate_quota_value(entity, "request_percentage", 0.5) == 0.5
    assert validate_quota_value(entity, "producer_byte_rate", 1048576.0) == 1048576.0
    assert (
        validate_quota_value(entity, "producer_byte_rate", 1048576.0000001)
        == 1048576.0000001
    )


@pytest.mark.parametrize(
    ("entity", "path"),
    [
        ({"user": "alice"}, "users/alice"),
        ({"user": None}, "users/<default>"),
        ({"client-id": "app-1"}, "clients/app-1"),
        ({"client-id": None}, "clients/<default>"),
        ({"client-id": "app", "user": "alice"}, "users/alice/clients/app"),
        ({"user": None, "client-id": None}, "users/<default>/clients/<default>"),
        (
            {"user": "<default>"},
            "users/%3Cdefault%3E",
        ),  # a user literally named <default>
        ({"user": "CN=a/b,O=x"}, "users/CN%3Da%2Fb%2CO%3Dx"),
        ({"ip": "10.0.0.1"}, "ips/10.0.0.1"),
        ({"ip": None}, "ips/<default>"),
    ],
)
def test_entity_paths_round_trip(entity: dict[str, str | None], path: str) -> None:
    quota_entity = QuotaEntity.of(entity)
    assert quota_entity.path == path
    assert QuotaEntity.from_path(path) == quota_entity
    assert quota_entity.as_dict() == entity


@pytest.mark.parametrize(
    "path",
    [
        "users",
        "users/a/ips/b",
        "clients/a/users/b",
        "groups/g",
        "users/a/users/b",
        "ips/x.y",
        "users/",
    ],
)
def test_bad_paths(path: str) -> None:
    with pytest.raises(KafkaError) as raised:
        QuotaEntity.from_path(path)
    assert raised.value.error_code == INVALID_REQUEST


def test_alter_delete_and_persist(store: ConfigStore, tmp_path: Path) -> None:
    store.alter_quotas(
        {"user": "alice"}, {"producer_byte_rate": 1024, "request_percentage": 50}
    )
    store.alter_quotas(
        {"user": "alice"}, {"consumer_byte_rate": 2048}, ["request_percentage"]
    )
    store.alter_quotas({"ip": None}, {"connection_creation_rate": 100})
    store.alter_quotas(
        {"user": None, "client-id": None}, {"controller_mutation_rate": 0.5}
    )
    expected = {
        QuotaEntity.of({"user": "alice"}): {
            "producer_byte_rate": 1024.0,
            "consumer_byte_rate": 2048.0,
        },
        QuotaEntity.of({"ip": None}): {"connection_creation_rate": 100.0},
        QuotaEntity.of({"user": None, "client-id": None}): {
            "controller_mutation_rate": 0.5
        },
    }
    assert store.describe_quotas() == expected
    assert ConfigStore(tmp_path).load().quotas == expected
    # deleting the last key removes the entity
    store.alter_quotas({"ip": None}, {}, ["connection_creation_rate"])
    assert QuotaEntity.of({"ip": None}) not in store.describe_quotas()
    # validate_only changes nothing
    store.alter_quotas({"user": "bob"}, {"producer_byte_rate": 1}, validate_only=True)
    assert QuotaEntity.of({"user": "bob"}) not in store.describe_quotas()


def test_describe_filters(store: ConfigStore) -> None:
    store.alter_quotas({"user": "alice"}, {"producer_byte_rate": 1})
    store.alter_quotas({"user": None}, {"producer_byte_rate": 2})
    store.alter_quotas({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 3})
    store.alter_quotas({"client-id": "app"}, {"producer_byte_rate": 4})
    store.alter_quotas({"ip": "10.0.0.1"}, {"connection_creation_rate": 5})

    def paths(components: list[QuotaFilterComponent], strict: bool = False) -> set[str]:
        return {entity.path for entity in store.describe_quotas(components, strict)}

    assert paths([QuotaFilterComponent("user", "alice")]) == {
        "users/alice",
        "users/alice/clients/app",
    }
    assert paths([QuotaFilterComponent("user", "alice")], strict=True) == {
        "users/alice"
    }
    assert paths([QuotaFilterComponent("user", None)]) == {"users/<default>"}
    assert paths([QuotaFilterComponent("user", ANY)], strict=True) == {
        "users/alice",
        "users/<default>",
    }
    assert paths(
        [QuotaFilterComponent("client-id", "app"), QuotaFilterComponent("user", ANY)]
    ) == {"users/alice/clients/app"}
    assert paths([QuotaFilterComponent("ip", ANY)]) == {"ips/10.0.0.1"}
    assert len(paths([])) == 5


@pytest.mark.parametrize(
    ("components", "code", "message"),
    [
        ([QuotaFilterComponent("")], INVALID_REQUEST, "Invalid empty entity type."),
        (
            [QuotaFilterComponent("user"), QuotaFilterComponent("user", "a")],
            INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.",
        ),
        (
            [QuotaFilterComponent("group")],
            Errors.UNSUPPORTED_VERSION,
            "Unsupported entity type group",
        ),
        (
            [QuotaFilterComponent("ip"), QuotaFilterComponent("user")],
            INVALID_REQUEST,
            (
                "Invalid entity filter component combination. IP filter component should not be used with "
                "user or clientId filter component."
            ),
        ),
    ],
)
def test_bad_filters(
    store: ConfigStore,
    components: list[QuotaFilterComponent],
    code: Errors,
    message: str,
) -> None:
    with pytest.raises(KafkaError) as raised:
        store.describe_quotas(components)
    assert (raised.value.error_code, str(raised.value)) == (code, message)


@pytest.mark.parametrize(
    ("content", "line", "fragment"),
    [
        (
            "quotas:\n  users/alice:\n    producer_byte_rate: -1\n",
            3,
            "at 'users/alice.producer_byte_rate': Quota producer_byte_rate must be greater than 0",
        ),
        (
            "quotas:\n  users/alice:\n    producer_byte_rate: lots\n",
            3,
            "Quota producer_byte_rate must be a number, got 'lots'",
        ),
        (
            "quotas:\n  teams/a:\n    producer_byte_rate: 1\n",
            2,
            "unknown entity kind 'teams'",
        ),
        (
            "quotas:\n  ips/10.0.0.1:\n    producer_byte_rate: 1\n",
            3,
            "Invalid configuration key producer_byte_rate",
        ),
        (
            "quotas:\n  users/a: {producer_byte_rate: 1}\n  users/%61: {producer_byte_rate: 2}\n",
            3,
            "the same entity is written twice",
        ),
    ],
)
def test_invalid_quota_files(
    tmp_path: Path, content: str, line: int, fragment: str
) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "quotas.yaml").write_text(content)
    with pytest.raises(ConfigFileError) as raised:
        ConfigStore(tmp_path).load()
    assert raised.value.line == line
    assert fragment in str(raised.value)


def test_hand_written_quotas_accept_unquoted_numbers_and_refuse_text(
    tmp_path: Path,
) -> None:
    """1e6 is a number (YAML 1.2, although PyYAML reads YAML 1.1); '12.5' is text, refused
    as the one quota validation refuses it from the CLI and the wire."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "quotas.yaml").write_text(
        "quotas:\n  clients/<default>: {producer_byte_rate: 1e6, request_percentage: 12.5}\n"
    )
    quotas = ConfigStore(tmp_path).load().quotas
    assert quotas[QuotaEntity.of({"client-id": None})] == {
        "producer_byte_rate": 1e6,
        "request_percentage": 12.5,
    }
    (tmp_path / "config" / "quotas.yaml").write_text(
        "quotas:\n  clients/<default>: {request_percentage: '12.5'}\n"
    )
    with pytest.raises(
        ConfigFileError, match="Quota request_percentage must be a number, got '12.5'"
    ):
        ConfigStore(tmp_path).load()


def test_a_bad_subscriptions_file_does_not_block_a_good_quotas_file(
    store: ConfigStore,
) -> None:
    (store.config_dir / "client-metrics.yaml").write_text("subscriptions:\n  s: [a]\n")
    (store.config_dir / "quotas.yaml").write_text(
        "quotas:\n  users/a: {producer_byte_rate: 1}\n"
    )
    assert store.reload() is True
    assert store.last_error is not None and "client-metrics.yaml" in store.last_error
    assert len(store.snapshot().quotas) == 1
    assert store.list_names() == []
