"""Merging matched subscriptions and the SubscriptionId, with worked vectors of Kafka's
``ClientMetricsManager.computeSubscriptionId``."""

from __future__ import annotations

import uuid

import pytest

from subscriptions.effective import resolve
from subscriptions.java_hashset import JavaHashSet
from subscriptions.kafka_uuid import kafka_uuid_from_str, kafka_uuid_hash_code
from subscriptions.matching import ClientMetadata
from subscriptions.model import Subscription
from subscriptions.subscription_id import compute_subscription_id

INSTANCE = kafka_uuid_from_str("VQQTF4UpT8qqtooenFFlgA")
OTHER = uuid.UUID(int=(0x1234567890ABCDEF << 64) | 0xFEDCBA0987654321)
CLIENT = ClientMetadata(
    client_instance_id="VQQTF4UpT8qqtooenFFlgA",
    client_id="app-1",
    client_software_name="librdkafka",
    client_software_version="2.16.0",
)


def _sub(name: str, **configs: str) -> Subscription:
    return Subscription.from_configs(
        name, {key.replace("_", "."): value for key, value in configs.items()}
    )


def test_instance_id_vector() -> None:
    assert INSTANCE == uuid.UUID(int=(0x5504131785294FCA << 64) | 0xAAB68A1E9C516580)
    assert kafka_uuid_hash_code(INSTANCE) == -422923453
    assert kafka_uuid_hash_code(OTHER) == -81370433


# computeSubscriptionId's worked vectors: (subscriptions, RequestedMetrics, interval, id)
VECTORS = [
    (
        [_sub("a", metrics="org.apache.kafka.producer.", interval_ms="5000")],
        ("org.apache.kafka.producer.",),
        5000,
        -1262090295,
    ),
    (
        [
            _sub(
                "a",
                metrics="org.apache.kafka.producer.,org.apache.kafka.consumer.",
                interval_ms="600000",
            )
        ],
        ("org.apache.kafka.producer.", "org.apache.kafka.consumer."),
        300000,
        -509988929,
    ),
    ([], (), 300000, 839772317),
    ([_sub("a", metrics="", interval_ms="300000")], (), 300000, 839772317),
    (
        [
            _sub("A", metrics="*,org.apache.kafka.producer.", interval_ms="60000"),
            _sub("B", metrics="org.apache.kafka.consumer.", interval_ms="30000"),
        ],
        ("*",),
        30000,
        1055085644,
    ),
]


@pytest.mark.parametrize(
    ("subscriptions", "metrics", "interval_ms", "subscription_id"), VECTORS
)
def test_kip714_vectors(
    subscriptions: list[Subscription],
    metrics: tuple[str, ...],
    interval_ms: int,
    subscription_id: int,
) -> None:
    effective = resolve(subscriptions, CLIENT, INSTANCE)
    assert effective.metrics == metrics
    assert effective.push_interval_ms == interval_ms
    assert effective.subscription_id == subscription_id


def test_more_vectors_from_the_reference() -> None:
    assert compute_subscription_id([], 300000, OTHER) == 803289441
    assert compute_subscription_id(["*"], 60000, OTHER) == -77900628
    two = uuid.UUID(int=2)
    for inserted, expected_string, expected_id in (
        (["BB", "Aa", "x"], "[BB, Aa, x]", 304718373),
        (["Aa", "BB", "x"], "[Aa, BB, x]", -311048155),
    ):
        merged = JavaHashSet()
        merged.add_all(inserted)
        assert merged.to_java_string() == expected_string
        assert compute_subscription_id(merged, 100, two) == expected_id


def test_only_matching_subscriptions_count() -> None:
    effective = resolve(
        [
            _sub(
                "rdkafka",
                metrics="org.apache.kafka.producer.",
                interval_ms="1000",
                match="client_software_name=librdkafka",
            ),
            _sub(
                "java",
                metrics="org.apache.kafka.consumer.",
                interval_ms="500",
                match="client_software_name=apache-kafka-java",
            ),
        ],
        CLIENT,
        INSTANCE,
    )
    assert effective.metrics == ("org.apache.kafka.producer.",)
    assert effective.push_interval_ms == 1000
    assert effective.matched == ("rdkafka",)


def test_a_subscription_without_metrics_still_lowers_the_interval() -> None:
    effective = resolve(
        [
            _sub("metrics", metrics="org.apache.kafka.producer."),
            _sub("fast", interval_ms="2000"),
        ],
        CLIENT,
        INSTANCE,
    )
    assert effective.metrics == ("org.apache.kafka.producer.",)
    assert effective.push_interval_ms == 2000


def test_overlapping_subscriptions_are_deduplicated_not_pruned() -> None:
    effective = resolve(
        [
            _sub("a", metrics="org.apache.,org.apache.kafka."),
            _sub("b", metrics="org.apache.kafka.,org.apache.kafka.producer."),
        ],
        CLIENT,
        INSTANCE,
    )
    assert sorted(effective.metrics) == [
        "org.apache.",
        "org.apache.kafka.",
        "org.apache.kafka.producer.",
    ]


def test_long_intervals_are_capped_unless_honoured() -> None:
    subscriptions = [_sub("slow", metrics="a.", interval_ms="900000")]
    assert resolve(subscriptions, CLIENT, INSTANCE).push_interval_ms == 300000
    honoured = resolve(subscriptions, CLIENT, INSTANCE, honour_long_intervals=True)
    assert honoured.push_interval_ms == 900000
    assert honoured.subscription_id == compute_subscription_id(["a."], 900000, INSTANCE)
    assert (
        resolve([], CLIENT, INSTANCE, honour_long_intervals=True).push_interval_ms
        == 300000
    )
    both = [*subscriptions, _sub("slower", interval_ms="1200000")]
    assert (
        resolve(both, CLIENT, INSTANCE, honour_long_intervals=True).push_interval_ms
        == 900000
    )


def test_star_anywhere_collapses_to_star() -> None:
    effective = resolve(
        [_sub("x", metrics="a.,b."), _sub("y", metrics="c.,*")], CLIENT, INSTANCE
    )
    assert effective.metrics == ("*",)


def test_same_name_later_wins_and_different_instances_get_different_ids() -> None:
    old, new = _sub("s", metrics="a."), _sub("s", metrics="b.")
    assert resolve([old, new], CLIENT, INSTANCE).metrics == ("b.",)
    one = resolve([new], CLIENT, INSTANCE).subscription_id
    two = resolve([new], CLIENT, OTHER).subscription_id
    assert one != two
    # XOR with the instance hash: undoing it gives the same CRC for both
    assert one ^ kafka_uuid_hash_code(INSTANCE) == two ^ kafka_uuid_hash_code(OTHER)


def test_requested_metrics_follow_java_hashset_order_not_config_order() -> None:
    effective = resolve(
        [_sub("s", metrics="org.apache.kafka.producer.,org.apache.kafka.consumer.")],
        CLIENT,
        INSTANCE,
    )
    assert effective.metrics == (
        "org.apache.kafka.producer.",
        "org.apache.kafka.consumer.",
    )
    reverse = resolve(
        [_sub("s", metrics="org.apache.kafka.consumer.,org.apache.kafka.producer.")],
        CLIENT,
        INSTANCE,
    )
    assert (
        reverse.metrics == effective.metrics
    )  # HashSet order, whatever the config order
    assert reverse.subscription_id == effective.subscription_id
