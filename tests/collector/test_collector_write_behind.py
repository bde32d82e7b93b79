"""The collector stages each accepted push in the landing log and writes a read's worth
with one writev just before that read's answers go out. Every push answered "ok" is in
the log by the time the answer arrives; a write that fails acknowledges nothing of that
batch: its pushes are answered THROTTLING_QUOTA_EXCEEDED (the clients push again one
interval later), and the connection stays open."""

from __future__ import annotations

import asyncio
import errno
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from collector.app.server import CollectorServer
from exporters.landing import LandingReader
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from tests.collector.collector_testkit import (
    RecordingTransport,
    collector_config,
    otlp_payload,
    running,
    subscribe_producers,
    zstd,
)
from tests.collector.wire_client import WireClient

pytestmark = pytest.mark.timeout(60)

ZERO = uuid.UUID(int=0)


async def start_server(tmp_path: Path, landing: dict[str, object]) -> CollectorServer:
    subscribe_producers(tmp_path)
    server = CollectorServer(collector_config(tmp_path, landing=landing))
    await server.start()
    return server


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[CollectorServer]:
    subscribe_producers(tmp_path)
    async with running(collector_config(tmp_path)) as node:
        yield node


async def subscribed(
    server: CollectorServer, instances: int
) -> tuple[WireClient, list]:
    c = await WireClient.connect(server.port(), "write-behind")
    for _ in range(instances):
        c.send(
            ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
            0,
            GetTelemetrySubscriptionsRequest(ZERO),
        )
    await c.writer.drain()
    return c, [await c.receive() for _ in range(instances)]


def pushes(gets: list, tag: bytes) -> list[PushTelemetryRequest]:
    payload = zstd(otlp_payload("org.apache.kafka.producer." + tag.decode()))
    return [
        PushTelemetryRequest(g.client_instance_id, g.subscription_id, False, 4, payload)
        for g in gets
    ]


async def test_a_pipelined_batch_is_in_the_log_when_answered(
    server: CollectorServer,
) -> None:
    c, gets = await subscribed(server, 20)
    for request in pushes(gets, b"batch"):
        c.send(ApiKeys.PUSH_TELEMETRY, 0, request)
    await c.writer.drain()
    answers = [(await c.receive()).error_code for _ in gets]
    assert answers == [Errors.NONE] * 20
    # Read at once, from another reader: the answers left after the records were written.
    records = list(LandingReader(server.landing_directory).read())
    assert len(records) == 20
    assert len({r.context.client_instance_id for r in records}) == 20
    assert [r.context.correlation_id for r in records] == sorted(
        r.context.correlation_id for r in records
    )
    await c.close()


async def test_a_failed_write_refuses_its_pushes_with_89(
    server: CollectorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, gets = await subscribed(server, 3)

    def no_space(fd: int, buffers: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "writev", no_space)
    for request in pushes(gets, b"lost"):
        c.send(ApiKeys.PUSH_TELEMETRY, 0, request)
    await c.writer.drain()
    # None of the three was written: none is acknowledged, the connection stays.
    refused = [(await c.receive()).error_code for _ in gets]
    assert refused == [Errors.THROTTLING_QUOTA_EXCEEDED] * 3
    monkeypatch.undo()
    assert list(LandingReader(server.landing_directory).read()) == []
    await c.close()

    # The log carries on for everyone (the failed write left nothing behind).
    other, other_gets = await subscribed(server, 2)
    for request in pushes(other_gets, b"kept"):
        other.send(ApiKeys.PUSH_TELEMETRY, 0, request)
    await other.writer.drain()
    assert [(await other.receive()).error_code for _ in other_gets] == [Errors.NONE] * 2
    assert [r.offset for r in LandingReader(server.landing_directory).read()] == [0, 1]
    await other.close()


async def test_write_behind_can_be_turned_off(tmp_path: Path) -> None:
    # landing.write_behind: false (the chart's schema offers the key): each push is written
    # in its own writev during export; answers and the log are the same.
    server = await start_server(tmp_path, {"fsync": "never", "write_behind": False})
    try:
        c, gets = await subscribed(server, 3)
        for request in pushes(gets, b"through"):
            c.send(ApiKeys.PUSH_TELEMETRY, 0, request)
        await c.writer.drain()
        assert [(await c.receive()).error_code for _ in gets] == [Errors.NONE] * 3
        assert len(list(LandingReader(server.landing_directory).read())) == 3
        await c.close()
    finally:
        await server.stop()


def connected(
    server: CollectorServer, count: int
) -> list[tuple[Any, RecordingTransport, Any, Any]]:
    """``count`` server-side connections driven in process, each with one instance
    subscribed: (protocol, transport, client codec, GetTelemetrySubscriptions answer)."""
    from proto import ClientConnection

    endpoint = next(iter(server.bound.values()))
    connections = []
    for index in range(count):
        assert server.quotas is not None
        server.quotas.on_accept(
            endpoint.listener_name, "127.0.0.1"
        )  # as the acceptor does
        protocol = server.open_connections.new(endpoint)
        transport = RecordingTransport(40_000 + index)
        protocol.connection_made(transport)  # type: ignore[arg-type]
        client = ClientConnection(client_id=f"turn-{index}")
        protocol.data_received(
            client.send_request(
                ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
                0,
                GetTelemetrySubscriptionsRequest(ZERO),
            )
        )
        client.receive_data(transport.written.pop())
        get = client.next_response().message  # type: ignore[union-attr]
        connections.append((protocol, transport, client, get))
    return connections


async def test_reads_of_one_loop_turn_share_one_write(
    server: CollectorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three connections each read a push in the same event-loop turn: their records go to
    # the log in one writev at the end of the turn, and no answer leaves before it.
    connections = connected(server, 3)

    writes: list[int] = []
    real_writev = os.writev

    def counting_writev(fd: int, buffers: list[bytes]) -> int:
        writes.append(len(buffers))
        return real_writev(fd, buffers)

    monkeypatch.setattr(os, "writev", counting_writev)
    for protocol, _, client, get in connections:
        [request] = pushes([get], b"turn")
        protocol.data_received(client.send_request(ApiKeys.PUSH_TELEMETRY, 0, request))
    assert all(transport.written == [] for _, transport, _, _ in connections)  # not yet
    assert list(LandingReader(server.landing_directory).read()) == []
    await asyncio.sleep(0)  # the turn ends: the flush runs, then the answers leave
    assert writes == [9]  # one writev: three records of head, context and payload
    for _, transport, client, _ in connections:
        [answer] = transport.written
        client.receive_data(answer)
        assert client.next_response().message.error_code == Errors.NONE
    assert len(list(LandingReader(server.landing_directory).read())) == 3
    for protocol, _, _, _ in connections:
        protocol.connection_lost(None)


async def test_a_turn_with_many_reads_flushes_every_bound_records(
    tmp_path: Path,
) -> None:
    """A loop turn that reads from many connections does not hold every answer until its
    end: once ``write_behind_max_records`` pushes are staged, the next read flushes them
    and its answers, and those waiting on the same flush, leave at once."""
    server = await start_server(
        tmp_path, {"fsync": "never", "write_behind_max_records": 2}
    )
    try:
        connections = connected(server, 5)
        for protocol, _, client, get in connections:
            [request] = pushes([get], b"bound")
            protocol.data_received(
                client.send_request(ApiKeys.PUSH_TELEMETRY, 0, request)
            )
        # Reads 1-2 staged two records: read 2 flushed them and answered reads 1 and 2.
        # Reads 3-4 did the same. Read 5 waits for the end of the turn.
        answered = [len(transport.written) for _, transport, _, _ in connections]
        assert answered == [1, 1, 1, 1, 0]
        assert len(list(LandingReader(server.landing_directory).read())) == 4
        await asyncio.sleep(0)
        assert [len(t.written) for _, t, _, _ in connections] == [1, 1, 1, 1, 1]
        for _, transport, client, _ in connections:
            client.receive_data(transport.written[0])
            assert client.next_response().message.error_code == Errors.NONE
        assert len(list(LandingReader(server.landing_directory).read())) == 5
        for protocol, _, _, _ in connections:
            protocol.connection_lost(None)
    finally:
        await server.stop()
