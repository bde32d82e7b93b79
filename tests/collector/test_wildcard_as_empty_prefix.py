"""``subscriptions.wildcard.as.empty.prefix.for``: a listed client library gets ``[""]``
(with that answer's subscription id) where Kafka answers ``["*"]``; nothing else changes.
And what counts as an empty push (``holds_a_metric``)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from collector.app.config import load_config
from collector.telemetry.payload import holds_a_metric
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


def metrics_data(metrics_per_scope: list[list[str]], *, resource: bool = True) -> bytes:
    data = MetricsData()
    resource_metrics = data.resource_metrics.add()
    if resource:
        attribute = resource_metrics.resource.attributes.add()
        attribute.key, attribute.value.string_value = "service.name", "app"
    for names in metrics_per_scope:
        scope = resource_metrics.scope_metrics.add()
        scope.scope.name = "kgo"
        for name in names:
            metric = scope.metrics.add()
            metric.name = name
            metric.gauge.data_points.add().as_double = 1.5
    return data.SerializeToString()


@pytest.mark.parametrize(
    ("payload", "holds"),
    [
        (b"", False),
        (MetricsData().SerializeToString(), False),
        (metrics_data([]), False),
        (metrics_data([[]]), False),
        (metrics_data([[], []], resource=False), False),
        (metrics_data([["a"]]), True),
        (metrics_data([[], ["b"]]), True),
        (metrics_data([["x" * 300] * 3]), True),  # multi-byte lengths
    ],
)
def test_holds_a_metric(payload: bytes, holds: bool) -> None:
    MetricsData.FromString(payload)  # what the push path has already checked
    assert holds_a_metric(payload) is holds
    # Trailing unknown fields of every wire type are skipped, not taken for metrics.
    unknown = b"\x18\x96\x01" + b"\x21" + b"\0" * 8 + b"\x2d" + b"\0" * 4
    assert holds_a_metric(unknown + payload) is holds
