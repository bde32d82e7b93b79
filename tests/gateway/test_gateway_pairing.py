"""One client connection and its upstream connection, over real sockets on 127.0.0.1:
ClientPair + KafkaProtocol + Upstream inside a real ``GatewayServer`` (on a FakeClock: no
behaviour here waits on time), in front of a *scripted* upstream, a small asyncio TCP
server in this module that answers with the bytes each test chooses.

The scripted upstream makes claims about order and faults checkable that a real broker
never exhibits on demand (an answer with the wrong correlation id, a broker that stops
reading); it stands for nothing Kafka-specific: the requests are Kafka's framing, the
answers are whatever bytes a test writes (the gateway passes the bodies of these APIs as
opaque bytes). Claims about Kafka itself are made against the real 4.4.0 cluster in
test_gateway_kafka.py and test_gateway_live_wire.py.

What must hold:

* responses reach the client in request order, with its correlation ids, when a local
  answer (PushTelemetry, GetTelemetrySubscriptions) sits between forwarded requests;
  the upstream receives the client's frames byte for byte;
* Produce with acks=0 gets no response and does not hold up the next response;
* an upstream response with the wrong correlation id closes that pair only (answers queued
  before it are still written);
* an upstream that stops reading makes the gateway stop reading from the client (the
  client's send buffer fills), and a client that stops reading makes the gateway stop
  reading upstream (the upstream's send buffer fills); both drain in order afterwards;
* an ApiVersions request newer than the gateway speaks gets Kafka's v0 UNSUPPORTED_VERSION
  answer without reaching the upstream;
* an unknown API key, or a request whose body the gateway must read and cannot, closes that
  client's connection (and its upstream connection) and nothing else.
* the fetch quota (``consumer_byte_rate``) meters the Fetch response the client receives,
  not the request it sent.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import logging
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from clock.testing import FakeClock
from collector.app.config import load_config
from collector.app.gateway_server import GatewayServer
from collector.gateway.api_versions import API_VERSIONS_RANGE
from proto import SUPPORTED_VERSIONS, ApiKeys, encode_request, encode_response
from proto.connection import decode_response, request_is_flexible
from proto.errors import Errors
from proto.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    GetTelemetrySubscriptionsRequest,
    ProduceRequest,
    PushTelemetryRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    fetch_response,
)
from proto.messages import api_versions_response as av
from proto.messages import produce_request as pr
from proto.messages.sasl_authenticate_response import SaslAuthenticateResponse
from proto.messages.sasl_handshake_response import SaslHandshakeResponse
from subscriptions.store import ConfigStore
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

CLIENT_ID = "pairing-test"
LIST_GROUPS = ApiKeys.LIST_GROUPS  # v0: header v1, forwarded as opaque bytes both ways
HEARTBEAT = ApiKeys.HEARTBEAT
WAIT_S = 10.0  # deadline for effects on real sockets (never reached when things work)


# ---- frames --------------------------------------------------------------------------------


def request_frame(
    api_key: int,
    version: int,
    correlation_id: int,
    body: bytes = b"",
    client_id: str = CLIENT_ID,
) -> bytes:
    """A request as a client writes it: size, header (v1, or v2 for flexible versions),
    body. The gateway reads only the header of the APIs used here with arbitrary bodies."""
    cid = client_id.encode()
    header = struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid
    if request_is_flexible(api_key, version):
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def response_frame(correlation_id: int, body: bytes) -> bytes:
    """A response with header v0 (what ListGroups v0 and Heartbeat v0 answers carry)."""
    return struct.pack(">ii", 4 + len(body), correlation_id) + body


def list_groups_answer(tag: str, padding: int = 0) -> bytes:
    """A ListGroups v0 response body: no error, one group named ``tag`` (plus ``padding``
    bytes the gateway must pass on untouched)."""
    name = tag.encode()
    return (
        struct.pack(">hih", 0, 1, len(name))
        + name
        + struct.pack(">h", 0)
        + b"\x5a" * padding
    )


def correlation_id_of(payload: bytes) -> int:
    return int(struct.unpack_from(">i", payload, 0)[0])


def produce_acks0(correlation_id: int) -> bytes:
    request = ProduceRequest(
        acks=0,
        timeout_ms=1000,
        topic_data=(
            pr.TopicProduceData(
                name="fire-and-forget",
                partition_data=(
                    pr.PartitionProduceData(index=0, records=b"not-records"),
                ),
            ),
        ),
    )
    return encode_request(ApiKeys.PRODUCE, 9, correlation_id, CLIENT_ID, request)


# ---- the scripted upstream -----------------------------------------------------------------


class ScriptedConnection(asyncio.Protocol):
    """One upstream connection the gateway opened: every request frame it receives, in
    order; ``send`` writes whatever bytes the test chooses."""

    def __init__(self, reading: bool) -> None:
        self.transport: asyncio.Transport | None = None
        self.requests: list[bytes] = []  # whole frames, size prefix included
        self.received_bytes = 0
        self.closed = asyncio.Event()
        self._buffer = bytearray()
        self._arrived = asyncio.Event()
        self._reading = reading

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if not self._reading:
            self.transport.pause_reading()  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        self.received_bytes += len(data)
        buffer = self._buffer
        buffer += data
        while len(buffer) >= 4:
            (size,) = struct.unpack_from(">i", buffer, 0)
            if len(buffer) < 4 + size:
                break
            self.requests.append(bytes(buffer[: 4 + size]))
            del buffer[: 4 + size]
            self._arrived.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()
        self._arrived.set()

    async def wait_requests(self, count: int) -> list[bytes]:
        """The first ``count`` request frames, once they have arrived."""
        async with asyncio.timeout(WAIT_S):
            while len(self.requests) < count:
                if self.closed.is_set():
                    raise AssertionError(
                        f"closed after {len(self.requests)} of {count} requests"
                    )
                self._arrived.clear()
                await self._arrived.wait()
        return self.requests[:count]

    def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def answer(self, request: bytes, body: bytes) -> None:
        """Answer ``request`` (a frame) with ``body``, under its correlation id."""
        self.send(response_frame(correlation_id_of(request[8:]), body))

    def resume_reading(self) -> None:
        assert self.transport is not None
        # A roomier buffer from now on: a 16 KiB window would make draining slow.
        self.transport.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20
        )
        self.transport.resume_reading()

    @property
    def unsent_bytes(self) -> int:
        """What this end has written that the gateway has not taken yet (asyncio's buffer)."""
        assert self.transport is not None
        return self.transport.get_write_buffer_size()


class ScriptedUpstream:
    """A TCP server on 127.0.0.1 standing in for a broker; each connection is scripted."""

    def __init__(
        self, *, reading: bool = True, receive_buffer: int | None = None
    ) -> None:
        self.connections: list[ScriptedConnection] = []
        self._reading = reading
        self._receive_buffer = receive_buffer
        self._accepted = asyncio.Event()
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if self._receive_buffer is not None:  # inherited by accepted sockets
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)
        sock.bind(("127.0.0.1", 0))
        self._server = await asyncio.get_running_loop().create_server(
            self._accept, sock=sock
        )
        return int(sock.getsockname()[1])

    def _accept(self) -> ScriptedConnection:
        connection = ScriptedConnection(self._reading)
        self.connections.append(connection)
        self._accepted.set()
        return connection

    async def connection(self, index: int) -> ScriptedConnection:
        async with asyncio.timeout(WAIT_S):
            while len(self.connections) <= index:
                self._accepted.clear()
                await self._accepted.wait()
        return self.connections[index]

    async def close(self) -> None:
        for connection in self.connections:
            if connection.transport is not None:
                connection.transport.abort()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


# ---- the client side -----------------------------------------------------------------------


class Client:
    """A raw client connection to the gateway (asyncio streams)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, port: int) -> Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def send(self, *frames: bytes) -> None:
        self.writer.write(b"".join(frames))
        await self.writer.drain()

    async def response(self) -> bytes:
        """The next response payload (after the size prefix)."""
        async with asyncio.timeout(WAIT_S):
            (size,) = struct.unpack(">i", await self.reader.readexactly(4))
            return await self.reader.readexactly(size)

    async def closed_by_gateway(self) -> bool:
        try:
            async with asyncio.timeout(WAIT_S):
                return await self.reader.read(65536) == b""
        except ConnectionError:
            return True

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


Start = Callable[..., Awaitable[GatewayServer]]


@pytest.fixture
async def start_gateway(tmp_path: Path) -> AsyncIterator[Start]:
    servers: list[GatewayServer] = []

    async def start(upstream_port: int, **overrides: Any) -> GatewayServer:
        settings: dict[str, Any] = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "http.listener": "127.0.0.1:0",
            "data.dir": str(tmp_path / f"data-{len(servers)}"),
            "landing": {"fsync": "never"},
            "gateway.upstream.bootstrap.servers": f"127.0.0.1:{upstream_port}",
            "gateway.broker.port.start": 0,
            # The scripted upstream answers only what a test scripts: the gateway cannot
            # ask it whether it requires authentication, and serves until it learns.
            "gateway.telemetry.require.authentication": False,
            # Nor can it hold the client-metrics configs: the gateway's own store.
            "gateway.subscriptions.store": "local",
        }
        settings.update(overrides)
        config = load_config(environ={}, overrides=settings)
        server = GatewayServer(config, clock=FakeClock(1_000_000))
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedUpstream]:
    scripted = ScriptedUpstream()
    yield scripted
    await scripted.close()


def pair_of(server: GatewayServer, index: int = -1) -> Any:
    """The ClientPair of a connection (oldest first)."""
    protocol = server.connections()[index]
    return server._pairs[protocol.session.connection_id]


# ---- order and correlation ids -------------------------------------------------------------


async def test_answers_keep_request_order_around_local_ones(
    start_gateway: Start, upstream: ScriptedUpstream
) -> None:
    server = await start_gateway(await upstream.start())
    client = await Client.connect(server.port())
    # Unusual correlation ids: negative, maximal, not increasing; the gateway keeps them.
    get = encode_request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        -7,
        CLIENT_ID,
        GetTelemetrySubscriptionsRequest(),
    )
    await client.send(get)
    subscription = decode_response(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, await client.response()
    )
    assert subscription.correlation_id == -7
    assert subscription.message.error_code == Errors.NONE
    push = encode_request(
        ApiKeys.PUSH_TELEMETRY,
        0,
        2**31 - 1,
        CLIENT_ID,
        PushTelemetryRequest(
            client_instance_id=subscription.message.client_instance_id,
            subscription_id=subscription.message.subscription_id,
        ),
    )
    first = request_frame(LIST_GROUPS, 0, 1000)
    heartbeat = request_frame(
        HEARTBEAT, 0, 5, body=b"\x00\x01g\x00\x00\x00\x01\x00\x01m"
    )
    get_again = encode_request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        3,
        CLIENT_ID,
        GetTelemetrySubscriptionsRequest(subscription.message.client_instance_id),
    )
    last = request_frame(LIST_GROUPS, 0, 999)
    # forwarded, local, forwarded, local, forwarded: one write, so one read at the gateway
    await client.send(first, push, heartbeat, get_again, last)
    connection = await upstream.connection(0)
    forwarded = await connection.wait_requests(3)
    # The client's bytes, as it sent them (correlation ids included); nothing local went up.
    assert forwarded == [first, heartbeat, last]
    # The local answers exist already; none may overtake the first forwarded request's.
    connection.answer(forwarded[0], list_groups_answer("first"))
    connection.answer(forwarded[1], b"\x00\x00")
    connection.answer(forwarded[2], list_groups_answer("last"))
    answers = [await client.response() for _ in range(5)]
    assert [correlation_id_of(a) for a in answers] == [1000, 2**31 - 1, 5, 3, 999]
    assert answers[0] == struct.pack(">i", 1000) + list_groups_answer("first")
    assert answers[2] == struct.pack(">i", 5) + b"\x00\x00"
    assert answers[4] == struct.pack(">i", 999) + list_groups_answer("last")
    pushed = decode_response(ApiKeys.PUSH_TELEMETRY, 0, answers[1])
    assert pushed.message.error_code == Errors.NONE
    assert (
        decode_response(
            ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, answers[3]
        ).correlation_id
        == 3
    )
    assert len(connection.requests) == 3
    await client.close()


async def test_produce_acks_0_gets_no_response_and_holds_nothing_up(
    start_gateway: Start, upstream: ScriptedUpstream
) -> None:
    server = await start_gateway(await upstream.start())
    client = await Client.connect(server.port())
    produce = produce_acks0(41)
    await client.send(
        request_frame(LIST_GROUPS, 0, 40),
        produce,
        produce_acks0(42),
        request_frame(LIST_GROUPS, 0, 43),
    )
    connection = await upstream.connection(0)
    forwarded = await connection.wait_requests(4)
    assert forwarded[1] == produce  # forwarded as the client wrote it
    # A broker answers acks=0 with nothing: only the two ListGroups are answered.
    connection.answer(forwarded[0], list_groups_answer("a"))
    connection.answer(forwarded[3], list_groups_answer("b"))
    assert correlation_id_of(await client.response()) == 40
    assert correlation_id_of(await client.response()) == 43
    # Nothing waits for the produce requests: the pair is idle, the next request flows.
    assert pair_of(server).idle
    await client.send(request_frame(LIST_GROUPS, 0, 44))
    (last,) = (await connection.wait_requests(5))[4:]
    connection.answer(last, list_groups_answer("c"))
    assert await client.response() == struct.pack(">i", 44) + list_groups_answer("c")
    await client.close()


# ---- faults --------------------------------------------------------------------------------


async def test_a_response_with_the_wrong_correlation_id_closes_that_pair_only(
    start_gateway: Start, upstream: ScriptedUpstream
) -> None:
    server = await start_gateway(await upstream.start())
    broken = await Client.connect(server.port())
    await broken.send(request_frame(LIST_GROUPS, 0, 1))
    broken_upstream = await upstream.connection(0)
    healthy = await Client.connect(server.port())
    await healthy.send(request_frame(LIST_GROUPS, 0, 1))
    healthy_upstream = await upstream.connection(1)
    (request,) = await broken_upstream.wait_requests(1)
    await broken.send(
        request_frame(LIST_GROUPS, 0, 2), request_frame(LIST_GROUPS, 0, 3)
    )
    await broken_upstream.wait_requests(3)
    broken_upstream.answer(request, list_groups_answer("fine"))  # answered, then
    broken_upstream.send(response_frame(7, list_groups_answer("wrong")))  # 7 is not 2
    assert (
        correlation_id_of(await broken.response()) == 1
    )  # what was answered is written
    assert await broken.closed_by_gateway()
    async with asyncio.timeout(WAIT_S):
        await (
            broken_upstream.closed.wait()
        )  # the gateway closed that upstream connection
    assert server.gateway is not None
    assert server.gateway.stats.upstream_failures == {("bootstrap", "protocol"): 1}
    # The other pair is untouched.
    (other,) = await healthy_upstream.wait_requests(1)
    healthy_upstream.answer(other, list_groups_answer("ok"))
    assert await healthy.response() == struct.pack(">i", 1) + list_groups_answer("ok")
    assert not healthy_upstream.closed.is_set()
    await healthy.close()


async def test_unknown_api_key_closes_the_connection(
    start_gateway: Start, upstream: ScriptedUpstream
) -> None:
    server = await start_gateway(await upstream.start())
    client = await Client.connect(server.port())
    await client.send(request_frame(LIST_GROUPS, 0, 1))
    connection = await upstream.connection(0)
    (first,) = await connection.wait_requests(1)
    connection.answer(first, list_groups_answer("before"))
    assert correlation_id_of(await client.response()) == 1
    # Kafka closes a connection whose request header names an API it does not know.
    await client.send(request_frame(999, 0, 2), request_frame(LIST_GROUPS, 0, 3))
    assert await client.closed_by_gateway()
    async with asyncio.timeout(WAIT_S):
        await connection.closed.wait()
    assert (
        len(connection.requests) == 1
    )  # neither the unknown key nor what followed went up


@pytest.mark.parametrize(
    "frame",
    [
        # ApiVersions v3 names the client's software: a body that ends too early
        request_frame(ApiKeys.API_VERSIONS, 3, 2, body=b"\x05libr"),
        # Produce: acks cannot be read
        request_frame(ApiKeys.PRODUCE, 9, 2, body=b"\x05ab"),
        # DescribeConfigs: the resources cannot be read (the gateway splits them by type)
        request_frame(ApiKeys.DESCRIBE_CONFIGS, 4, 2, body=b"\x03\x10"),
        # CreateTopics: the partitions to charge to the mutation quota cannot be counted
        request_frame(ApiKeys.CREATE_TOPICS, 7, 2, body=b"\x02\x05ab"),
    ],
    ids=["api_versions", "produce", "describe_configs", "create_topics"],
)
async def test_a_request_the_gateway_cannot_read_closes_that_connection_only(
    start_gateway: Start,
    upstream: ScriptedUpstream,
    frame: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = await start_gateway(await upstream.start())
    bystander = await Client.connect(server.port())
    await bystander.send(request_frame(LIST_GROUPS, 0, 1))
    bystander_upstream = await upstream.connection(0)
    client = await Client.connect(server.port())
    await client.send(request_frame(LIST_GROUPS, 0, 1))
    connection = await upstream.connection(1)
    (first,) = await connection.wait_requests(1)
    connection.answer(first, list_groups_answer("before"))
    assert correlation_id_of(await client.response()) == 1
    caplog.set_level(logging.INFO)
    await client.send(frame, request_frame(LIST_GROUPS, 0, 3))
    assert await client.closed_by_gateway()
    async with asyncio.timeout(WAIT_S):
        await connection.closed.wait()
    assert len(connection.requests) == 1
    # One line saying why, not a traceback from the event loop.
    assert not [r for r in caplog.records if r.exc_info], [
        r.getMessage() for r in caplog.records
    ]
    assert any("closing connection" in r.getMessage() for r in caplog.records)
    (waiting,) = await bystander_upstream.wait_requests(1)
    bystander_upstream.answer(waiting, list_groups_answer("ok"))
    assert correlation_id_of(await bystander.response()) == 1
    await bystander.close()


async def test_api_versions_newer_than_the_gateway_speaks_is_answered_locally(
    start_gateway: Start, upstream: ScriptedUpstream
) -> None:
    server = await start_gateway(await upstream.start())
    client = await Client.connect(server.port())
    newer = API_VERSIONS_RANGE[1] + 1
    # What a newer client sends first: ApiVersions at its own latest version.
    body = b"\x08librdkafka\x062.99.0\x00"
    await client.send(request_frame(ApiKeys.API_VERSIONS, newer, 77, body=body))
    answer = await client.response()
    # Kafka's v0 UNSUPPORTED_VERSION answer (header v0, no throttle time): the one API key
    # it lists is ApiVersions, with the versions the gateway speaks, so the client retries.
    assert answer == struct.pack(
        ">ihihhh",
        77,
        Errors.UNSUPPORTED_VERSION,
        1,
        ApiKeys.API_VERSIONS,
        *API_VERSIONS_RANGE,
    )
    # The retry at a version the gateway speaks is forwarded.
    await client.send(request_frame(LIST_GROUPS, 0, 78))
    connection = await upstream.connection(0)
    (forwarded,) = await connection.wait_requests(1)
    assert correlation_id_of(forwarded[8:]) == 78  # the first thing the upstream saw
    await client.close()


async def test_api_versions_lists_what_the_gateway_answers_and_what_the_upstream_has(
    start_gateway: Start, upstream: ScriptedUpstream
) -> None:
    """An upstream without the client-quota APIs and ListConfigResources (Tansu 0.6 lists
    neither): the gateway adds what it answers itself (telemetry, CLIENT_METRICS
    administration, the client quotas it enforces) and never an API it would only forward
    to an upstream that lacks it (CreateAcls here: no authorizer on this gateway)."""
    server = await start_gateway(await upstream.start())
    client = await Client.connect(server.port())
    await client.send(
        encode_request(
            ApiKeys.API_VERSIONS, 3, 9, CLIENT_ID, ApiVersionsRequest("t", "1")
        )
    )
    connection = await upstream.connection(0)
    await connection.wait_requests(1)
    listed = {
        ApiKeys.PRODUCE: (0, 11),
        ApiKeys.METADATA: (0, 12),
        ApiKeys.API_VERSIONS: (0, 4),
        ApiKeys.DESCRIBE_CONFIGS: (0, 4),
        ApiKeys.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    }
    answer = ApiVersionsResponse(
        api_keys=tuple(
            av.ApiVersion(k, low, high) for k, (low, high) in sorted(listed.items())
        )
    )
    connection.send(encode_response(ApiKeys.API_VERSIONS, 3, 9, answer))
    got = decode_response(ApiKeys.API_VERSIONS, 3, await client.response()).message
    ranges = {k.api_key: (k.min_version, k.max_version) for k in got.api_keys}
    local = SUPPORTED_VERSIONS
    assert (
        ranges[ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS]
        == local[ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS]
    )
    assert ranges[ApiKeys.PUSH_TELEMETRY] == local[ApiKeys.PUSH_TELEMETRY]
    assert ranges[ApiKeys.LIST_CONFIG_RESOURCES] == local[ApiKeys.LIST_CONFIG_RESOURCES]
    assert ranges[ApiKeys.DESCRIBE_CONFIGS] == local[ApiKeys.DESCRIBE_CONFIGS]
    for api_key in (ApiKeys.DESCRIBE_CLIENT_QUOTAS, ApiKeys.ALTER_CLIENT_QUOTAS):
        assert ranges[api_key] == local[api_key]
    assert ApiKeys.CREATE_ACLS not in ranges  # forwarded: the upstream has none
    assert set(ranges) == set(listed) | {
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        ApiKeys.PUSH_TELEMETRY,
        ApiKeys.LIST_CONFIG_RESOURCES,
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        ApiKeys.ALTER_CLIENT_QUOTAS,
    }
    await client.close()


# ---- backpressure --------------------------------------------------------------------------

PADDING = 256 * 1024  # bytes of opaque request or response body
LIMIT = (
    48 * 1024 * 1024
)  # the test fails if the gateway swallows this much without pushing back
# Longer than Linux's longest delayed ACK (TCP_DELACK_MAX, 200 ms): a client socket that
# stayed full this long while the gateway was paused is held, not merely slow.
SETTLE_S = 0.5


def held_upstream_reading(server: GatewayServer) -> bool:
    """Whether the gateway stopped reading from the (one) pair's upstream connection."""
    upstream_protocol = pair_of(server)._upstream
    return (
        upstream_protocol is not None and not upstream_protocol._transport.is_reading()
    )


async def test_an_upstream_that_stops_reading_stops_the_gateway_reading_the_client(
    start_gateway: Start,
) -> None:
    scripted = ScriptedUpstream(reading=False, receive_buffer=16 * 1024)
    port = await scripted.start()
    # Requests in flight alone must not be what stops reading (the upstream never answers
    # while it does not read): allow plenty.
    server = await start_gateway(port, **{"connection.max.inflight.requests": 100_000})
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", server.port()))
    connection = await scripted.connection(0)
    frames = [
        request_frame(LIST_GROUPS, 0, index, body=bytes([index % 251]) * PADDING)
        for index in range(LIMIT // PADDING)
    ]
    stream = memoryview(b"".join(frames))
    sent = 0
    blocked_since: float | None = None
    # Write as fast as the socket takes it; the gateway runs between writes. Pushing back
    # means: the client's socket stays full while the gateway has stopped reading it. The
    # kernels' buffers keep moving for as long as late (delayed) ACKs arrive, so "stays"
    # is measured in loop time, not in loop turns (a loaded machine turns slowly).
    while True:
        try:
            sent += sock.send(stream[sent : sent + 65536])
            blocked_since = None
        except BlockingIOError:
            if not server.connections()[0].reading_paused:
                blocked_since = None
            elif blocked_since is None:
                blocked_since = loop.time()
            elif loop.time() - blocked_since >= SETTLE_S:
                break
        assert sent < len(stream), (
            "the gateway read everything the client sent: no backpressure"
        )
        await asyncio.sleep(0)
    gateway_protocol = server.connections()[0]
    assert gateway_protocol.reading_paused and not gateway_protocol.muted
    held_at = sent
    assert (
        connection.received_bytes < 16 * 1024 * 1024
    )  # the upstream took (almost) nothing
    for _ in range(
        200
    ):  # the loop turns; nothing moves while the upstream does not read
        await asyncio.sleep(0)
        with pytest.raises(BlockingIOError):
            sock.send(stream[sent : sent + 65536])
    assert sent == held_at
    # The upstream reads again: everything arrives, in order, byte for byte.
    connection.resume_reading()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    while sent < len(stream):
        try:
            sent += sock.send(stream[sent : sent + 65536])
        except BlockingIOError:
            await asyncio.sleep(0)
    assert await connection.wait_requests(len(frames)) == frames
    assert not server.connections()[0].reading_paused
    sock.close()


async def test_a_client_that_stops_reading_stops_the_gateway_reading_upstream(
    start_gateway: Start, upstream: ScriptedUpstream
) -> None:
    server = await start_gateway(await upstream.start())
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", server.port()))
    count = LIMIT // PADDING
    requests = [request_frame(LIST_GROUPS, 0, index) for index in range(count)]
    await loop.sock_sendall(sock, b"".join(requests))
    connection = await upstream.connection(0)
    forwarded = await connection.wait_requests(count)
    answers = [
        response_frame(index, list_groups_answer(f"answer-{index}", PADDING))
        for index in range(count)
    ]
    for answer in answers:  # the whole lot at once; the client reads none of it yet
        connection.send(answer)
    assert forwarded == requests
    await eventually(
        lambda: held_upstream_reading(server),
        timeout_s=WAIT_S,
        what="the gateway holds upstream",
    )
    for _ in range(200):  # the loop turns; nothing moves while the client does not read
        await asyncio.sleep(0)
    # Most of the answers are still the upstream's to send: the gateway did not take them.
    unsent = connection.unsent_bytes
    assert unsent > LIMIT // 2, (
        f"the gateway read {LIMIT - unsent} bytes nobody drained"
    )
    assert held_upstream_reading(server)
    # The client reads: every answer arrives, in order, byte for byte.
    expected = b"".join(answers)
    received = bytearray()
    async with asyncio.timeout(WAIT_S * 3):
        while len(received) < len(expected):
            received += await loop.sock_recv(sock, 1 << 20)
    assert bytes(received) == expected
    assert not held_upstream_reading(server)
    sock.close()


# ---- the fetch quota meters responses ------------------------------------------------------

FETCH_V4 = 4  # header v1, not flexible: the body follows the client id


def fetch_v4_request(correlation_id: int, partitions: int) -> bytes:
    """A Fetch v4 request frame asking for ``partitions`` partitions of one topic (16 bytes
    each: a large request needs no large response)."""
    from kio.schema.fetch.v4 import request as fetch_v4
    from kio.serial import entity_writer
    from kio.static.primitive import i8, i32, i32Timedelta, i64

    request = fetch_v4.FetchRequest(
        replica_id=fetch_v4.BrokerId(-1),
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)),
        min_bytes=i32(1),
        max_bytes=i32(1 << 20),
        isolation_level=i8(0),
        topics=(
            fetch_v4.FetchTopic(
                topic=fetch_v4.TopicName("quota-topic"),
                partitions=tuple(
                    fetch_v4.FetchPartition(
                        partition=i32(index),
                        fetch_offset=i64(0),
                        partition_max_bytes=i32(1 << 20),
                    )
                    for index in range(partitions)
                ),
            ),
        ),
    )
    buffer = io.BytesIO()
    entity_writer(fetch_v4.FetchRequest)(buffer, request)
    return request_frame(ApiKeys.FETCH, FETCH_V4, correlation_id, buffer.getvalue())


def fetch_v4_answer(record_bytes: int) -> bytes:
    """A Fetch v4 response body: one partition carrying ``record_bytes`` of records (opaque
    to the gateway), or no topics at all for 0."""
    topics: tuple[fetch_response.FetchableTopicResponse, ...] = ()
    if record_bytes:
        partition = fetch_response.PartitionData(
            partition_index=0, high_watermark=1, records=b"r" * record_bytes
        )
        topics = (
            fetch_response.FetchableTopicResponse(
                topic="quota-topic", partitions=(partition,)
            ),
        )
    out = bytearray()
    fetch_response.WRITERS[FETCH_V4](
        fetch_response.FetchResponse(responses=topics), out
    )
    return bytes(out)


async def test_the_fetch_quota_meters_the_response_not_the_request(
    start_gateway: Start, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    """``consumer_byte_rate`` counts what the client receives (KafkaApis records a Fetch
    response's size): a 20 KB request answered with 50 bytes is not throttled at 1000 B/s,
    a 100-byte request answered with 20 KB is (answered empty, with the throttle time)."""
    ConfigStore(tmp_path / "data-0").alter_quotas(
        {"client-id": CLIENT_ID}, {"consumer_byte_rate": 1000}
    )
    server = await start_gateway(await upstream.start())
    client = await Client.connect(server.port())
    big_request = fetch_v4_request(50, partitions=1250)
    assert len(big_request) > 20_000
    await client.send(big_request)
    connection = await upstream.connection(0)
    (forwarded,) = await connection.wait_requests(1)
    small_answer = fetch_v4_answer(0)
    assert len(small_answer) < 50
    connection.answer(forwarded, small_answer)
    answer = await client.response()
    assert (
        answer == struct.pack(">i", 50) + small_answer
    )  # throttle_time_ms 0, untouched

    small_request = fetch_v4_request(51, partitions=1)
    assert len(small_request) < 100
    await client.send(small_request)
    (forwarded,) = (await connection.wait_requests(2))[1:]
    connection.answer(forwarded, fetch_v4_answer(20_000))
    answer = await client.response()
    throttled = fetch_response.READERS[FETCH_V4](memoryview(answer), 4)[0]
    # 20 KB over 1000 B/s in an 11-second sample window: seconds of throttle, no records.
    assert throttled.throttle_time_ms > 1000
    assert throttled.responses == ()
    await client.close()


# ---- a mechanism whose end the gateway does not read -----------------------------------


async def oauthbearer_exchange(
    client: Client, connection: ScriptedConnection, first: int
) -> None:
    """SaslHandshake (OAUTHBEARER) and one SaslAuthenticate, each accepted upstream."""
    await client.send(
        encode_request(
            ApiKeys.SASL_HANDSHAKE,
            1,
            first,
            CLIENT_ID,
            SaslHandshakeRequest(mechanism="OAUTHBEARER"),
        )
    )
    (handshake,) = (await connection.wait_requests(1))[-1:]
    connection.send(
        encode_response(
            ApiKeys.SASL_HANDSHAKE,
            1,
            first,
            SaslHandshakeResponse(mechanisms=("OAUTHBEARER",)),
        )
    )
    assert correlation_id_of(await client.response()) == first
    await client.send(
        encode_request(
            ApiKeys.SASL_AUTHENTICATE,
            2,
            first + 1,
            CLIENT_ID,
            SaslAuthenticateRequest(auth_bytes=b"n,,\x01auth=Bearer opaque\x01\x01"),
        )
    )
    await connection.wait_requests(2)
    connection.send(
        encode_response(
            ApiKeys.SASL_AUTHENTICATE, 2, first + 1, SaslAuthenticateResponse()
        )
    )
    assert correlation_id_of(await client.response()) == first + 1


async def test_a_mechanism_the_gateway_does_not_read_counts_once_the_cluster_answers(
    start_gateway: Start, upstream: ScriptedUpstream
) -> None:
    """In front of a cluster that requires SASL, an OAUTHBEARER (or GSSAPI) exchange passes
    through, but the gateway cannot tell when it succeeded: what the gateway answers itself
    is refused until the cluster has answered the connection a request other than
    ApiVersions and SASL (which a SASL listener does only after a successful exchange)."""
    server = await start_gateway(
        await upstream.start(),
        **{"gateway.upstream.security.protocol": "SASL_PLAINTEXT"},
    )
    telemetry = encode_request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        9,
        CLIENT_ID,
        GetTelemetrySubscriptionsRequest(),
    )
    # Straight after the exchange: refused, the connection closed unanswered.
    early = await Client.connect(server.port())
    await oauthbearer_exchange(early, await upstream.connection(0), 1)
    await early.send(telemetry)
    assert await early.closed_by_gateway()
    # Once the cluster answered a forwarded request on the connection: served.
    client = await Client.connect(server.port())
    connection = await upstream.connection(1)
    await oauthbearer_exchange(client, connection, 1)
    await client.send(request_frame(LIST_GROUPS, 0, 3))
    (forwarded,) = (await connection.wait_requests(3))[2:]
    connection.answer(forwarded, list_groups_answer("g"))
    assert correlation_id_of(await client.response()) == 3
    await client.send(telemetry)
    assert correlation_id_of(await client.response()) == 9
    await client.close()
