"""ApiVersions capping against an upstream that advertises more than the gateway handles.

golden/requests.txt's api_versions lines are Kafka-serialized upstream answers (v0-v4): every
4.4.0 API at its stable range, Produce and Fetch one version newer than 4.4.0, an API key
4.4.0 does not have (1000), features and unknown tagged fields in the flexible versions.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.gateway.api_versions import (
    API_VERSIONS_RANGE,
    DECODED_VERSIONS,
    cap_api_versions,
    capped_range,
    unsupported_version_response,
)
from collector.gateway.wire import MalformedResponseError, tagged_fields
from proto.api_keys import ApiKeys
from proto.api_table import API_TABLE
from proto.connection import decode_response
from proto.errors import Errors
from proto.messages import api_versions_response as av
from tests.gateway.golden import GoldenRequest, requests

LOCAL: dict[int, tuple[int, int]] = {
    ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKeys.PUSH_TELEMETRY: (0, 0),
}
GOLDEN = requests("api_versions")


def decode(version: int, body: bytes) -> av.ApiVersionsResponse:
    message, end = av.READERS[version](memoryview(body), 0)
    assert end == len(body)
    return message


def ranges(message: av.ApiVersionsResponse) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in message.api_keys}


@pytest.mark.parametrize("g", GOLDEN, ids=[g.id for g in GOLDEN])
def test_cap_kafkas_answer(g: GoldenRequest) -> None:
    upstream = decode(g.version, g.body)
    capped_body = cap_api_versions(g.version, g.body, LOCAL)
    capped = decode(g.version, capped_body)
    got = ranges(capped)
    up = ranges(upstream)
    assert 1000 in up and 1000 not in got  # unknown to the gateway: removed
    produce_max = API_TABLE[ApiKeys.PRODUCE].max_version
    assert produce_max is not None and up[ApiKeys.PRODUCE][1] == produce_max + 1
    assert got[ApiKeys.PRODUCE] == (3, 13)  # capped to 4.4.0 (and the codec)
    assert got[ApiKeys.FETCH] == (4, 18)
    assert got[ApiKeys.API_VERSIONS] == API_VERSIONS_RANGE  # v5 is not spoken
    assert got[ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS] == (0, 0)
    assert got[ApiKeys.PUSH_TELEMETRY] == (0, 0)
    for api_key, (low, high) in up.items():
        if api_key in LOCAL:
            continue
        assert got.get(api_key) == capped_range(api_key, low, high)
    # entries stay in API key order, with the added ones in place
    assert [k.api_key for k in capped.api_keys] == sorted(got)
    # everything but the ApiKeys array is the upstream's, byte for byte
    same = dataclass_without_keys(upstream) == dataclass_without_keys(capped)
    assert same
    assert _tail(g.version, capped_body) == _tail(g.version, g.body)
    if g.version >= 3:  # the Metadata entry's own unknown tagged field (tag 7) survived
        assert b"\x03\x00\x00\x00\x0d\x01\x07\x01\x09" in capped_body


def dataclass_without_keys(message: av.ApiVersionsResponse) -> av.ApiVersionsResponse:
    import dataclasses

    return dataclasses.replace(message, api_keys=())


def _tail(version: int, body: bytes) -> bytes:
    """The bytes after the ApiKeys array: ThrottleTimeMs and the tagged fields."""
    flexible = version >= 3
    if flexible:
        from proto.primitives import read_uvarint

        count, pos = read_uvarint(body, 2)
        count -= 1
        for _ in range(count):
            pos += 6
            pos = tagged_fields(body, pos)[1]
    else:
        (count,) = struct.unpack_from(">i", body, 2)
        pos = 6 + 6 * count
    return body[pos:]


def test_a_key_whose_range_becomes_empty_is_dropped() -> None:
    assert capped_range(ApiKeys.PRODUCE, 14, 15) is None  # all newer than the gateway
    assert capped_range(ApiKeys.FETCH, 0, 3) is None  # all older than 4.4.0 keeps
    assert (
        capped_range(ApiKeys.LEADER_AND_ISR, 0, 7) is None
    )  # removed from the protocol
    assert capped_range(9999, 0, 1) is None
    assert capped_range(ApiKeys.OFFSET_COMMIT, 0, 99) == (
        2,
        10,
    )  # not decoded: the table
    assert capped_range(ApiKeys.METADATA, 0, 13) == (0, 13)
    assert (
        capped_range(ApiKeys.DESCRIBE_CONFIGS, 0, 4)
        == DECODED_VERSIONS[ApiKeys.DESCRIBE_CONFIGS]
    )


def test_local_apis_override_the_upstream() -> None:
    upstream = av.ApiVersionsResponse(
        api_keys=(
            av.ApiVersion(ApiKeys.METADATA, 0, 13),
            av.ApiVersion(ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0),
            av.ApiVersion(
                ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, 1
            ),  # overridden in place
        ),
        throttle_time_ms=3,
    )
    out = bytearray()
    av.WRITERS[3](upstream, out)
    capped = decode(3, cap_api_versions(3, bytes(out), LOCAL))
    assert [(k.api_key, k.min_version, k.max_version) for k in capped.api_keys] == [
        (ApiKeys.METADATA, 0, 13),
        (ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0),
        (ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0),
        (ApiKeys.PUSH_TELEMETRY, 0, 0),
    ]
    assert capped.throttle_time_ms == 3


def test_the_v0_unsupported_version_fallback_is_read_as_v0() -> None:
    """An upstream that does not know the requested version answers in v0 (KIP-511)."""
    fallback = av.ApiVersionsResponse(
        error_code=Errors.UNSUPPORTED_VERSION,
        api_keys=(av.ApiVersion(ApiKeys.API_VERSIONS, 0, 9),),
    )
    out = bytearray()
    av.WRITERS[0](fallback, out)
    capped = decode(0, cap_api_versions(4, bytes(out), LOCAL))
    assert capped.error_code == Errors.UNSUPPORTED_VERSION
    assert ranges(capped) == {ApiKeys.API_VERSIONS: API_VERSIONS_RANGE}  # nothing added


def test_malformed_answers() -> None:
    body = next(g.body for g in GOLDEN if g.version == 3)
    with pytest.raises(MalformedResponseError):
        cap_api_versions(3, body + b"\x00", LOCAL)
    for size in (0, 1, 2, 5, len(body) // 2, len(body) - 1):
        with pytest.raises(MalformedResponseError):
            cap_api_versions(3, body[:size], LOCAL)


def test_unsupported_version_answer_is_kafkas_v0() -> None:
    frame = unsupported_version_response(correlation_id=42)
    (size,) = struct.unpack_from(">i", frame, 0)
    assert size == len(frame) - 4
    response = decode_response(ApiKeys.API_VERSIONS, 0, frame[4:])
    assert response.correlation_id == 42
    assert response.message.error_code == Errors.UNSUPPORTED_VERSION
    assert ranges(response.message) == {ApiKeys.API_VERSIONS: API_VERSIONS_RANGE}


@settings(max_examples=200, deadline=None)
@given(
    version=st.integers(0, 4),
    entries=st.lists(
        st.tuples(st.integers(-5, 120), st.integers(-2, 20), st.integers(-2, 20)),
        max_size=30,
    ),
    throttle=st.integers(0, 1000),
)
def test_any_upstream_answer(
    version: int, entries: list[tuple[int, int, int]], throttle: int
) -> None:
    upstream = av.ApiVersionsResponse(
        api_keys=tuple(av.ApiVersion(k, low, high) for k, low, high in entries),
        throttle_time_ms=throttle if version >= 1 else 0,
    )
    out = bytearray()
    av.WRITERS[version](upstream, out)
    capped = decode(version, cap_api_versions(version, bytes(out), LOCAL))
    got = [(k.api_key, k.min_version, k.max_version) for k in capped.api_keys]
    for api_key, low, high in got:
        assert low <= high
        if api_key in LOCAL:
            assert (low, high) == LOCAL[api_key]
            continue
        info = API_TABLE[api_key]
        assert info.min_version is not None and info.max_version is not None
        assert info.min_version <= low and high <= info.max_version
        if api_key in DECODED_VERSIONS:
            assert (
                DECODED_VERSIONS[api_key][0] <= low
                and high <= DECODED_VERSIONS[api_key][1]
            )
    assert {k for k, _, _ in got} >= set(LOCAL)
    assert capped.throttle_time_ms == upstream.throttle_time_ms
