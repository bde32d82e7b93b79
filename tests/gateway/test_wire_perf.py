"""What the per-response work costs: Fetch and Produce pass through on every request.

The structural properties are asserted (a Fetch walk does not look into its records, so its
cost does not grow with them; the common case copies nothing); the timings are printed
(``-s``) and bounded only loosely, since the tests share two cores with other work.
Figures from a quiet run are in docs/protocol.md, "What the gateway decodes".
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable

from collector.gateway.addresses import rewrite_addresses
from collector.gateway.throttle import read_throttle_ms, with_throttle_ms
from proto.api_keys import ApiKeys
from proto.messages import fetch_response as f
from proto.messages import metadata_response as m
from proto.messages import produce_response as p


def address_for(node_id: int) -> tuple[str, int]:
    return "gateway.test", 19000 + node_id


def best_us(call: Callable[[], object], n: int) -> float:
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(n):
            call()
        runs.append((time.perf_counter() - started) / n)
    return min(runs) * 1e6


def fetch_body(total: int, partitions: int = 6, endpoints: bool = False) -> bytes:
    records = os.urandom(total // partitions)
    message = f.FetchResponse(
        responses=(
            f.FetchableTopicResponse(
                topic_id=uuid.uuid4(),
                partitions=tuple(
                    f.PartitionData(
                        partition_index=i, high_watermark=100, records=records
                    )
                    for i in range(partitions)
                ),
            ),
        ),
        node_endpoints=(f.NodeEndpoint(2, "kafka-2.upstream.internal", 9094, "r"),)
        if endpoints
        else (),
    )
    out = bytearray()
    f.WRITERS[17](message, out)
    return bytes(out)


def test_fetch_cost_does_not_grow_with_its_records() -> None:
    small, large = fetch_body(64 << 10), fetch_body(4 << 20)
    assert (
        rewrite_addresses(ApiKeys.FETCH, 17, large, address_for) is None
    )  # nothing copied
    t_small = best_us(
        lambda: rewrite_addresses(ApiKeys.FETCH, 17, small, address_for), 2000
    )
    t_large = best_us(
        lambda: rewrite_addresses(ApiKeys.FETCH, 17, large, address_for), 2000
    )
    print(f"\nFetch v17, 6 partitions: 64 KiB {t_small:.2f} us, 4 MiB {t_large:.2f} us")
    assert t_large < 3 * t_small + 5


def test_costs() -> None:
    fetch = fetch_body(1 << 20)
    fetch_endpoints = fetch_body(1 << 20, endpoints=True)
    produce = p.ProduceResponse(
        responses=(
            p.TopicProduceResponse(
                name="orders",
                partition_responses=(p.PartitionProduceResponse(index=0),),
            ),
        )
    )
    out = bytearray()
    p.WRITERS[11](produce, out)
    produce_body = bytes(out)
    metadata = m.MetadataResponse(
        brokers=tuple(
            m.MetadataResponseBroker(i, f"kafka-{i}.internal", 9092) for i in range(3)
        ),
        topics=tuple(
            m.MetadataResponseTopic(
                name=f"topic-{t}",
                topic_id=uuid.uuid4(),
                partitions=tuple(
                    m.MetadataResponsePartition(
                        partition_index=i, replica_nodes=(0, 1, 2), isr_nodes=(0, 1, 2)
                    )
                    for i in range(6)
                ),
            )
            for t in range(100)
        ),
    )
    out = bytearray()
    m.WRITERS[12](metadata, out)
    metadata_body = bytes(out)
    in_place = bytearray(fetch)
    costs = {
        "Fetch v17 1 MiB/6 partitions, no NodeEndpoints: rewrite_addresses": best_us(
            lambda: rewrite_addresses(ApiKeys.FETCH, 17, fetch, address_for), 2000
        ),
        "Fetch v17 1 MiB/6 partitions, NodeEndpoints rewritten (one copy)": best_us(
            lambda: rewrite_addresses(ApiKeys.FETCH, 17, fetch_endpoints, address_for),
            300,
        ),
        "Fetch with_throttle_ms, bytearray (in place)": best_us(
            lambda: with_throttle_ms(ApiKeys.FETCH, 17, in_place, 5), 20000
        ),
        "Fetch with_throttle_ms, bytes (one copy)": best_us(
            lambda: with_throttle_ms(ApiKeys.FETCH, 17, fetch, 5), 300
        ),
        "Produce v11 small: rewrite_addresses": best_us(
            lambda: rewrite_addresses(ApiKeys.PRODUCE, 11, produce_body, address_for),
            20000,
        ),
        "Produce v11 small: read_throttle_ms": best_us(
            lambda: read_throttle_ms(ApiKeys.PRODUCE, 11, produce_body), 20000
        ),
        "Metadata v12 3 brokers, 100 topics x 6 partitions: rewrite_addresses": best_us(
            lambda: rewrite_addresses(ApiKeys.METADATA, 12, metadata_body, address_for),
            200,
        ),
    }
    for name, cost in costs.items():
        print(f"{name}: {cost:.2f} us")
    # loose: ten times a quiet run's figure
    assert (
        costs["Fetch v17 1 MiB/6 partitions, no NodeEndpoints: rewrite_addresses"] < 40
    )
    assert costs["Produce v11 small: rewrite_addresses"] < 20
