"""Admin operations with kafka-client-metrics.sh semantics."""

from __future__ import annotations

from pathlib import Path

import pytest

from proto.errors import Errors, KafkaError
from subscriptions import admin
from subscriptions.kafka_uuid import kafka_uuid_from_str
from subscriptions.store import ConfigStore


@pytest.fixture
def store(tmp_path: Path) -> ConfigStore:
    config_store = ConfigStore(tmp_path)
    config_store.load()
    return config_store


def test_alter_sets_given_options_and_leaves_the_rest(store: ConfigStore) -> None:
    assert (
        admin.alter(
            store, "producers", metrics="org.apache.kafka.producer.", interval="60000"
        )
        == "producers"
    )
    admin.alter(store, "producers", match="client_software_name=librdkafka")
    assert store.describe("producers") == {
        "metrics": "org.apache.kafka.producer.",
        "interval.ms": "60000",
        "match": "client_software_name=librdkafka",
    }


def test_an_empty_option_deletes_that_key(store: ConfigStore) -> None:
    admin.alter(store, "s", metrics="a.", interval="1000")
    admin.alter(store, "s", interval="")
    assert store.describe("s") == {"metrics": "a."}
    admin.alter(store, "s", metrics="")
    assert store.list_names() == []


def test_generate_name_is_a_kafka_uuid(store: ConfigStore) -> None:
    name = admin.alter(store, generate_name=True, metrics="*")
    assert "-" not in name
    kafka_uuid_from_str(name)
    assert admin.list_subscriptions(store) == admin.list(store) == [name]


@pytest.mark.parametrize(("name", "generate"), [(None, False), ("x", True)])
def test_exactly_one_of_name_or_generate_name(
    store: ConfigStore, name: str | None, generate: bool
) -> None:
    with pytest.raises(admin.AdminUsageError, match="One of --name or --generate-name"):
        admin.alter(store, name, generate_name=generate, metrics="a.")


def test_bad_values_carry_kafka_errors(store: ConfigStore) -> None:
    with pytest.raises(KafkaError) as raised:
        admin.alter(store, "s", interval="10")
    assert raised.value.error_code == Errors.INVALID_REQUEST
    assert store.list_names() == []


def test_describe_prints_like_the_kafka_tool(store: ConfigStore) -> None:
    admin.alter(store, "a", metrics="m1,m2")
    admin.alter(store, "b", interval="5000", match="client_id=x")
    assert admin.format_describe(admin.describe(store)) == (
        "Client metrics configs for a are:\n"
        "  metrics=m1,m2\n"
        "  interval.ms=300000\n"
        "  match=\n"
        "Client metrics configs for b are:\n"
        "  metrics=\n"
        "  interval.ms=5000\n"
        "  match=client_id=x"
    )
    assert admin.describe(store, "b") == [
        ("b", {"metrics": "", "interval.ms": "5000", "match": "client_id=x"})
    ]
    with pytest.raises(admin.AdminUsageError, match="does not exist"):
        admin.describe(store, "missing")


def test_delete(store: ConfigStore) -> None:
    admin.alter(store, "s", metrics="a.")
    admin.delete(store, "s")
    assert admin.list_subscriptions(store) == []
    with pytest.raises(admin.AdminUsageError, match="does not exist"):
        admin.delete(store, "s")
    with pytest.raises(admin.AdminUsageError, match="must be specified with --delete"):
        admin.delete(store, "")
