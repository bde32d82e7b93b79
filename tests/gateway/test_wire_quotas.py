"""The gateway's quota work on forwarded bytes, sans I/O, on a FakeClock (``GatewayQuotas``):

* a Fetch request's MaxBytes is clamped to one quota window of the client's fetch quota
  (Kafka's ``maxValueInQuotaWindow``), 4 bytes patched, for every Fetch version Kafka 4.4
  has, read the way the gateway reads frames (``proto.ServerConnection``, which leaves a
  flexible header's tagged fields in the body of an API it has no request schema for);
* a Fetch the gateway throttles is answered empty (``KafkaApis``' ``getThrottledResponse``):
  the throttle time, no topics, session id 0 unless the fetch was incremental; its bytes are
  un-recorded; a response with a top-level error is left alone;
* a client channel muted by several throttles reads again only when the last one ends, and
  a request that throttled itself holds the channel until its response takes over.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import struct
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32, i32Timedelta

from clock.testing import FakeClock
from collector.gateway.forwarded_quotas import GatewayQuotas
from collector.pipeline.quota_enforcer import QuotaEnforcer
from proto.connection import ServerConnection
from proto.messages import fetch_response
from quota import QuotaEngine

CAP = 1000  # bytes per second
CLIENT = "app"


def fetch_frame(
    version: int, *, max_bytes: int, session_id: int = 0, epoch: int = -1
) -> Any:
    """A Fetch request of ``version`` as a client writes it, framed as the gateway reads it."""
    module = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    fields: dict[str, Any] = {
        "max_wait": i32Timedelta.parse(datetime.timedelta(milliseconds=500)),
        "min_bytes": i32(1),
        "max_bytes": i32(max_bytes),
        "topics": (),
    }
    names = module.FetchRequest.__dataclass_fields__
    if "isolation_level" in names:
        fields["isolation_level"] = i8(1)
    if "session_id" in names:
        fields["session_id"] = i32(session_id)
        fields["session_epoch"] = i32(epoch)
    if "forgotten_topics_data" in names:
        fields["forgotten_topics_data"] = ()
    if "replica_id" in names:
        fields["replica_id"] = i32(-1)
    request = module.FetchRequest(**fields)
    header_type = module.FetchRequest.__header_schema__
    header: dict[str, Any] = {
        "request_api_key": request.__api_key__,
        "request_api_version": request.__version__,
        "correlation_id": i32(7),
    }
    if "client_id" in header_type.__dataclass_fields__:
        header["client_id"] = CLIENT
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header_type(**header))
    entity_writer(type(request))(buffer, request)
    raw = buffer.getvalue()
    connection = ServerConnection()
    connection.receive_data(struct.pack(">i", len(raw)) + raw)
    frame = connection.next_request()
    assert frame is not None
    return frame


def read_fetch(raw: bytes, version: int) -> Any:
    """The Fetch request's fields, decoded with kio."""
    module = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    header_type = module.FetchRequest.__header_schema__
    _, offset = entity_reader(header_type)(raw, 0)
    request, _ = entity_reader(module.FetchRequest)(raw, offset)
    return request


def gateway_quotas(clock: FakeClock, **quotas: float) -> GatewayQuotas:
    engine = QuotaEngine.from_config(
        {"quota.window.num": 2, "quota.window.size.seconds": 1}, clock.now_ms()
    )
    engine.apply_entity_quotas({f"clients/{CLIENT}": quotas} if quotas else {})
    return GatewayQuotas(QuotaEnforcer(engine, clock=clock))


FETCH_VERSIONS = range(4, 19)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_max_bytes_clamped_to_one_quota_window(version: int) -> None:
    clock = FakeClock()
    quotas = gateway_quotas(clock, consumer_byte_rate=CAP)
    frame = fetch_frame(version, max_bytes=50 * 1024 * 1024, session_id=3, epoch=4)
    forwarded = quotas.fetch_request(frame, "ANONYMOUS", clock.now_ms())
    assert len(forwarded) == len(frame.raw)
    before, after = read_fetch(frame.raw, version), read_fetch(forwarded, version)
    # CAP x (2 - 1) windows x 1 s; every other field as the client wrote it.
    assert after.max_bytes == CAP
    assert after == dataclasses.replace(before, max_bytes=i32(CAP))


@pytest.mark.parametrize("version", [4, 12, 15, 18])
def test_fetch_max_bytes_left_alone(version: int) -> None:
    clock = FakeClock()
    # No fetch quota at all: the very same bytes.
    frame = fetch_frame(version, max_bytes=50 * 1024 * 1024)
    assert gateway_quotas(clock).fetch_request(frame, "ANONYMOUS", 0) is frame.raw
    # A fetch quota elsewhere, or a request asking for less than the window: untouched.
    quotas = gateway_quotas(clock, consumer_byte_rate=CAP)
    small = fetch_frame(version, max_bytes=CAP // 2)
    assert quotas.fetch_request(small, "ANONYMOUS", 0) is small.raw


def response_body(version: int, message: Any) -> bytes:
    out = bytearray()
    fetch_response.WRITERS[version](message, out)
    return bytes(out)


def decode_response(frame: bytes, version: int) -> tuple[int, Any]:
    (size, correlation_id) = struct.unpack_from(">ii", frame, 0)
    assert size == len(frame) - 4
    body_at = 8 + (
        1 if version >= 12 else 0
    )  # response header v1 from v12: tagged fields
    message, end = fetch_response.READERS[version](memoryview(frame), body_at)
    assert end == len(frame)
    return correlation_id, message


@pytest.mark.parametrize(
    ("version", "session_id", "epoch", "answered_session"),
    [
        (4, 0, -1, 0),  # no sessions before v7
        (
            7,
            0,
            0,
            0,
        ),  # a full fetch that opens a session: Kafka answers INVALID_SESSION_ID
        (12, 0, -1, 0),  # sessionless
        (13, 55, 3, 55),  # incremental: the session goes on
        (18, 55, 9, 55),
    ],
)
def test_throttled_fetch_is_answered_empty_and_unrecorded(
    version: int, session_id: int, epoch: int, answered_session: int
) -> None:
    clock = FakeClock()
    quotas = gateway_quotas(clock, consumer_byte_rate=CAP)
    frame = fetch_frame(version, max_bytes=CAP, session_id=session_id, epoch=epoch)
    big = 3 * CAP
    throttle_ms = quotas.record_fetch_bytes("ANONYMOUS", CLIENT, big, clock.now_ms())
    assert throttle_ms > 0
    upstream = response_body(
        version,
        fetch_response.FetchResponse(
            throttle_time_ms=0,
            session_id=55 if version >= 7 else 0,
            responses=(
                fetch_response.FetchableTopicResponse(topic="t", partitions=()),
            ),
        ),
    )
    answer = quotas.throttled_fetch_response(
        frame, memoryview(upstream), big, "ANONYMOUS", throttle_ms, clock.now_ms()
    )
    assert answer is not None
    correlation_id, message = decode_response(answer, version)
    assert correlation_id == 7
    assert (message.throttle_time_ms, message.error_code, message.responses) == (
        throttle_ms,
        0,
        (),
    )
    if version >= 7:
        assert message.session_id == answered_session
    # Un-recorded: the same bytes a window later... are within the quota again.
    clock.advance(1000)
    assert quotas.record_fetch_bytes("ANONYMOUS", CLIENT, CAP, clock.now_ms()) == 0


def test_throttled_fetch_with_a_top_level_error_is_forwarded() -> None:
    clock = FakeClock()
    quotas = gateway_quotas(clock, consumer_byte_rate=CAP)
    frame = fetch_frame(13, max_bytes=CAP, session_id=55, epoch=3)
    upstream = response_body(
        13, fetch_response.FetchResponse(error_code=71, session_id=0)
    )
    assert (
        quotas.throttled_fetch_response(
            frame, memoryview(upstream), 100, "ANONYMOUS", 50, 0
        )
        is None
    )


class Channel:
    """A client connection as quotas see it: mute/unmute (KafkaProtocol's are flags)."""

    def __init__(self) -> None:
        self.muted = False

    def mute(self) -> None:
        self.muted = True

    def unmute(self) -> None:
        self.muted = False


def test_a_channel_reads_again_only_when_its_last_throttle_ends() -> None:
    clock = FakeClock()
    quotas = gateway_quotas(clock, producer_byte_rate=CAP)
    channel = Channel()
    # Two responses in flight, throttled 100 ms and 500 ms (a pipelining client).
    quotas.mute(channel, "ANONYMOUS", CLIENT, 500)
    quotas.mute(channel, "ANONYMOUS", CLIENT, 100)
    clock.advance(100)
    assert channel.muted
    clock.advance(399)
    assert channel.muted
    clock.advance(1)
    assert not channel.muted


def test_a_request_that_throttled_itself_holds_the_channel_until_its_response() -> None:
    clock = FakeClock()
    quotas = gateway_quotas(clock, producer_byte_rate=CAP)
    channel = Channel()
    quotas.hold(channel)  # read nothing more: the request is at the broker
    assert channel.muted
    clock.advance(5000)  # however long the broker takes
    assert channel.muted
    quotas.mute(
        channel, "ANONYMOUS", CLIENT, 300, held=True
    )  # its response: 300 ms more
    clock.advance(299)
    assert channel.muted
    clock.advance(1)
    assert not channel.muted
    # A response with no throttle of its own (another quota cleared) ends the hold at once.
    quotas.hold(channel)
    quotas.mute(channel, "ANONYMOUS", CLIENT, 0, held=True)
    assert not channel.muted


def test_a_closed_channel_is_forgotten() -> None:
    clock = FakeClock()
    quotas = gateway_quotas(clock, producer_byte_rate=CAP)
    channel = Channel()
    quotas.hold(channel)
    quotas.mute(channel, "ANONYMOUS", CLIENT, 200)
    quotas.forget(channel)
    other = Channel()  # the next connection, maybe at the same address
    quotas.mute(other, "ANONYMOUS", CLIENT, 100)
    clock.advance(200)
    assert not other.muted
    assert not quotas._holds
