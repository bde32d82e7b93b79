"""QuotaEngine: broker settings from a plain mapping, entity quotas from the config store's
shape, the per-request calls, the shared delay queue, connections and the metrics snapshot."""

from __future__ import annotations

import pytest

from clock.testing import FakeClock
from quota import (
    ACCEPT,
    THROTTLING_QUOTA_EXCEEDED,
    WAIT_FOR_SLOT,
    EntityQuotaChange,
    InvalidQuotaError,
    QuotaConfigError,
    QuotaEngine,
    QuotaEngineConfig,
    QuotaType,
    Reject,
    ThrottledChannelQueue,
    ThrottlingQuotaExceededError,
)
from quota.connection_quotas import INT_MAX

SECOND_MS = 1000


def make_engine(clock: FakeClock, **settings: object) -> QuotaEngine:
    return QuotaEngine.from_config(settings, clock.now_ms())


# -- broker settings --------------------------------------------------------------------------


def test_defaults_are_kafkas() -> None:
    config = QuotaEngineConfig.from_mapping({})
    assert (
        config.client.num_quota_samples,
        config.client.quota_window_size_seconds,
    ) == (11, 1)
    assert (
        config.controller.num_quota_samples,
        config.controller.quota_window_size_seconds,
    ) == (
        11,
        1,
    )
    assert config.connections.max_connections == INT_MAX
    assert config.connections.max_connections_per_ip == INT_MAX
    assert config.connections.max_connection_creation_rate == INT_MAX
    assert config.listeners == {}


def test_settings_are_read_from_kafka_keys() -> None:
    config = QuotaEngineConfig.from_mapping(
        {
            "quota.window.num": "21",
            "quota.window.size.seconds": 2,
            "controller.quota.window.num": 5,
            "max.connections": "1000",
            "max.connections.per.ip": 50,
            "max.connections.per.ip.overrides": "10.0.0.1:200, [::1]:3",
            "max.connection.creation.rate": 40,
            "listeners": "PLAINTEXT://0.0.0.0:9092,internal://127.0.0.1:9093",
            "inter.broker.listener.name": "internal",
            "listener.name.plaintext.max.connections": "300",
            "listener.name.internal.max.connection.creation.rate": 7,
            "socket.request.max.bytes": 104857600,  # not a quota key: ignored
        }
    )
    assert (
        config.client.num_quota_samples,
        config.client.quota_window_size_seconds,
    ) == (21, 2)
    assert config.controller.num_quota_samples == 5
    assert config.connections.max_connections == 1000
    assert dict(config.connections.max_connections_per_ip_overrides) == {
        "10.0.0.1": 200,
        "::1": 3,
    }
    assert config.connections.protected_listener == "INTERNAL"
    assert config.connections.quota_window_size_seconds == 2
    assert config.listeners["PLAINTEXT"].max_connections == 300
    assert config.listeners["INTERNAL"].max_connection_creation_rate == 7
    assert config.listeners["INTERNAL"].max_connections == INT_MAX


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"quota.window.num": 0}, "quota.window.num: Value must be at least 1"),
        (
            {"quota.window.size.seconds": "soon"},
            "quota.window.size.seconds: not an integer",
        ),
        ({"max.connections": True}, "max.connections: not an integer"),
        (
            {"max.connections.per.ip": -1},
            "max.connections.per.ip: Value must be at least 0",
        ),
        ({"max.connections.per.ip.overrides": "10.0.0.1"}, "is not <ip>:<count>"),
        ({"max.connections.per.ip.overrides": "host.example:3"}, "not an IP address"),
        ({"max.connections.per.ip": 0}, "every connection would be refused"),
        (
            {"listener.name.a.max.connections": 0},
            "max.connections: Value must be at least 1",
        ),
    ],
)
def test_bad_settings_name_the_key(settings: dict[str, object], message: str) -> None:
    with pytest.raises(QuotaConfigError, match=message.replace("[", r"\[")):
        QuotaEngineConfig.from_mapping(settings)


# -- entity quotas ----------------------------------------------------------------------------


def test_apply_entity_quotas_from_the_store_shape(clock: FakeClock) -> None:
    engine = make_engine(clock)
    changes = engine.apply_entity_quotas(
        {
            "users/alice": {"producer_byte_rate": 1024, "request_percentage": 25.5},
            "clients/<default>": {"consumer_byte_rate": 2048},
            "users/<default>/clients/<default>": {"controller_mutation_rate": 5},
            "ips/10.0.0.7": {"connection_creation_rate": 3},
        }
    )
    assert len(changes) == 5
    assert engine.produce.quota("alice", "any").bound == 1024
    assert engine.request.quota("alice", "any").bound == 25.5
    assert engine.fetch.quota("bob", "app").bound == 2048
    assert engine.controller_mutation.quota("bob", "app").bound == 5
    assert engine.connections.connection_rate_for_ip("10.0.0.7") == 3
    assert engine.entity_quotas()["users/alice"] == {
        "producer_byte_rate": 1024,
        "request_percentage": 25.5,
    }


def test_apply_entity_quotas_is_the_complete_desired_state(clock: FakeClock) -> None:
    engine = make_engine(clock)
    engine.apply_entity_quotas(
        {
            "users/alice": {"producer_byte_rate": 1024, "request_percentage": 25},
            "ips/<default>": {"connection_creation_rate": 10},
        }
    )
    changes = engine.apply_entity_quotas(
        {
            "users/alice": {
                "producer_byte_rate": 4096
            },  # changed; request_percentage dropped
            "clients/app": {"producer_byte_rate": 10},  # new
        }
    )
    assert set(changes) == {
        EntityQuotaChange("users/alice", "request_percentage", None),
        EntityQuotaChange("ips/<default>", "connection_creation_rate", None),
        EntityQuotaChange("users/alice", "producer_byte_rate", 4096),
        EntityQuotaChange("clients/app", "producer_byte_rate", 10),
    }
    assert not engine.request.quotas_enabled
    assert engine.connections.connection_rate_for_ip("10.9.9.9") == INT_MAX
    assert engine.apply_entity_quotas(engine.entity_quotas()) == []  # idempotent


@pytest.mark.parametrize(
    ("entity_quotas", "message"),
    [
        (
            {"users/alice": {"bytes_per_fortnight": 1}},
            "Invalid configuration key bytes_per_fortnight",
        ),
        (
            {"users/alice": {"connection_creation_rate": 1}},
            "Invalid configuration key connection_creation_rate",
        ),
        (
            {"ips/10.0.0.1": {"producer_byte_rate": 1}},
            "Invalid configuration key producer_byte_rate",
        ),
        (
            {"users/alice": {"producer_byte_rate": 0}},
            "Quota producer_byte_rate must be greater than 0",
        ),
        (
            {"users/alice": {"producer_byte_rate": 1.5}},
            "producer_byte_rate cannot be a fractional value",
        ),
        ({"ips/10.0.0.1": {"connection_creation_rate": 2**31}}, "too large for an INT"),
        ({"users/alice": {"request_percentage": "lots"}}, "must be a number"),
        ({"groups/g": {"producer_byte_rate": 1}}, "Unhandled client quota entity type"),
        ({"users/alice": {}, "/config/users/alice": {}}, "duplicate entity"),
    ],
)
def test_invalid_entity_quotas_change_nothing(
    clock: FakeClock, entity_quotas: dict[str, dict[str, object]], message: str
) -> None:
    engine = make_engine(clock)
    engine.apply_entity_quotas({"clients/app": {"producer_byte_rate": 100}})
    before = engine.entity_quotas()
    with pytest.raises(InvalidQuotaError, match=message) as error:
        engine.apply_entity_quotas(
            {"users/bob": {"producer_byte_rate": 5}, **entity_quotas}
        )
    assert error.value.error_code == 42  # INVALID_REQUEST, as AlterClientQuotas answers
    assert engine.entity_quotas() == before
    assert engine.produce.quota("bob", "x").bound != 5


def test_alter_entity_quota_one_key_at_a_time(clock: FakeClock) -> None:
    engine = make_engine(clock)
    engine.alter_entity_quota(
        {"user": "alice", "client-id": None}, "producer_byte_rate", 100
    )
    assert engine.entity_quotas() == {
        "users/alice/clients/<default>": {"producer_byte_rate": 100}
    }
    assert engine.produce.quota("alice", "x").bound == 100
    engine.alter_entity_quota(
        "users/alice/clients/<default>", "producer_byte_rate", None
    )
    assert engine.entity_quotas() == {}
    assert not engine.produce.quotas_enabled


# -- per request ------------------------------------------------------------------------------


def test_produce_bytes_throttle_and_the_shared_delay_queue(clock: FakeClock) -> None:
    engine = make_engine(clock)
    assert (
        engine.record_produce_bytes("alice", "app", 10**9, clock.now_ms()) == 0
    )  # no quota
    engine.apply_entity_quotas({"clients/app": {"producer_byte_rate": 1000}})
    throttle_ms = engine.record_produce_bytes("alice", "app", 20_000, clock.now_ms())
    # 20 000 B over the padded 10 s window: 2000 B/s, X = (2000 - 1000) / 1000 · 10 s
    assert throttle_ms == 10_000
    channel = "connection-1"
    engine.throttle(
        channel, "alice", "app", throttle_ms, clock.now_ms(), QuotaType.PRODUCE
    )
    engine.throttle("connection-2", "alice", "app", 300, clock.now_ms())
    assert engine.next_deadline_ms() == clock.now_ms() + 300
    clock.advance(300)
    assert [entry.channel for entry in engine.pop_expired(clock.now_ms())] == [
        "connection-2"
    ]
    clock.advance(throttle_ms - 300)
    assert [entry.channel for entry in engine.pop_expired(clock.now_ms())] == [channel]
    assert engine.next_deadline_ms() is None


def test_fetch_bytes_unrecord_and_max_fetch(clock: FakeClock) -> None:
    engine = make_engine(clock)
    assert engine.max_fetch_bytes("u", "c", clock.now_ms()) == float("inf")
    engine.apply_entity_quotas({"users/u": {"consumer_byte_rate": 100}})
    assert engine.max_fetch_bytes("u", "c", clock.now_ms()) == 100 * 10 * 1
    assert engine.record_fetch_bytes("u", "c", 5000, clock.now_ms()) > 0
    engine.unrecord_fetch_bytes("u", "c", 5000, clock.now_ms())
    assert engine.record_fetch_bytes("u", "c", 0, clock.now_ms()) == 0


def test_request_time_throttle_is_capped_at_one_window(clock: FakeClock) -> None:
    engine = make_engine(clock, **{"quota.window.size.seconds": 2})
    engine.apply_entity_quotas({"clients/<default>": {"request_percentage": 1}})
    one_second_ns = 1_000_000_000
    assert (
        engine.record_request("u", "c", one_second_ns, clock.now_ms()) == 2 * SECOND_MS
    )
    engine.record_network_time("u", "c", one_second_ns, clock.now_ms())
    engine.record_exempt_request(one_second_ns, clock.now_ms())


def test_strict_mutation_quota_carries_error_code_89(clock: FakeClock) -> None:
    engine = make_engine(clock)
    engine.apply_entity_quotas({"users/admin": {"controller_mutation_rate": 5}})
    burst = 11 * 1 * 5  # controller.quota.window.num × window s × rate = 55 tokens
    quota = engine.mutation_quota("admin", "cli", strict=True, now_ms=clock.now_ms())
    quota.record(560, clock.now_ms())  # the bucket wasn't negative: accepted
    with pytest.raises(ThrottlingQuotaExceededError) as rejected:
        quota.record(1, clock.now_ms())
    assert rejected.value.error_code == THROTTLING_QUOTA_EXCEEDED
    assert rejected.value.throttle_time_ms == (560 - burst) * 1000 // 5
    permissive = engine.mutation_quota(
        "admin", "cli", strict=False, now_ms=clock.now_ms()
    )
    permissive.record(1, clock.now_ms())
    assert permissive.throttle_time_ms(clock.now_ms()) == (560 + 1 - burst) * 1000 // 5


def test_listeners_can_be_added_later(clock: FakeClock) -> None:
    engine = make_engine(clock)
    with pytest.raises(KeyError, match="unknown listener"):
        engine.on_accept("SSL", "10.0.0.1", clock.now_ms())
    engine.add_listener("ssl", clock.now_ms(), max_connections=1)
    assert engine.on_accept("SSL", "10.0.0.1", clock.now_ms()) == ACCEPT
    assert engine.on_accept("SSL", "10.0.0.2", clock.now_ms()) == WAIT_FOR_SLOT


def test_connections_through_the_engine(clock: FakeClock) -> None:
    engine = make_engine(
        clock,
        listeners="PLAINTEXT://:9092",
        **{"max.connections": 1, "max.connections.per.ip": 5},
    )
    assert engine.on_accept("plaintext", "127.0.0.1", clock.now_ms()) == ACCEPT
    assert engine.on_accept("PLAINTEXT", "127.0.0.1", clock.now_ms()) == WAIT_FOR_SLOT
    engine.on_close("PLAINTEXT", "127.0.0.1")
    assert engine.on_accept("PLAINTEXT", "127.0.0.1", clock.now_ms()) == ACCEPT
    engine.on_close("PLAINTEXT", "127.0.0.1")
    # 1 connection/s from this IP: over the padded 10 s window that is 10 at once, then no.
    engine.apply_entity_quotas({"ips/127.0.0.1": {"connection_creation_rate": 1}})
    padded_window_s = 10
    for _ in range(padded_window_s):
        assert engine.on_accept("PLAINTEXT", "127.0.0.1", clock.now_ms()) == ACCEPT
        engine.on_close("PLAINTEXT", "127.0.0.1")
    refused = engine.on_accept("PLAINTEXT", "127.0.0.1", clock.now_ms())
    assert isinstance(refused, Reject) and refused.close_delay_ms == SECOND_MS


# -- observability and housekeeping -----------------------------------------------------------


def test_metrics_snapshot_has_entity_level_labels(clock: FakeClock) -> None:
    engine = make_engine(clock, listeners="PLAINTEXT://:9092")
    engine.apply_entity_quotas({"users/alice": {"producer_byte_rate": 1000}})
    engine.record_produce_bytes(
        "alice", "instance-specific-client-id", 5000, clock.now_ms()
    )
    values = {
        (v.name.group, v.name.name, v.name.tags): v.value
        for v in engine.metrics_snapshot(clock.now_ms())
    }
    # a user-level quota: every client of alice shares the sensor, whatever its client-id
    assert (
        values[("Produce", "byte-rate", (("user", "alice"), ("client-id", "")))] == 500
    )
    assert (
        "socket-server-metrics",
        "connection-accept-rate",
        (("listener", "PLAINTEXT"),),
    ) in values
    assert values[("Produce", "queue-size", ())] == 0
    tag_keys = {key for (_g, _n, tags) in values for key, _ in tags}
    assert tag_keys <= {"user", "client-id", "listener", "ip"}


def test_expire_inactive_sensors_after_an_hour(clock: FakeClock) -> None:
    engine = make_engine(clock)
    engine.apply_entity_quotas({"clients/<default>": {"producer_byte_rate": 1000}})
    engine.record_produce_bytes("u", "c", 1, clock.now_ms())
    clock.advance(3600 * SECOND_MS + 1)
    assert sorted(engine.expire_inactive_sensors(clock.now_ms())) == [
        "Produce-:c",
        "ProduceThrottleTime-:c",
    ]


# -- the delay queue --------------------------------------------------------------------------


def test_delay_queue_orders_by_deadline_then_insertion(clock: FakeClock) -> None:
    queue: ThrottledChannelQueue[str] = ThrottledChannelQueue()
    now = clock.now_ms()
    queue.add("late", 500, now, "Produce")
    queue.add("first", 100, now, "Request")
    queue.add("second", 100, now, "Request")
    assert queue.next_deadline_ms() == now + 100
    assert (queue.size(), queue.size("Request"), queue.size("Produce")) == (3, 2, 1)
    assert [e.channel for e in queue.pop_expired(now + 99)] == []
    assert [e.channel for e in queue.pop_expired(now + 100)] == ["first", "second"]
    assert queue.size("Request") == 0
    assert [e.channel for e in queue.pop_expired(now + 10_000)] == ["late"]
    assert queue.next_deadline_ms() is None
    with pytest.raises(ValueError, match="must not be negative"):
        queue.add("bad", -1, now)


# -- Prometheus rendering ---------------------------------------------------------------------


def test_prometheus_collector_renders_kafka_style_series(clock: FakeClock) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from quota.prometheus import QuotaMetricsCollector, prometheus_name

    engine = make_engine(clock, listeners="PLAINTEXT://:9092")
    engine.apply_entity_quotas({"users/alice": {"producer_byte_rate": 1000}})
    engine.record_produce_bytes("alice", "app", 5000, clock.now_ms())
    engine.apply_entity_quotas(
        {
            "users/alice": {"producer_byte_rate": 1000},
            "ips/<default>": {"connection_creation_rate": 50},
        }
    )
    engine.on_accept("PLAINTEXT", "10.0.0.1", clock.now_ms())
    registry = CollectorRegistry()
    registry.register(QuotaMetricsCollector(engine.metrics_snapshot, clock.now_ms))
    text = generate_latest(registry).decode()
    assert prometheus_name("Produce", "byte-rate") == "kafka_server_produce_byte_rate"
    assert 'kafka_server_produce_byte_rate{client_id="",user="alice"} 500.0' in text
    rate = "kafka_server_socket_server_metrics_connection_accept_rate"
    assert f'{rate}{{ip="",listener="PLAINTEXT"}} 0.1' in text
    assert f'{rate}{{ip="10.0.0.1",listener=""}} 0.1' in text
    assert "kafka_server_produce_queue_size 0.0" in text
