"""ClusterSubscriptionStore: the subscriptions are the set last read from the cluster, the
quotas the local store's; versions move only on a change; merge order is kept across reads;
a subscription the collector cannot apply is skipped with one line; the local store's
subscriptions until the first read and after ``use_local``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from proto.errors import Errors, KafkaError
from subscriptions.cluster_store import ClusterSubscriptionStore
from subscriptions.store import ConfigStore

PRODUCERS = {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}
CONSUMERS = {"metrics": "org.apache.kafka.consumer."}


@pytest.fixture
def local(tmp_path: Path) -> ConfigStore:
    store = ConfigStore(tmp_path)
    store.alter_subscription("local-only", {"interval.ms": "5000"})
    store.alter_quotas({"user": "alice"}, {"producer_byte_rate": 1024})
    return store


def names(store: ClusterSubscriptionStore) -> list[str]:
    return [s.name for s in store.snapshot().subscriptions]


def test_before_the_first_read_the_local_subscriptions_apply(
    local: ConfigStore,
) -> None:
    store = ClusterSubscriptionStore(local, "kafka:9092")
    assert names(store) == ["local-only"]
    assert not store.read_from_cluster


def test_a_read_replaces_the_subscriptions_and_keeps_the_local_quotas(
    local: ConfigStore,
) -> None:
    store = ClusterSubscriptionStore(local, "kafka:9092")
    before = store.version
    assert store.install({"producers": PRODUCERS})
    assert names(store) == ["producers"]
    assert store.version > before
    assert store.describe("producers") == PRODUCERS
    assert store.describe_quotas()  # alice's quota, from the local store
    assert store.snapshot().quotas
    assert store.read_from_cluster


def test_the_same_set_again_is_no_change(local: ConfigStore) -> None:
    store = ClusterSubscriptionStore(local, "kafka:9092")
    store.install({"producers": PRODUCERS})
    version = store.version
    assert not store.install({"producers": dict(PRODUCERS)})
    assert store.version == version


def test_known_names_keep_their_place_and_new_ones_follow(local: ConfigStore) -> None:
    store = ClusterSubscriptionStore(local, "kafka:9092")
    store.install({"b": CONSUMERS, "a": PRODUCERS})
    # The cluster lists in another order, one gone, one new: the merge order stays.
    store.install({"c": CONSUMERS, "a": PRODUCERS, "b": {"metrics": "*"}})
    assert names(store) == ["b", "a", "c"]
    store.install({"a": PRODUCERS})
    assert names(store) == ["a"]


def test_a_subscription_the_collector_cannot_apply_is_skipped_with_one_line(
    local: ConfigStore, caplog: pytest.LogCaptureFixture
) -> None:
    store = ClusterSubscriptionStore(local, "kafka:9092")
    # Java's regex takes a lookahead, RE2 does not.
    lookahead = {"metrics": "*", "match": "client_id=(?=a).*"}
    with caplog.at_level(logging.ERROR):
        store.install({"java-only": lookahead, "producers": PRODUCERS})
        store.install({"java-only": lookahead, "producers": PRODUCERS, "c": CONSUMERS})
    assert names(store) == ["producers", "c"]
    lines = [r.getMessage() for r in caplog.records if "java-only" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "Illegal client matching pattern" in lines[0]


def test_quota_changes_of_the_local_store_move_the_version(
    local: ConfigStore,
) -> None:
    store = ClusterSubscriptionStore(local, "kafka:9092")
    store.install({"producers": PRODUCERS})
    version = store.version
    store.alter_quotas({"user": "bob"}, {"consumer_byte_rate": 2048})
    assert store.version > version
    assert len(store.snapshot().quotas) == 2
    assert names(store) == ["producers"]


def test_subscriptions_are_altered_at_the_cluster_not_here(local: ConfigStore) -> None:
    store = ClusterSubscriptionStore(local, "kafka:9092")
    store.install({"producers": PRODUCERS})
    with pytest.raises(KafkaError) as raised:
        store.alter_subscription("producers", {"interval.ms": "2000"})
    assert raised.value.error_code == Errors.INVALID_REQUEST
    assert "kafka:9092" in str(raised.value)
    # A preview of a change still works, by the same rules as the local store's.
    proposed = store.proposed_subscriptions("producers", {"interval.ms": "2000"})
    assert [s.interval_ms for s in proposed] == [2000]


def test_use_local_serves_the_local_store_again(local: ConfigStore) -> None:
    store = ClusterSubscriptionStore(local, "kafka:9092")
    store.install({"producers": PRODUCERS})
    store.use_local()
    assert names(store) == ["local-only"]
    store.alter_subscription("local-two", {"interval.ms": "6000"})
    assert names(store) == ["local-only", "local-two"]
