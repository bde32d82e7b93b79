"""The quota engine in the server, applied as a Kafka broker applies it: connection quotas
at accept; request time, PushTelemetry bytes and admin mutations recorded per request; a
throttled request answered at once with ``throttle_time_ms`` (the largest throttle) and its
connection muted that long; push-interval gating counted with the throttles; metrics on
``/metrics``.  Real sockets; the quotas come from the store.

Tests that measure a mute use real time (a raw client that ignores ``throttle_time_ms``
times its next request): throttles are kept to a few hundred ms and asserted with
tolerance.  The arithmetic of ``QuotaEnforcer.record`` is checked with the clock injected.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from clock import SYSTEM_CLOCK, Clock
from clock.testing import FakeClock
from collector.app.config import load_config
from collector.app.server import CollectorServer
from collector.pipeline.quota_enforcer import QuotaEnforcer
from proto import ApiKeys, ClientConnection, ServerConnection
from proto.errors import Errors
from proto.messages import (
    AlterClientQuotasRequest,
    ApiVersionsRequest,
    GetTelemetrySubscriptionsRequest,
    MetadataRequest,
    PushTelemetryRequest,
)
from proto.messages import alter_client_quotas_request as acq
from quota import QuotaEngine, QuotaType
from subscriptions.store import ConfigStore
from tests.collector.collector_testkit import (
    RecordingChannel,
    open_connections,
    otlp_payload,
)
from tests.collector.wire_client import WireClient
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

Factory = Callable[..., Any]
ZERO = uuid.UUID(int=0)
# Two samples of one second: a client's rate is measured over one padded second, so a
# single push's throttle is (bytes/s - limit) / limit x 1000 ms (Kafka's QuotaUtils).
SHORT_WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Factory]:
    servers: list[CollectorServer] = []

    async def factory(
        clock: Clock = SYSTEM_CLOCK, **overrides: object
    ) -> CollectorServer:
        settings: dict[str, object] = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "http.listener": "127.0.0.1:0",
            "data.dir": str(tmp_path / "data"),
            "landing": {"fsync": "never"},
        }
        settings.update(overrides)
        server = CollectorServer(
            load_config(environ={}, overrides=settings), clock=clock
        )
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


async def test_max_connections_per_ip_refuses_the_extra_connection(
    start: Factory,
) -> None:
    server = await start(**{"max.connections.per.ip": 1})
    first = await WireClient.connect(server.port())
    assert await api_versions_ok(first)
    second = await WireClient.connect(server.port())
    assert await second.closed_by_server()
    assert await api_versions_ok(first)  # the first is unaffected
    await first.close()
    # Once the first is gone, a new connection is admitted.
    await eventually(
        lambda: not open_connections(server), timeout_s=5, what="first closed"
    )
    third = await WireClient.connect(server.port())
    assert await api_versions_ok(third)
    await third.close()


async def test_max_connections_makes_the_next_connection_wait_for_a_slot(
    start: Factory,
) -> None:
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
    clock = FakeClock(1_000_000)
    server = await start(clock=clock)
    greedy = await WireClient.connect(server.port(), client_id="greedy")
    throttle_ms = 0
    for _ in range(2000):
        response = await greedy.request(
            ApiKeys.METADATA, 12, MetadataRequest(topics=None)
        )
        if response.throttle_time_ms > 0:
            throttle_ms = response.throttle_time_ms
            break
    assert 0 < throttle_ms <= 1000  # Kafka caps a request throttle at one quota window
    # The channel is muted: the next request is only read once the throttle expired.
    await answered_only_after(server, clock, greedy, throttle_ms)
    # Other clients are not throttled.
    modest = await WireClient.connect(server.port(), client_id="modest")
    assert (
        await modest.request(ApiKeys.METADATA, 12, MetadataRequest(topics=None))
    ).throttle_time_ms == 0
    await greedy.close()
    await modest.close()


async def test_quota_changes_apply_without_restart(
    start: Factory, tmp_path: Path
) -> None:
    server = await start()
    store = ConfigStore(tmp_path / "data")
    store.alter_quotas({"client-id": "late"}, {"request_percentage": 0.01})
    server.reload()  # SIGHUP (the directory watcher does the same within about a second)
    assert server.quotas is not None
    assert server.quotas.engine.entity_quotas() == {
        "clients/late": {"request_percentage": 0.01}
    }


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
    assert server.quotas.engine.entity_quotas()["clients/greedy"] == {
        "request_percentage": 0.01
    }
    assert ConfigStore(tmp_path / "data").snapshot().quotas

    described = await admin.request(
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        1,
        DescribeClientQuotasRequest(
            components=(
                ComponentData(entity_type="client-id", match_type=0, match="greedy"),
            )
        ),
    )
    assert described.error_code == Errors.NONE
    (entry,) = described.entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [
        ("client-id", "greedy")
    ]
    assert [(v.key, v.value) for v in entry.values] == [("request_percentage", 0.01)]
    defaults = await admin.request(
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        0,
        DescribeClientQuotasRequest(
            components=(ComponentData(entity_type="user", match_type=1, match=None),)
        ),
    )
    assert [
        [(e.entity_type, e.entity_name) for e in x.entity] for x in defaults.entries
    ] == [[("user", None)]]
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


# ----------------------------------------------------------------------------- helpers
async def scrape(
    server: CollectorServer,
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample on the server's /metrics, by (name, labels)."""
    url = f"http://127.0.0.1:{server.http_port}/metrics"
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        text = await response.text()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float],
    name: str,
    **labels: str,
) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def answered_only_after(
    server: CollectorServer, clock: FakeClock, client: WireClient, throttle_ms: int
) -> None:
    """A trivial request on a throttled channel is not even read until the clock passes
    the throttle: a millisecond before, the server has read nothing; at the throttle's
    end the channel unmutes and the request is answered."""
    answered = dict(server.request_metrics.requests)
    client.send(ApiKeys.API_VERSIONS, 3, ApiVersionsRequest("quota-test", "1"))
    await client.writer.drain()
    await settle()
    assert server.request_metrics.requests == answered
    clock.advance(throttle_ms - 1)
    await settle()
    assert server.request_metrics.requests == answered
    clock.advance(1)
    assert (await client.receive(10.0)).error_code == Errors.NONE


async def answered_at_once(client: WireClient) -> bool:
    """A trivial request is answered without the clock moving."""
    return await api_versions_ok(client, timeout_s=10.0)


async def settle() -> None:
    """Let the event loop run what is ready (a read the kernel already has, its answer)."""
    for _ in range(20):
        await asyncio.sleep(0)


def subscribe_producers(data_dir: Path, interval_ms: int = 60_000) -> None:
    ConfigStore(data_dir).alter_subscription(
        "producers",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": str(interval_ms)},
        [],
    )


def push_frame_bytes(client_id: str, payload: bytes) -> int:
    """A PushTelemetry's size as Kafka records it against producer_byte_rate (header and
    body, no size prefix); ids have fixed widths, so any values give the same size."""
    frame = ClientConnection(client_id=client_id).send_request(
        ApiKeys.PUSH_TELEMETRY,
        0,
        PushTelemetryRequest(uuid.uuid4(), 1, False, 0, payload),
    )
    return len(frame) - 4


PAYLOAD = otlp_payload(*(f"org.apache.kafka.producer.metric.{i}" for i in range(40)))


# ----------------------------------------------------------------------------- byte rate
async def test_push_bytes_count_against_producer_byte_rate(
    start: Factory, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    subscribe_producers(data_dir)
    frame_bytes = push_frame_bytes("bulky", PAYLOAD)
    # One push a second against a limit 1.3 x smaller: (1.3 - 1) / 1 x 1000 ms = 300 ms.
    limit = int(frame_bytes / 1.3)
    ConfigStore(data_dir).alter_quotas(
        {"client-id": "bulky"}, {"producer_byte_rate": limit}
    )
    clock = FakeClock(1_000_000)
    server = await start(clock, **SHORT_WINDOWS)

    bulky = await WireClient.connect(server.port(), client_id="bulky")
    get = await bulky.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, GetTelemetrySubscriptionsRequest(ZERO)
    )
    assert get.error_code == Errors.NONE and get.throttle_time_ms == 0
    push = await bulky.request(
        ApiKeys.PUSH_TELEMETRY,
        0,
        PushTelemetryRequest(
            get.client_instance_id, get.subscription_id, False, 0, PAYLOAD
        ),
    )
    # Accepted (landed) and answered at once; only the next read is delayed.
    assert push.error_code == Errors.NONE
    expected_ms = (frame_bytes / limit - 1) * 1000
    assert abs(push.throttle_time_ms - expected_ms) <= 0.05 * expected_ms
    # Another client id has its own (unlimited) quota: answered with the clock standing.
    modest = await WireClient.connect(server.port(), client_id="modest")
    assert await answered_at_once(modest)
    # The channel is muted: a client that ignores throttle_time_ms waits it out anyway.
    await answered_only_after(server, clock, bulky, push.throttle_time_ms)

    samples = await scrape(server)
    labels = {"user": "ANONYMOUS", "client_id": "bulky"}
    assert (
        sample(
            samples, "ktc_quota_throttled_responses_total", quota="produce", **labels
        )
        == 1
    )
    throttle_s = sample(
        samples, "ktc_quota_throttle_time_seconds_total", quota="produce", **labels
    )
    assert throttle_s == push.throttle_time_ms / 1000
    # Kafka's own quota metrics, tagged by the entity level that matched (client-id only).
    entity = {"user": "", "client_id": "bulky"}
    assert (sample(samples, "kafka_server_produce_byte_rate", **entity) or 0) > 0
    assert (sample(samples, "kafka_server_produce_throttle_time", **entity) or 0) > 0
    await bulky.close()
    await modest.close()


async def test_push_interval_gating_is_counted_with_the_throttles(
    start: Factory, tmp_path: Path
) -> None:
    subscribe_producers(tmp_path / "data")
    server = await start()
    client = await WireClient.connect(server.port(), client_id="eager")
    get = await client.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, GetTelemetrySubscriptionsRequest(ZERO)
    )
    push = PushTelemetryRequest(
        get.client_instance_id, get.subscription_id, False, 0, PAYLOAD
    )
    assert (
        await client.request(ApiKeys.PUSH_TELEMETRY, 0, push)
    ).error_code == Errors.NONE
    early = await client.request(ApiKeys.PUSH_TELEMETRY, 0, push)
    # Kafka answers gating with error 89 and throttle_time_ms 0 (the interval is the delay).
    assert (early.error_code, early.throttle_time_ms) == (
        Errors.THROTTLING_QUOTA_EXCEEDED,
        0,
    )
    samples = await scrape(server)
    labels = {"quota": "push_interval", "user": "ANONYMOUS", "client_id": "eager"}
    assert sample(samples, "ktc_quota_throttled_responses_total", **labels) == 1
    await client.close()


# ----------------------------------------------------------------------------- largest throttle
def _push_frame(client_id: str) -> Any:
    server_side = ServerConnection()
    server_side.receive_data(
        ClientConnection(client_id=client_id).send_request(
            ApiKeys.PUSH_TELEMETRY,
            0,
            PushTelemetryRequest(uuid.uuid4(), 1, False, 0, PAYLOAD),
        )
    )
    return server_side.next_request()


@pytest.mark.parametrize(
    ("bytes_per_limit", "expected_quota"),
    [
        # bytes: (2.5 - 1) x 1000 = 1500 ms; request: 30 % of a thread against 10 % is
        # (30 - 10) / 10 x 1000 = 2000 ms, capped at one window: 1000 ms.  Bytes win.
        (2.5, QuotaType.PRODUCE),
        # bytes: (1.2 - 1) x 1000 = 200 ms < request's 1000 ms.  Request wins.
        (1.2, QuotaType.REQUEST),
    ],
)
async def test_a_response_carries_the_largest_throttle_and_mutes_under_its_quota(
    bytes_per_limit: float, expected_quota: QuotaType
) -> None:
    from collector.core.context import RequestContext

    now_ms = 1_000_000
    engine = QuotaEngine.from_config(SHORT_WINDOWS, now_ms)
    frame = _push_frame("both")
    limit = int(len(frame.raw) / bytes_per_limit)
    engine.apply_entity_quotas(
        {"clients/both": {"producer_byte_rate": limit, "request_percentage": 10}}
    )
    enforcer = QuotaEnforcer(engine, clock=FakeClock(now_ms))
    channel = RecordingChannel()
    context = RequestContext(frame, channel.session, now_ms, channel)
    bytes_ms = int((len(frame.raw) / limit - 1) * 1000)
    expected_ms = max(bytes_ms, 1000)

    throttle_ms = enforcer.record(context, len(frame.body), handling_ns=300_000_000)
    assert abs(throttle_ms - expected_ms) <= 1
    enforcer.throttle(context, throttle_ms)
    assert channel.muted
    assert engine.queue.size(str(expected_quota)) == 1
    assert sum(engine.queue.size(str(t)) for t in QuotaType) == 1
    (count,) = enforcer.throttles.items()
    assert count[0] == (expected_quota.name.lower(), "ANONYMOUS", "both")
    # The reaper unmutes once the throttle is over (driven here by hand, clock injected).
    now_ms += throttle_ms
    assert [t.channel for t in engine.pop_expired(now_ms)] == [channel]
    enforcer.close()


# ----------------------------------------------------------------------------- mutation quota
def _quota_entries(count: int) -> tuple[acq.EntryData, ...]:
    return tuple(
        acq.EntryData(
            entity=(acq.EntityData("client-id", f"app-{i}"),),
            ops=(acq.OpData("consumer_byte_rate", 1_000_000.0, False),),
        )
        for i in range(count)
    )


# controller_mutation_rate 10/s with Kafka's 11 one-second samples: a bucket of 110 tokens.
# It starts full; a strict quota accepts while it is not negative, so entry 111 takes it to
# -1 and the rest are refused; -1 token is 1 / 10 s = 100 ms of throttle.
MUTATION_RATE = 10
BURST = 11 * MUTATION_RATE


async def test_strict_mutation_quota_refuses_with_throttling_quota_exceeded(
    start: Factory, tmp_path: Path
) -> None:
    ConfigStore(tmp_path / "data").alter_quotas(
        {"client-id": "kafka-configs"}, {"controller_mutation_rate": MUTATION_RATE}
    )
    clock = FakeClock(1_000_000)
    server = await start(clock)
    admin = await WireClient.connect(server.port(), client_id="kafka-configs")
    # validate_only: counted as Kafka's controller counts it, without writing 120 quotas.
    request = AlterClientQuotasRequest(
        entries=_quota_entries(BURST + 10), validate_only=True
    )
    response = await admin.request(
        ApiKeys.ALTER_CLIENT_QUOTAS, 1, request
    )  # v1: strict
    codes = [entry.error_code for entry in response.entries]
    accepted = codes.index(Errors.THROTTLING_QUOTA_EXCEEDED)
    # The clock stands while the request runs: the bucket does not refill.
    assert BURST + 1 <= accepted <= BURST + 3
    assert set(codes[accepted:]) == {Errors.THROTTLING_QUOTA_EXCEEDED}
    refused = response.entries[accepted]
    assert refused.error_message == "The throttling quota has been exceeded."
    assert 0 < response.throttle_time_ms <= 1000 // MUTATION_RATE
    await answered_only_after(server, clock, admin, response.throttle_time_ms)
    samples = await scrape(server)
    labels = {
        "quota": "controller_mutation",
        "user": "ANONYMOUS",
        "client_id": "kafka-configs",
    }
    assert sample(samples, "ktc_quota_throttled_responses_total", **labels) == 1
    # The bucket (refilling since, during the mute) is far from full.
    entity = {"user": "", "client_id": "kafka-configs"}
    tokens = sample(samples, "kafka_server_controllermutation_tokens", **entity)
    assert tokens is not None and tokens < 5
    await admin.close()


async def test_permissive_mutation_quota_applies_then_throttles(
    start: Factory, tmp_path: Path
) -> None:
    from proto.messages import IncrementalAlterConfigsRequest
    from proto.messages.incremental_alter_configs_request import (
        AlterableConfig,
        AlterConfigsResource,
    )

    ConfigStore(tmp_path / "data").alter_quotas(
        {"client-id": "old-tool"}, {"controller_mutation_rate": MUTATION_RATE}
    )
    clock = FakeClock(1_000_000)
    server = await start(clock)
    admin = await WireClient.connect(server.port(), client_id="old-tool")
    resources = tuple(
        AlterConfigsResource(16, f"sub-{i}", (AlterableConfig("metrics", 0, "*"),))
        for i in range(BURST + 2)
    )
    request = IncrementalAlterConfigsRequest(resources=resources, validate_only=True)
    response = await admin.request(ApiKeys.INCREMENTAL_ALTER_CONFIGS, 0, request)  # v0
    # Every change is accepted; the bucket ends about 2 tokens short: ~200 ms of throttle.
    assert {r.error_code for r in response.responses} == {Errors.NONE}
    assert 0 < response.throttle_time_ms <= 2 * 1000 // MUTATION_RATE
    await answered_only_after(server, clock, admin, response.throttle_time_ms)
    await admin.close()


# ----------------------------------------------------------------------------- admin preprocess
async def test_incremental_alter_configs_preprocess_is_kafkas(
    start: Factory, tmp_path: Path
) -> None:
    from proto.messages import IncrementalAlterConfigsRequest
    from proto.messages.incremental_alter_configs_request import (
        AlterableConfig,
        AlterConfigsResource,
    )

    server = await start()
    admin = await WireClient.connect(server.port(), client_id="kafka-client-metrics")
    set_, delete, append = 0, 1, 2
    request = IncrementalAlterConfigsRequest(
        resources=(
            # Null values on SET and APPEND (not DELETE): named in request order.
            AlterConfigsResource(
                16,
                "nulls",
                (
                    AlterableConfig("metrics", set_, None),
                    AlterableConfig("interval.ms", delete, None),
                    AlterableConfig("match", append, None),
                ),
            ),
            AlterConfigsResource(
                16,
                "twice",
                (
                    AlterableConfig("metrics", set_, "a"),
                    AlterableConfig("metrics", delete, None),
                ),
            ),
            # A resource named twice fails both times.
            AlterConfigsResource(16, "dup", (AlterableConfig("metrics", set_, "*"),)),
            AlterConfigsResource(16, "dup", (AlterableConfig("metrics", set_, "*"),)),
        )
    )
    response = await admin.request(ApiKeys.INCREMENTAL_ALTER_CONFIGS, 1, request)
    assert [(r.error_code, r.error_message) for r in response.responses] == [
        (Errors.INVALID_REQUEST, "Null value not supported for : metrics, match"),
        (Errors.INVALID_REQUEST, "Error due to duplicate config keys"),
        (Errors.INVALID_REQUEST, "Each resource must appear at most once."),
        (Errors.INVALID_REQUEST, "Each resource must appear at most once."),
    ]
    assert ConfigStore(tmp_path / "data").list_names() == []
    await admin.close()


# ----------------------------------------------------------------------------- ktc quotas
async def test_ktc_quotas_takes_kafka_configs_options_and_a_running_server_reloads(
    start: Factory, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from collector.app.cli import cli

    data_dir = str(tmp_path / "data")
    server = await start()
    assert server.quotas is not None
    # A change written before the store watcher watches the directory would only be seen
    # at the next SIGHUP.
    await server.store_watching.wait()

    def ktc(*args: str) -> str:
        result = CliRunner().invoke(cli, ["quotas", *args, "--data-dir", data_dir])
        assert result.exit_code == 0, result.output
        return result.output

    # kafka-configs.sh --alter --entity-type users --entity-name alice
    #   --entity-type clients --entity-default --add-config ...: mixing needs the shortcuts.
    ktc(
        "alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-name",
        "app",
        "--add-config",
        "producer_byte_rate=1024",
    )
    ktc(
        "alter",
        "--user",
        "alice",
        "--client-defaults",
        "--add-config",
        "request_percentage=50",
    )
    ktc(
        "alter",
        "--entity-type",
        "ips",
        "--entity-default",
        "--add-config",
        "connection_creation_rate=20",
    )
    expected = {
        "users/alice/clients/app": {"producer_byte_rate": 1024.0},
        "users/alice/clients/<default>": {"request_percentage": 50.0},
        "ips/<default>": {"connection_creation_rate": 20.0},
    }
    # Hot reload: the server's store watcher applies the file change (no SIGHUP needed).
    await eventually(
        lambda: server.quotas.engine.entity_quotas() == expected,
        timeout_s=10,
        what="the quotas file change applied",
    )
    described = ktc(
        "describe",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-name",
        "app",
    )
    assert described.splitlines() == [
        "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1024.0"
    ]
    ktc(
        "alter",
        "--entity-type",
        "ips",
        "--entity-default",
        "--delete-config",
        "connection_creation_rate",
    )
    await eventually(
        lambda: "ips/<default>" not in server.quotas.engine.entity_quotas(),
        timeout_s=10,
        what="the deleted quota removed",
    )

    mixed = CliRunner().invoke(
        cli,
        [
            "quotas",
            "alter",
            "--data-dir",
            data_dir,
            "--entity-type",
            "users",
            "--entity-name",
            "bob",
            "--entity-type",
            "clients",
            "--entity-default",
            "--add-config",
            "request_percentage=1",
        ],
    )
    assert mixed.exit_code == 2 and "--client-defaults" in mixed.output


async def test_a_connection_held_for_a_slot_is_closed_when_the_server_stops(
    start: Factory,
) -> None:
    server = await start(**{"max.connections": 1})
    first = await WireClient.connect(server.port())
    assert await api_versions_ok(first)
    held = await WireClient.connect(server.port())  # accepted by the kernel, held by us
    assert server.quotas is not None
    await eventually(  # the acceptor takes it and waits for a slot
        lambda: ("PLAINTEXT", "wait_for_slot") in server.quotas.connection_decisions,
        timeout_s=5,
        what="the held connection waiting for a slot",
    )
    await server.stop()
    assert await held.closed_by_server(timeout_s=5.0)
    await first.close()
    await held.close()


def test_connection_quota_keys_are_kafkas_and_checked_at_load() -> None:
    from collector.app.config import ConfigError
    from collector.app.server import quota_settings

    two_listeners = {
        "listeners": "PLAINTEXT://:9092,ADMIN://:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,ADMIN:PLAINTEXT",
    }
    config = load_config(
        environ={"KTC_INTER_BROKER_LISTENER_NAME": "ADMIN"},
        overrides={
            **two_listeners,
            "listener.name.plaintext.max.connection.creation.rate": 50,
        },
    )
    settings = quota_settings(config)
    assert settings["inter.broker.listener.name"] == "ADMIN"
    assert settings["listener.name.plaintext.max.connection.creation.rate"] == 50
    # Round trip through the dotted form (what `ktc validate-config` prints).
    assert config.with_overrides({"node.id": 2}).connection_quota_overrides == (
        config.connection_quota_overrides
    )
    with pytest.raises(
        ConfigError, match="listener.name.plaintext.max.connections: .*at least 1"
    ):
        load_config(
            environ={}, overrides={"listener.name.plaintext.max.connections": 0}
        )
    with pytest.raises(ConfigError, match="'ADMIN' is not a listener"):
        load_config(environ={}, overrides={"inter.broker.listener.name": "ADMIN"})
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(environ={}, overrides={"listener.name.plaintext.max.bytes": 1})
