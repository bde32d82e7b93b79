"""ClientMetricsManager: Kafka's Get gating and Push ladder, with a fake clock.

Every case is (state, request) -> error code, in the order of Kafka's
``ClientMetricsManager.processGetTelemetrySubscriptionRequest`` and
``processPushTelemetryRequest`` (server/.../metrics/ClientMetricsManager.java).
The landing log is real; payloads are real OTLP, really compressed.
"""

from __future__ import annotations

import tracemalloc
import uuid

import pytest

from collector.telemetry.client_metrics import SUPPORTED_COMPRESSION_TYPES
from exporters.base import ExportResult
from exporters.context import TelemetryContext
from exporters.landing import LandingLog, LandingReader
from proto.errors import Errors
from proto.messages import PushTelemetryRequest
from subscriptions.kafka_uuid import ONE_UUID, ZERO_UUID, kafka_uuid_from_str
from tests.collector.collector_testkit import (
    MemorySubscriptions,
    make_manager,
    make_session,
    otlp_payload,
    subscription,
    zstd,
)

INTERVAL = 1000
CONN = make_session()


def get(manager, instance_id=ZERO_UUID, now_ms=0, conn=CONN, client_id="app-1"):
    return manager.get_telemetry_subscriptions(instance_id, conn, client_id, now_ms)


def push(
    manager,
    instance_id,
    subscription_id,
    now_ms,
    *,
    metrics=b"",
    compression_type=0,
    terminating=False,
    conn=CONN,
    correlation_id=1,
):
    request = PushTelemetryRequest(
        client_instance_id=instance_id,
        subscription_id=subscription_id,
        terminating=terminating,
        compression_type=compression_type,
        metrics=metrics,
    )
    return manager.push_telemetry(request, conn, "app-1", correlation_id, now_ms)


def handshake(manager, now_ms=0):
    response = get(manager, now_ms=now_ms)
    assert response.error_code == Errors.NONE
    return response.client_instance_id, response.subscription_id


def landed(landing: LandingLog) -> list:
    return list(LandingReader(landing.directory).read(0))


# ----------------------------------------------------------------------------- Get
def test_first_get_assigns_an_id_and_returns_the_subscription(manager) -> None:
    response = get(manager)
    assert response.error_code == Errors.NONE
    assert response.client_instance_id not in (ZERO_UUID, ONE_UUID)
    assert list(response.requested_metrics) == ["org.apache.kafka.producer."]
    assert response.push_interval_ms == INTERVAL
    assert (
        list(response.accepted_compression_types)
        == list(SUPPORTED_COMPRESSION_TYPES)
        == [4, 3, 1, 2]
    )
    assert response.telemetry_max_bytes == 1_048_576
    assert response.delta_temporality is True
    assert manager.instance_count == 1


def test_get_with_known_id_echoes_it(manager) -> None:
    instance_id, _ = handshake(manager)
    again = get(manager, instance_id, now_ms=INTERVAL)
    assert again.error_code == Errors.NONE
    assert (
        again.client_instance_id == instance_id
    )  # never zero: Java clients reject that


def test_get_before_interval_is_throttled(manager) -> None:
    instance_id, _ = handshake(manager, now_ms=0)
    assert (
        get(manager, instance_id, now_ms=INTERVAL - 1).error_code
        == Errors.THROTTLING_QUOTA_EXCEEDED
    )
    assert get(manager, instance_id, now_ms=INTERVAL).error_code == Errors.NONE


def test_get_gate_counts_from_the_last_push(manager) -> None:
    instance_id, sub_id = handshake(manager, now_ms=0)
    assert push(manager, instance_id, sub_id, 900).error_code == Errors.NONE
    # now - max(lastGet=0, lastPush=900) = 1000 - 900 < 1000
    assert (
        get(manager, instance_id, now_ms=1000).error_code
        == Errors.THROTTLING_QUOTA_EXCEEDED
    )
    assert get(manager, instance_id, now_ms=1900).error_code == Errors.NONE


def test_known_subscription_id_vector(landing) -> None:
    """ClientMetricsManager.computeSubscriptionId: instance VQQTF4UpT8qqtooenFFlgA,
    producer prefix, 5000 ms."""
    subs = MemorySubscriptions(subscription("p", "org.apache.kafka.producer.", 5000))
    manager = make_manager(subs, landing)
    instance_id = kafka_uuid_from_str("VQQTF4UpT8qqtooenFFlgA")
    response = get(manager, instance_id)
    assert response.subscription_id == -1262090295


def test_no_matching_subscription_sends_nothing_at_300s(landing) -> None:
    subs = MemorySubscriptions(subscription("only-x", "*", 1000, match="client_id=x"))
    manager = make_manager(subs, landing)
    response = get(manager, client_id="not-x")
    assert response.error_code == Errors.NONE
    assert list(response.requested_metrics) == []
    assert response.push_interval_ms == 300_000


# ----------------------------------------------------------------------------- Push ladder
@pytest.mark.parametrize("bad_id", [ZERO_UUID, ONE_UUID])
def test_push_with_reserved_id_is_invalid_request(manager, bad_id: uuid.UUID) -> None:
    assert push(manager, bad_id, 0, 0).error_code == Errors.INVALID_REQUEST
    assert manager.instance_count == 0  # no instance is created


def test_push_lands_with_full_context(manager, landing) -> None:
    instance_id, sub_id = handshake(manager)
    payload = otlp_payload("org.apache.kafka.producer.record.queue.time.avg")
    response = push(
        manager,
        instance_id,
        sub_id,
        500,
        metrics=zstd(payload),
        compression_type=4,
        correlation_id=42,
    )
    assert response.error_code == Errors.NONE
    (record,) = landed(landing)
    assert record.payload == payload  # decompressed before landing
    ctx: TelemetryContext = record.context
    assert ctx.client_instance_id == manager.instance(instance_id).instance_id_str
    assert ctx.client_id == "app-1"
    assert ctx.client_software_name == "confluent-kafka-python"
    assert ctx.client_software_version == "2.16.1-rdkafka-2.16.0"
    assert (ctx.client_source_address, ctx.client_source_port) == ("127.0.0.1", 50000)
    assert (ctx.listener_name, ctx.security_protocol, ctx.principal) == (
        "PLAINTEXT",
        "PLAINTEXT",
        "User:ANONYMOUS",
    )
    assert ctx.push_interval_ms == INTERVAL
    assert ctx.subscription_id == sub_id
    assert ctx.compression_type == 4
    assert ctx.correlation_id == 42
    assert (ctx.node_id, ctx.cluster_id) == (7, "test-cluster")
    assert ctx.terminating is False
    assert ctx.received_time_unix_nano > 0


def test_first_push_after_get_is_never_too_early(manager) -> None:
    instance_id, sub_id = handshake(manager, now_ms=0)
    # librdkafka jitters the first push to 0.8-1.2x the interval, Java 0.5-1.5x.
    assert push(manager, instance_id, sub_id, 1).error_code == Errors.NONE
    assert (
        push(manager, instance_id, sub_id, 500).error_code
        == Errors.THROTTLING_QUOTA_EXCEEDED
    )
    assert push(manager, instance_id, sub_id, 1001).error_code == Errors.NONE


def test_terminating_push_bypasses_the_interval_then_nothing_more(
    manager, landing
) -> None:
    instance_id, sub_id = handshake(manager, now_ms=0)
    assert push(manager, instance_id, sub_id, 10).error_code == Errors.NONE
    final = push(
        manager,
        instance_id,
        sub_id,
        20,
        terminating=True,
        metrics=otlp_payload("org.apache.kafka.producer.x"),
    )
    assert final.error_code == Errors.NONE
    assert landed(landing)[-1].context.terminating is True
    # After a terminating push: INVALID_REQUEST, even after the interval.
    assert push(manager, instance_id, sub_id, 5000).error_code == Errors.INVALID_REQUEST
    # Kafka's quirk: the rejected push stored terminating=false, so a third is processed.
    assert push(manager, instance_id, sub_id, 10_000).error_code == Errors.NONE


def test_rejected_terminating_push_still_terminates(manager) -> None:
    instance_id, sub_id = handshake(manager, now_ms=0)
    assert push(manager, instance_id, sub_id + 1, 10, terminating=True).error_code == (
        Errors.UNKNOWN_SUBSCRIPTION_ID
    )
    assert push(manager, instance_id, sub_id, 20).error_code == Errors.INVALID_REQUEST


def test_wrong_subscription_id_then_get_is_exempt_from_the_gate(manager) -> None:
    instance_id, sub_id = handshake(manager, now_ms=0)
    assert (
        push(manager, instance_id, sub_id ^ 1, 10).error_code
        == Errors.UNKNOWN_SUBSCRIPTION_ID
    )
    # The 2025 fix (#19959): the re-Get right after 117 is answered at once.
    again = get(manager, instance_id, now_ms=11)
    assert again.error_code == Errors.NONE
    assert again.subscription_id == sub_id
    # ... and the exemption is spent: lastKnownError is NONE again.
    assert (
        get(manager, instance_id, now_ms=12).error_code
        == Errors.THROTTLING_QUOTA_EXCEEDED
    )


def test_unknown_compression_type_then_get_is_exempt(manager) -> None:
    instance_id, sub_id = handshake(manager, now_ms=0)
    assert push(
        manager, instance_id, sub_id, 10, compression_type=5, metrics=b"x"
    ).error_code == (Errors.UNSUPPORTED_COMPRESSION_TYPE)
    assert get(manager, instance_id, now_ms=11).error_code == Errors.NONE


def test_throttle_comes_before_subscription_id(manager) -> None:
    instance_id, sub_id = handshake(manager, now_ms=0)
    assert push(manager, instance_id, sub_id, 10).error_code == Errors.NONE
    assert (
        push(manager, instance_id, sub_id ^ 1, 20).error_code
        == Errors.THROTTLING_QUOTA_EXCEEDED
    )


def test_a_push_rejected_after_the_gate_still_uses_the_interval(manager) -> None:
    instance_id, sub_id = handshake(manager, now_ms=0)
    assert push(manager, instance_id, sub_id, 10).error_code == Errors.NONE
    assert push(
        manager, instance_id, sub_id, 1010, compression_type=9, metrics=b"x"
    ).error_code == (Errors.UNSUPPORTED_COMPRESSION_TYPE)
    # lastPush moved to 1010 although the push was rejected (Kafka's order).
    assert (
        push(manager, instance_id, sub_id, 1500).error_code
        == Errors.THROTTLING_QUOTA_EXCEEDED
    )


def test_too_large_compressed_payload(landing, subs) -> None:
    manager = make_manager(subs, landing, telemetry_max_bytes=100)
    instance_id, sub_id = handshake(manager)
    assert push(manager, instance_id, sub_id, 10, metrics=b"\0" * 101).error_code == (
        Errors.TELEMETRY_TOO_LARGE
    )
    assert landed(landing) == []


def test_size_check_is_on_the_compressed_bytes(landing, subs) -> None:
    payload = otlp_payload(*[f"org.apache.kafka.producer.m{i}" for i in range(40)])
    compressed = zstd(payload)
    manager = make_manager(subs, landing, telemetry_max_bytes=len(payload))
    instance_id, sub_id = handshake(manager)
    assert len(compressed) < len(payload)
    response = push(
        manager, instance_id, sub_id, 10, metrics=compressed, compression_type=4
    )
    assert response.error_code == Errors.NONE


@pytest.mark.parametrize(
    ("compression_type", "metrics"),
    [
        (4, b"\x28\xb5\x2f\xfdgarbage"),
        (1, b"not gzip"),
        (3, b"not lz4"),
        (0, b"\xff\xff\xff not otlp"),
    ],
)
def test_undecodable_payload_is_invalid_record(
    manager, landing, compression_type: int, metrics: bytes
) -> None:
    instance_id, sub_id = handshake(manager)
    response = push(
        manager,
        instance_id,
        sub_id,
        10,
        metrics=metrics,
        compression_type=compression_type,
    )
    assert response.error_code == Errors.INVALID_RECORD
    assert landed(landing) == []


def test_decompression_bomb_is_telemetry_too_large_with_bounded_memory(
    landing, subs
) -> None:
    cap = 1_048_576
    manager = make_manager(subs, landing, telemetry_max_bytes=cap)
    instance_id, sub_id = handshake(manager)
    bomb = zstd(b"\0" * (256 * cap))  # 256 MiB of zeros, a few KiB compressed
    assert len(bomb) < cap
    tracemalloc.start()
    try:
        response = push(
            manager, instance_id, sub_id, 10, metrics=bomb, compression_type=4
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # KAFKA-21076: trunk answers 118, not 87, for a decompressed size over the cap.
    assert response.error_code == Errors.TELEMETRY_TOO_LARGE
    assert landed(landing) == []
    assert peak < 8 * cap, f"peak {peak} bytes while rejecting a bomb"


def test_empty_metrics_is_accepted_and_not_exported(manager, landing) -> None:
    instance_id, sub_id = handshake(manager)
    assert push(manager, instance_id, sub_id, 10, metrics=b"").error_code == Errors.NONE
    assert landed(landing) == []


class FailingExporter:
    def export(self, context: TelemetryContext, payload: bytes) -> ExportResult:
        return ExportResult.failure("disk full")

    def close(self) -> None:
        pass


def test_exporter_failure_is_invalid_record(subs) -> None:
    manager = make_manager(subs, FailingExporter())
    instance_id, sub_id = handshake(manager)
    response = push(
        manager,
        instance_id,
        sub_id,
        10,
        metrics=otlp_payload("org.apache.kafka.producer.a"),
    )
    assert response.error_code == Errors.INVALID_RECORD


# ----------------------------------------------------------------------------- subscriptions
def test_subscription_change_reaches_the_client_without_waiting(manager, subs) -> None:
    instance_id, old_id = handshake(manager, now_ms=0)
    assert push(manager, instance_id, old_id, 10).error_code == Errors.NONE
    subs.set(subscription("consumers", "org.apache.kafka.consumer.", 2000))
    # The instance is re-evaluated lazily: the old id is now unknown ...
    assert (
        push(manager, instance_id, old_id, 1100).error_code
        == Errors.UNKNOWN_SUBSCRIPTION_ID
    )
    # ... and the re-Get is answered at once with the new set.
    response = get(manager, instance_id, now_ms=1101)
    assert response.error_code == Errors.NONE
    assert list(response.requested_metrics) == ["org.apache.kafka.consumer."]
    assert response.push_interval_ms == 2000
    assert response.subscription_id != old_id
    new_id = response.subscription_id
    # Kafka's quirk, kept: the exempt Get does not stamp lastGet, and the rejected push
    # at 1100 did stamp lastPush, so the next push waits a full interval from 1100.
    assert (
        push(manager, instance_id, new_id, 1200).error_code
        == Errors.THROTTLING_QUOTA_EXCEEDED
    )
    assert push(manager, instance_id, new_id, 3100).error_code == Errors.NONE


def test_reevaluation_keeps_the_creation_metadata(landing) -> None:
    subs = MemorySubscriptions(subscription("a", "*", 1000, match="client_id=first"))
    manager = make_manager(subs, landing)
    instance_id = get(manager, client_id="first").client_instance_id
    subs.set(subscription("b", "org.x.", 1000, match="client_id=first"))
    # A later request with another client id does not change what the instance matches.
    response = get(manager, instance_id, now_ms=5, client_id="second")
    assert list(response.requested_metrics) == ["org.x."]


# ----------------------------------------------------------------------------- lifetime
def test_expiry_after_max_of_60s_and_three_intervals(manager) -> None:
    instance_id, sub_id = handshake(manager, now_ms=0)
    assert manager.expire(59_999) == 0
    push(manager, instance_id, sub_id, 30_000)  # re-arms: now deadline 90_000
    assert manager.expire(60_000) == 0
    assert manager.instance(instance_id) is not None
    assert manager.expire(90_000) == 1
    assert manager.instance(instance_id) is None
    assert manager.instance_count == 0


def test_expiry_uses_three_intervals_when_longer(landing) -> None:
    subs = MemorySubscriptions(subscription("slow", "*", 100_000))
    manager = make_manager(subs, landing)
    assert get(manager).error_code == Errors.NONE
    assert manager.expire(299_999) == 0
    assert manager.expire(300_000) == 1


def test_expiry_heap_holds_one_entry_per_instance(manager) -> None:
    instance_id, sub_id = handshake(manager, now_ms=0)
    for now in range(1000, 50_000, 1000):
        push(manager, instance_id, sub_id, now)
    assert manager.scheduled_expiries == 1


def test_connection_close_drops_the_instance_it_created(manager) -> None:
    instance_id, _ = handshake(manager)
    other = get(manager, conn=make_session(connection_id=2)).client_instance_id
    manager.connection_closed(CONN.connection_id)
    assert manager.instance(instance_id) is None
    assert manager.instance(other) is not None
    manager.connection_closed(99)  # unknown connection: nothing happens


def test_lru_eviction_at_cache_size(subs, landing) -> None:
    manager = make_manager(subs, landing, cache_max_size=2)
    first = get(manager, conn=make_session(connection_id=1)).client_instance_id
    second = get(manager, conn=make_session(connection_id=2)).client_instance_id
    get(manager, first, now_ms=2000)  # touch: second is now least recently used
    third = get(manager, conn=make_session(connection_id=3)).client_instance_id
    assert manager.instance_count == 2
    assert manager.instance(second) is None
    assert manager.instance(first) is not None and manager.instance(third) is not None
    assert manager.connection_instance(2) is None


def test_instance_recreated_after_expiry_is_new(manager) -> None:
    instance_id, sub_id = handshake(manager, now_ms=0)
    manager.expire(60_000)
    # A push for an unknown id re-creates the instance (another broker's client, or ours
    # after expiry); with the same subscriptions the id still matches.
    assert push(manager, instance_id, sub_id, 60_001).error_code == Errors.NONE
