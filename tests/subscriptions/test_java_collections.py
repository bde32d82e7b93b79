"""Property tests of the Java String/HashSet/ConcurrentHashMap models against simple references.

The JDK itself is the referee in test_subscription_id_jdk.py; these check the laws that
hold without it, so a regression shows up with a minimal Hypothesis example.
"""

from __future__ import annotations

import uuid

from hypothesis import assume, given
from hypothesis import strategies as st

from subscriptions.java_chm import ConcurrentHashMapOrder, chm_spread
from subscriptions.java_hashset import JavaHashSet, hashmap_hash, table_size_for
from subscriptions.java_lang import java_split, string_hash_code, to_int32
from subscriptions.kafka_uuid import (
    ONE_UUID,
    ZERO_UUID,
    kafka_uuid_from_str,
    kafka_uuid_to_str,
    random_instance_id,
)

names = st.text(min_size=1, max_size=12)
distinct_names = st.lists(names, min_size=0, max_size=120, unique=True)


def _reference_hash_code(text: str) -> int:
    units = text.encode("utf-16-be", "surrogatepass")
    code_units = [
        int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)
    ]
    n = len(code_units)
    return to_int32(sum(unit * 31 ** (n - 1 - i) for i, unit in enumerate(code_units)))


@given(st.text(max_size=40))
def test_string_hash_code_is_the_java_polynomial(text: str) -> None:
    assert string_hash_code(text) == _reference_hash_code(text)


def test_string_hash_code_known_values() -> None:
    assert string_hash_code("") == 0
    assert string_hash_code("Aa") == string_hash_code("BB") == 2112
    assert string_hash_code("org.apache.kafka.producer.") == _reference_hash_code(
        "org.apache.kafka.producer."
    )
    assert string_hash_code("😀") == 0xD83D * 31 + 0xDE00


@given(st.text(alphabet="ab=", max_size=12))
def test_java_split_drops_only_trailing_empties(text: str) -> None:
    parts = java_split(text, "=")
    assert "=".join(parts) == text.rstrip("=") or (
        text and set(text) == {"="} and parts == []
    )
    assert not parts or parts[-1] != "" or parts == [""]


@given(distinct_names)
def test_hash_set_holds_each_element_once(items: list[str]) -> None:
    hash_set = JavaHashSet()
    hash_set.add_all(items + items[::2])
    assert sorted(hash_set) == sorted(items)
    assert len(hash_set) == len(items)
    assert all(item in hash_set for item in items)


@given(distinct_names)
def test_hash_set_order_is_bucket_then_insertion_without_treeification(
    items: list[str],
) -> None:
    """Without a 9-entry bucket, order = stable sort by bucket of the final table."""
    low_bits = [hashmap_hash(item) & 15 for item in items]
    assume(all(low_bits.count(bits) < 9 for bits in set(low_bits)))
    capacity = 16
    while len(items) > capacity * 3 // 4:
        capacity *= 2
    hash_set = JavaHashSet()
    hash_set.add_all(items)
    assert hash_set.capacity == (capacity if items else 0)
    assert list(hash_set) == sorted(
        items, key=lambda item: hashmap_hash(item) & (capacity - 1)
    )


@given(st.integers(min_value=0, max_value=2000))
def test_copy_constructor_capacity_jdk17(size: int) -> None:
    items = [f"m{i}" for i in range(size)]
    copy = JavaHashSet.copy_of(items)
    expected = table_size_for(max(int(size / 0.75) + 1, 16))
    assert copy.capacity == (expected if size else 0)
    assert sorted(copy) == sorted(items)


def test_nine_colliding_strings_resize_a_small_table_then_treeify() -> None:
    colliding = [
        "".join(blocks)
        for blocks in (
            [a, b, c, d]
            for a in ("Aa", "BB")
            for b in ("Aa", "BB")
            for c in ("Aa", "BB")
            for d in ("Aa", "BB")
        )
    ]
    hash_set = JavaHashSet()
    capacities = []
    for item in colliding[:11]:
        hash_set.add(item)
        capacities.append(hash_set.capacity)
    # all share one bucket: the 9th and 10th entries double the table (treeifyBin below
    # 64 buckets resizes instead); from 64 on the bucket becomes a tree, no more growth
    assert capacities == [16] * 8 + [32, 64, 64]
    assert sorted(hash_set) == sorted(colliding[:11])


@given(st.lists(names, max_size=100, unique=True))
def test_chm_grows_when_count_reaches_three_quarters(keys: list[str]) -> None:
    spread = [chm_spread(key) & 15 for key in keys]
    assume(all(spread.count(bits) < 9 for bits in set(spread)))
    capacity = 16
    while len(keys) >= capacity * 3 // 4:
        capacity *= 2
    order = ConcurrentHashMapOrder(keys)
    assert order.capacity == (capacity if keys else 0)
    ordered = order.keys()
    assert sorted(ordered) == sorted(keys)
    buckets = [chm_spread(key) & (capacity - 1) for key in ordered]
    assert buckets == sorted(buckets)


def test_chm_twelve_keys_make_32_buckets_but_hash_set_stays_at_16() -> None:
    keys = [f"sub-{i}" for i in range(12)]
    assert ConcurrentHashMapOrder(keys).capacity == 32
    hash_set = JavaHashSet()
    hash_set.add_all(keys)
    assert hash_set.capacity == 16


def test_chm_transfer_reverses_nodes_before_the_last_run() -> None:
    # three keys in bin 0 of 16 whose bit 16 is lo, lo, hi: after the resize the two lo
    # keys come out reversed (prepended), per ConcurrentHashMap.transfer.
    pool = (f"k{i}" for i in range(100_000))
    lo = [key for key in pool if chm_spread(key) & 31 == 0][:2]
    hi = next(
        key for key in (f"h{i}" for i in range(100_000)) if chm_spread(key) & 31 == 16
    )
    filler = [
        key for key in (f"f{i}" for i in range(100_000)) if chm_spread(key) & 15 != 0
    ][:9]
    order = ConcurrentHashMapOrder([lo[0], lo[1], hi, *filler])
    assert order.capacity == 32
    keys = order.keys()
    assert keys.index(lo[1]) < keys.index(lo[0])


@given(st.uuids())
def test_kafka_uuid_string_round_trip(value: uuid.UUID) -> None:
    text = kafka_uuid_to_str(value)
    assert len(text) == 22 and "=" not in text
    assert kafka_uuid_from_str(text) == value


def test_kafka_uuid_rejects_bad_strings() -> None:
    for bad in (
        "",
        "short",
        "VQQTF4UpT8qqtooenFFlgA=",
        "VQQTF4UpT8qqtooenFFlg!",
        "VQQTF4UpT8qqtooenFFlgB",
    ):
        try:
            kafka_uuid_from_str(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_random_instance_ids_are_kafka_safe() -> None:
    for _ in range(2000):
        value = random_instance_id()
        assert value not in (ZERO_UUID, ONE_UUID)
        assert "-" not in kafka_uuid_to_str(value)
        assert value.version == 4


def test_java_utf8_joins_surrogate_pairs_and_replaces_lone_surrogates() -> None:
    from subscriptions.java_lang import java_utf8

    assert java_utf8("a😀") == "a😀".encode()
    assert (
        java_utf8("a\ud83d\ude00") == "a😀".encode()
    )  # a pair held as two code points
    assert (
        java_utf8("x\ud800y") == b"x?y"
    )  # Java's encoder writes '?' for a lone surrogate
    assert java_utf8("\ude00\ud83d") == b"??"
