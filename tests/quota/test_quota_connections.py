"""ConnectionQuotas: Kafka's ConnectionQuotasTest made deterministic (a manual clock instead
of blocked acceptor threads): count limits, per-IP overrides, broker/listener/IP creation
rates, the protected listener, and un-recording rejected connections."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from clock.testing import FakeClock
from quota import (
    ACCEPT,
    WAIT_FOR_SLOT,
    ConnectionQuotaConfig,
    ConnectionQuotas,
    Delay,
    MetricName,
    Metrics,
    QuotaConfigError,
    Reject,
    RejectReason,
)
from quota.connection_quotas import METRICS_GROUP

EXTERNAL, ADMIN, REPLICATION = "EXTERNAL", "ADMIN", "REPLICATION"
LISTENER_IPS = {
    EXTERNAL: "192.168.1.1",
    ADMIN: "192.168.1.2",
    REPLICATION: "192.168.1.3",
}
KNOWN_HOST, UNKNOWN_HOST = "192.168.10.0", "192.168.2.0"
# ConnectionQuotasTest's broker: 2 samples of 1 s, REPLICATION is the inter-broker listener.
NUM_QUOTA_SAMPLES, WINDOW_S = 2, 1


def make_quotas(
    metrics: Metrics, clock: FakeClock, **limits: object
) -> ConnectionQuotas:
    config = ConnectionQuotaConfig(
        protected_listener=REPLICATION,
        num_quota_samples=NUM_QUOTA_SAMPLES,
        quota_window_size_seconds=WINDOW_S,
        **limits,  # type: ignore[arg-type]
    )
    quotas = ConnectionQuotas(config, metrics, clock.now_ms())
    for listener in LISTENER_IPS:
        quotas.add_listener(listener, clock.now_ms())
    return quotas


def accept(
    quotas: ConnectionQuotas,
    clock: FakeClock,
    listener: str,
    count: int,
    ip: str | None = None,
) -> None:
    """``count`` connections that must each be accepted immediately."""
    for _ in range(count):
        assert (
            quotas.inc(listener, ip or LISTENER_IPS[listener], clock.now_ms()) == ACCEPT
        )


@dataclass
class Outcome:
    accepted: int = 0
    ip_rejected: int = 0
    delayed_ms: int = 0


def accept_at_interval(
    quotas: ConnectionQuotas,
    clock: FakeClock,
    listener: str,
    count: int,
    interval_ms: int,
    ip: str | None = None,
) -> Outcome:
    """Offer ``count`` connections ``interval_ms`` apart, as a blocked acceptor would: a Delay
    holds the listener (the clock moves on) and the same connection is retried."""
    outcome = Outcome()
    address = ip or LISTENER_IPS[listener]
    for _ in range(count):
        while True:
            decision = quotas.inc(listener, address, clock.now_ms())
            if isinstance(decision, Delay):
                outcome.delayed_ms += decision.delay_ms
                clock.advance(decision.delay_ms)
                continue
            break
        if decision == ACCEPT:
            outcome.accepted += 1
        else:
            assert isinstance(decision, Reject), decision
            assert decision.reason is RejectReason.IP_CONNECTION_RATE_EXCEEDED
            outcome.ip_rejected += 1
        clock.advance(interval_ms)
    return outcome


def metric_value(
    metrics: Metrics, clock: FakeClock, name: str, *tags: tuple[str, str]
) -> float:
    metric = metrics.metric(MetricName(name, METRICS_GROUP, tuple(tags)))
    assert metric is not None, name
    return metric.measurable_value(clock.now_ms())


# -- counts -----------------------------------------------------------------------------------


def test_fail_when_no_listeners(metrics: Metrics, clock: FakeClock) -> None:
    quotas = ConnectionQuotas(ConnectionQuotaConfig(), metrics, clock.now_ms())
    with pytest.raises(KeyError, match="unknown listener"):
        quotas.inc(EXTERNAL, LISTENER_IPS[EXTERNAL], clock.now_ms())


def test_fail_decrement_for_unknown_ip(metrics: Metrics, clock: FakeClock) -> None:
    quotas = make_quotas(metrics, clock)
    with pytest.raises(ValueError, match="no connections"):
        quotas.dec(EXTERNAL, UNKNOWN_HOST)


def test_no_connection_limits_by_default(metrics: Metrics, clock: FakeClock) -> None:
    quotas = make_quotas(metrics, clock)
    connections_per_listener = 10_000
    for listener in LISTENER_IPS:
        accept(quotas, clock, listener, connections_per_listener)
    for listener, ip in LISTENER_IPS.items():
        assert quotas.get(ip) == connections_per_listener
        assert quotas.listener_count(listener) == connections_per_listener


def test_max_connections_per_ip(metrics: Metrics, clock: FakeClock) -> None:
    max_per_ip = 17
    quotas = make_quotas(metrics, clock, max_connections_per_ip=max_per_ip)
    ip = LISTENER_IPS[EXTERNAL]
    accept(quotas, clock, EXTERNAL, max_per_ip)
    assert quotas.get(ip) == max_per_ip
    for _ in range(2):
        assert quotas.inc(EXTERNAL, ip, clock.now_ms()) == Reject(
            RejectReason.TOO_MANY_CONNECTIONS_PER_IP, 0, max_per_ip
        )
    # Kafka counts the refused connection and its acceptor decrements it on close; the
    # decision already did both halves.
    assert quotas.get(ip) == max_per_ip
    accept(
        quotas, clock, EXTERNAL, max_per_ip, ip=KNOWN_HOST
    )  # another IP is unaffected
    for _ in range(2):
        quotas.dec(EXTERNAL, ip)
    accept(quotas, clock, EXTERNAL, 2)
    assert quotas.get(ip) == max_per_ip


def test_max_connections_per_ip_overrides(metrics: Metrics, clock: FakeClock) -> None:
    quotas = make_quotas(
        metrics,
        clock,
        max_connections_per_ip=2,
        max_connections_per_ip_overrides={KNOWN_HOST: 5, "0:0:0:0:0:0:0:1": 0},
    )
    accept(quotas, clock, EXTERNAL, 5, ip=KNOWN_HOST)
    assert isinstance(quotas.inc(EXTERNAL, KNOWN_HOST, clock.now_ms()), Reject)
    accept(quotas, clock, EXTERNAL, 2, ip=UNKNOWN_HOST)
    assert isinstance(quotas.inc(EXTERNAL, UNKNOWN_HOST, clock.now_ms()), Reject)
    assert isinstance(
        quotas.inc(EXTERNAL, "::1", clock.now_ms()), Reject
    )  # same address
    quotas.update_max_connections_per_ip_overrides({})
    assert isinstance(quotas.inc(EXTERNAL, KNOWN_HOST, clock.now_ms()), Reject)  # now 2


def test_overrides_must_be_ip_addresses() -> None:
    with pytest.raises(QuotaConfigError, match="not an IP address"):
        ConnectionQuotas(
            ConnectionQuotaConfig(
                max_connections_per_ip_overrides={"broker.example.com": 3}
            ),
            Metrics(),
            0,
        )


def test_max_broker_wide_connection_limit(metrics: Metrics, clock: FakeClock) -> None:
    max_connections = 800
    quotas = make_quotas(metrics, clock, max_connections=max_connections)
    accept(
        quotas, clock, EXTERNAL, max_connections
    )  # all of them may go to one listener
    assert not quotas.max_connections_exceeded(EXTERNAL)  # exactly at the maximum

    now = clock.now_ms()
    assert (
        quotas.inc(EXTERNAL, LISTENER_IPS[EXTERNAL], now) == WAIT_FOR_SLOT
    )  # acceptor holds
    assert (
        quotas.inc(EXTERNAL, LISTENER_IPS[EXTERNAL], now) == WAIT_FOR_SLOT
    )  # still no slot
    quotas.dec(EXTERNAL, LISTENER_IPS[EXTERNAL])
    assert (
        quotas.inc(EXTERNAL, LISTENER_IPS[EXTERNAL], now) == ACCEPT
    )  # the held one goes in
    assert quotas.total_count == max_connections

    # The inter-broker listener ignores the broker-wide limit.
    accept(quotas, clock, REPLICATION, 1)
    assert quotas.max_connections_exceeded(EXTERNAL)
    assert not quotas.max_connections_exceeded(REPLICATION)
    assert quotas.inc(ADMIN, LISTENER_IPS[ADMIN], now) == WAIT_FOR_SLOT
    accept(quotas, clock, REPLICATION, 1)  # even while another listener waits

    # 802 open: three must close before the waiting ADMIN connection fits under 800.
    for _ in range(2):
        quotas.dec(EXTERNAL, LISTENER_IPS[EXTERNAL])
    assert quotas.inc(ADMIN, LISTENER_IPS[ADMIN], now) == WAIT_FOR_SLOT
    quotas.dec(EXTERNAL, LISTENER_IPS[EXTERNAL])
    assert quotas.inc(ADMIN, LISTENER_IPS[ADMIN], now) == ACCEPT


def test_max_listener_connection_limits(metrics: Metrics, clock: FakeClock) -> None:
    listener_max = 200  # three listeners: 600, under the broker-wide 800
    quotas = make_quotas(metrics, clock, max_connections=800)
    for listener in LISTENER_IPS:
        quotas.reconfigure_listener(listener, max_connections=listener_max)
        accept(quotas, clock, listener, listener_max)
        assert not quotas.max_connections_exceeded(listener)
    now = clock.now_ms()
    for (
        listener,
        ip,
    ) in LISTENER_IPS.items():  # every listener blocks, the protected one too
        assert quotas.inc(listener, ip, now) == WAIT_FOR_SLOT
    for listener, ip in LISTENER_IPS.items():
        quotas.dec(listener, ip)
        assert quotas.inc(listener, ip, now) == ACCEPT
        assert quotas.listener_count(listener) == listener_max


@pytest.mark.parametrize(
    ("max_connections", "rate"),
    [(0, 10), (10, 0), (-1, 10)],
    ids=["connections", "rate", "negative"],
)
def test_listener_limits_must_be_above_zero(
    metrics: Metrics, clock: FakeClock, max_connections: int, rate: int
) -> None:
    quotas = make_quotas(metrics, clock)
    with pytest.raises(QuotaConfigError, match=r"Invalid listener\.name\.EXTERNAL"):
        quotas.reconfigure_listener(EXTERNAL, max_connections, rate)


def test_a_protected_listener_needs_other_listeners(
    metrics: Metrics, clock: FakeClock
) -> None:
    config = ConnectionQuotaConfig(max_connections=1, protected_listener=REPLICATION)
    quotas = ConnectionQuotas(config, metrics, clock.now_ms())
    quotas.add_listener(REPLICATION, clock.now_ms())
    accept(quotas, clock, REPLICATION, 1)
    assert (
        quotas.inc(REPLICATION, LISTENER_IPS[REPLICATION], clock.now_ms())
        == WAIT_FOR_SLOT
    )


# -- creation rates ---------------------------------------------------------------------------


def test_broker_connection_rate_when_below_the_limit(
    metrics: Metrics, clock: FakeClock
) -> None:
    broker_rate = 125
    quotas = make_quotas(metrics, clock, max_connection_creation_rate=broker_rate)
    outcome = accept_at_interval(quotas, clock, EXTERNAL, 200, interval_ms=25)  # 40/s
    assert outcome == Outcome(accepted=200, delayed_ms=0)


def test_broker_connection_rate_when_above_the_limit(
    metrics: Metrics, clock: FakeClock
) -> None:
    broker_rate = 90
    quotas = make_quotas(metrics, clock, max_connection_creation_rate=broker_rate)
    start_ms = clock.now_ms()
    connections = 400
    outcome = accept_at_interval(
        quotas, clock, EXTERNAL, connections, interval_ms=10
    )  # 100/s offered
    assert outcome.accepted == connections and outcome.delayed_ms > 0
    actual_rate = connections / ((clock.now_ms() - start_ms) / 1000)
    assert actual_rate == pytest.approx(broker_rate, rel=0.1)
    throttle = metric_value(
        metrics, clock, "connection-accept-throttle-time", ("listener", EXTERNAL)
    )
    assert 0 < throttle <= WINDOW_S * 1000  # delays are capped at one quota window


def test_listener_connection_rate_when_above_the_limit(
    metrics: Metrics, clock: FakeClock
) -> None:
    listener_rate = 30
    quotas = make_quotas(metrics, clock, max_connection_creation_rate=125)
    quotas.reconfigure_listener(EXTERNAL, max_connection_creation_rate=listener_rate)
    start_ms = clock.now_ms()
    connections = 600
    outcome = accept_at_interval(
        quotas, clock, EXTERNAL, connections, interval_ms=25
    )  # 40/s offered
    actual_rate = outcome.accepted / ((clock.now_ms() - start_ms) / 1000)
    assert actual_rate == pytest.approx(listener_rate, rel=0.1)
    # the other listeners are not slowed by EXTERNAL's limit
    assert accept_at_interval(quotas, clock, ADMIN, 40, interval_ms=25).delayed_ms == 0


def test_a_delayed_connection_is_recorded_once(
    metrics: Metrics, clock: FakeClock
) -> None:
    quotas = make_quotas(metrics, clock, max_connection_creation_rate=1)
    first = quotas.inc(EXTERNAL, LISTENER_IPS[EXTERNAL], clock.now_ms())
    assert first == ACCEPT  # 1 connection over the padded 1 s window: exactly the limit
    held = quotas.inc(EXTERNAL, LISTENER_IPS[EXTERNAL], clock.now_ms())
    assert (
        isinstance(held, Delay) and held.delay_ms == WINDOW_S * 1000
    )  # 2/s -> capped at 1 s
    clock.advance(held.delay_ms // 2)
    assert quotas.inc(EXTERNAL, LISTENER_IPS[EXTERNAL], clock.now_ms()) == Delay(
        held.delay_ms // 2
    )
    clock.advance(held.delay_ms // 2)
    assert quotas.inc(EXTERNAL, LISTENER_IPS[EXTERNAL], clock.now_ms()) == ACCEPT
    # two connections recorded in the broker rate, not one per retry
    assert metric_value(
        metrics, clock, "broker-connection-accept-rate"
    ) == pytest.approx(2 / 1.0)


def test_protected_listener_skips_the_broker_rate(
    metrics: Metrics, clock: FakeClock
) -> None:
    quotas = make_quotas(metrics, clock, max_connection_creation_rate=1)
    accept(quotas, clock, REPLICATION, 50)
    assert metric_value(metrics, clock, "broker-connection-accept-rate") == 0


def test_ip_connection_rate_when_below_the_limit(
    metrics: Metrics, clock: FakeClock
) -> None:
    quotas = make_quotas(metrics, clock)
    quotas.update_ip_connection_rate_quota(LISTENER_IPS[EXTERNAL], 30)
    start_ms = clock.now_ms()
    outcome = accept_at_interval(quotas, clock, EXTERNAL, 200, interval_ms=40)  # 25/s
    assert outcome == Outcome(accepted=200)
    assert outcome.accepted / ((clock.now_ms() - start_ms) / 1000) == 25
    # an IP without a quota is not limited at all
    assert accept_at_interval(quotas, clock, ADMIN, 200, interval_ms=20) == Outcome(
        accepted=200
    )
    assert quotas.connection_rate_for_ip(LISTENER_IPS[ADMIN]) == 2**31 - 1


def test_ip_connection_rate_when_above_the_limit(
    metrics: Metrics, clock: FakeClock
) -> None:
    ip_rate = 20
    quotas = make_quotas(metrics, clock)
    quotas.update_ip_connection_rate_quota(LISTENER_IPS[EXTERNAL], ip_rate)
    connections, interval_ms = 80, 25  # 40/s offered for 2 s
    start_ms = clock.now_ms()
    outcome = accept_at_interval(quotas, clock, EXTERNAL, connections, interval_ms)
    elapsed_s = (clock.now_ms() - start_ms) / 1000
    assert outcome.delayed_ms == 0  # IP limits never block the acceptor
    assert outcome.ip_rejected > 0
    assert outcome.accepted / elapsed_s == pytest.approx(ip_rate, abs=1)
    assert (
        metric_value(
            metrics, clock, "ip-connection-accept-throttle-time", ("listener", EXTERNAL)
        )
        > 0
    )

    # the default IP quota applies to IPs without their own
    quotas.update_ip_connection_rate_quota(None, ip_rate)
    start_ms = clock.now_ms()
    outcome = accept_at_interval(quotas, clock, ADMIN, connections, interval_ms)
    assert outcome.accepted / ((clock.now_ms() - start_ms) / 1000) == pytest.approx(
        ip_rate, abs=1
    )
    # nothing was refused on the replication listener: no IP throttle time there at all
    assert math.isnan(
        metric_value(
            metrics,
            clock,
            "ip-connection-accept-throttle-time",
            ("listener", REPLICATION),
        )
    )


def test_ip_rejection_closes_after_the_throttle_time(
    metrics: Metrics, clock: FakeClock
) -> None:
    quotas = make_quotas(metrics, clock)
    quotas.update_ip_connection_rate_quota(KNOWN_HOST, 1)
    assert quotas.inc(EXTERNAL, KNOWN_HOST, clock.now_ms()) == ACCEPT
    rejected = quotas.inc(EXTERNAL, KNOWN_HOST, clock.now_ms())
    assert isinstance(rejected, Reject)
    assert rejected.reason is RejectReason.IP_CONNECTION_RATE_EXCEEDED
    assert rejected.close_delay_ms == WINDOW_S * 1000 and rejected.limit == 1
    assert quotas.get(KNOWN_HOST) == 1  # the refused one never counted


@pytest.mark.parametrize("listener", [EXTERNAL, REPLICATION])
def test_rejected_ip_connection_is_unrecorded_from_every_rate(
    metrics: Metrics, clock: FakeClock, listener: str
) -> None:
    quotas = make_quotas(metrics, clock)
    ip = LISTENER_IPS[listener]
    quotas.update_ip_connection_rate_quota(ip, 0)
    assert isinstance(quotas.inc(listener, ip, clock.now_ms()), Reject)
    assert metric_value(metrics, clock, "connection-accept-rate", ("ip", ip)) == 0
    assert (
        metric_value(metrics, clock, "connection-accept-rate", ("listener", listener))
        == 0
    )
    assert metric_value(metrics, clock, "broker-connection-accept-rate") == 0


def test_ip_quota_updates_reach_existing_sensors(
    metrics: Metrics, clock: FakeClock
) -> None:
    quotas = make_quotas(metrics, clock)
    quotas.update_ip_connection_rate_quota(None, 5)
    accept(quotas, clock, EXTERNAL, 1, ip=KNOWN_HOST)
    sensor_metric = metrics.metric(
        MetricName("connection-accept-rate", METRICS_GROUP, (("ip", KNOWN_HOST),))
    )
    assert sensor_metric is not None and sensor_metric.config.quota is not None
    assert sensor_metric.config.quota.bound == 5
    quotas.update_ip_connection_rate_quota(None, 50)
    assert sensor_metric.config.quota.bound == 50
    quotas.update_ip_connection_rate_quota(KNOWN_HOST, 7)
    assert sensor_metric.config.quota.bound == 7
    quotas.update_ip_connection_rate_quota(KNOWN_HOST, None)  # back to the default
    assert sensor_metric.config.quota.bound == 50


def test_remove_listener_drops_its_sensors(metrics: Metrics, clock: FakeClock) -> None:
    quotas = make_quotas(metrics, clock)
    quotas.remove_listener(ADMIN)
    assert metrics.get_sensor(f"Connection-Accept-Rate-{ADMIN}") is None
    with pytest.raises(KeyError):
        quotas.inc(ADMIN, LISTENER_IPS[ADMIN], clock.now_ms())
