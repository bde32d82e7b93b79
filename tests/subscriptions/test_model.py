"""Subscription validation: every error code and message Kafka gives, and the happy paths."""

from __future__ import annotations

import pytest

from proto.errors import Errors, KafkaError
from subscriptions.model import (
    DEFAULT_INTERVAL_MS,
    Subscription,
    normalise_config_value,
    parse_list,
)

INVALID_CONFIG = Errors.INVALID_CONFIG
INVALID_REQUEST = Errors.INVALID_REQUEST

# (name, configs, error code, exact message)
REJECTED: list[tuple[str, dict[str, str | None], Errors, str]] = [
    ("", {"metrics": "a"}, INVALID_REQUEST, "Subscription name can't be empty"),
    ("s", {"metrics": None}, INVALID_REQUEST, "Null value not supported for : metrics"),
    (
        "s",
        {"metrics": None, "match": None},
        INVALID_REQUEST,
        "Null value not supported for : metrics, match",
    ),
    (
        "s",
        {"metric": "a"},
        INVALID_REQUEST,
        "Unknown client metrics configuration: metric",
    ),
    (
        "s",
        {"metrics": "a", "push.interval.ms": "1000"},
        INVALID_REQUEST,
        "Unknown client metrics configuration: push.interval.ms",
    ),
    # LIST rules (ValidList.anyNonDuplicateValues(true, false)) on the list Kafka 4.4.0
    # validates, its repeats dropped: an empty item is refused, a repeat is not.
    (
        "s",
        {"metrics": "a,"},
        INVALID_CONFIG,
        "Configuration 'metrics' values must not be empty.",
    ),
    (
        "s",
        {"metrics": ",a"},
        INVALID_CONFIG,
        "Configuration 'metrics' values must not be empty.",
    ),
    (
        "s",
        {"metrics": "a,,"},
        INVALID_CONFIG,
        "Configuration 'metrics' values must not be empty.",
    ),
    (
        "s",
        {"match": "client_id=a,"},
        INVALID_CONFIG,
        "Configuration 'match' values must not be empty.",
    ),
    # interval.ms: parse errors are ConfigExceptions (INVALID_CONFIG) ...
    (
        "s",
        {"interval.ms": "abc"},
        INVALID_CONFIG,
        "Invalid value abc for configuration interval.ms: Not a number of type INT",
    ),
    (
        "s",
        {"interval.ms": "1_000"},
        INVALID_CONFIG,
        "Invalid value 1_000 for configuration interval.ms: Not a number of type INT",
    ),
    (
        "s",
        {"interval.ms": "1.5"},
        INVALID_CONFIG,
        "Invalid value 1.5 for configuration interval.ms: Not a number of type INT",
    ),
    (
        "s",
        {"interval.ms": ""},
        INVALID_CONFIG,
        "Invalid value  for configuration interval.ms: Not a number of type INT",
    ),
    (
        "s",
        {"interval.ms": "2147483648"},
        INVALID_CONFIG,
        "Invalid value 2147483648 for configuration interval.ms: Not a number of type INT",
    ),
    # ... the range check is an InvalidRequestException
    (
        "s",
        {"interval.ms": "99"},
        INVALID_REQUEST,
        "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
    ),
    (
        "s",
        {"interval.ms": "3600001"},
        INVALID_REQUEST,
        "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
    ),
    (
        "s",
        {"interval.ms": "-5"},
        INVALID_REQUEST,
        "Invalid value -5 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
    ),
    # match items: exactly "selector=regex" after Java's split("=")
    (
        "s",
        {"match": "client_id"},
        INVALID_CONFIG,
        "Illegal client matching pattern: client_id",
    ),
    (
        "s",
        {"match": "client_id="},
        INVALID_CONFIG,
        "Illegal client matching pattern: client_id=",
    ),
    (
        "s",
        {"match": "client_id=a=b"},
        INVALID_CONFIG,
        "Illegal client matching pattern: client_id=a=b",
    ),
    ("s", {"match": "=a"}, INVALID_CONFIG, "Illegal client matching pattern: =a"),
    (
        "s",
        {"match": "client=a"},
        INVALID_CONFIG,
        "Illegal client matching pattern: client=a",
    ),
    (
        "s",
        {"match": "CLIENT_ID=a"},
        INVALID_CONFIG,
        "Illegal client matching pattern: CLIENT_ID=a",
    ),
    (
        "s",
        {"match": "client_id=("},
        INVALID_CONFIG,
        "Illegal client matching pattern: client_id=(",
    ),
    (
        "s",
        {"match": "client_id=*a"},
        INVALID_CONFIG,
        "Illegal client matching pattern: client_id=*a",
    ),
    (
        "s",
        {"match": "client_id=a{1,3}"},
        INVALID_CONFIG,
        "Illegal client matching pattern: 3}",
    ),
    # the first failure in Kafka's order wins: unknown key before parse errors ...
    (
        "s",
        {"interval.ms": "x", "colour": "red"},
        INVALID_REQUEST,
        "Unknown client metrics configuration: colour",
    ),
    # ... metrics parsed before interval.ms, interval.ms before match ...
    (
        "s",
        {"match": "bad", "interval.ms": "x", "metrics": "a,,"},
        INVALID_CONFIG,
        "Configuration 'metrics' values must not be empty.",
    ),
    (
        "s",
        {"match": "a,a", "interval.ms": "x"},
        INVALID_CONFIG,
        "Invalid value x for configuration interval.ms: Not a number of type INT",
    ),
    # ... and parsing (match list) before the range check, the range before the patterns
    (
        "s",
        {"match": "a,,", "interval.ms": "1"},
        INVALID_CONFIG,
        "Configuration 'match' values must not be empty.",
    ),
    (
        "s",
        {"match": "bad", "interval.ms": "1"},
        INVALID_REQUEST,
        "Invalid value 1 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
    ),
]


@pytest.mark.parametrize(("name", "configs", "code", "message"), REJECTED)
def test_rejected_configs(
    name: str, configs: dict[str, str | None], code: Errors, message: str
) -> None:
    with pytest.raises(KafkaError) as raised:
        Subscription.from_configs(name, configs)
    assert raised.value.error_code == code
    assert str(raised.value) == message


def test_defaults_when_nothing_is_set() -> None:
    subscription = Subscription.from_configs("empty", {})
    assert subscription.metrics == ()
    assert subscription.interval_ms == DEFAULT_INTERVAL_MS
    assert subscription.match == ()
    assert subscription.configured_keys == frozenset()
    assert subscription.to_configs() == {}
    assert subscription.to_configs(include_defaults=True) == {
        "metrics": "",
        "interval.ms": "300000",
        "match": "",
    }


def test_full_subscription_parses_and_renders_like_kafka() -> None:
    subscription = Subscription.from_configs(
        "producers",
        {
            "metrics": " org.apache.kafka.producer. ,\torg.apache.kafka.consumer.coordinator. ",
            "interval.ms": " +60000 ",
            "match": "client_software_name = librdkafka , client_software_version=2\\..*",
        },
    )
    assert subscription.metrics == (
        "org.apache.kafka.producer.",
        "org.apache.kafka.consumer.coordinator.",
    )
    assert subscription.interval_ms == 60000
    assert subscription.match == (
        ("client_software_name", "librdkafka"),
        ("client_software_version", "2\\..*"),
    )
    assert subscription.to_configs() == {
        "metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator.",
        "interval.ms": "60000",
        "match": "client_software_name=librdkafka,client_software_version=2\\..*",
    }
    assert (
        Subscription.from_configs("producers", subscription.to_configs())
        == subscription
    )


@pytest.mark.parametrize(
    ("value", "interval"), [("100", 100), ("3600000", 3600000), ("0300", 300)]
)
def test_interval_bounds_are_inclusive(value: str, interval: int) -> None:
    assert (
        Subscription.from_configs("s", {"interval.ms": value}).interval_ms == interval
    )


def test_java_split_quirk_trailing_equals_is_accepted() -> None:
    """Java's split("=") drops trailing empty strings: "client_id=a=" is two parts."""
    assert Subscription.from_configs("s", {"match": "client_id=a="}).match == (
        ("client_id", "a"),
    )


def test_same_selector_twice_the_last_one_counts() -> None:
    subscription = Subscription.from_configs(
        "s", {"match": "client_id=a.*,client_id=b.*"}
    )
    assert subscription.patterns["client_id"].pattern == "b.*"
    assert subscription.to_configs()["match"] == "client_id=a.*,client_id=b.*"


def test_empty_metrics_value_means_no_metrics() -> None:
    subscription = Subscription.from_configs("s", {"metrics": ""})
    assert subscription.metrics == ()
    assert subscription.configured_keys == frozenset({"metrics"})


def test_java_trim_keeps_unicode_spaces() -> None:
    """String.trim() strips only chars <= U+0020; a no-break space stays part of the name."""
    assert Subscription.from_configs("s", {"metrics": "\u00a0a"}).metrics == (
        "\u00a0a",
    )
    assert parse_list(" \t a ,b\u3000") == ["a", "b\u3000"]


def test_direct_construction_validates_patterns() -> None:
    with pytest.raises(KafkaError) as raised:
        Subscription("s", match=(("client_id", "("),))
    assert raised.value.error_code == INVALID_CONFIG
    with pytest.raises(KafkaError) as raised:
        Subscription("")
    assert raised.value.error_code == INVALID_REQUEST


@pytest.mark.parametrize(
    ("configs", "metrics", "match"),
    [
        ({"metrics": "a,a"}, ("a",), ()),
        ({"metrics": " a, b ,a"}, ("a", "b"), ()),
        ({"match": "client_id=a,client_id=a"}, (), (("client_id", "a"),)),
    ],
)
def test_repeated_list_items_are_accepted_once_like_kafka_4_4(
    configs: dict[str, str],
    metrics: tuple[str, ...],
    match: tuple[tuple[str, str], ...],
) -> None:
    """Kafka 4.4.0 accepts ``metrics=a,a`` and ``match=client_id=a,client_id=a`` (error 0,
    checked against a 4.4.0 broker by tests/compat) and keeps each item once."""
    subscription = Subscription.from_configs("s", configs)
    assert subscription.metrics == metrics
    assert subscription.match == match


def test_list_and_int_values_are_normalised_like_kafka_4_4() -> None:
    """What Kafka 4.4.0 describes after a SET: the parsed value rendered again."""
    assert normalise_config_value("metrics", " a, b ,a") == "a,b"
    assert normalise_config_value("match", " client_id = x ") == "client_id = x"
    assert normalise_config_value("interval.ms", " 1000 ") == "1000"
    assert normalise_config_value("interval.ms", "1e3") == "1e3"  # refused later
