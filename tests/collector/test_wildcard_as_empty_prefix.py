"""``subscriptions.wildcard.as.empty.prefix.for``: a listed client library gets ``[""]``
(with that answer's subscription id) where Kafka answers ``["*"]``; nothing else changes."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from collector.app.config import load_config
from collector.telemetry.subscription_source import StoreSubscriptions
from subscriptions.effective import resolve
from subscriptions.matching import ClientMetadata
from subscriptions.model import Subscription
from subscriptions.subscription_id import compute_subscription_id

INSTANCE = uuid.UUID("5a2c3b1e-9f0d-4e7a-8b6c-1d2e3f405162")
EVERYTHING = Subscription(name="everything", metrics=("*",), interval_ms=2000)
PRODUCERS = Subscription(
    name="producers", metrics=("org.apache.kafka.producer.",), interval_ms=2000
)


def source(*subscriptions: Subscription) -> StoreSubscriptions:
    snapshot = SimpleNamespace(subscriptions=subscriptions)
    store = SimpleNamespace(version=1, snapshot=lambda: snapshot)
    return StoreSubscriptions(
        store,
        honour_long_intervals=False,
        wildcard_as_empty_prefix_for=frozenset({"kgo"}),
    )


def client(software: str) -> ClientMetadata:
    return ClientMetadata(
        client_instance_id="WiwLHp8NTnqLbB0uP0BRYg",
        client_id="c",
        client_software_name=software,
        client_software_version="1.22.3",
    )


def test_a_listed_library_gets_the_empty_prefix_and_its_id() -> None:
    got = source(EVERYTHING).resolve(client("kgo"), INSTANCE)
    assert got.metrics == ("",)
    assert got.push_interval_ms == 2000
    assert got.subscription_id == compute_subscription_id(("",), 2000, INSTANCE)
    kafkas = resolve((EVERYTHING,), client("kgo"), INSTANCE)
    assert got.subscription_id != kafkas.subscription_id
    assert got.matched == ("everything",)


@pytest.mark.parametrize("software", ["librdkafka", "apache-kafka-java", "unknown"])
def test_every_other_library_gets_kafkas_answer(software: str) -> None:
    got = source(EVERYTHING).resolve(client(software), INSTANCE)
    assert got == resolve((EVERYTHING,), client(software), INSTANCE)
    assert got.metrics == ("*",)


def test_prefixes_are_kafkas_for_a_listed_library_too() -> None:
    got = source(PRODUCERS).resolve(client("kgo"), INSTANCE)
    assert got == resolve((PRODUCERS,), client("kgo"), INSTANCE)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ("kgo",)),
        ({"KTC_SUBSCRIPTIONS_WILDCARD_AS_EMPTY_PREFIX_FOR": ""}, ()),
        (
            {"KTC_SUBSCRIPTIONS_WILDCARD_AS_EMPTY_PREFIX_FOR": "kgo, dekaf"},
            ("kgo", "dekaf"),
        ),
        ({"KTC_SUBSCRIPTIONS_WILDCARD_AS_EMPTY_PREFIX_FOR": "[kgo]"}, ("kgo",)),
    ],
)
def test_the_setting(environ: dict[str, str], expected: tuple[str, ...]) -> None:
    config = load_config(environ=environ)
    assert config.subscriptions_wildcard_as_empty_prefix_for == expected
