"""Address rewriting against Kafka's own bytes: every address-bearing response, every version.

Each golden line (golden/responses.txt; golden/live.txt for answers captured from a running
Kafka 4.4.0 cluster, golden/capture_live.py) holds a response body as Kafka 4.4.0 sends it
and the same message with the gateway's addresses, serialized by Kafka's classes.
Rewriting the first must give exactly the second: every broker address replaced, node ids,
racks, keys, messages, topic names and unknown tagged fields untouched, node id -1 and
DescribeCluster's controller endpoints left alone. Each body is also fed whole, byte by
byte through the response framer, with trailing bytes, and truncated.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

from collector.gateway.addresses import (
    ADDRESS_VERSIONS,
    MalformedResponseError,
    revealed_nodes,
    rewrite_addresses,
    scan_addresses,
)
from collector.gateway.frames import (
    ResponseFramer,
    response_body_offset,
    response_correlation_id,
)
from proto.api_keys import ApiKeys
from proto.api_table import response_header_version
from proto.messages import RESPONSE_MODULES
from tests.gateway.golden import (
    HERE,
    GoldenResponse,
    gateway_address,
    kafka_classpath,
    responses,
    run_java,
    upstream_address,
)

GOLDEN = responses()
IDS = [g.id for g in GOLDEN]


def walked(g: GoldenResponse) -> bool:
    return scan_addresses(g.api_key, g.version, g.upstream) is not None


def test_goldens_cover_every_version_of_every_address_bearing_response() -> None:
    covered = {(g.api_key, g.version) for g in GOLDEN}
    for api_key, (low, high) in ADDRESS_VERSIONS.items():
        for version in range(low, high + 1):
            assert (api_key, version) in covered, (ApiKeys(api_key).name, version)
    assert any(g.upstream != g.expected for g in GOLDEN if g.api_key == ApiKeys.PRODUCE)
    assert any(g.upstream != g.expected for g in GOLDEN if g.api_key == ApiKeys.FETCH)


@pytest.mark.parametrize("g", GOLDEN, ids=IDS)
def test_rewrite_gives_kafkas_bytes(g: GoldenResponse) -> None:
    rewritten = rewrite_addresses(g.api_key, g.version, g.upstream, gateway_address)
    if g.upstream == g.expected:
        assert (
            rewritten is None
        )  # nothing to change: forwarded as it came, nothing copied
    else:
        assert rewritten == g.expected
    # A second pass over the rewritten body finds nothing left to change.
    assert rewrite_addresses(g.api_key, g.version, g.expected, gateway_address) is None
    # memoryview in, same answer (the gateway passes views of its frames)
    view = rewrite_addresses(
        g.api_key, g.version, memoryview(g.upstream), gateway_address
    )
    assert view == rewritten


@pytest.mark.parametrize("g", GOLDEN, ids=IDS)
def test_revealed_nodes_are_the_upstream_brokers(g: GoldenResponse) -> None:
    nodes = revealed_nodes(g.api_key, g.version, g.upstream)
    for node_id, address in nodes.items():
        assert address == upstream_address(node_id)
    controllers = g.api_key == ApiKeys.DESCRIBE_QUORUM or g.case == "controllers"
    if controllers:
        assert nodes == {}  # controller endpoints are not brokers to bind listeners for
    else:
        assert bool(nodes) == (g.upstream != g.expected)
    assert -1 not in nodes


@pytest.mark.parametrize("g", GOLDEN, ids=IDS)
def test_generated_codec_reads_kafkas_bytes(g: GoldenResponse) -> None:
    """Our generated decoder reads both bodies to their last byte, and they differ only in
    the addresses; without unknown tagged fields (non-flexible versions) re-encoding gives
    Kafka's bytes back."""
    module = RESPONSE_MODULES[g.api_key]
    upstream, end = module.READERS[g.version](memoryview(g.upstream), 0)
    assert end == len(g.upstream)
    _, end = module.READERS[g.version](memoryview(g.expected), 0)
    assert end == len(g.expected)
    if (
        module.FIRST_FLEXIBLE_VERSION is None
        or g.version < module.FIRST_FLEXIBLE_VERSION
    ):
        out = bytearray()
        module.WRITERS[g.version](upstream, out)
        assert bytes(out) == g.upstream


@pytest.mark.parametrize("g", GOLDEN, ids=IDS)
def test_trailing_bytes(g: GoldenResponse) -> None:
    """A walked body must end where its schema ends: one byte more is malformed (the gateway
    closes the pair). Versions that carry no address are not walked: forwarded untouched."""
    for tail in (b"\x00", b"\x01\x02\x03"):
        if walked(g):
            with pytest.raises(MalformedResponseError):
                rewrite_addresses(
                    g.api_key, g.version, g.upstream + tail, gateway_address
                )
        else:
            assert (
                rewrite_addresses(
                    g.api_key, g.version, g.upstream + tail, gateway_address
                )
                is None
            )


WALKED = [g for g in GOLDEN if walked(g)]


@pytest.mark.parametrize("g", WALKED, ids=[g.id for g in WALKED])
def test_every_truncation_is_malformed(g: GoldenResponse) -> None:
    for size in range(len(g.upstream)):
        with pytest.raises(MalformedResponseError):
            scan_addresses(g.api_key, g.version, g.upstream[:size])


def frame(g: GoldenResponse, correlation_id: int) -> bytes:
    header = struct.pack(">i", correlation_id)
    if response_header_version(g.api_key, g.version) == 1:
        header += b"\x00"  # response header v1: empty tagged-field section
    payload = header + g.upstream
    return struct.pack(">i", len(payload)) + payload


def rewrite_frames(
    framer: ResponseFramer, in_flight: dict[int, GoldenResponse]
) -> list[bytes]:
    out = []
    while (payload := framer.next_frame()) is not None:
        g = in_flight.pop(response_correlation_id(payload))
        body = memoryview(payload)[
            response_body_offset(g.api_key, g.version, payload) :
        ]
        rewritten = rewrite_addresses(g.api_key, g.version, body, gateway_address)
        out.append(bytes(body) if rewritten is None else rewritten)
    return out


@pytest.mark.parametrize("feed", ["whole", "byte_by_byte", "odd_chunks"])
def test_framed_stream_of_every_golden(feed: str) -> None:
    """All golden responses as one upstream stream, cut by the framer, each rewritten."""
    stream = b"".join(frame(g, index) for index, g in enumerate(GOLDEN))
    in_flight = dict(enumerate(GOLDEN))
    framer = ResponseFramer()
    bodies: list[bytes] = []
    if feed == "whole":
        framer.receive_data(stream)
        bodies = rewrite_frames(framer, in_flight)
    else:
        step = 1 if feed == "byte_by_byte" else 97
        for at in range(0, len(stream), step):
            framer.receive_data(stream[at : at + step])
            bodies.extend(rewrite_frames(framer, in_flight))
    assert bodies == [g.expected for g in GOLDEN]
    assert framer.buffered_bytes == 0 and not in_flight


def test_framer_rejects_a_negative_size() -> None:
    from proto.errors import FramingError

    framer = ResponseFramer()
    with pytest.raises(FramingError):
        framer.receive_data(b"\xff\xff\xff\xfe")


def test_a_coordinator_with_node_id_minus_one_is_untouched() -> None:
    cases = [
        g
        for g in GOLDEN
        if g.api_key == ApiKeys.FIND_COORDINATOR and g.case == "unavailable"
    ]
    for g in cases:
        if g.version <= 3:
            assert (
                rewrite_addresses(g.api_key, g.version, g.upstream, gateway_address)
                is None
            )
        else:  # the available coordinator is rewritten, the -1 one is not
            rewritten = rewrite_addresses(
                g.api_key, g.version, g.upstream, gateway_address
            )
            assert rewritten == g.expected
            assert b"group-b" in rewritten and struct.pack(">i", -1) in rewritten


def test_goldens_are_what_kafka_serializes(tmp_path: Path) -> None:
    """Re-runs the Java programs and compares with the committed files."""
    java, classpath = shutil.which("java"), kafka_classpath()
    if java is None or classpath is None:
        reason = "needs java and the kafka-clients 4.4.0 jar (make kafka-libs)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    for program, name in (
        ("GoldenResponses", "responses.txt"),
        ("GoldenRequests", "requests.txt"),
        ("GoldenThrottle", "throttle.txt"),
        ("GoldenLive", "live.txt"),
    ):
        assert (
            run_java(program, java, classpath, tmp_path) == (HERE / name).read_text()
        ), name
