"""GET /v1/clients and POST /v1/subscriptions/preview on an in-process server with a fake
clock: raw Kafka requests on real sockets create the instances, aiohttp asks the real HTTP
listener.  The real clients' side is tests/integration/test_live_clients.py."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from clock.testing import FakeClock
from collector.app.admin_http import _is_loopback
from collector.app.config import ConfigError, load_config
from collector.app.server import CollectorServer
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import (
    ApiVersionsRequest,
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
)
from subscriptions.kafka_uuid import kafka_uuid_from_str
from subscriptions.store import ConfigStore
from tests.collector.collector_testkit import Start, make_session, otlp_payload
from tests.collector.wire_client import WireClient

pytestmark = pytest.mark.timeout(60)

ZERO = uuid.UUID(int=0)
SECRET = "s3cret-admin-bearer-0123"


async def http(
    server: CollectorServer,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: object = None,
) -> tuple[int, Any]:
    url = f"http://127.0.0.1:{server.http_port}{path}"
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, headers=headers, json=body) as response,
    ):
        return response.status, await response.json()


async def connect(
    server: CollectorServer, client_id: str, software: str = "wire-test"
) -> WireClient:
    client = await WireClient.connect(server.port(), client_id=client_id)
    answer = await client.request(
        ApiKeys.API_VERSIONS, 3, ApiVersionsRequest(software, "1.0")
    )
    assert answer.error_code == Errors.NONE
    return client


async def get(client: WireClient, instance_id: uuid.UUID = ZERO) -> Any:
    return await client.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        GetTelemetrySubscriptionsRequest(instance_id),
    )


async def push(
    client: WireClient,
    answer: Any,
    *,
    terminating: bool = False,
    subscription_id: int | None = None,
) -> Errors:
    request = PushTelemetryRequest(
        client_instance_id=answer.client_instance_id,
        subscription_id=answer.subscription_id
        if subscription_id is None
        else subscription_id,
        terminating=terminating,
        compression_type=0,
        metrics=otlp_payload("org.apache.kafka.producer.request.latency.avg"),
    )
    return Errors((await client.request(ApiKeys.PUSH_TELEMETRY, 0, request)).error_code)


def subscribe(
    tmp_path: Path, name: str, metrics: str, interval: int, match: str = ""
) -> None:
    configs = {"metrics": metrics, "interval.ms": str(interval)}
    if match:
        configs["match"] = match
    ConfigStore(tmp_path / "data").alter_subscription(name, configs)


# ----------------------------------------------------------------------------- the entry
async def test_an_entry_holds_identity_subscription_times_and_counters(
    start: Start, tmp_path: Path
) -> None:
    subscribe(tmp_path, "producers", "org.apache.kafka.producer.", 1000)
    clock = FakeClock(1_000_000, wall_ns=1_700_000_000_000_000_000)
    server = await start(clock)
    client = await connect(server, "orders-1", software="librdkafka")
    answer = await get(client)
    clock.advance(10)
    assert await push(client, answer) == Errors.NONE
    assert (
        await push(client, answer) == Errors.THROTTLING_QUOTA_EXCEEDED
    )  # within 1000 ms
    clock.advance(1000)
    assert (
        await push(client, answer, subscription_id=7) == Errors.UNKNOWN_SUBSCRIPTION_ID
    )

    status, page = await http(server, "GET", "/v1/clients")
    assert status == 200 and page["next_cursor"] is None
    [entry] = page["clients"]
    local_port = client.writer.get_extra_info("sockname")[1]
    assert entry == {
        "client_instance_id": entry["client_instance_id"],
        "client_id": "orders-1",
        "client_software_name": "librdkafka",
        "client_software_version": "1.0",
        "client_source_address": "127.0.0.1",
        "client_source_port": local_port,
        "listener": "PLAINTEXT",
        "principal": "User:ANONYMOUS",
        "subscriptions": ["producers"],
        "subscription_id": answer.subscription_id,
        "metrics": ["org.apache.kafka.producer."],
        "push_interval_ms": 1000,
        "first_seen": "2023-11-14T22:13:20.000Z",  # the wall clock at the Get
        "last_get": "2023-11-14T22:13:20.000Z",
        "last_push": "2023-11-14T22:13:20.010Z",
        "pushes_accepted": 1,
        "empty_pushes": 0,
        "errors": {"UNKNOWN_SUBSCRIPTION_ID": 1, "THROTTLING_QUOTA_EXCEEDED": 1},
        "throttles": 1,
        "terminating": False,
    }
    assert kafka_uuid_from_str(entry["client_instance_id"]) == answer.client_instance_id
    await client.close()


async def test_a_terminating_instance_shows_it_then_disappears_after_expiry(
    start: Start, tmp_path: Path
) -> None:
    subscribe(tmp_path, "producers", "org.apache.kafka.producer.", 1000)
    clock = FakeClock(1_000_000)
    server = await start(clock)
    client = await connect(server, "leaving")
    answer = await get(client)
    assert await push(client, answer, terminating=True) == Errors.NONE
    # The connection stays open: only the expiry removes the instance.
    [entry] = (await http(server, "GET", "/v1/clients"))[1]["clients"]
    assert entry["terminating"] is True and entry["pushes_accepted"] == 1
    clock.advance(59_000)  # Kafka's cache expiry is max(60 s, 3 x interval)
    assert len((await http(server, "GET", "/v1/clients"))[1]["clients"]) == 1
    clock.advance(2_000)  # the expiry tick (every second) past the deadline
    assert (await http(server, "GET", "/v1/clients"))[1]["clients"] == []
    await client.close()


# ----------------------------------------------------------------------------- paging
async def test_pages_follow_the_cursor_in_id_order_and_filters_apply(
    start: Start, tmp_path: Path
) -> None:
    subscribe(
        tmp_path,
        "orders",
        "org.apache.kafka.producer.",
        1000,
        match="client_id=orders-.*",
    )
    clock = FakeClock(1_000_000)
    server = await start(clock)
    manager = server.manager
    assert manager is not None
    for n in range(7):  # the manager directly: seven instances on seven "connections"
        client_id = f"orders-{n}" if n % 2 == 0 else f"billing-{n}"
        manager.get_telemetry_subscriptions(
            ZERO, make_session(n + 100), client_id, clock.now_ms()
        )
    everyone = sorted(i.instance_id_str for i in manager.instances())
    by_int = sorted(manager.instances(), key=lambda i: i.client_instance_id.int)

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        query = "?limit=3" + (f"&cursor={cursor}" if cursor else "")
        status, page = await http(server, "GET", "/v1/clients" + query)
        assert status == 200 and len(page["clients"]) <= 3
        seen += [c["client_instance_id"] for c in page["clients"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3 and sorted(seen) == everyone
    assert seen == [i.instance_id_str for i in by_int]  # id order, each once

    status, page = await http(server, "GET", "/v1/clients?subscription=orders&limit=2")
    ids = [c["client_id"] for c in page["clients"]]
    cursor = page["next_cursor"]
    while cursor:
        page = (
            await http(
                server,
                "GET",
                f"/v1/clients?subscription=orders&limit=2&cursor={cursor}",
            )
        )[1]
        ids += [c["client_id"] for c in page["clients"]]
        cursor = page["next_cursor"]
    assert sorted(ids) == ["orders-0", "orders-2", "orders-4", "orders-6"]
    page = (await http(server, "GET", "/v1/clients?client_id=billing-3"))[1]
    assert [c["client_id"] for c in page["clients"]] == ["billing-3"]

    assert (await http(server, "GET", "/v1/clients?colour=blue"))[0] == 400
    assert (await http(server, "GET", "/v1/clients?limit=0"))[0] == 400
    assert (await http(server, "GET", "/v1/clients?cursor=not-an-id"))[0] == 400


# ----------------------------------------------------------------------------- protection
async def test_a_configured_secret_is_required(start: Start) -> None:
    server = await start(FakeClock(1_000_000), **{"http.admin.secret": SECRET})
    assert (await http(server, "GET", "/v1/clients"))[0] == 401
    wrong = {"Authorization": "Bearer not-the-secret-at-all"}
    assert (await http(server, "GET", "/v1/clients", headers=wrong))[0] == 401
    right = {"Authorization": f"Bearer {SECRET}"}
    assert (await http(server, "GET", "/v1/clients", headers=right))[0] == 200
    body = {"name": "x", "metrics": "org."}
    assert (await http(server, "POST", "/v1/subscriptions/preview", body=body))[
        0
    ] == 401
    assert (
        await http(
            server, "POST", "/v1/subscriptions/preview", headers=right, body=body
        )
    )[0] == 200
    assert (await http(server, "GET", "/healthz"))[0] == 200  # probes stay open


async def test_with_an_authorizer_and_no_secret_only_loopback_is_served(
    start: Start,
) -> None:
    server = await start(
        FakeClock(1_000_000), **{"authorizer.class.name": "StandardAuthorizer"}
    )
    assert (await http(server, "GET", "/v1/clients"))[
        0
    ] == 200  # the test is on loopback
    assert (
        _is_loopback("127.0.0.1")
        and _is_loopback("::1")
        and _is_loopback("::ffff:127.0.0.1")
    )
    assert not _is_loopback("10.1.2.3") and not _is_loopback("::ffff:10.1.2.3")
    assert not _is_loopback(None)


def test_a_short_secret_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="http.admin.secret"):
        load_config(environ={}, overrides={"http.admin.secret": "short"})


# ----------------------------------------------------------------------------- preview
async def test_the_preview_is_what_the_next_get_receives_and_stores_nothing(
    start: Start, tmp_path: Path
) -> None:
    subscribe(tmp_path, "base", "org.apache.kafka.producer.", 1000)
    clock = FakeClock(1_000_000)
    server = await start(clock)
    orders = await connect(server, "orders-1")
    billing = await connect(server, "billing-1")
    before = {client: await get(client) for client in (orders, billing)}
    store_file = (tmp_path / "data" / "config" / "client-metrics.yaml").read_bytes()

    body = {
        "name": "narrow",
        "metrics": "org.apache.kafka.consumer.",
        "interval": "700",
        "match": "client_id=orders-.*",
    }
    status, answer = await http(server, "POST", "/v1/subscriptions/preview", body=body)
    assert status == 200, answer
    assert (
        answer["name"] == "narrow"
        and answer["unaffected"] == 1
        and answer["stored"] is False
    )
    [change] = answer["affected"]
    assert change["client_id"] == "orders-1"
    assert change["old"] == {
        "subscription_id": before[orders].subscription_id,
        "metrics": ["org.apache.kafka.producer."],
        "push_interval_ms": 1000,
        "subscriptions": ["base"],
    }
    assert (
        tmp_path / "data" / "config" / "client-metrics.yaml"
    ).read_bytes() == store_file
    assert server._store is not None
    assert server._store.list_names() == ["base"]

    # The real change, then each client's next Get.
    server._store.alter_subscription(
        "narrow",
        {
            "metrics": "org.apache.kafka.consumer.",
            "interval.ms": "700",
            "match": "client_id=orders-.*",
        },
    )
    after = {c: await get(c, before[c].client_instance_id) for c in (orders, billing)}
    assert after[orders].subscription_id == change["new"]["subscription_id"]
    assert list(after[orders].requested_metrics) == change["new"]["metrics"]
    assert after[orders].push_interval_ms == change["new"]["push_interval_ms"] == 700
    assert after[billing].subscription_id == before[billing].subscription_id

    bad = {"name": "narrow", "interval": "5"}  # below Kafka's 100 ms floor
    status, answer = await http(server, "POST", "/v1/subscriptions/preview", body=bad)
    assert (
        status == 400 and answer["error_code"] == "INVALID_REQUEST"
    )  # as the real alter
    assert (await http(server, "POST", "/v1/subscriptions/preview", body={"nme": "x"}))[
        0
    ] == 400
    await orders.close()
    await billing.close()
