"""``ConnectionQuotas``: connection-count and connection-creation-rate limits at accept time.

Follows ``ConnectionQuotas`` in core ``kafka/network/SocketServer.scala`` and
``server/.../network/ConnectionQuotaEntity.java`` (KIP-308, KIP-402, KIP-612), sans I/O.

Limits, and what hitting them does:

    limit                                         scope       on hitting it
    max.connections                               broker      hold the accept until a slot frees
    listener.name.X.max.connections               listener X  hold the accept until a slot frees
    max.connection.creation.rate                  broker      hold the accept for the throttle
    listener.name.X.max.connection.creation.rate  listener X  hold the accept for the throttle
    connection_creation_rate (ips/<ip> entity)    one IP      reject, close after the throttle
    max.connections.per.ip (+ .overrides)         one IP      reject, close now

Broker- and listener-wide limits *block the acceptor* (back-pressure on everyone arriving
at that listener); per-IP limits only turn that IP away.  Throttle times are capped at one
quota window.  When several listeners exist, the inter-broker listener is *protected*: it
ignores the broker-wide count and rate, so replication survives a client connection storm
(its own listener limits still apply).

A connection rejected by its IP's rate is taken back out of the IP, listener and broker
rate sensors, so a flood of refused connections doesn't throttle everyone else.

Driving it (Kafka runs one blocking acceptor thread per listener; do the same per listener):

    decision = quotas.inc(listener, ip, now_ms)
    Accept        -> serve the connection; call dec(listener, ip) when it closes
    Delay(ms)     -> accept nothing more on this listener for ms, then call inc again with
                     the same connection (its rate was recorded once, and is not re-recorded)
    WaitForSlot   -> accept nothing more on this listener until a dec() or a raised limit,
                     then call inc again (``slot_available(listener)`` tells when)
    Reject(...)   -> close the socket after ``close_delay_ms``; counts are already undone,
                     don't call dec
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from quota.entity import canonical_ip
from quota.errors import QuotaConfigError, QuotaViolationError
from quota.metric import MetricName
from quota.metric_config import MetricConfig, Quota
from quota.metrics import Metrics
from quota.rate import Rate
from quota.sampled_stat import Avg
from quota.sensor import Sensor
from quota.throttle import bounded_throttle_time_ms

__all__ = [
    "ACCEPT",
    "INT_MAX",
    "WAIT_FOR_SLOT",
    "Accept",
    "ConnectionDecision",
    "ConnectionQuotaConfig",
    "ConnectionQuotas",
    "Delay",
    "Reject",
    "RejectReason",
    "WaitForSlot",
]

# Java Integer.MAX_VALUE: "no limit" for every connection setting.
INT_MAX: Final = 2**31 - 1
METRICS_GROUP: Final = "socket-server-metrics"
CONNECTION_RATE_SENSOR_NAME: Final = "Connection-Accept-Rate"
CONNECTION_RATE_METRIC_NAME: Final = "connection-accept-rate"
IP_SENSOR_EXPIRATION_MS: Final = 3600 * 1000


@dataclass(frozen=True, slots=True)
class Accept:
    pass


@dataclass(frozen=True, slots=True)
class Delay:
    """Hold this listener's acceptor ``delay_ms``, then retry the same connection."""

    delay_ms: int


@dataclass(frozen=True, slots=True)
class WaitForSlot:
    """No connection slot on the broker or listener: retry after a close or a limit change."""


class RejectReason(enum.Enum):
    TOO_MANY_CONNECTIONS_PER_IP = (
        "the address already has the configured maximum of connections"
    )
    IP_CONNECTION_RATE_EXCEEDED = "the address exceeded its connection creation rate"


@dataclass(frozen=True, slots=True)
class Reject:
    """Refuse the connection: close it after ``close_delay_ms`` (the IP throttle time)."""

    reason: RejectReason
    close_delay_ms: int = 0
    limit: int = 0  # the count limit or rate quota that was hit


ACCEPT: Final = Accept()
WAIT_FOR_SLOT: Final = WaitForSlot()
ConnectionDecision = Accept | Delay | WaitForSlot | Reject


@dataclass(frozen=True, slots=True)
class ConnectionQuotaConfig:
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    # IP address -> its own max.connections.per.ip ("ip:count,ip:count" in Kafka's config).
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    max_connection_creation_rate: int = INT_MAX
    # The listener protected from broker-wide limits (Kafka: inter.broker.listener.name).
    protected_listener: str | None = None
    num_quota_samples: int = 11
    quota_window_size_seconds: int = 1

    def __post_init__(self) -> None:
        for key, value in (  # KafkaConfig: all three are atLeast(0)
            ("max.connections", self.max_connections),
            ("max.connection.creation.rate", self.max_connection_creation_rate),
            ("max.connections.per.ip", self.max_connections_per_ip),
        ):
            if value < 0:
                raise QuotaConfigError(
                    f"Invalid {key} {value}: it must not be negative"
                )
        if (
            self.max_connections_per_ip == 0
            and not self.max_connections_per_ip_overrides
        ):
            # KafkaConfig: 0 only makes sense as "deny all except the overrides".
            raise QuotaConfigError(
                "max.connections.per.ip is 0 but max.connections.per.ip.overrides is empty: "
                "every connection would be refused"
            )


@dataclass(frozen=True, slots=True)
class _RateEntity:
    """ConnectionQuotaEntity: which sensor/metric a connection-rate quota lives in."""

    sensor_name: str
    metric_name: str
    expiration_ms: int | None
    tags: tuple[tuple[str, str], ...]


_BROKER_ENTITY: Final = _RateEntity(
    CONNECTION_RATE_SENSOR_NAME, f"broker-{CONNECTION_RATE_METRIC_NAME}", None, ()
)


def _listener_entity(listener: str) -> _RateEntity:
    return _RateEntity(
        f"{CONNECTION_RATE_SENSOR_NAME}-{listener}",
        CONNECTION_RATE_METRIC_NAME,
        None,
        (("listener", listener),),
    )


def _ip_entity(ip: str) -> _RateEntity:
    return _RateEntity(
        f"{CONNECTION_RATE_SENSOR_NAME}-{ip}",
        CONNECTION_RATE_METRIC_NAME,
        IP_SENSOR_EXPIRATION_MS,
        (("ip", ip),),
    )


class _ListenerQuota:
    __slots__ = (
        "ip_throttle_sensor",
        "listener_throttle_sensor",
        "max_connections",
        "rate_sensor",
    )

    def __init__(
        self,
        max_connections: int,
        rate_sensor: Sensor,
        listener_throttle_sensor: Sensor,
        ip_throttle_sensor: Sensor,
    ) -> None:
        self.max_connections = max_connections
        self.rate_sensor = rate_sensor
        self.listener_throttle_sensor = listener_throttle_sensor
        self.ip_throttle_sensor = ip_throttle_sensor


class ConnectionQuotas:
    def __init__(
        self, config: ConnectionQuotaConfig, metrics: Metrics, now_ms: int
    ) -> None:
        self._config = config
        self._metrics = metrics
        self._default_max_connections_per_ip = config.max_connections_per_ip
        self._max_connections_per_ip_overrides = _canonical_overrides(
            config.max_connections_per_ip_overrides
        )
        self._broker_max_connections = config.max_connections
        self._protected_listener_name = config.protected_listener
        self._max_throttle_time_ms = config.quota_window_size_seconds * 1000
        self._counts: dict[str, int] = {}
        self._listener_counts: dict[str, int] = {}
        self._listeners: dict[str, _ListenerQuota] = {}
        self._total_count = 0
        self._default_connection_rate_per_ip = INT_MAX
        self._connection_rate_per_ip: dict[str, int] = {}
        # Listener -> when its held connection may proceed (the acceptor is blocked on it).
        self._pending_until_ms: dict[str, int] = {}
        self._broker_rate_sensor = self._get_or_create_rate_sensor(
            config.max_connection_creation_rate, _BROKER_ENTITY, now_ms
        )

    # -- accepting and closing -------------------------------------------------------------

    def inc(self, listener: str, ip: str, now_ms: int) -> ConnectionDecision:
        """Decide on a new connection from ``ip`` on ``listener`` (see the module doc)."""
        if listener not in self._listener_counts:
            raise KeyError(f"unknown listener {listener!r}: call add_listener first")
        address = canonical_ip(ip)
        pending_until_ms = self._pending_until_ms.get(listener)
        if pending_until_ms is None:
            throttle_ms = max(
                self._record_connection_and_get_throttle_time_ms(listener, now_ms), 0
            )
            if throttle_ms > 0 or not self.slot_available(listener):
                self._pending_until_ms[listener] = now_ms + throttle_ms
                return Delay(throttle_ms) if throttle_ms > 0 else WAIT_FOR_SLOT
        else:
            if now_ms < pending_until_ms:
                return Delay(pending_until_ms - now_ms)
            if not self.slot_available(listener):
                return WAIT_FOR_SLOT
            del self._pending_until_ms[listener]

        rejected = self._record_ip_connection_maybe_throttle(listener, address, now_ms)
        if rejected is not None:
            return rejected

        count = self._counts.get(address, 0)
        self._counts[address] = count + 1
        self._total_count += 1
        self._listener_counts[listener] += 1
        limit = self._max_connections_per_ip_overrides.get(
            address, self._default_max_connections_per_ip
        )
        if count >= limit:
            # Kafka counts the connection, throws, and its acceptor closes the channel, which
            # decrements again; both halves happen here.
            self.dec(listener, address)
            return Reject(RejectReason.TOO_MANY_CONNECTIONS_PER_IP, 0, limit)
        return ACCEPT

    def dec(self, listener: str, ip: str) -> None:
        """An accepted connection closed."""
        address = canonical_ip(ip)
        count = self._counts.get(address)
        if count is None:
            raise ValueError(
                "Attempted to decrease connection count for address with no connections, "
                f"address: {address}"
            )
        if count == 1:
            del self._counts[address]
        else:
            self._counts[address] = count - 1
        self._total_count -= 1
        listener_count = self._listener_counts.get(listener)
        if listener_count:
            self._listener_counts[listener] = listener_count - 1

    def get(self, ip: str) -> int:
        """Open connections from ``ip``."""
        return self._counts.get(canonical_ip(ip), 0)

    @property
    def total_count(self) -> int:
        return self._total_count

    def listener_count(self, listener: str) -> int:
        return self._listener_counts.get(listener, 0)

    def slot_available(self, listener: str) -> bool:
        if self._listener_counts[listener] >= self._max_listener_connections(listener):
            return False
        if self._is_protected(listener):
            return True
        return self._total_count < self._broker_max_connections

    def max_connections_exceeded(self, listener: str) -> bool:
        """More connections than max.connections (possible via the protected listener).

        Kafka's processors then close their least recently used connection, except on the
        protected listener.
        """
        return (
            self._total_count > self._broker_max_connections
            and not self._is_protected(listener)
        )

    def connection_rate_for_ip(self, ip: str) -> int:
        return self._connection_rate_per_ip.get(
            canonical_ip(ip), self._default_connection_rate_per_ip
        )

    # -- listeners and limits --------------------------------------------------------------

    def add_listener(
        self,
        listener: str,
        now_ms: int,
        max_connections: int = INT_MAX,
        max_connection_creation_rate: int = INT_MAX,
    ) -> None:
        if listener in self._listeners:
            return
        _check_listener_limits(listener, max_connections, max_connection_creation_rate)
        self._listeners[listener] = _ListenerQuota(
            max_connections,
            self._get_or_create_rate_sensor(
                INT_MAX, _listener_entity(listener), now_ms
            ),
            self._throttle_sensor("", listener, now_ms),
            self._throttle_sensor("ip-", listener, now_ms),
        )
        self._listener_counts[listener] = 0
        self._update_connection_rate_quota(
            max_connection_creation_rate, _listener_entity(listener)
        )

    def reconfigure_listener(
        self,
        listener: str,
        max_connections: int = INT_MAX,
        max_connection_creation_rate: int = INT_MAX,
    ) -> None:
        _check_listener_limits(listener, max_connections, max_connection_creation_rate)
        self._listeners[listener].max_connections = max_connections
        self._update_connection_rate_quota(
            max_connection_creation_rate, _listener_entity(listener)
        )

    def remove_listener(self, listener: str) -> None:
        listener_quota = self._listeners.pop(listener, None)
        if listener_quota is None:
            return
        del self._listener_counts[listener]
        self._pending_until_ms.pop(listener, None)
        for sensor in (
            listener_quota.rate_sensor,
            listener_quota.listener_throttle_sensor,
            listener_quota.ip_throttle_sensor,
        ):
            self._metrics.remove_sensor(sensor.name)

    @property
    def listeners(self) -> list[str]:
        return list(self._listeners)

    def update_max_connections_per_ip_overrides(
        self, overrides: Mapping[str, int]
    ) -> None:
        self._max_connections_per_ip_overrides = _canonical_overrides(overrides)

    def update_ip_connection_rate_quota(self, ip: str | None, rate: int | None) -> None:
        """Set (``rate``) or remove (``None``) the rate quota of one IP, or of the default
        (``ip=None``), and update existing per-IP sensors."""
        if ip is not None:
            address = canonical_ip(ip)
            if rate is not None:
                self._connection_rate_per_ip[address] = rate
            else:
                self._connection_rate_per_ip.pop(address, None)
            self._update_connection_rate_quota(
                self.connection_rate_for_ip(address), _ip_entity(address)
            )
            return
        self._default_connection_rate_per_ip = rate if rate is not None else INT_MAX
        for name, metric in self._metrics.metrics.items():
            address_tag = name.tag("ip")
            if (
                name.name == CONNECTION_RATE_METRIC_NAME
                and name.group == METRICS_GROUP
                and address_tag is not None
            ):
                limit = self.connection_rate_for_ip(address_tag)
                if metric.config.quota is None or metric.config.quota.bound != limit:
                    metric.config = self._rate_quota_metric_config(limit)

    # -- internals -------------------------------------------------------------------------

    def _is_protected(self, listener: str) -> bool:
        return (
            listener == self._protected_listener_name and len(self._listener_counts) > 1
        )

    def _max_listener_connections(self, listener: str) -> int:
        listener_quota = self._listeners.get(listener)
        return listener_quota.max_connections if listener_quota is not None else INT_MAX

    def _record_connection_and_get_throttle_time_ms(
        self, listener: str, now_ms: int
    ) -> int:
        """The longer of the broker-wide and listener rate throttles (the protected listener
        skips the broker-wide one)."""
        if self._is_protected(listener):
            broker_throttle_ms = 0
        else:
            broker_throttle_ms = self._record_and_get_throttle_time_ms(
                self._broker_rate_sensor, now_ms
            )
        listener_quota = self._listeners.get(listener)
        if listener_quota is None:
            return 0
        listener_throttle_ms = self._record_and_get_throttle_time_ms(
            listener_quota.rate_sensor, now_ms
        )
        throttle_ms = max(broker_throttle_ms, listener_throttle_ms)
        if throttle_ms > 0:
            listener_quota.listener_throttle_sensor.record(throttle_ms, now_ms)
        return throttle_ms

    def _record_ip_connection_maybe_throttle(
        self, listener: str, address: str, now_ms: int
    ) -> Reject | None:
        rate = self._connection_rate_per_ip.get(
            address, self._default_connection_rate_per_ip
        )
        if rate == INT_MAX:
            return None
        sensor = self._get_or_create_rate_sensor(rate, _ip_entity(address), now_ms)
        throttle_ms = self._record_and_get_throttle_time_ms(sensor, now_ms)
        if throttle_ms <= 0:
            return None
        # Not accepted, so not a created connection: take it back out of every rate.
        sensor.unrecord(1.0, now_ms)
        if not self._is_protected(listener):
            self._broker_rate_sensor.unrecord(1.0, now_ms)
        listener_quota = self._listeners.get(listener)
        if listener_quota is not None:
            listener_quota.ip_throttle_sensor.record(throttle_ms, now_ms)
            listener_quota.rate_sensor.unrecord(1.0, now_ms)
        return Reject(RejectReason.IP_CONNECTION_RATE_EXCEEDED, throttle_ms, rate)

    def _record_and_get_throttle_time_ms(self, sensor: Sensor, now_ms: int) -> int:
        try:
            sensor.record(1.0, now_ms)
        except QuotaViolationError as violation:
            return bounded_throttle_time_ms(
                violation, self._max_throttle_time_ms, now_ms
            )
        return 0

    def _get_or_create_rate_sensor(
        self, limit: int, entity: _RateEntity, now_ms: int
    ) -> Sensor:
        sensor = self._metrics.get_sensor(entity.sensor_name)
        if sensor is None:
            sensor = self._metrics.sensor(
                entity.sensor_name,
                now_ms,
                self._rate_quota_metric_config(limit),
                entity.expiration_ms,
            )
            sensor.add(
                MetricName(
                    entity.metric_name,
                    METRICS_GROUP,
                    entity.tags,
                    "Tracking rate of accepting new connections (per second)",
                ),
                Rate(),
            )
        return sensor

    def _update_connection_rate_quota(self, limit: int, entity: _RateEntity) -> None:
        metric = self._metrics.metric(
            MetricName(entity.metric_name, METRICS_GROUP, entity.tags)
        )
        if metric is not None:
            metric.config = self._rate_quota_metric_config(limit)

    def _rate_quota_metric_config(self, limit: int) -> MetricConfig:
        return MetricConfig(
            quota=Quota.upper_bound(limit),
            samples=self._config.num_quota_samples,
            time_window_ms=self._config.quota_window_size_seconds * 1000,
        )

    def _throttle_sensor(self, prefix: str, listener: str, now_ms: int) -> Sensor:
        """Average of the non-zero throttle times on a listener (listener/broker or IP)."""
        sensor = self._metrics.sensor(
            f"{prefix}ConnectionRateThrottleTime-{listener}", now_ms
        )
        sensor.add(
            MetricName(
                f"{prefix}connection-accept-throttle-time",
                METRICS_GROUP,
                (("listener", listener),),
                "Tracking average throttle-time, out of non-zero throttle times, per listener",
            ),
            Avg(),
        )
        return sensor


def _check_listener_limits(listener: str, max_connections: int, rate: int) -> None:
    if max_connections <= 0:
        raise QuotaConfigError(
            f"Invalid listener.name.{listener}.max.connections {max_connections}"
        )
    if rate <= 0:
        raise QuotaConfigError(
            f"Invalid listener.name.{listener}.max.connection.creation.rate {rate}"
        )


def _canonical_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    canonical: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            canonical[canonical_ip(host)] = count
        except ValueError:
            raise QuotaConfigError(
                f"max.connections.per.ip.overrides: {host!r} is not an IP address "
                "(host names are not resolved by the quota engine)"
            ) from None
    return canonical
