"""Per-API request size limits, the ``queued.max.request.bytes`` budget and
``connections.max.idle.ms``: the codec, the protocol with the shared budget, the idle sweep
on a fake clock, and each wired into a running server."""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

import pytest

from clock.testing import FakeClock
from collector.app.config import ConfigError, load_config
from collector.core.handler import FunctionHandler
from collector.net.idle import IdleConnections, sweep_period_ms
from collector.net.protocol import KafkaProtocol
from collector.net.request_memory import RequestMemory
from proto import ApiKeys, ClientConnection, FramingError, ServerConnection
from proto.messages import ApiVersionsRequest, PushTelemetryRequest
from proto.request_limits import (
    REQUEST_HEADER_MAX_BYTES,
    RequestSizeLimits,
    push_telemetry_request_max_bytes,
    request_size_limits,
)
from tests.collector.collector_testkit import LoneHost, Start
from tests.collector.wire_client import WireClient

pytestmark = pytest.mark.timeout(60)

MAX_REQUEST = 104857600
TELEMETRY_MAX = 1048576
SERVE_LIMITS = RequestSizeLimits(
    request_size_limits(
        [ApiKeys.PUSH_TELEMETRY, ApiKeys.API_VERSIONS, ApiKeys.METADATA],
        telemetry_max_bytes=TELEMETRY_MAX,
        max_request_size=MAX_REQUEST,
    ),
    other=REQUEST_HEADER_MAX_BYTES,
)


def announce(size: int, api_key: int, api_version: int = 0) -> bytes:
    """A request's first bytes: its size prefix, api key and version."""
    return struct.pack(">ihh", size, api_key, api_version)


# ----------------------------------------------------------------------------- the limits
def test_the_push_limit_is_a_push_at_telemetry_max_bytes_with_the_longest_client_id() -> (
    None
):
    # The largest legitimate push, encoded by the real codec, is exactly the limit: one
    # byte more of metrics (or of client id, which cannot grow) would be over it.
    for telemetry_max in (1, 127, 128, 4096, TELEMETRY_MAX):
        frame = ClientConnection(client_id="c" * 32767).send_request(
            ApiKeys.PUSH_TELEMETRY,
            0,
            PushTelemetryRequest(uuid.uuid4(), 7, True, 4, b"\x01" * telemetry_max),
        )
        assert len(frame) - 4 == push_telemetry_request_max_bytes(telemetry_max)


def test_every_limit_is_at_most_socket_request_max_bytes() -> None:
    served = [
        ApiKeys.PUSH_TELEMETRY,
        ApiKeys.METADATA,
        ApiKeys.DESCRIBE_CONFIGS,
        ApiKeys.PRODUCE,
    ]
    limits = request_size_limits(
        served, telemetry_max_bytes=TELEMETRY_MAX, max_request_size=5000
    )
    assert set(limits.values()) == {5000}
    limits = request_size_limits(
        served, telemetry_max_bytes=TELEMETRY_MAX, max_request_size=MAX_REQUEST
    )
    # An API with no entry in the table (the gateway forwards Produce) keeps the maximum.
    assert limits[ApiKeys.PRODUCE] == MAX_REQUEST
    assert limits[ApiKeys.PUSH_TELEMETRY] < 2 * TELEMETRY_MAX
    assert all(limit <= MAX_REQUEST for limit in limits.values())


# ----------------------------------------------------------------------------- the codec
@pytest.mark.parametrize("split", [6, 5, 3, 1])
def test_an_over_limit_push_is_refused_from_its_first_six_bytes(split: int) -> None:
    limit = SERVE_LIMITS.limit(ApiKeys.PUSH_TELEMETRY)
    head = announce(limit + 1, ApiKeys.PUSH_TELEMETRY)[:6]
    codec = ServerConnection(MAX_REQUEST, limits=SERVE_LIMITS)
    with pytest.raises(
        FramingError, match=f"api key 72 is over that API's limit of {limit}"
    ):
        for at in range(0, 6, split):  # however the six bytes arrive
            codec.receive_data(head[at : at + split])
    assert codec.reserved_bytes <= 6  # nothing of the body was ever kept or reserved


def test_a_push_at_its_limit_is_read_and_a_forwarded_api_keeps_the_maximum() -> None:
    limit = SERVE_LIMITS.limit(ApiKeys.PUSH_TELEMETRY)
    codec = ServerConnection(MAX_REQUEST, limits=SERVE_LIMITS)
    codec.receive_data(announce(limit, ApiKeys.PUSH_TELEMETRY))
    assert codec.frame_in_progress and codec.reserved_bytes == 4 + limit
    gateway = RequestSizeLimits(SERVE_LIMITS.per_api, other=MAX_REQUEST)
    codec = ServerConnection(MAX_REQUEST, limits=gateway)
    codec.receive_data(announce(MAX_REQUEST, ApiKeys.PRODUCE, 9))
    assert codec.reserved_bytes == 4 + MAX_REQUEST


def test_an_api_the_node_does_not_serve_is_refused_at_the_header_size() -> None:
    codec = ServerConnection(MAX_REQUEST, limits=SERVE_LIMITS)
    with pytest.raises(FramingError, match="api key 0 "):
        codec.receive_data(announce(REQUEST_HEADER_MAX_BYTES + 1, ApiKeys.PRODUCE, 9))


def test_a_whole_over_limit_frame_in_one_read_is_refused_too() -> None:
    small = RequestSizeLimits({ApiKeys.API_VERSIONS: 20}, other=MAX_REQUEST)
    frame = request(40)
    codec = ServerConnection(MAX_REQUEST, limits=small)
    with pytest.raises(FramingError):
        codec.receive_data(frame)
    codec = ServerConnection(MAX_REQUEST, limits=small)
    with pytest.raises(FramingError):  # behind an allowed frame in the same read
        codec.receive_data(request(40, api_key=ApiKeys.METADATA) + frame)
    codec = ServerConnection(MAX_REQUEST, limits=small)
    codec.receive_data(request(20) + request(20))  # at the limit: both read
    assert codec.next_request() is not None and codec.next_request() is not None


# ----------------------------------------------------------------------------- the budget
class PausingTransport:
    """The transport part a KafkaProtocol uses, remembering whether reading is paused."""

    def __init__(self) -> None:
        self.paused = False
        self.closed = False
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def writelines(self, data: list[bytes]) -> None:
        self.written.extend(data)

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


def connection(
    connection_id: int,
    memory: RequestMemory | None = None,
    handled: list[int] | None = None,
) -> tuple[KafkaProtocol, PausingTransport]:
    def handle(frame: Any, session: Any, channel: Any) -> bytes:
        if handled is not None:
            handled.append(len(frame.raw))
        return b"\x00\x00\x00\x04" + struct.pack(">i", frame.correlation_id)

    protocol = KafkaProtocol(
        LoneHost(FunctionHandler(handle)),  # type: ignore[arg-type]
        connection_id,
        "PLAINTEXT",
        "PLAINTEXT",
        memory=memory,
    )
    transport = PausingTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport


def request(
    size: int, correlation_id: int = 1, api_key: int = ApiKeys.API_VERSIONS
) -> bytes:
    """A whole v0 request of ``size`` bytes after its prefix (ApiVersions by default; the
    body is padding)."""
    header = struct.pack(">hhih", api_key, 0, correlation_id, -1)
    return struct.pack(">i", size) + header + b"\x00" * (size - len(header))


def test_requests_in_progress_reserve_their_announced_size_and_release_it_when_handed_on() -> (
    None
):
    memory = RequestMemory(10_000)
    handled: list[int] = []
    a, _ = connection(1, memory, handled)
    frame = request(3000)
    a.data_received(frame[:100])
    assert memory.held == a.held_bytes == 3004  # the whole request, from its first read
    a.data_received(frame[100:])
    assert handled == [3000] and memory.held == 0
    a.data_received(frame[:50])
    a.connection_lost(None)
    assert memory.held == 0  # a closed connection's reservation goes back


def test_when_the_budget_runs_out_reading_stops_except_for_admitted_requests() -> None:
    memory = RequestMemory(10_000)
    handled: list[int] = []
    a, a_transport = connection(1, memory, handled)
    b, b_transport = connection(2, memory, handled)
    c, c_transport = connection(3, memory, handled)
    big = request(6000)
    b.data_received(big[:10])  # admitted: 6004 of 10000
    a.data_received(big[:10])  # admitted, and the budget is used up (12008)
    assert memory.exhausted and memory.held == 12008
    # Nobody idle at a request boundary is read from; the two admitted requests go on.
    assert c_transport.paused and not a_transport.paused and not b_transport.paused
    assert memory.waiting == 1
    d, d_transport = connection(4, memory, handled)
    assert d_transport.paused  # a connection opened meanwhile waits from the start
    # b finishes: its request is handled and answered, its bytes go back; a's 6004 leave
    # room, and everyone reads again.
    b.data_received(big[10:])
    assert handled == [6000] and b_transport.written
    assert not memory.exhausted and memory.held == 6004
    assert not c_transport.paused and not d_transport.paused and memory.waiting == 0


def test_a_request_begun_while_the_budget_is_out_stops_its_connection() -> None:
    memory = RequestMemory(5000)
    a, a_transport = connection(1, memory)
    b, b_transport = connection(2, memory)
    big = request(6000)
    a.data_received(big[:10])  # admitted (the pool is not strict), now used up
    assert memory.exhausted and b_transport.paused and not a_transport.paused
    # b's transport had bytes in flight when it was paused: they are read, and its new
    # request is not admitted: it counts the 20 bytes it has, and b stays paused.
    b.data_received(request(100)[:20])
    assert b_transport.paused and not b.memory_granted and memory.held == 6004 + 20
    a.data_received(big[10:])
    assert memory.held == 20 and not b_transport.paused
    b.data_received(request(100)[20:30])  # read with room: admitted, at its full size
    assert b.memory_granted and memory.held == 104


def test_frames_read_while_muted_stay_counted_until_handled() -> None:
    memory = RequestMemory(10_000)
    handled: list[int] = []
    a, _ = connection(1, memory, handled)
    a.mute()
    a.data_received(request(200) + request(300, 2))
    assert handled == [] and memory.held == 204 + 304
    a.unmute()
    assert handled == [200, 300] and memory.held == 0


def test_the_budget_and_idle_keys_are_validated_with_their_names() -> None:
    with pytest.raises(ConfigError, match="queued.max.request.bytes"):
        load_config(environ={}, overrides={"queued.max.request.bytes": 0})
    with pytest.raises(ConfigError, match="connections.max.idle.ms"):
        load_config(environ={}, overrides={"connections.max.idle.ms": 0})
    assert load_config(environ={}, overrides={"connections.max.idle.ms": -1})
    config = load_config(environ={})
    assert config.queued_max_request_bytes == 104857600
    assert config.connections_max_idle_ms == 600000


# ----------------------------------------------------------------------------- idleness
def test_idle_connections_close_at_connections_max_idle_ms_and_traffic_keeps_one() -> (
    None
):
    clock = FakeClock(1_000_000)
    max_idle = 10_000
    period = sweep_period_ms(max_idle)
    quiet, quiet_transport = connection(1)
    talking, talking_transport = connection(2)
    throttled, throttled_transport = connection(3)
    throttled.mute()  # a throttle holds it: not idle however long
    connections = {1: quiet, 2: talking, 3: throttled}
    sweep = IdleConnections(max_idle, lambda: list(connections.items()))
    start = clock.now_ms()
    sweep.sweep(start)  # the connections are seen as they open

    def run_until(at_ms: int) -> None:
        while clock.now_ms() < at_ms:
            clock.advance(period)
            sweep.sweep(clock.now_ms())

    run_until(start + max_idle // 2)
    talking.data_received(request(20))  # traffic: a request and its answer
    run_until(start + max_idle - period)
    assert not quiet_transport.closed
    run_until(start + max_idle)
    assert quiet_transport.closed and quiet.closing
    assert sweep.closed == 1
    assert not talking_transport.closed and not throttled_transport.closed
    run_until(start + max_idle // 2 + max_idle + period)
    assert talking_transport.closed  # quiet since its request
    assert not throttled_transport.closed


# ----------------------------------------------------------------------------- wired
async def test_a_server_refuses_an_over_limit_push_before_its_body(
    start: Start,
) -> None:
    server = await start(**{"telemetry.max.bytes": 4096})
    limit = push_telemetry_request_max_bytes(4096)
    client = await WireClient.connect(server.port())
    client.send_raw(announce(limit + 1, ApiKeys.PUSH_TELEMETRY))  # no body at all
    await client.writer.drain()
    assert await client.closed_by_server(10.0)
    assert server.request_metrics.connections_closed_on_error == 1
    await client.close()


async def test_a_server_closes_idle_connections_on_its_clock(start: Start) -> None:
    clock = FakeClock(1_000_000)
    server = await start(clock, **{"connections.max.idle.ms": 5000})
    client = await WireClient.connect(server.port())
    ok = await client.request(ApiKeys.API_VERSIONS, 3, ApiVersionsRequest("idle", "1"))
    assert ok.error_code == 0
    # The sweep runs every 500 ms of the clock; it first sees the connection at its first
    # tick (+500 ms), so the connection closes 5 s of quiet after that (+5500 ms).
    for _ in range(10):
        clock.advance(500)
        await settle()
    assert len(server.connections()) == 1
    clock.advance(500)
    await settle()
    assert await client.closed_by_server(10.0)
    assert server.idle_connections is not None and server.idle_connections.closed == 1
    await client.close()


async def settle() -> None:
    """Let the event loop run what is ready (a woken timer's task, a write)."""
    for _ in range(20):
        await asyncio.sleep(0)
