"""Property tests: config round trips and the merge laws, over generated subscriptions."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from subscriptions.effective import resolve
from subscriptions.matching import ClientMetadata
from subscriptions.model import SELECTORS, Subscription
from subscriptions.subscription_id import compute_subscription_id

# metric prefixes: no commas (the list separator), nothing String.trim() would strip at
# either end (chars <= U+0020)
prefix = st.text(
    alphabet=st.characters(blacklist_characters=",", blacklist_categories=["Cs"]),
    min_size=1,
    max_size=20,
).filter(lambda s: s[0] > " " and s[-1] > " ")
regex = st.sampled_from(
    ["a.*", ".*", "librdkafka", "2\\..*", "[0-9]+", "(?i)APP", "x|y"]
)
match_item = st.tuples(st.sampled_from(SELECTORS), regex)


@st.composite
def subscriptions(draw: st.DrawFn, name: str | None = None) -> Subscription:
    configs: dict[str, str] = {}
    if draw(st.booleans()):
        configs["metrics"] = ",".join(draw(st.lists(prefix, max_size=8, unique=True)))
    if draw(st.booleans()):
        configs["interval.ms"] = str(draw(st.integers(100, 3_600_000)))
    if draw(st.booleans()):
        items = draw(st.lists(match_item, max_size=3, unique_by=lambda item: item[0]))
        configs["match"] = ",".join(
            f"{selector}={pattern}" for selector, pattern in items
        )
    return Subscription.from_configs(
        name or draw(st.text(min_size=1, max_size=8)), configs
    )


@given(subscriptions())
def test_rendered_configs_parse_back_to_the_same_subscription(
    subscription: Subscription,
) -> None:
    assert (
        Subscription.from_configs(subscription.name, subscription.to_configs())
        == subscription
    )
    full = Subscription.from_configs(
        subscription.name, subscription.to_configs(include_defaults=True)
    )
    assert (full.metrics, full.interval_ms, full.match) == (
        subscription.metrics,
        subscription.interval_ms,
        subscription.match,
    )


client = st.builds(
    ClientMetadata,
    client_instance_id=st.just("VQQTF4UpT8qqtooenFFlgA"),
    client_id=st.one_of(st.none(), st.sampled_from(["app", "APP", "a1", "x", "123"])),
    client_software_name=st.sampled_from(
        ["librdkafka", "apache-kafka-java", "unknown"]
    ),
    client_software_version=st.sampled_from(["2.16.0", "3.9.1", "unknown"]),
    client_source_address=st.sampled_from(["10.0.0.1", "a.b"]),
    client_source_port=st.sampled_from(["9092", "53211"]),
)


@given(
    st.lists(subscriptions(), max_size=6, unique_by=lambda s: s.name),
    client,
    st.uuids(),
)
def test_merge_laws(
    subs: list[Subscription], metadata: ClientMetadata, instance_id: uuid.UUID
) -> None:
    effective = resolve(subs, metadata, instance_id)
    matched = [s for s in subs if s.name in effective.matched]
    union = {metric for s in matched for metric in s.metrics}
    if "*" in union:
        assert effective.metrics == ("*",)
    else:
        assert sorted(effective.metrics) == sorted(
            union
        )  # each once, whatever the order
    assert effective.push_interval_ms == min(
        [300_000, *(s.interval_ms for s in matched)]
    )
    assert effective.subscription_id == compute_subscription_id(
        effective.metrics, effective.push_interval_ms, instance_id
    )
    # the order of creation only reorders names within a bucket: the set is the same
    again = resolve(list(reversed(subs)), metadata, instance_id)
    assert sorted(again.metrics) == sorted(effective.metrics)
    assert sorted(again.matched) == sorted(effective.matched)
