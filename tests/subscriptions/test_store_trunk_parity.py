"""The store as Apache Kafka trunk treats stored and altered client-metrics configs:

- a changed value longer than 32767 characters is INVALID_CONFIG (KAFKA-18907);
- a SET to the value already stored writes nothing and keeps the version (the controller
  writes a ConfigRecord only for a value that changes);
- on loading, unknown keys are ignored and a subscription that does not validate is
  skipped with one log line, the others apply (KAFKA-19851).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from proto.errors import Errors, KafkaError
from subscriptions.model import MAX_CONFIG_VALUE_LENGTH
from subscriptions.store import ConfigStore

TOO_LONG = "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes."


@pytest.fixture
def store(tmp_path: Path) -> ConfigStore:
    return ConfigStore(tmp_path)


def _metrics_file(store: ConfigStore) -> Path:
    return store.config_dir / "client-metrics.yaml"


def _prefixes(count: int, width: int) -> str:
    """``count`` distinct metric prefixes of ``width`` characters, comma-separated."""
    return ",".join(f"p{i:0{width - 1}d}" for i in range(count))


def test_a_value_of_32767_characters_is_accepted_one_more_is_not(
    store: ConfigStore,
) -> None:
    at_limit = _prefixes(4681, 6) + "x"  # 4681 * 7 - 1 + 1 characters
    assert len(at_limit) == MAX_CONFIG_VALUE_LENGTH
    store.alter_subscription("s", {"metrics": at_limit})
    before = store.snapshot()
    with pytest.raises(KafkaError) as raised:
        store.alter_subscription("s", {"metrics": at_limit + "y"})
    assert (raised.value.error_code, str(raised.value)) == (
        Errors.INVALID_CONFIG,
        TOO_LONG,
    )
    assert store.snapshot() is before


def test_the_length_is_counted_in_java_chars(store: ConfigStore) -> None:
    """16,384 astral characters are 32,768 UTF-16 units: too long for Java."""
    with pytest.raises(KafkaError) as raised:
        store.alter_subscription("s", {"metrics": "\U0001f600" * 16_384})
    assert str(raised.value) == TOO_LONG


def test_the_length_check_comes_before_the_subscription_rules(
    store: ConfigStore,
) -> None:
    """Kafka's controller checks the record size before ClientMetricsConfigs.validate: an
    over-long value with an unknown key next to it is still INVALID_CONFIG."""
    with pytest.raises(KafkaError) as raised:
        store.alter_subscription("s", {"colour": "x" * 40_000, "metrics": "a"})
    assert (raised.value.error_code, str(raised.value)) == (
        Errors.INVALID_CONFIG,
        TOO_LONG,
    )


def test_setting_the_stored_value_again_changes_nothing(store: ConfigStore) -> None:
    store.alter_subscription("s", {"metrics": "a.,b.", "interval.ms": "60000"})
    before = store.snapshot()
    written = _metrics_file(store).stat().st_mtime_ns
    result = store.alter_subscription("s", {"metrics": "a.,b."})
    assert result is not None and result.metrics == ("a.", "b.")
    assert store.snapshot() is before and store.version == before.version
    assert _metrics_file(store).stat().st_mtime_ns == written
    # deleting a key that is not set is no change either, nor is deleting a name never stored
    assert store.alter_subscription("s", {}, ["match"]) is not None
    assert store.alter_subscription("never", {}, ["metrics"]) is None
    assert store.snapshot() is before
    # a real change still is one
    store.alter_subscription("s", {"metrics": "a."})
    assert store.version == before.version + 1


HAND_EDITED = """\
subscriptions:
  good:
    metrics: org.apache.kafka.producer.
  empty-item:
    metrics: "a,,b"
  too-fast:
    interval.ms: 5
  from-a-newer-version:
    metrics: org.apache.kafka.consumer.
    colour: red
"""


def test_loading_skips_what_does_not_validate_and_ignores_unknown_keys(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "client-metrics.yaml").write_text(HAND_EDITED)
    with caplog.at_level(logging.WARNING, logger="subscriptions.store"):
        store = ConfigStore(tmp_path)
    snapshot = store.snapshot()
    assert [s.name for s in snapshot.subscriptions] == ["good", "from-a-newer-version"]
    newer = snapshot.subscription("from-a-newer-version")
    assert newer is not None and newer.metrics == ("org.apache.kafka.consumer.",)
    assert dict(snapshot.skipped) == {
        "empty-item": "Configuration 'metrics' values must not be empty. (INVALID_CONFIG)",
        "too-fast": "Invalid value 5 for interval.ms, interval must be between 100 and 3600000 "
        "(1 hour) (INVALID_REQUEST)",
    }
    assert dict(snapshot.ignored_keys) == {"from-a-newer-version": ("colour",)}
    assert store.last_error is None
    # one line per subscription not applied as written, naming the file, line and entry
    path = tmp_path / "config" / "client-metrics.yaml"
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}, line 4 at 'empty-item': subscription skipped, its configs do not validate: "
        "Configuration 'metrics' values must not be empty. (INVALID_CONFIG)",
        f"{path}, line 6 at 'too-fast': subscription skipped, its configs do not validate: "
        "Invalid value 5 for interval.ms, interval must be between 100 and 3600000 (1 hour) "
        "(INVALID_REQUEST)",
        f"{path}, line 8 at 'from-a-newer-version': unknown client metrics configuration "
        "ignored: colour",
    ]

    # Stored as written: another alteration keeps the skipped entries and unknown keys ...
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="subscriptions.store"):
        store.alter_subscription("good", {"interval.ms": "60000"})
    assert caplog.records == []  # ... and does not log them again
    reread = ConfigStore(tmp_path).snapshot()
    assert list(reread.subscription_configs) == [
        "good",
        "empty-item",
        "too-fast",
        "from-a-newer-version",
    ]
    assert reread.subscription_configs["from-a-newer-version"]["colour"] == "red"

    # An alteration validates the full stored map, as Kafka's controller does ...
    with pytest.raises(KafkaError) as raised:
        store.alter_subscription("from-a-newer-version", {"interval.ms": "60000"})
    assert (raised.value.error_code, str(raised.value)) == (
        Errors.INVALID_REQUEST,
        "Unknown client metrics configuration: colour",
    )
    # ... so the unknown key goes with a DELETE, and a fix brings a skipped one into force
    store.alter_subscription(
        "from-a-newer-version", {"interval.ms": "60000"}, ["colour"]
    )
    store.alter_subscription("too-fast", {"interval.ms": "500"})
    assert [s.name for s in store.snapshot().subscriptions] == [
        "good",
        "too-fast",
        "from-a-newer-version",
    ]
    assert dict(store.snapshot().skipped) == {
        "empty-item": "Configuration 'metrics' values must not be empty. (INVALID_CONFIG)"
    }


def test_a_reload_skips_one_subscription_not_the_file(store: ConfigStore) -> None:
    store.alter_subscription("a", {"metrics": "a."})
    store.alter_subscription("b", {"metrics": "b."})
    _metrics_file(store).write_text(
        "subscriptions:\n  a: {metrics: a2.}\n  b: {match: 'client_id=('}\n"
    )
    assert store.reload() is True
    snapshot = store.snapshot()
    assert [(s.name, s.metrics) for s in snapshot.subscriptions] == [("a", ("a2.",))]
    assert dict(snapshot.skipped) == {
        "b": "Illegal client matching pattern: client_id=( (INVALID_CONFIG)"
    }
    assert store.last_error is None
    assert store.list_names() == [
        "a",
        "b",
    ]  # stored, as a Kafka config resource stays stored
