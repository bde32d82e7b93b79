"""The running server over real sockets: crafted requests get Kafka's answers, malformed
frames close only their own connection, pipelined responses keep request order."""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from collector.app.server import CollectorServer
from exporters.landing import LandingReader
from proto import SUPPORTED_VERSIONS, ApiKeys, encode_request
from proto.errors import Errors
from proto.messages import (
    ApiVersionsRequest,
    DescribeConfigsRequest,
    GetTelemetrySubscriptionsRequest,
    MetadataRequest,
    PushTelemetryRequest,
)
from proto.messages.describe_configs_request import DescribeConfigsResource
from proto.messages.metadata_request import MetadataRequestTopic
from subscriptions.store import ConfigStore
from tests.collector.collector_testkit import (
    collector_config,
    newest_session,
    open_connections,
    otlp_payload,
    running,
    subscribe_producers,
    zstd,
)
from tests.collector.wire_client import WireClient
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

ZERO = uuid.UUID(int=0)
SERVED = {
    ApiKeys.API_VERSIONS,
    ApiKeys.METADATA,
    ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
    ApiKeys.PUSH_TELEMETRY,
    ApiKeys.DESCRIBE_CONFIGS,
    ApiKeys.INCREMENTAL_ALTER_CONFIGS,
    ApiKeys.LIST_CONFIG_RESOURCES,
    ApiKeys.DESCRIBE_CLIENT_QUOTAS,
    ApiKeys.ALTER_CLIENT_QUOTAS,
    # ACLs (collector.broker.acl_apis): answered 54 SECURITY_DISABLED without an authorizer.
    ApiKeys.DESCRIBE_ACLS,
    ApiKeys.CREATE_ACLS,
    ApiKeys.DELETE_ACLS,
    # Listed on every listener, as Kafka lists them (answered 34 outside a SASL exchange).
    ApiKeys.SASL_HANDSHAKE,
    ApiKeys.SASL_AUTHENTICATE,
    ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS,
    ApiKeys.ALTER_USER_SCRAM_CREDENTIALS,
}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[CollectorServer]:
    subscribe_producers(tmp_path)
    config = collector_config(
        tmp_path,
        **{
            "node.id": 5,
            "cluster.id": "wire-cluster",
            "telemetry.max.bytes": 4096,
            "socket.request.max.bytes": 65536,
        },
    )
    async with running(config) as node:
        yield node


async def client(
    server: CollectorServer, client_id: str | None = "wire-test"
) -> WireClient:
    return await WireClient.connect(server.port(), client_id)


async def still_serving(server: CollectorServer) -> None:
    """Another connection is unaffected."""
    other = await client(server)
    response = await other.request(
        ApiKeys.API_VERSIONS, 3, ApiVersionsRequest("ok-client", "1.0")
    )
    assert response.error_code == Errors.NONE
    await other.close()


# ----------------------------------------------------------------------------- ApiVersions
async def test_api_versions_lists_exactly_what_is_served(
    server: CollectorServer,
) -> None:
    c = await client(server)
    response = await c.request(
        ApiKeys.API_VERSIONS, 3, ApiVersionsRequest("confluent-kafka-python", "2.16.1")
    )
    assert response.error_code == Errors.NONE
    listed = {e.api_key: (e.min_version, e.max_version) for e in response.api_keys}
    assert set(listed) == SERVED
    assert all(listed[k] == SUPPORTED_VERSIONS[k] for k in listed)
    assert (
        c_sw := newest_session(server)
    ).client_software_name == "confluent-kafka-python"
    assert c_sw.client_software_version == "2.16.1"
    await c.close()


@pytest.mark.parametrize(
    "name,version", [("-leading-dash", "1.0"), ("ok", "1.0 "), ("", "1"), ("a_b", "1")]
)
async def test_api_versions_v3_validates_software_strings(
    server: CollectorServer, name: str, version: str
) -> None:
    c = await client(server)
    response = await c.request(
        ApiKeys.API_VERSIONS, 3, ApiVersionsRequest(name, version)
    )
    assert response.error_code == Errors.INVALID_REQUEST
    # The connection stays usable, and the bad strings were not recorded.
    response = await c.request(ApiKeys.API_VERSIONS, 0, ApiVersionsRequest())
    assert response.error_code == Errors.NONE
    assert newest_session(server).client_software_name == "unknown"
    await c.close()


async def test_api_versions_unknown_version_gets_v0_unsupported(
    server: CollectorServer,
) -> None:
    c = await client(server)
    # A future ApiVersions (v99): header v2 (flexible), body never parsed (KIP-511).
    c.send_raw(
        struct.pack(">ihhihb", 18, ApiKeys.API_VERSIONS, 99, 7, -1, 0) + b"\x05future"
    )
    await c.writer.drain()
    data = await asyncio.wait_for(c.reader.read(1024), 5)
    _size, correlation_id, error_code, count = struct.unpack_from(">iihi", data)
    assert (correlation_id, error_code, count) == (7, Errors.UNSUPPORTED_VERSION, 1)
    assert struct.unpack_from(">hhh", data, 14) == (
        ApiKeys.API_VERSIONS,
        *SUPPORTED_VERSIONS[ApiKeys.API_VERSIONS],
    )
    await c.close()


# ----------------------------------------------------------------------------- Metadata
async def test_metadata_the_collector_is_the_only_broker(
    server: CollectorServer,
) -> None:
    c = await client(server)
    request = MetadataRequest(
        topics=(
            MetadataRequestTopic(name="orders"),
            MetadataRequestTopic(name="bad/name"),
        )
    )
    for version in (0, 1, 4, 9, 12):
        response = await c.request(ApiKeys.METADATA, version, request)
        (broker,) = response.brokers
        assert (broker.node_id, broker.host, broker.port) == (
            5,
            "127.0.0.1",
            server.port(),
        )
        errors = {t.name: t.error_code for t in response.topics}
        assert errors == {
            "orders": Errors.UNKNOWN_TOPIC_OR_PARTITION,
            "bad/name": Errors.INVALID_TOPIC_EXCEPTION,
        }
        if version >= 1:
            assert response.controller_id == 5
        if version >= 2:
            assert response.cluster_id == "wire-cluster"
    all_topics = await c.request(ApiKeys.METADATA, 12, MetadataRequest(topics=None))
    assert all_topics.topics == ()
    await c.close()


# ----------------------------------------------------------------------------- telemetry
async def test_get_and_push_in_one_pipelined_write_answer_in_order(
    server: CollectorServer,
) -> None:
    c = await client(server)
    c.send(ApiKeys.API_VERSIONS, 3, ApiVersionsRequest("wire-sw", "9.9"))
    c.send(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, GetTelemetrySubscriptionsRequest(ZERO)
    )
    await c.writer.drain()
    assert (await c.receive()).error_code == Errors.NONE
    get = await c.receive()
    assert get.error_code == Errors.NONE and list(get.requested_metrics) == [
        "org.apache.kafka.producer."
    ]
    payload = otlp_payload("org.apache.kafka.producer.a")
    ladder = [
        (
            PushTelemetryRequest(
                get.client_instance_id, get.subscription_id, False, 4, zstd(payload)
            ),
            Errors.NONE,
        ),
        (
            PushTelemetryRequest(
                get.client_instance_id, get.subscription_id, False, 4, zstd(payload)
            ),
            Errors.THROTTLING_QUOTA_EXCEEDED,
        ),
        (PushTelemetryRequest(ZERO, 0, False, 0, b""), Errors.INVALID_REQUEST),
        (
            PushTelemetryRequest(uuid.UUID(int=1), 0, False, 0, b""),
            Errors.INVALID_REQUEST,
        ),
        (
            PushTelemetryRequest(
                get.client_instance_id, get.subscription_id, True, 4, zstd(payload)
            ),
            Errors.NONE,
        ),
        (
            PushTelemetryRequest(
                get.client_instance_id, get.subscription_id, False, 0, b""
            ),
            Errors.INVALID_REQUEST,
        ),
    ]
    for request, _ in ladder:
        c.send(ApiKeys.PUSH_TELEMETRY, 0, request)
    await c.writer.drain()
    answers = [(await c.receive()).error_code for _ in ladder]
    assert answers == [expected for _, expected in ladder]
    landed = list(LandingReader(server.landing_directory).read(0))
    assert [r.context.terminating for r in landed] == [False, True]
    assert landed[0].context.client_software_name == "wire-sw"
    assert landed[0].context.client_id == "wire-test"
    assert landed[0].payload == payload
    await c.close()


@pytest.mark.parametrize(
    ("compression_type", "metrics", "expected"),
    [
        (7, b"x", Errors.UNSUPPORTED_COMPRESSION_TYPE),
        (0, b"\0" * 4097, Errors.TELEMETRY_TOO_LARGE),  # telemetry.max.bytes is 4096
        (4, b"\x28\xb5\x2f\xfd" + b"\xff" * 40, Errors.INVALID_RECORD),
        (0, b"\x0a\xff\xff\xff\xff\x0f", Errors.INVALID_RECORD),  # not OTLP
        (4, zstd(b"\0" * 50_000_000), Errors.TELEMETRY_TOO_LARGE),  # bomb (KAFKA-21076)
    ],
)
async def test_push_errors_over_the_wire(
    server: CollectorServer, compression_type: int, metrics: bytes, expected: Errors
) -> None:
    c = await client(server)
    get = await c.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, GetTelemetrySubscriptionsRequest(ZERO)
    )
    push = PushTelemetryRequest(
        get.client_instance_id, get.subscription_id, False, compression_type, metrics
    )
    assert (await c.request(ApiKeys.PUSH_TELEMETRY, 0, push)).error_code == expected
    await c.close()


async def test_wrong_subscription_then_immediate_reget(server: CollectorServer) -> None:
    c = await client(server)
    get = await c.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, GetTelemetrySubscriptionsRequest(ZERO)
    )
    push = PushTelemetryRequest(
        get.client_instance_id, get.subscription_id + 1, False, 0, b""
    )
    assert (
        await c.request(ApiKeys.PUSH_TELEMETRY, 0, push)
    ).error_code == Errors.UNKNOWN_SUBSCRIPTION_ID
    again = await c.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        GetTelemetrySubscriptionsRequest(get.client_instance_id),
    )
    assert again.error_code == Errors.NONE
    too_soon = await c.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        GetTelemetrySubscriptionsRequest(get.client_instance_id),
    )
    assert too_soon.error_code == Errors.THROTTLING_QUOTA_EXCEEDED
    await c.close()


async def test_closing_the_connection_drops_its_instance(
    server: CollectorServer,
) -> None:
    c = await client(server)
    get = await c.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, GetTelemetrySubscriptionsRequest(ZERO)
    )
    assert (
        server.manager is not None
        and server.manager.instance(get.client_instance_id) is not None
    )
    await c.close()
    await eventually(
        lambda: server.manager.instance(get.client_instance_id) is None,  # type: ignore[union-attr]
        timeout_s=2,
        what="the instance dropped with its connection",
    )


# ----------------------------------------------------------------------------- malformed
def _truncated_push() -> bytes:
    """A PushTelemetry frame whose declared size matches, but whose body stops short."""
    frame = encode_request(
        ApiKeys.PUSH_TELEMETRY,
        0,
        1,
        "x",
        PushTelemetryRequest(uuid.uuid4(), 0, False, 0, b"abc"),
    )
    body = frame[4:-6]
    return struct.pack(">i", len(body)) + body


MALFORMED = {
    "negative size": struct.pack(">i", -1),
    "size over socket.request.max.bytes": struct.pack(">i", 65537),
    "unknown api key": struct.pack(">ihhih", 10, 1000, 0, 1, -1),
    "known but unserved api key (Produce)": struct.pack(
        ">ihhih", 10, ApiKeys.PRODUCE, 9, 1, -1
    ),
    "unsupported Metadata version": struct.pack(
        ">ihhih", 10, ApiKeys.METADATA, 13, 1, -1
    ),
    "truncated PushTelemetry body": _truncated_push(),
    "header shorter than its fixed fields": struct.pack(">ih", 2, 18),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
async def test_malformed_input_closes_only_that_connection(
    server: CollectorServer, name: str
) -> None:
    healthy = await client(server)
    bad = await client(server)
    bad.send_raw(MALFORMED[name])
    await bad.writer.drain()
    assert await bad.closed_by_server(), f"{name}: connection left open"
    # The server and other connections carry on.
    response = await healthy.request(
        ApiKeys.API_VERSIONS, 3, ApiVersionsRequest("still-here", "1")
    )
    assert response.error_code == Errors.NONE
    await still_serving(server)
    await healthy.close()


async def test_responses_before_a_malformed_frame_are_still_sent(
    server: CollectorServer,
) -> None:
    c = await client(server)
    c.send(ApiKeys.API_VERSIONS, 3, ApiVersionsRequest("a", "1"))
    c.send_raw(struct.pack(">ihhih", 10, 1000, 0, 1, -1))
    await c.writer.drain()
    assert (await c.receive()).error_code == Errors.NONE
    assert await c.closed_by_server()


async def test_a_truncated_frame_then_disconnect_leaves_the_server_fine(
    server: CollectorServer,
) -> None:
    c = await client(server)
    c.send_raw(struct.pack(">i", 100) + b"\0" * 10)
    await c.writer.drain()
    await c.close()
    await still_serving(server)


# ----------------------------------------------------------------------------- HTTP
async def test_metrics_health_and_readiness(server: CollectorServer) -> None:
    c = await client(server)
    await c.request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, GetTelemetrySubscriptionsRequest(ZERO)
    )
    base = f"http://127.0.0.1:{server.http_port}"
    async with aiohttp.ClientSession() as http:
        async with http.get(base + "/metrics") as r:
            text = await r.text()
            assert r.status == 200
        assert "kafka_server_client_metrics_instance_count 1.0" in text
        assert (
            'ktc_requests_total{api="GET_TELEMETRY_SUBSCRIPTIONS",error_code="0"} 1.0'
            in text
        )
        assert 'ktc_connections{listener="PLAINTEXT"} 1.0' in text
        assert "client_instance_id" not in text  # no per-instance labels by default
        async with http.get(base + "/healthz") as r:
            assert r.status == 200
        async with http.get(base + "/readyz") as r:
            assert r.status == 200
        server.health.begin_shutdown()
        async with http.get(base + "/readyz") as r:
            assert r.status == 503
            assert (await r.json())["checks"]["shutdown"] == "shutting down"
    await c.close()


# ----------------------------------------------------------------------------- durability
async def test_group_commit_acks_only_fsynced_pushes(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "all", {"metrics": "*", "interval.ms": "100"}, []
    )
    config = collector_config(
        tmp_path, landing={"fsync": "always", "group_commit": True}
    )
    async with running(config) as server:
        log = server.landing.exporter
        c = await client(server)
        gets = []
        for _ in range(5):
            c.send(
                ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
                0,
                GetTelemetrySubscriptionsRequest(ZERO),
            )
        await c.writer.drain()
        gets = [await c.receive() for _ in range(5)]
        payload = zstd(otlp_payload("a.b"))
        for get in gets:  # five pushes in one write: one batch, one fsync
            c.send(
                ApiKeys.PUSH_TELEMETRY,
                0,
                PushTelemetryRequest(
                    get.client_instance_id, get.subscription_id, False, 4, payload
                ),
            )
        await c.writer.drain()
        first = await c.receive()
        # By the time the first ack of the batch arrives, the whole batch is on disk.
        assert first.error_code == Errors.NONE
        assert log.durable_offset == log.next_offset == 5  # type: ignore[union-attr]
        assert [(await c.receive()).error_code for _ in range(4)] == [Errors.NONE] * 4
        await c.close()


# ----------------------------------------------------------------------------- backpressure
async def test_a_client_that_does_not_read_stops_being_read(
    server: CollectorServer,
) -> None:
    import socket as socket_module

    sock = socket_module.socket()
    sock.setsockopt(socket_module.SOL_SOCKET, socket_module.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port()))
    reader, writer = await asyncio.open_connection(sock=sock)
    c = WireClient(reader, writer, "slow-reader")
    # Large responses (about 25 KB each, several MB in all) so that the kernel's socket
    # buffers fill and the transport's own buffer passes its high-water mark.
    describe = DescribeConfigsRequest(
        resources=tuple(
            DescribeConfigsResource(
                resource_type=16, resource_name=f"sub-{i}", configuration_keys=None
            )
            for i in range(60)
        ),
        include_documentation=True,
    )
    count = 400
    for _ in range(count):
        c.send(ApiKeys.DESCRIBE_CONFIGS, 4, describe)
    (connection,) = open_connections(server)
    # Responses pile up in the server's write buffer; past its high-water mark the
    # server stops reading this connection instead of buffering without bound.
    await eventually(
        lambda: connection.reading_paused, timeout_s=5, what="reading paused"
    )
    await still_serving(server)  # others are served meanwhile
    for _ in range(
        count
    ):  # every request answered, in order (the client codec checks ids)
        response = await c.receive(timeout_s=10)
        assert len(response.results) == 60
    assert not connection.reading_paused
    await c.close()
