"""ServerConnection / ClientConnection: golden bytes, every served version, malformed input.

Every reader is tested three ways (h11's rule): the whole buffer at once, one byte at a time,
and with the next frame's first bytes trailing behind.
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proto.codegen import MessageSpec
from proto.connection import (
    SUPPORTED_VERSIONS,
    ApiKeys,
    ClientConnection,
    RequestFrame,
    ResponseFramer,
    ServerConnection,
    api_versions_unsupported_response,
    decode_request,
    encode_request,
    encode_response,
    request_is_flexible,
)
from proto.errors import (
    Errors,
    FramingError,
    InvalidRequestError,
    UnknownApiKey,
    UnsupportedVersionError,
)
from proto.messages.api_versions_request import ApiVersionsRequest
from proto.messages.api_versions_response import ApiVersionsResponse
from proto.messages.get_telemetry_subscriptions_request import (
    GetTelemetrySubscriptionsRequest,
)
from proto.messages.get_telemetry_subscriptions_response import (
    GetTelemetrySubscriptionsResponse,
)
from proto.messages.push_telemetry_request import PushTelemetryRequest
from proto.messages.push_telemetry_response import PushTelemetryResponse
from tests.proto.message_strategies import (
    api_messages,
    kio_class,
    kio_encode,
    message_strategy,
)


def hexbytes(annotated: str) -> bytes:
    """Hex with '|' separators between fields and '#' comments."""
    lines = [line.split("#", 1)[0] for line in annotated.splitlines()]
    return bytes.fromhex(" ".join(lines).replace("|", " "))


# GetTelemetrySubscriptionsRequest v0, correlation 7, client "app-1", first call (field by field
# from GetTelemetrySubscriptionsRequest.json and RequestHeader.json).
GET_REQUEST = hexbytes(
    """
    00 00 00 21                       # size 33
    00 47 | 00 00 | 00 00 00 07       # api key 71, version 0, correlation id 7
    00 05 61 70 70 2d 31              # client id: legacy string "app-1" (header v2 keeps it)
    00                                # header tagged fields: none
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00   # ClientInstanceId: zero uuid
    00                                # body tagged fields: none
    """
)

# The answer (GetTelemetrySubscriptionsResponse.json, response header v1).
GET_RESPONSE = hexbytes(
    """
    00 00 00 4a | 00 00 00 07 | 00    # size 74, correlation 7, header tagged fields
    00 00 00 00 | 00 00               # throttle 0, error 0
    55 04 13 17 85 29 4f ca aa b6 8a 1e 9c 51 65 80   # ClientInstanceId VQQTF4UpT8qqtooenFFlgA
    b4 c6 07 c9                       # SubscriptionId
    05 04 03 01 02                    # compact [4, 3, 1, 2]: zstd, lz4, gzip, snappy
    00 00 13 88 | 00 10 00 00 | 01    # interval 5000, max bytes 1048576, delta temporality
    02 1b 6f 72 67 2e 61 70 61 63 68 65 2e 6b 61 66 6b 61 2e 70 72 6f 64 75 63 65 72 2e
                                      # compact array of 1 compact string (26 bytes)
    00                                # tagged fields
    """
)

INSTANCE_ID = uuid.UUID(bytes=base64.urlsafe_b64decode("VQQTF4UpT8qqtooenFFlgA=="))

# PushTelemetryRequest v0, correlation 8, client "app-1", zstd, 3 metric bytes.
PUSH_REQUEST = hexbytes(
    """
    00 00 00 2b                       # size 43
    00 48 | 00 00 | 00 00 00 08       # api key 72, version 0, correlation id 8
    00 05 61 70 70 2d 31 | 00         # client id "app-1", header tagged fields
    55 04 13 17 85 29 4f ca aa b6 8a 1e 9c 51 65 80   # ClientInstanceId
    b4 c6 07 c9                       # SubscriptionId
    01                                # Terminating true
    04                                # CompressionType zstd
    04 0a 0b 0c                       # Metrics: compact bytes, 3 bytes
    00                                # tagged fields
    """
)
PUSH_RESPONSE = hexbytes(
    "00 00 00 0c | 00 00 00 08 | 00"  # size 12, correlation 8, header tagged fields
    "00 00 00 00 | 00 75 | 00"  # throttle 0, error 117 UNKNOWN_SUBSCRIPTION_ID, tags
)


def feed_whole(data: bytes) -> list[RequestFrame]:
    conn = ServerConnection()
    conn.receive_data(data)
    return list(drain(conn))


def feed_bytewise(data: bytes) -> list[RequestFrame]:
    conn = ServerConnection()
    frames: list[RequestFrame] = []
    for index in range(len(data)):
        conn.receive_data(data[index : index + 1])
        frames.extend(drain(conn))
    return frames


def drain(conn: ServerConnection) -> Iterator[RequestFrame]:
    while (frame := conn.next_request()) is not None:
        yield frame


FEEDERS = [feed_whole, feed_bytewise]


@pytest.mark.parametrize("feed", FEEDERS)
def test_golden_get_telemetry_subscriptions_request(feed: Any) -> None:
    (frame,) = feed(GET_REQUEST)
    assert (frame.api_key, frame.api_version, frame.correlation_id) == (71, 0, 7)
    assert frame.client_id == "app-1"
    assert frame.header_size == 2 + 2 + 4 + 7 + 1
    assert frame.raw == GET_REQUEST[4:]
    assert decode_request(frame) == GetTelemetrySubscriptionsRequest()
    assert (
        encode_request(71, 0, 7, "app-1", GetTelemetrySubscriptionsRequest())
        == GET_REQUEST
    )


def test_golden_get_telemetry_subscriptions_response() -> None:
    response = GetTelemetrySubscriptionsResponse(
        client_instance_id=INSTANCE_ID,
        subscription_id=struct.unpack(">i", bytes.fromhex("b4c607c9"))[0],
        accepted_compression_types=(4, 3, 1, 2),
        push_interval_ms=5000,
        telemetry_max_bytes=1048576,
        delta_temporality=True,
        requested_metrics=("org.apache.kafka.producer.",),
    )
    assert encode_response(71, 0, 7, response) == GET_RESPONSE


@pytest.mark.parametrize("feed", FEEDERS)
def test_golden_push_telemetry(feed: Any) -> None:
    (frame,) = feed(PUSH_REQUEST)
    push = decode_request(frame)
    assert push == PushTelemetryRequest(
        client_instance_id=INSTANCE_ID,
        subscription_id=-1262090295,
        terminating=True,
        compression_type=4,
        metrics=b"\x0a\x0b\x0c",
    )
    # zero copy: the metrics are a view of the frame's bytes
    assert isinstance(push.metrics, memoryview) and push.metrics.obj is frame.raw
    reply = PushTelemetryResponse(error_code=Errors.UNKNOWN_SUBSCRIPTION_ID)
    assert encode_response(72, 0, 8, reply) == PUSH_RESPONSE


def test_several_frames_in_one_read_and_trailing_partial_frame() -> None:
    conn = ServerConnection()
    conn.receive_data(GET_REQUEST + PUSH_REQUEST + PUSH_REQUEST[:10])
    assert conn.buffered_bytes == len(GET_REQUEST) + len(PUSH_REQUEST) + 10
    first, second = conn.next_request(), conn.next_request()
    assert first is not None and second is not None
    assert (first.api_key, second.api_key) == (71, 72)
    assert conn.next_request() is None
    assert conn.buffered_bytes == 10
    conn.receive_data(PUSH_REQUEST[10:])
    third = conn.next_request()
    assert third is not None and decode_request(third) == decode_request(second)
    assert conn.buffered_bytes == 0


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(
        st.sampled_from([0, 1, 3, 100, 16_383, 16_385, 70_000, 300_000]),
        min_size=1,
        max_size=5,
    ),
    cuts=st.lists(
        st.sampled_from([1, 2, 3, 5, 100, 4096, 20_000, 65_536, 262_144]), min_size=1
    ),
    data=st.data(),
)
def test_frames_cut_anywhere_come_out_whole_and_in_order(
    sizes: list[int], cuts: list[int], data: Any
) -> None:
    """Large frames arrive in many reads (a 1 MiB Produce request in 64-256 KiB pieces, a
    slow client a few bytes at a time): whatever the cuts, every frame comes out whole, in
    order, once; ``buffered_bytes`` counts what is held; a caller's bytearray may be reused
    after receive_data returns."""
    frames = [bytes([index % 251]) * size for index, size in enumerate(sizes)]
    stream = b"".join(struct.pack(">i", len(frame)) + frame for frame in frames)
    framer = ResponseFramer()
    got: list[bytes] = []
    at = 0
    step = 0
    while at < len(stream):
        cut = cuts[step % len(cuts)]
        step += 1
        piece = bytearray(stream[at : at + cut])
        framer.receive_data(piece)
        piece[:] = b"\xee" * len(piece)  # the caller reuses its buffer
        at += cut
        held = (
            len(stream)
            - sum(4 + len(frame) for frame in got)
            - max(0, len(stream) - at)
        )
        assert framer.buffered_bytes == held
        if data.draw(st.booleans()):
            while (frame := framer.next_frame()) is not None:
                got.append(frame)
    while (frame := framer.next_frame()) is not None:
        got.append(frame)
    assert got == frames
    assert framer.buffered_bytes == 0


# ---- every served version, against kio bodies ------------------------------------------------


# Versions kio does not have yet (it predates KIP-1242): golden bytes below instead.
KIO_PREDATES = {("ApiVersionsRequest", 5), ("ApiVersionsResponse", 5)}


def served(kind: str) -> list[tuple[MessageSpec, int]]:
    return [
        (spec, version)
        for spec, version in api_messages()
        if spec.kind == kind
        and spec.api_key in SUPPORTED_VERSIONS
        and SUPPORTED_VERSIONS[spec.api_key][0]
        <= version
        <= SUPPORTED_VERSIONS[spec.api_key][1]
        and (spec.name, version) not in KIO_PREDATES
    ]


REQUESTS = served("request")
RESPONSES = served("response")


def header_by_hand(
    api_key: int, version: int, correlation_id: int, client_id: str
) -> bytes:
    encoded = client_id.encode()
    header = (
        struct.pack(">hhih", api_key, version, correlation_id, len(encoded)) + encoded
    )
    return header + (b"\x00" if request_is_flexible(api_key, version) else b"")


@pytest.mark.parametrize(
    ("spec", "version"), REQUESTS, ids=[f"{s.name}-v{v}" for s, v in REQUESTS]
)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(0, 2**31 - 1))
def test_every_served_request_version(
    spec: MessageSpec, version: int, data: st.DataObject, correlation_id: int
) -> None:
    kio_cls = kio_class(spec, version)
    assert kio_cls is not None and spec.api_key is not None
    message = data.draw(message_strategy(spec, version))
    payload = header_by_hand(spec.api_key, version, correlation_id, "c-1") + kio_encode(
        message, kio_cls
    )
    wire = struct.pack(">i", len(payload)) + payload
    assert encode_request(spec.api_key, version, correlation_id, "c-1", message) == wire
    for feed in FEEDERS:
        (frame,) = feed(wire)
        assert frame.correlation_id == correlation_id
        assert decode_request(frame) == message
    # trailing bytes: the next frame's start stays buffered, the first decodes the same
    conn = ServerConnection()
    conn.receive_data(wire + wire[:5])
    first = conn.next_request()
    assert first is not None and decode_request(first) == message
    assert conn.next_request() is None and conn.buffered_bytes == 5


@pytest.mark.parametrize(
    ("spec", "version"), RESPONSES, ids=[f"{s.name}-v{v}" for s, v in RESPONSES]
)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_served_response_version(
    spec: MessageSpec, version: int, data: st.DataObject
) -> None:
    kio_cls = kio_class(spec, version)
    assert kio_cls is not None and spec.api_key is not None
    message = data.draw(message_strategy(spec, version))
    flexible = spec.api_key != ApiKeys.API_VERSIONS and version >= (
        spec.flexible_versions.low if spec.flexible_versions.high is None else 10**6
    )
    payload = (
        struct.pack(">i", 42)
        + (b"\x00" if flexible else b"")
        + kio_encode(message, kio_cls)
    )
    wire = struct.pack(">i", len(payload)) + payload
    assert encode_response(spec.api_key, version, 42, message) == wire
    client = ClientConnection()
    client._in_flight[42] = (spec.api_key, version)  # as if request 42 had been sent
    for index in range(len(wire)):
        client.receive_data(wire[index : index + 1])
    response = client.next_response()
    assert response is not None and response.message == message


def test_api_versions_response_header_is_always_v0() -> None:
    from proto.messages.api_versions_response import ApiVersionsResponse

    wire = encode_response(18, 3, 5, ApiVersionsResponse())
    assert (
        wire[4:8] == b"\x00\x00\x00\x05" and wire[8:10] == b"\x00\x00"
    )  # error code next


# ---- malformed input ----------------------------------------------------------------------


def test_negative_size_is_a_framing_error() -> None:
    conn = ServerConnection()
    with pytest.raises(FramingError, match="-1"):
        conn.receive_data(b"\xff\xff\xff\xff")
    with pytest.raises(FramingError):  # the connection stays broken
        conn.next_request()


def test_oversized_prefix_is_rejected_before_its_body_is_buffered() -> None:
    conn = ServerConnection(max_request_size=1000)
    conn.receive_data(b"\x00\x00")
    with pytest.raises(FramingError, match="1001"):
        conn.receive_data(b"\x03\xe9")  # 1001 > 1000, no body byte sent yet
    limit = ServerConnection(max_request_size=len(GET_REQUEST) - 4)
    limit.receive_data(GET_REQUEST)  # exactly at the limit is fine
    assert limit.next_request() is not None


def test_oversized_second_frame_in_the_same_read_is_caught_on_arrival() -> None:
    conn = ServerConnection(max_request_size=100)
    with pytest.raises(FramingError):
        conn.receive_data(GET_REQUEST + b"\x7f\xff\xff\xff")


def test_default_limit_is_socket_request_max_bytes() -> None:
    assert ServerConnection().max_request_size == 104857600
    with pytest.raises(FramingError):
        ServerConnection().receive_data(struct.pack(">i", 104857601))


@pytest.mark.parametrize(
    "payload",
    [
        b"",  # size 0
        b"\x00\x47\x00",  # shorter than api key + version + correlation id
        b"\x00\x47\x00\x00\x00\x00\x00\x07\x00\x09app",  # client id past the end
        b"\x00\x47\x00\x00\x00\x00\x00\x07\x00\x00",  # flexible header without its tags
    ],
)
def test_malformed_header_is_a_framing_error(payload: bytes) -> None:
    conn = ServerConnection()
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    with pytest.raises(FramingError, match="header"):
        conn.next_request()


def frame_of(
    api_key: int, version: int, body: bytes, client_id: str = "c"
) -> RequestFrame:
    payload = header_by_hand(api_key, version, 1, client_id) + body
    (frame,) = feed_whole(struct.pack(">i", len(payload)) + payload)
    return frame


def test_unknown_api_key() -> None:
    frame = frame_of(999, 0, b"")
    assert (
        frame.api_key == 999 and frame.body.tobytes() == b""
    )  # readable for pass-through
    with pytest.raises(UnknownApiKey) as info:
        decode_request(frame)
    assert info.value.error_code == Errors.INVALID_REQUEST


def test_known_but_disabled_api_is_invalid_request_and_keeps_its_body_opaque() -> None:
    frame = frame_of(
        ApiKeys.PRODUCE, 9, b"\x00opaque"
    )  # Produce v9 is flexible in Kafka
    assert (
        frame.body.tobytes() == b"\x00opaque"
    )  # no schema here: header tags left in body
    with pytest.raises(InvalidRequestError, match="disabled api") as info:
        decode_request(frame)
    assert info.value.error_code == Errors.INVALID_REQUEST


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(72, 1), (71, 3), (3, 14), (18, 6), (32, 0), (74, 2)],
)
def test_unsupported_version(api_key: int, version: int) -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame_of(api_key, version, b"\x00" * 40))
    assert info.value.error_code == Errors.UNSUPPORTED_VERSION


def test_unsupported_api_versions_version_gets_a_v0_answer() -> None:
    # ApiVersions v9: header v2 (flexible from v3), body never parsed by Kafka
    frame = frame_of(18, 9, b"\x07garbage")
    assert frame.correlation_id == 1
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame)
    wire = api_versions_unsupported_response(frame.correlation_id)
    assert wire == hexbytes(
        """
        00 00 00 10 | 00 00 00 01         # size 16, correlation 1 (header v0)
        00 23                             # error 35 UNSUPPORTED_VERSION
        00 00 00 01 | 00 12 00 00 00 05   # [ApiVersions: 0..5]
        """
    )


@pytest.mark.parametrize(
    "body",
    [
        PUSH_REQUEST[20:-2],  # truncated: metrics bytes missing
        PUSH_REQUEST[20:40],  # truncated inside the fixed fields
        PUSH_REQUEST[20:42] + b"\x00\x00",  # null Metrics (Kafka: parse failure)
        PUSH_REQUEST[20:42] + b"\x7f\x00",  # Metrics length past the end
    ],
)
def test_malformed_push_body_is_invalid_request(body: bytes) -> None:
    with pytest.raises(InvalidRequestError) as info:
        decode_request(frame_of(72, 0, body, client_id="app-1"))
    assert info.value.error_code == Errors.INVALID_REQUEST


def test_trailing_garbage_after_a_body_is_ignored_like_kafka() -> None:
    frame = frame_of(72, 0, PUSH_REQUEST[20:] + b"extra", client_id="app-1")
    assert decode_request(frame) == decode_request(feed_whole(PUSH_REQUEST)[0])


def test_null_client_id_reads_as_empty_like_kafka() -> None:
    payload = struct.pack(">hhih", 18, 0, 3, -1)
    (frame,) = feed_whole(struct.pack(">i", len(payload)) + payload)
    assert frame.client_id == ""
    assert decode_request(frame) == ApiVersionsRequest()


# ApiVersions v5 (KIP-1242), byte by byte: kio has no v5 yet.
API_VERSIONS_V5_REQUEST = hexbytes(
    """
    00 00 00 32                       # size 50
    00 12 00 05 | 00 00 00 07         # ApiVersions v5, correlation 7
    00 03 63 2d 31 | 00               # client id "c-1" (int16 length), header tags
    04 6b 74 63 | 04 31 2e 30         # ClientSoftwareName "ktc", Version "1.0" (compact)
    17 4d 67 37 64 57 6e 5a 52 53 48 53 70 4c 79 5a 4f 6e 6e 45 52 2d 67
                                      # ClusterId, compact nullable, 22 characters
    00 00 00 01                       # NodeId 1
    00                                # tagged fields
    """
)
API_VERSIONS_V5_RESPONSE = hexbytes(
    """
    00 00 00 0c | 00 00 00 07         # size 12, correlation 7 (header v0, KIP-511)
    00 81                             # error 129 REBOOTSTRAP_REQUIRED
    01                                # ApiKeys: none (compact: length + 1)
    00 00 00 00                       # ThrottleTimeMs 0
    00                                # tagged fields
    """
)


def test_api_versions_v5_golden_bytes() -> None:
    request = ApiVersionsRequest("ktc", "1.0", "Mg7dWnZRSHSpLyZOnnER-g", 1)
    assert encode_request(18, 5, 7, "c-1", request) == API_VERSIONS_V5_REQUEST
    for feed in FEEDERS:
        (frame,) = feed(API_VERSIONS_V5_REQUEST)
        assert decode_request(frame) == request
    conn = ServerConnection()
    conn.receive_data(API_VERSIONS_V5_REQUEST + API_VERSIONS_V5_REQUEST[:5])
    first = conn.next_request()
    assert first is not None and decode_request(first) == request
    assert conn.next_request() is None and conn.buffered_bytes == 5
    response = ApiVersionsResponse(error_code=Errors.REBOOTSTRAP_REQUIRED)
    assert encode_response(18, 5, 7, response) == API_VERSIONS_V5_RESPONSE
    client = ClientConnection()
    client._in_flight[7] = (18, 5)
    for index in range(len(API_VERSIONS_V5_RESPONSE)):
        client.receive_data(API_VERSIONS_V5_RESPONSE[index : index + 1])
    answer = client.next_response()
    assert answer is not None and answer.message == response


# ---- the client side -----------------------------------------------------------------------


def test_client_and_server_talk() -> None:
    client = ClientConnection(client_id="app-1")
    server = ServerConnection()
    server.receive_data(
        client.send_request(71, 0, GetTelemetrySubscriptionsRequest())
        + client.send_request(18, 3, ApiVersionsRequest(client_software_name="x"))
    )
    assert client.in_flight == 2
    replies = b""
    for frame in drain(server):
        request = decode_request(frame)
        if frame.api_key == 71:
            reply: Any = GetTelemetrySubscriptionsResponse(
                client_instance_id=INSTANCE_ID
            )
        else:
            assert request.client_software_name == "x"
            from proto.messages.api_versions_response import ApiVersionsResponse

            reply = ApiVersionsResponse(throttle_time_ms=3)
        replies += encode_response(
            frame.api_key, frame.api_version, frame.correlation_id, reply
        )
    client.receive_data(replies)
    first, second = client.next_response(), client.next_response()
    assert first is not None and first.message.client_instance_id == INSTANCE_ID
    assert second is not None and second.message.throttle_time_ms == 3
    assert client.next_response() is None and client.in_flight == 0


def test_client_rejects_unknown_correlation_ids() -> None:
    client = ClientConnection()
    client.receive_data(PUSH_RESPONSE)
    with pytest.raises(FramingError, match="correlation"):
        client.next_response()


def test_client_falls_back_to_v0_for_an_unsupported_api_versions_answer() -> None:
    # A client that asks with ApiVersions v3 of a server that only knows v0..v2 gets the
    # v0 UNSUPPORTED_VERSION answer; like Kafka's client it parses that as v0.
    client = ClientConnection()
    wire = client.send_request(18, 3, ApiVersionsRequest(client_software_name="x"))
    (frame,) = feed_whole(wire)
    client.receive_data(api_versions_unsupported_response(frame.correlation_id))
    response = client.next_response()
    assert response is not None and response.api_version == 0
    assert response.message.error_code == Errors.UNSUPPORTED_VERSION
    assert [
        (v.api_key, v.min_version, v.max_version) for v in response.message.api_keys
    ] == [(18, 0, 5)]
