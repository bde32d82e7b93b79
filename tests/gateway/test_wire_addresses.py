"""Address rewriting against an oracle, on random messages of every address-bearing response.

Random messages (nulls, empty arrays, unicode hosts, negative node ids, tagged fields set)
are encoded by the generated writers; the rewritten body must decode to the same message
with exactly the broker addresses replaced (``expected``, written with dataclasses.replace
from what the specs say), and ``revealed_nodes`` must name exactly the brokers in it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.gateway.addresses import (
    ADDRESS_VERSIONS,
    SCANNERS,
    Endpoint,
    rewrite_addresses,
    scan_addresses,
)
from proto.api_keys import ApiKeys
from proto.codegen import MessageSpec
from proto.messages import RESPONSE_MODULES
from tests.gateway.golden.strategies import message_strategy, specs


def address_for(node_id: int) -> tuple[str, int]:
    return f"gw-{node_id}.example.com", 20000 + node_id % 1000


def _with(item: Any, node_id: int) -> Any:
    host, port = address_for(node_id)
    return dataclasses.replace(item, host=host, port=port) if node_id >= 0 else item


def _brokers(items: Any, key: str = "node_id") -> Any:
    return tuple(_with(item, getattr(item, key)) for item in items)


def expected(api_key: int, version: int, m: Any) -> tuple[Any, set[int]]:
    """The message as the gateway must send it, and the broker node ids it reveals."""
    replace = dataclasses.replace
    if api_key == ApiKeys.METADATA:
        return replace(m, brokers=_brokers(m.brokers)), {b.node_id for b in m.brokers}
    if api_key == ApiKeys.FIND_COORDINATOR:
        if version <= 3:
            return _with(m, m.node_id), {m.node_id}
        return replace(m, coordinators=_brokers(m.coordinators)), {
            c.node_id for c in m.coordinators
        }
    if api_key == ApiKeys.DESCRIBE_CLUSTER:
        if version >= 1 and m.endpoint_type != 1:
            return m, set()
        return replace(m, brokers=_brokers(m.brokers, "broker_id")), {
            b.broker_id for b in m.brokers
        }
    if api_key == ApiKeys.DESCRIBE_QUORUM:
        nodes = tuple(
            replace(
                n,
                listeners=tuple(_with(listener, n.node_id) for listener in n.listeners),
            )
            for n in m.nodes
        )
        return replace(m, nodes=nodes), set()
    first_version: dict[int, int] = {ApiKeys.PRODUCE: 10, ApiKeys.FETCH: 16}
    first = first_version.get(api_key, 0)
    if version < first:
        return m, set()
    return replace(m, node_endpoints=_brokers(m.node_endpoints)), {
        e.node_id for e in m.node_endpoints
    }


CASES = [
    (spec, version)
    for spec in specs().values()
    if spec.kind == "response" and spec.api_key in SCANNERS
    for version in spec.versions()
]


def test_cases_cover_every_walkable_version() -> None:
    assert {(s.api_key, v) for s, v in CASES} == {
        (key, v)
        for key, (low, high) in ADDRESS_VERSIONS.items()
        for v in range(low, high + 1)
    }


@pytest.mark.parametrize(
    ("spec", "version"), CASES, ids=[f"{s.name}-v{v}" for s, v in CASES]
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_rewrite_matches_the_oracle(
    spec: MessageSpec, version: int, data: st.DataObject
) -> None:
    assert spec.api_key is not None
    module = RESPONSE_MODULES[spec.api_key]
    message = data.draw(message_strategy(spec, version))
    out = bytearray()
    module.WRITERS[version](message, out)
    body = bytes(out)
    want, node_ids = expected(spec.api_key, version, message)
    rewritten = rewrite_addresses(spec.api_key, version, body, address_for)
    decoded, end = module.READERS[version](
        memoryview(body if rewritten is None else rewritten), 0
    )
    assert end == len(body if rewritten is None else rewritten)
    assert decoded == want
    if rewritten is None:
        assert want == message  # None only when nothing had to change
    scan = scan_addresses(spec.api_key, version, body)
    revealed = {} if scan is None else scan.nodes()
    assert set(revealed) == {n for n in node_ids if n >= 0}


@settings(max_examples=200, deadline=None)
@given(
    hosts=st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=4),
    tag_values=st.lists(st.binary(max_size=5), max_size=3),
)
def test_produce_node_endpoints_any_host_length(
    hosts: list[str], tag_values: list[bytes]
) -> None:
    """The tagged NodeEndpoints field's size prefix is rewritten when the hosts' lengths cross
    a varint boundary (127/128 bytes); the other top-level tags keep their bytes."""
    from proto.messages import produce_response as p

    message = p.ProduceResponse(
        throttle_time_ms=5,
        node_endpoints=tuple(p.NodeEndpoint(n, h, 9092) for n, h in enumerate(hosts)),
    )
    out = bytearray()
    p.WRITERS[12](message, out)
    body = bytes(out)
    # add unknown top-level tags after tag 0, rewriting the tagged section by hand
    section_at = 5  # empty Responses (1 byte), ThrottleTimeMs (4), then the tags
    from collector.gateway.wire import tagged_fields
    from proto.primitives import write_tagged_fields

    fields, end = tagged_fields(body, section_at)
    assert end == len(body)
    tags = [(tag, body[start:stop]) for tag, _, start, stop in fields]
    tags += [(10 + i, value) for i, value in enumerate(tag_values)]
    section = bytearray()
    write_tagged_fields(section, tags)
    body = body[:section_at] + bytes(section)

    def long_address(node_id: int) -> tuple[str, int]:
        return "g" * (60 + 40 * node_id), 30000 + node_id

    rewritten = rewrite_addresses(ApiKeys.PRODUCE, 12, body, long_address)
    assert rewritten is not None
    decoded, end = p.READERS[12](memoryview(rewritten), 0)
    assert end == len(rewritten)
    assert [(e.node_id, e.host, e.port) for e in decoded.node_endpoints] == [
        (n, *long_address(n)) for n in range(len(hosts))
    ]
    new_fields, _ = tagged_fields(rewritten, section_at)
    assert [(t, rewritten[s:e]) for t, _, s, e in new_fields][1:] == tags[1:]


def test_endpoint_values() -> None:
    from proto.messages import metadata_response as m

    out = bytearray()
    m.WRITERS[12](
        m.MetadataResponse(
            brokers=(
                m.MetadataResponseBroker(1, "h", 1),
                m.MetadataResponseBroker(-1, "x", 2),
            )
        ),
        out,
    )
    scan = scan_addresses(ApiKeys.METADATA, 12, bytes(out))
    assert scan is not None
    assert scan.endpoints == (Endpoint(1, "h", 1, True),)  # node id -1 is no node
