"""The durable config store: incremental alters, validation, atomic writes, reload."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from proto.errors import Errors, KafkaError
from subscriptions.config_file import ConfigFileError
from subscriptions.store import ConfigStore

PRODUCERS = {"metrics": "org.apache.kafka.producer.", "interval.ms": "60000"}


@pytest.fixture
def store(tmp_path: Path) -> ConfigStore:
    config_store = ConfigStore(tmp_path)
    config_store.load()
    return config_store


def _metrics_file(store: ConfigStore) -> Path:
    return store.config_dir / "client-metrics.yaml"


def test_an_empty_data_dir_loads_as_no_subscriptions(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path / "fresh")
    snapshot = store.load()
    assert snapshot.subscriptions == ()
    assert dict(snapshot.quotas) == {}
    assert (tmp_path / "fresh" / "config").is_dir()


def test_alter_persists_and_a_new_store_reads_it_back(
    store: ConfigStore, tmp_path: Path
) -> None:
    created = store.alter_subscription("producers", PRODUCERS)
    assert created is not None and created.interval_ms == 60000
    store.alter_subscription("everyone", {"metrics": "*"})
    reopened = ConfigStore(tmp_path).load()
    assert reopened.subscriptions == store.snapshot().subscriptions
    assert [s.name for s in reopened.subscriptions] == ["producers", "everyone"]


def test_incremental_semantics(store: ConfigStore) -> None:
    store.alter_subscription(
        "a", {"metrics": "x.", "interval.ms": "1000", "match": "client_id=app"}
    )
    store.alter_subscription("b", {"metrics": "y."})
    # SET one key, others untouched
    store.alter_subscription("a", {"interval.ms": "2000"})
    assert store.describe("a") == {
        "metrics": "x.",
        "interval.ms": "2000",
        "match": "client_id=app",
    }
    # DELETE one key: back to its default
    altered = store.alter_subscription("a", {}, ["interval.ms"])
    assert altered is not None and altered.interval_ms == 300000
    assert store.describe("a") == {"metrics": "x.", "match": "client_id=app"}
    assert store.describe("a", include_defaults=True) == {
        "metrics": "x.",
        "interval.ms": "300000",
        "match": "client_id=app",
    }
    # deleting every key removes the subscription; a re-created one goes last
    assert store.alter_subscription("a", {}, ["metrics", "match"]) is None
    assert store.list_names() == ["b"]
    store.alter_subscription("a", {"metrics": "z."})
    assert store.list_names() == ["b", "a"]
    # an existing subscription keeps its place when altered
    store.alter_subscription("b", {"metrics": "w."})
    assert store.list_names() == ["b", "a"]


def test_stored_values_are_parsed_and_rendered_like_kafka(store: ConfigStore) -> None:
    """Kafka 4.4.0 describes a LIST as parsed and joined again, repeats dropped, and an INT
    as its number (checked against a 4.4.0 broker by tests/compat)."""
    store.alter_subscription("s", {"metrics": " a. , b. ,a.", "interval.ms": " 1000 "})
    assert store.describe("s") == {"metrics": "a.,b.", "interval.ms": "1000"}
    assert store.snapshot().subscriptions[0].metrics == ("a.", "b.")


@pytest.mark.parametrize(
    ("set_", "delete", "code", "message"),
    [
        (
            {"metrics": "a,,b"},
            [],
            Errors.INVALID_CONFIG,
            "Configuration 'metrics' values must not be empty.",
        ),
        (
            {"interval.ms": "50"},
            [],
            Errors.INVALID_REQUEST,
            "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        ),
        (
            {"colour": "red"},
            [],
            Errors.INVALID_REQUEST,
            "Unknown client metrics configuration: colour",
        ),
        (
            {"metrics": None},
            [],
            Errors.INVALID_REQUEST,
            "Null value not supported for : metrics",
        ),
        (
            {"metrics": "a"},
            ["metrics"],
            Errors.INVALID_REQUEST,
            "Error due to duplicate config keys",
        ),
        (
            {"match": "client_id=("},
            [],
            Errors.INVALID_CONFIG,
            "Illegal client matching pattern: client_id=(",
        ),
    ],
)
def test_a_rejected_alter_changes_nothing(
    store: ConfigStore,
    set_: dict[str, str | None],
    delete: list[str],
    code: Errors,
    message: str,
) -> None:
    store.alter_subscription("s", PRODUCERS)
    before_bytes = _metrics_file(store).read_bytes()
    before = store.snapshot()
    with pytest.raises(KafkaError) as raised:
        store.alter_subscription("s", set_, delete)
    assert (raised.value.error_code, str(raised.value)) == (code, message)
    assert store.snapshot() is before
    assert _metrics_file(store).read_bytes() == before_bytes


def test_the_full_resulting_map_is_validated(store: ConfigStore) -> None:
    store.alter_subscription("s", {"match": "client_id=a"})
    with pytest.raises(KafkaError) as raised:
        store.alter_subscription("s", {"interval.ms": "99"})
    assert raised.value.error_code == Errors.INVALID_REQUEST
    with pytest.raises(KafkaError) as raised:
        store.alter_subscription("", {"metrics": "a"})
    assert str(raised.value) == "Subscription name can't be empty"


def test_validate_only_writes_nothing(store: ConfigStore) -> None:
    result = store.alter_subscription("s", PRODUCERS, validate_only=True)
    assert result is not None and result.name == "s"
    assert store.list_names() == []
    assert not _metrics_file(store).exists()


def test_delete_subscription(store: ConfigStore) -> None:
    store.alter_subscription("s", PRODUCERS)
    assert store.delete_subscription("s") is True
    assert store.delete_subscription("s") is False
    assert store.list_names() == []


def test_versions_grow_with_every_change(store: ConfigStore) -> None:
    first = store.snapshot().version
    store.alter_subscription("s", PRODUCERS)
    store.alter_quotas({"user": "alice"}, {"producer_byte_rate": 1024})
    assert store.snapshot().version == first + 2


HAND_WRITTEN = """\
# my subscriptions
subscriptions:
  producers:
    metrics: [org.apache.kafka.producer., org.apache.kafka.consumer.]
    interval.ms: 60000
  rdkafka-only:
    metrics: "*"
    match:
      - client_software_name=librdkafka
      - client_software_version=2\\..*
  not-yet:
"""


def test_hand_written_file_with_lists_and_numbers(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "client-metrics.yaml").write_text(HAND_WRITTEN)
    snapshot = ConfigStore(tmp_path).load()
    producers, rdkafka = snapshot.subscriptions
    assert producers.metrics == (
        "org.apache.kafka.producer.",
        "org.apache.kafka.consumer.",
    )
    assert producers.interval_ms == 60000
    assert rdkafka.match == (
        ("client_software_name", "librdkafka"),
        ("client_software_version", "2\\..*"),
    )
    assert snapshot.subscription_configs["rdkafka-only"]["match"] == (
        "client_software_name=librdkafka,client_software_version=2\\..*"
    )


@pytest.mark.parametrize(
    ("content", "line", "fragment"),
    [
        (
            "subscriptions:\n  s:\n    metrics: a\n  s:\n    metrics: b\n",
            4,
            "duplicate key (first written on line 2)",
        ),
        (
            "subscriptions:\n  s:\n    interval.ms: 1.5\n",
            3,
            "at 's.interval.ms': expected a string, an integer",
        ),
        (
            "subscriptions:\n  s:\n    metrics: [a, [b]]\n",
            3,
            "expected a string, an integer or a list of strings",
        ),
        ("subscriptions:\n  s: [a]\n", 2, "expected a mapping of config keys"),
        (
            "subscription:\n  s: {metrics: a}\n",
            1,
            "expected a single top-level key 'subscriptions'",
        ),
        ("subscriptions: [a]\n", 1, "expected a mapping"),
        ("subscriptions:\n  s: {metrics: a\n", 3, "not valid YAML"),
    ],
)
def test_invalid_files_are_rejected_with_file_line_and_key(
    tmp_path: Path, content: str, line: int, fragment: str
) -> None:
    (tmp_path / "config").mkdir()
    path = tmp_path / "config" / "client-metrics.yaml"
    path.write_text(content)
    with pytest.raises(ConfigFileError) as raised:
        ConfigStore(tmp_path).load()
    message = str(raised.value)
    assert message.startswith(f"{path}, line {line}")
    assert fragment in message
    assert raised.value.line == line


def test_invalid_edit_keeps_the_last_good_state(store: ConfigStore) -> None:
    store.alter_subscription("s", PRODUCERS)
    good = store.snapshot()
    _metrics_file(store).write_text("subscriptions:\n  s:\n    interval.ms: [1, [2]]\n")
    assert store.reload() is False
    assert store.snapshot() is good
    assert (
        store.last_error is not None
        and "expected a string, an integer" in store.last_error
    )
    _metrics_file(store).write_text("subscriptions:\n  s:\n    interval.ms: 7000\n")
    assert store.reload() is True
    assert store.last_error is None
    assert store.snapshot().subscriptions[0].interval_ms == 7000
    assert store.snapshot().version == good.version + 1


def test_reload_of_unchanged_content_is_not_a_change(store: ConfigStore) -> None:
    store.alter_subscription("s", PRODUCERS)
    version = store.snapshot().version
    assert store.reload() is False
    assert store.snapshot().version == version


def test_removing_the_file_removes_every_subscription(store: ConfigStore) -> None:
    store.alter_subscription("s", PRODUCERS)
    _metrics_file(store).unlink()
    assert store.reload() is True
    assert store.list_names() == []


CRASHING_WRITER = textwrap.dedent("""
    import os, signal, sys
    from subscriptions.store import ConfigStore
    store = ConfigStore(sys.argv[1])
    store.load()
    def die(*args):
        os.kill(os.getpid(), signal.SIGKILL)  # the temp file is written and fsynced, not renamed
    os.replace = die
    store.alter_subscription("new", {"metrics": "b."})
""")


def test_a_crash_mid_write_leaves_the_old_file(
    store: ConfigStore, tmp_path: Path
) -> None:
    store.alter_subscription("old", {"metrics": "a."})
    before = _metrics_file(store).read_bytes()
    repo = Path(__file__).resolve().parents[2]
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHING_WRITER, str(tmp_path)],
        check=False,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        timeout=60,
    )
    assert crashed.returncode == -signal.SIGKILL
    leftovers = list(store.config_dir.glob(".client-metrics.yaml.tmp-*"))
    assert len(leftovers) == 1 and b"new" in leftovers[0].read_bytes()
    assert _metrics_file(store).read_bytes() == before
    reopened = ConfigStore(tmp_path)
    assert [s.name for s in reopened.load().subscriptions] == ["old"]
    reopened.alter_subscription(
        "next", {"metrics": "c."}
    )  # the next write sweeps the leftover
    assert list(store.config_dir.glob(".client-metrics.yaml.tmp-*")) == []
    assert ConfigStore(tmp_path).load().subscription("next") is not None


def test_a_failed_write_is_a_clear_error_and_changes_nothing(
    store: ConfigStore,
) -> None:
    # a directory where the file should be: the rename fails, as on a read-only mount
    _metrics_file(store).mkdir()
    before = store.snapshot()
    with pytest.raises(KafkaError) as raised:
        store.alter_subscription("s", PRODUCERS)
    assert raised.value.error_code == Errors.UNKNOWN_SERVER_ERROR
    assert str(raised.value).startswith(f"cannot write {_metrics_file(store)}")
    assert store.snapshot() is before
    assert list(store.config_dir.glob(".client-metrics.yaml.tmp-*")) == []


def test_a_new_store_never_overwrites_what_it_has_not_read(tmp_path: Path) -> None:
    """The CLI builds a fresh store per command: its first write must keep the others."""
    ConfigStore(tmp_path).alter_subscription("first", {"metrics": "a."})
    ConfigStore(tmp_path).alter_subscription("second", {"metrics": "b."})
    assert ConfigStore(tmp_path).list_names() == ["first", "second"]
