"""PushTelemetry v0 has paths of its own in the dispatcher: while no quota records
requests it skips the RequestContext and the quota call; while one does, it records the
push from its parts (``Dispatcher._push``).  Both ways must answer byte for
byte what the generic path answers, for Kafka's whole push ladder, count the same
requests and throttles, and land the same records."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from clock.testing import FakeClock
from collector.broker.kafka_apis import KafkaApis
from collector.pipeline.dispatch import Dispatcher
from collector.pipeline.quota_enforcer import QuotaEnforcer
from collector.pipeline.request_metrics import RequestMetrics
from exporters.landing import LandingLog, LandingOptions, LandingReader
from proto import ApiKeys, ClientConnection, RequestFrame, ServerConnection
from proto.messages import (
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
    get_telemetry_subscriptions_response,
)
from quota import QuotaEngine
from tests.collector.collector_testkit import (
    MemorySubscriptions,
    RecordingChannel,
    make_manager,
    otlp_payload,
    subscription,
    zstd,
)

ZERO = uuid.UUID(int=0)
INSTANCE = uuid.UUID("6a3c1a8e-96c1-4f0e-9b1d-2f6f3b9f6a10")
# Limits no test traffic comes near: the metered path records, nothing throttles.
HIGH_QUOTAS = {
    (("user", None), ("client-id", None)): {
        "producer_byte_rate": 1e12,
        "request_percentage": 1e6,
    }
}


@dataclasses.dataclass
class Path_:
    name: str
    dispatcher: Dispatcher
    metrics: RequestMetrics
    quotas: QuotaEnforcer | None
    landing: LandingLog


def build(name: str, tmp_path: Path, clock: FakeClock) -> Path_:
    subs = MemorySubscriptions(
        subscription("producers", "org.apache.kafka.producer.", 1000)
    )
    landing = LandingLog(
        tmp_path / name, LandingOptions(write_behind=False), housekeeping=False
    )
    ids = iter([INSTANCE])
    manager = make_manager(
        subs, landing, new_instance_id=lambda: next(ids), clock=FakeClock(wall_ns=1)
    )
    apis = KafkaApis(
        manager=manager, node_id=7, cluster_id="test-cluster", advertised={}
    )
    table = apis.table()
    quotas = None
    if name == "generic":  # the table row without its direct handler: the generic path
        table[ApiKeys.PUSH_TELEMETRY] = dataclasses.replace(
            table[ApiKeys.PUSH_TELEMETRY], push_manager=None
        )
    if name in ("metered", "generic"):
        engine = QuotaEngine.from_config({}, 0)
        quotas = QuotaEnforcer(engine, clock=clock)
        quotas.apply_entity_quotas(HIGH_QUOTAS)
    metrics = RequestMetrics()
    dispatcher = Dispatcher(table, clock=clock, quota=quotas, observer=metrics)
    return Path_(name, dispatcher, metrics, quotas, landing)


@pytest.fixture
def paths(tmp_path: Path) -> Iterator[tuple[FakeClock, list[Path_]]]:
    clock = FakeClock(1_000_000)
    built = [
        build(name, tmp_path, clock) for name in ("unmetered", "metered", "generic")
    ]
    yield clock, built
    for path in built:
        path.landing.close()


def frame_of(api_key: int, message: object, correlation_id: int) -> RequestFrame:
    client = ClientConnection(client_id="paths")
    client._next_correlation_id = correlation_id
    server = ServerConnection()
    server.receive_data(client.send_request(api_key, 0, message))
    frame = server.next_request()
    assert frame is not None
    return frame


async def test_every_push_path_answers_kafkas_ladder_identically(
    paths: tuple[FakeClock, list[Path_]],
) -> None:
    clock, built = paths
    payload = zstd(otlp_payload("org.apache.kafka.producer.record.send.rate"))
    assert built[0].quotas is None and not built[1].quotas.is_idle()  # type: ignore[union-attr]
    channel = RecordingChannel()
    get = frame_of(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, GetTelemetrySubscriptionsRequest(ZERO), 1
    )
    answers = {
        p.name: [p.dispatcher.handle(get, channel.session, channel)] for p in built
    }
    assert answers["unmetered"] == answers["metered"] == answers["generic"]
    # The subscription id the Get answered (the same for all three: same instance id).
    answered = answers["generic"][0]
    assert answered is not None
    response, _ = get_telemetry_subscriptions_response.READERS[0](answered, 4 + 5)
    assert response.client_instance_id == INSTANCE
    sid = response.subscription_id

    ladder = [
        # (ms to advance, request): accepted, too early (89), wrong subscription (117),
        # unknown compression (76), accepted, terminating, after terminating (42),
        # reserved instance id (42)
        (0, PushTelemetryRequest(INSTANCE, sid, False, 4, payload)),
        (10, PushTelemetryRequest(INSTANCE, sid, False, 4, payload)),
        (1000, PushTelemetryRequest(INSTANCE, sid + 1, False, 4, payload)),
        (1000, PushTelemetryRequest(INSTANCE, sid, False, 9, payload)),
        (1000, PushTelemetryRequest(INSTANCE, sid, False, 4, payload)),
        (5, PushTelemetryRequest(INSTANCE, sid, True, 4, payload)),
        (1000, PushTelemetryRequest(INSTANCE, sid, False, 4, payload)),
        (1000, PushTelemetryRequest(ZERO, sid, False, 4, payload)),
    ]
    for correlation_id, (advance_ms, request) in enumerate(ladder, start=2):
        clock.advance(advance_ms)
        frame = frame_of(ApiKeys.PUSH_TELEMETRY, request, correlation_id)
        for path in built:
            answers[path.name].append(
                path.dispatcher.handle(frame, channel.session, channel)
            )

    error_codes = [int.from_bytes(a[13:15], "big") for a in answers["generic"][1:]]  # type: ignore[index]
    assert error_codes == [0, 89, 117, 76, 0, 0, 42, 42]
    assert answers["unmetered"] == answers["generic"]
    assert answers["metered"] == answers["generic"]
    requests = [p.metrics.requests for p in built]
    assert requests[0] == requests[1] == requests[2]
    gated = [
        {k: (v.responses, v.throttle_ms) for k, v in p.quotas.throttles.items()}
        for p in built[1:]
        if p.quotas is not None
    ]
    assert gated[0] == gated[1] == {("push_interval", "ANONYMOUS", "paths"): (1, 0)}
    landed = [
        [
            (r.offset, r.context.correlation_id, bytes(r.payload))
            for r in LandingReader(p.landing.directory).read()
        ]
        for p in built
    ]
    assert landed[0] == landed[1] == landed[2]
    assert [c for _, c, _ in landed[0]] == [2, 6, 7]
