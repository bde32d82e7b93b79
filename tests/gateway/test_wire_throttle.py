"""ThrottleTimeMs read and patched in place, for every response of Kafka 4.4.0.

golden/throttle.txt holds Kafka's own bytes for every API key and version with ThrottleTimeMs
4321 wherever the version has the field. A patch must change exactly those four bytes and
nothing else; a response without the field comes back as the very same object.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.gateway.throttle import (
    read_throttle_ms,
    throttle_offset,
    with_throttle_ms,
)
from collector.gateway.wire import MalformedResponseError
from proto.api_keys import ApiKeys
from proto.api_table import API_TABLE
from proto.codegen import MessageSpec
from proto.messages import RESPONSE_MODULES
from tests.gateway.golden import GoldenThrottle, throttles
from tests.gateway.golden.strategies import message_strategy, response_specs

GOLDEN = throttles()


def test_golden_covers_every_api_and_version() -> None:
    covered = {(g.api_key, g.version) for g in GOLDEN}
    for info in API_TABLE.values():
        if info.min_version is not None and info.max_version is not None:
            for version in range(info.min_version, info.max_version + 1):
                assert (info.api_key, version) in covered


@pytest.mark.parametrize("g", GOLDEN, ids=[g.id for g in GOLDEN])
def test_read_and_patch_kafkas_bytes(g: GoldenThrottle) -> None:
    assert API_TABLE[g.api_key].has_throttle(g.version) == g.has_throttle
    if not g.has_throttle:
        assert read_throttle_ms(g.api_key, g.version, g.body) is None
        assert with_throttle_ms(g.api_key, g.version, g.body, 99) is g.body
        return
    assert read_throttle_ms(g.api_key, g.version, g.body) == 4321
    patched = with_throttle_ms(g.api_key, g.version, g.body, 99)
    assert read_throttle_ms(g.api_key, g.version, patched) == 99
    offset = throttle_offset(g.api_key, g.version, g.body)
    assert offset is not None
    assert (
        bytes(patched) == g.body[:offset] + struct.pack(">i", 99) + g.body[offset + 4 :]
    )
    # the same value: nothing to do, the same object back
    assert with_throttle_ms(g.api_key, g.version, g.body, 4321) is g.body


def test_a_bytearray_is_patched_in_place_and_a_readonly_view_is_copied() -> None:
    g = next(g for g in GOLDEN if g.api_key == ApiKeys.FETCH and g.version == 18)
    buffer = bytearray(g.body)
    assert with_throttle_ms(g.api_key, g.version, buffer, 7) is buffer
    assert read_throttle_ms(g.api_key, g.version, buffer) == 7
    view = memoryview(g.body)
    patched = with_throttle_ms(g.api_key, g.version, view, 8)
    assert isinstance(patched, bytearray) and read_throttle_ms(1, 18, patched) == 8
    writable = memoryview(bytearray(g.body))
    assert with_throttle_ms(g.api_key, g.version, writable, 9) is writable


def test_a_body_too_short_for_its_throttle_field_is_malformed() -> None:
    with pytest.raises(MalformedResponseError):
        read_throttle_ms(ApiKeys.FETCH, 18, b"\x00\x00")
    produce = next(
        g for g in GOLDEN if g.api_key == ApiKeys.PRODUCE and g.version == 13
    )
    for size in range(len(produce.body) - 1):  # cut before the end of ThrottleTimeMs
        if size < throttle_offset(0, 13, produce.body) + 4:  # type: ignore[operator]
            with pytest.raises(MalformedResponseError):
                read_throttle_ms(ApiKeys.PRODUCE, 13, produce.body[:size])


CASES = [
    (spec, version)
    for spec in response_specs()
    for version in spec.versions()
    if any(f.name == "ThrottleTimeMs" for f in spec.fields)
]


@pytest.mark.parametrize(
    ("spec", "version"), CASES, ids=[f"{s.name}-v{v}" for s, v in CASES]
)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), throttle_ms=st.integers(0, 2**31 - 1))
def test_patch_random_messages(
    spec: MessageSpec, version: int, data: st.DataObject, throttle_ms: int
) -> None:
    """Random messages of every generated response: the patched body decodes to the same
    message with the new throttle time, and nothing else changed."""
    assert spec.api_key is not None
    module = RESPONSE_MODULES[spec.api_key]
    message: Any = data.draw(message_strategy(spec, version))
    out = bytearray()
    module.WRITERS[version](message, out)
    body = bytes(out)
    has = API_TABLE[spec.api_key].has_throttle(version)
    assert read_throttle_ms(spec.api_key, version, body) == (
        message.throttle_time_ms if has else None
    )
    patched = with_throttle_ms(spec.api_key, version, body, throttle_ms)
    decoded, end = module.READERS[version](memoryview(bytes(patched)), 0)
    assert end == len(body)
    if has:
        import dataclasses

        assert decoded == dataclasses.replace(message, throttle_time_ms=throttle_ms)
    else:
        assert patched is body
