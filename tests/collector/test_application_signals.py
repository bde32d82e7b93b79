"""The sans-IO walk of a push for its application (collector/telemetry/application_signals.py):
resource ``group_id``, the Streams and share-consumer flags, the latest point of each Streams
state series; read whole, with trailing fields, out of field order, on arbitrary bytes; and
how the manager reads an instance's pushes (once, or every push of a Streams client)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from collector.telemetry.application_signals import (
    ALIVE_THREADS_METRIC,
    FAILED_THREADS_METRIC,
    NOT_AN_APPLICATION,
    ApplicationSignals,
    StreamsClientId,
    observe_push,
    parse_streams_client_id,
    read_signals,
)
from collector.telemetry.client_metrics import ClientMetricsManager
from proto.errors import Errors
from proto.messages import PushTelemetryRequest
from proto.streams_states import CLIENT_STATE_METRIC, THREAD_STATE_METRIC
from tests.collector.collector_testkit import (
    MemorySubscriptions,
    make_manager,
    make_session,
    subscription,
)
from tests.collector.streams_payloads import T0, delta_sum, gauge, payload, point

UUID = "0f5bd7c4-2b8e-4a3c-9d1e-7a6b5c4d3e2f"
PREFIX = f"wordcount-{UUID}"


def test_resource_group_id_and_no_streams() -> None:
    signals = read_signals(
        payload(
            [
                gauge(
                    "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg",
                    point(1),
                )
            ],
            {"group_id": "orders", "client_rack": "r1"},
        )
    )
    assert signals.group_id == "orders"
    assert not signals.streams and not signals.share_consumer and signals.points == ()


def test_share_consumer_metrics_set_the_flag() -> None:
    signals = read_signals(
        payload(
            [
                gauge(
                    "org.apache.kafka.consumer.share.fetch.manager.fetch.latency.avg",
                    point(2),
                )
            ]
        )
    )
    assert signals.share_consumer and not signals.streams and signals.group_id is None


def test_streams_states_latest_point_per_series() -> None:
    signals = read_signals(
        payload(
            [
                gauge("org.apache.kafka.stream.thread.process.rate", point(3)),
                gauge(
                    CLIENT_STATE_METRIC,
                    point(
                        1, T0, integer=True, process_id=UUID, application_id="wordcount"
                    ),
                    point(
                        2,
                        T0 + 5,
                        integer=True,
                        process_id=UUID,
                        application_id="wordcount",
                    ),
                ),
                gauge(
                    THREAD_STATE_METRIC,
                    point(4, T0, process_id=UUID, thread_id=f"{PREFIX}-StreamThread-1"),
                ),
                gauge(ALIVE_THREADS_METRIC, point(2, T0)),
            ],
            {"group_id": "wordcount", "group_member_id": "m-1"},
        )
    )
    assert signals.streams and signals.group_id == "wordcount"
    by_metric = {(p.metric, p.thread_id): p for p in signals.points}
    state = by_metric[(CLIENT_STATE_METRIC, None)]
    assert (
        state.value,
        state.time_unix_nano,
        state.process_id,
        state.application_id,
    ) == (
        2.0,
        T0 + 5,
        UUID,
        "wordcount",
    )
    thread = by_metric[(THREAD_STATE_METRIC, f"{PREFIX}-StreamThread-1")]
    assert thread.value == 4.0 and thread.process_id == UUID
    assert by_metric[(ALIVE_THREADS_METRIC, None)].value == 2.0
    # Only the few state series are kept, not the other stream.* names.
    assert len(signals.points) == 3


def test_a_later_push_merges_since_and_delta_sums() -> None:
    first = read_signals(
        payload(
            [
                gauge(CLIENT_STATE_METRIC, point(1, T0, process_id=UUID)),
                delta_sum(FAILED_THREADS_METRIC, point(0, T0)),
            ]
        )
    )
    second = read_signals(
        payload(
            [
                gauge(CLIENT_STATE_METRIC, point(2, T0 + 10)),
                delta_sum(FAILED_THREADS_METRIC, point(1, T0 + 10)),
            ]
        ),
        first,
    )
    third = read_signals(
        payload(
            [
                gauge(CLIENT_STATE_METRIC, point(2, T0 + 20)),
                delta_sum(FAILED_THREADS_METRIC, point(0, T0 + 20)),
            ]
        ),
        second,
    )
    by_metric = {p.metric: p for p in third.points}
    state = by_metric[CLIENT_STATE_METRIC]
    # RUNNING since the push that first said so; process_id kept from the first push.
    assert (state.value, state.since_unix_nano, state.time_unix_nano) == (
        2.0,
        T0 + 10,
        T0 + 20,
    )
    assert state.process_id == UUID
    failed = by_metric[FAILED_THREADS_METRIC]
    assert failed.value == 1.0 and failed.since_unix_nano == T0 + 10
    # A series absent from a push keeps its point; an older point does not replace it.
    stale = read_signals(payload([gauge(CLIENT_STATE_METRIC, point(6, T0))]), third)
    assert {p.metric: p.value for p in stale.points} == {
        CLIENT_STATE_METRIC: 2.0,
        FAILED_THREADS_METRIC: 1.0,
    }


def _field(number: int, body: bytes) -> bytes:
    """A length-delimited field, as protobuf writes it."""
    length = len(body)
    varint = b""
    while length >= 0x80:
        varint += bytes([length & 0x7F | 0x80])
        length >>= 7
    return bytes([number << 3 | 2]) + varint + bytes([length]) + body


def test_name_after_the_data_and_trailing_fields() -> None:
    """A Metric whose name comes after its gauge (any field order is valid protobuf), and
    an unknown field after everything: read as protobuf reads them."""
    data = gauge("x", point(5, T0, thread_id="t-1")).gauge.SerializeToString()
    metric = _field(5, data) + _field(1, THREAD_STATE_METRIC.encode())
    raw = _field(1, _field(2, _field(2, metric))) + b"\x98\x06\x01"  # field 99 = 1
    parsed = MetricsData.FromString(raw)
    assert (
        parsed.resource_metrics[0].scope_metrics[0].metrics[0].name
        == THREAD_STATE_METRIC
    )
    signals = read_signals(raw)
    assert [(p.metric, p.thread_id, p.value) for p in signals.points] == [
        (THREAD_STATE_METRIC, "t-1", 5.0)
    ]
    assert signals.streams


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    read_signals(data)
    read_signals(payload([gauge(CLIENT_STATE_METRIC, point(2))]) + data)


@pytest.mark.parametrize(
    ("client_id", "expected"),
    [
        (f"{PREFIX}-admin", StreamsClientId(PREFIX, "admin", None, "wordcount", UUID)),
        (
            f"{PREFIX}-StreamThread-2-consumer",
            StreamsClientId(
                PREFIX, "consumer", f"{PREFIX}-StreamThread-2", "wordcount", UUID
            ),
        ),
        (
            f"{PREFIX}-StreamThread-1-producer",
            StreamsClientId(
                PREFIX, "producer", f"{PREFIX}-StreamThread-1", "wordcount", UUID
            ),
        ),
        (
            f"{PREFIX}-StateUpdater-1-restore-consumer",
            StreamsClientId(PREFIX, "restore-consumer", None, "wordcount", UUID),
        ),
        (
            f"{PREFIX}-global-consumer",
            StreamsClientId(PREFIX, "global-consumer", None, "wordcount", UUID),
        ),
        ("billing-admin", StreamsClientId("billing", "admin", None, None, None)),
        ("billing-StateUpdater-1-producer", None),
        ("rdkafka", None),
        ("", None),
        (None, None),
    ],
)
def test_streams_client_ids(
    client_id: str | None, expected: StreamsClientId | None
) -> None:
    assert parse_streams_client_id(client_id) == expected


def test_the_first_push_decides() -> None:
    plain = payload([gauge("org.apache.kafka.producer.record.send.rate", point(1))])
    assert observe_push(plain, None, "orders-producer") is NOT_AN_APPLICATION
    # A Streams admin's client id keeps its pushes read, states or not yet.
    admin = observe_push(plain, None, f"{PREFIX}-admin")
    assert admin.streams and admin.points == ()
    grouped = observe_push(payload([], {"group_id": "g"}), None, "c-1")
    assert grouped.group_id == "g" and not grouped.streams


def _push(manager, instance_id, subscription_id, now_ms, body, client_id):
    request = PushTelemetryRequest(
        client_instance_id=instance_id,
        subscription_id=subscription_id,
        terminating=False,
        compression_type=0,
        metrics=body,
    )
    response = manager.push_telemetry(request, make_session(), client_id, 1, now_ms)
    assert response.error_code == Errors.NONE


def test_the_manager_reads_a_consumer_once_and_a_streams_thread_every_push(
    landing,
) -> None:
    subs = MemorySubscriptions(subscription("all", "*", 1000))
    manager = make_manager(subs, landing)
    session = make_session()
    consumer = manager.get_telemetry_subscriptions(uuid.UUID(int=0), session, "c-1", 0)
    thread = manager.get_telemetry_subscriptions(
        uuid.UUID(int=0), session, f"{PREFIX}-StreamThread-1-consumer", 0
    )
    consumer_id, thread_id = consumer.client_instance_id, thread.client_instance_id
    name = f"{PREFIX}-StreamThread-1"
    for step, (group, state) in enumerate((("g-1", 1), ("g-2", 4))):
        now = step * 1000
        _push(
            manager,
            consumer_id,
            consumer.subscription_id,
            now,
            payload(
                [gauge("org.apache.kafka.consumer.x", point(1))], {"group_id": group}
            ),
            "c-1",
        )
        _push(
            manager,
            thread_id,
            thread.subscription_id,
            now,
            payload(
                [
                    gauge(
                        THREAD_STATE_METRIC,
                        point(state, T0 + step, process_id=UUID, thread_id=name),
                    )
                ],
                {"group_id": "wordcount"},
            ),
            f"{name}-consumer",
        )
    consumer_signals = _signals(manager, consumer_id)
    # Decided at the first push, not read again.
    assert consumer_signals.group_id == "g-1"
    thread_signals = _signals(manager, thread_id)
    assert [p.value for p in thread_signals.points] == [4.0]
    # A store change re-creates the instances; what their pushes said stays.
    subs.set(
        subscription("all", "*", 1000), subscription("more", "org.apache.kafka.", 1000)
    )
    manager.get_telemetry_subscriptions(thread_id, session, f"{name}-consumer", 5000)
    assert _signals(manager, thread_id) is thread_signals


def _signals(
    manager: ClientMetricsManager, instance_id: uuid.UUID
) -> ApplicationSignals:
    instance = manager.instance(instance_id)
    assert instance is not None and instance.application is not None
    return instance.application
