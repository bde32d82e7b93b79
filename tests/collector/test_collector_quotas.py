"""The quota engine in the server: connection quotas at accept, request-time quotas with
throttle_time_ms and a muted channel.  Real sockets; the quotas come from the store."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from wire_client import WireClient

from collector.config import load_config
from collector.server import CollectorServer
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import ApiVersionsRequest, MetadataRequest
from subscriptions.store import ConfigStore

pytestmark = pytest.mark.timeout(60)

Factory = Callable[..., Any]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Factory]:
    servers: list[CollectorServer] = []

    async def factory(**overrides: object) -> CollectorServer:
        settings = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "http.listener": None,
            "data.dir": str(tmp_path / "data"),
            "landing": {"fsync": "never"},
        }
        settings.update(overrides)
        server = CollectorServer(load_config(environ={}, overrides=settings))
        await server.start()
        servers.append(server)
        return server

    yield factory
    for server in servers:
        await server.stop()


async def api_versions_ok(client: WireClient, timeout_s: float = 5.0) -> bool:
    client.send(ApiKeys.API_VERSIONS, 3, ApiVersionsRequest("quota-test", "1"))
    await client.writer.drain()
    return (await client.receive(timeout_s)).error_code == Errors.NONE


async def test_max_connections_per_ip_refuses_the_extra_connection(start: Factory) -> None:
    server = await start(**{"max.connections.per.ip": 1})
    first = await WireClient.connect(server.port())
    assert await api_versions_ok(first)
    second = await WireClient.connect(server.port())
    assert await second.closed_by_server()
    assert await api_versions_ok(first)  # the first is unaffected
    await first.close()
    # Once the first is gone, a new connection is admitted.
    for _ in range(100):
        if not server._connections:
            break
        await asyncio.sleep(0.01)
    third = await WireClient.connect(server.port())
    assert await api_versions_ok(third)
    await third.close()


async def test_max_connections_makes_the_next_connection_wait_for_a_slot(start: Factory) -> None:
    server = await start(**{"max.connections": 1})
    first = await WireClient.connect(server.port())
    assert await api_versions_ok(first)
    # The kernel completes the TCP handshake, but the acceptor does not take the socket
    # until a slot frees (Kafka's acceptor blocks the same way).
    second = await WireClient.connect(server.port())
    with pytest.raises(asyncio.TimeoutError):
        await api_versions_ok(second, timeout_s=0.5)
    await first.close()
    assert (await second.receive(5.0)).error_code == Errors.NONE
    await second.close()


async def test_request_quota_throttles_and_mutes_the_channel(
    start: Factory, tmp_path: Path
) -> None:
    # 0.01 % of one request-handler thread: a handful of Metadata requests exceed it.
    ConfigStore(tmp_path / "data").alter_quotas(
        {"client-id": "greedy"}, {"request_percentage": 0.01}
    )
    server = await start()
    greedy = await WireClient.connect(server.port(), client_id="greedy")
    throttle_ms = 0
    for _ in range(2000):
        response = await greedy.request(ApiKeys.METADATA, 12, MetadataRequest(topics=None))
        if response.throttle_time_ms > 0:
            throttle_ms = response.throttle_time_ms
            break
    assert 0 < throttle_ms <= 1000  # Kafka caps a request throttle at one quota window
    # The channel is muted: the next request is only read once the throttle expired.
    started = time.monotonic()
    await greedy.request(ApiKeys.METADATA, 12, MetadataRequest(topics=None))
    assert (time.monotonic() - started) * 1000 >= throttle_ms * 0.8
    # Other clients are not throttled.
    modest = await WireClient.connect(server.port(), client_id="modest")
    assert (
        await modest.request(ApiKeys.METADATA, 12, MetadataRequest(topics=None))
    ).throttle_time_ms == 0
    await greedy.close()
    await modest.close()


async def test_quota_changes_apply_without_restart(start: Factory, tmp_path: Path) -> None:
    server = await start()
    store = ConfigStore(tmp_path / "data")
    store.alter_quotas({"client-id": "late"}, {"request_percentage": 0.01})
    server.reload()  # SIGHUP (the directory watcher does the same within about a second)
    assert server.quotas is not None
    assert server.quotas.engine.entity_quotas() == {"clients/late": {"request_percentage": 0.01}}


# ----------------------------------------------------------------------------- admin APIs
async def test_alter_and_describe_client_quotas_over_the_wire(
    start: Factory, tmp_path: Path
) -> None:
    from proto.messages import AlterClientQuotasRequest, DescribeClientQuotasRequest
    from proto.messages import alter_client_quotas_request as acq
    from proto.messages.describe_client_quotas_request import ComponentData

    server = await start()
    admin = await WireClient.connect(server.port(), client_id="kafka-configs")
    alter = AlterClientQuotasRequest(
        entries=(
            acq.EntryData(
                entity=(acq.EntityData("client-id", "greedy"),),
                ops=(acq.OpData("request_percentage", 0.01, False),),
            ),
            acq.EntryData(
                entity=(acq.EntityData("user", None),),
                ops=(acq.OpData("producer_byte_rate", 1024.0, False),),
            ),
            acq.EntryData(
                entity=(acq.EntityData("colour", "blue"),),
                ops=(acq.OpData("request_percentage", 1.0, False),),
            ),
        )
    )
    response = await admin.request(ApiKeys.ALTER_CLIENT_QUOTAS, 1, alter)
    assert [e.error_code for e in response.entries] == [
        Errors.NONE,
        Errors.NONE,
        Errors.INVALID_REQUEST,
    ]
    # Applied to the engine at once, and durable in the store.
    assert server.quotas is not None
    assert server.quotas.engine.entity_quotas()["clients/greedy"] == {"request_percentage": 0.01}
    assert ConfigStore(tmp_path / "data").snapshot().quotas

    described = await admin.request(
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        1,
        DescribeClientQuotasRequest(
            components=(ComponentData(entity_type="client-id", match_type=0, match="greedy"),)
        ),
    )
    assert described.error_code == Errors.NONE
    (entry,) = described.entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("client-id", "greedy")]
    assert [(v.key, v.value) for v in entry.values] == [("request_percentage", 0.01)]
    defaults = await admin.request(
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        0,
        DescribeClientQuotasRequest(
            components=(ComponentData(entity_type="user", match_type=1, match=None),)
        ),
    )
    assert [[(e.entity_type, e.entity_name) for e in x.entity] for x in defaults.entries] == [
        [("user", None)]
    ]
    bad = await admin.request(
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        1,
        DescribeClientQuotasRequest(
            components=(ComponentData(entity_type="user", match_type=0, match=None),)
        ),
    )
    assert bad.error_code == Errors.INVALID_REQUEST

    remove = AlterClientQuotasRequest(
        entries=(
            acq.EntryData(
                entity=(acq.EntityData("client-id", "greedy"),),
                ops=(acq.OpData("request_percentage", 0.0, True),),
            ),
        )
    )
    assert (await admin.request(ApiKeys.ALTER_CLIENT_QUOTAS, 0, remove)).entries[
        0
    ].error_code == Errors.NONE
    assert "clients/greedy" not in server.quotas.engine.entity_quotas()
    await admin.close()
