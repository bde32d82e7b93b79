"""``QuotaEngine``: the one object the collector talks to.

It owns the metrics registry, the four client quota managers (produce bytes, fetch bytes,
request time, controller mutations), the connection quotas and one delay queue of
throttled channels, and it reads broker settings and entity quotas from plain data.

Cost per request: while no quota of a type is configured, its ``record_*`` call returns 0
after one integer test; with quotas, one cached sensor lookup plus a ``Rate`` update and
check (see tests/perf/bench_quota.py for measured numbers).

Broker settings (``QuotaEngineConfig.from_mapping``; values may be ints or strings):

    quota.window.num                         11     samples of client quotas
    quota.window.size.seconds                1      window of client quotas, and the cap of
                                                    request and connection-rate throttles
    controller.quota.window.num              11     samples of the mutation token bucket
    controller.quota.window.size.seconds     1
    max.connections                          2^31-1
    max.connections.per.ip                   2^31-1
    max.connections.per.ip.overrides         ""     "10.0.0.1:50,10.0.0.2:5" (IPs only)
    max.connection.creation.rate             2^31-1
    listeners                                       "PLAINTEXT://:9092,ADMIN://:9093": names
    inter.broker.listener.name                      the protected listener (if several)
    listener.name.<name>.max.connections
    listener.name.<name>.max.connection.creation.rate

Entity quotas (``apply_entity_quotas``): a mapping from entity to ``{key: value}``, e.g.
the config store's ``snapshot().quotas`` as it is.  The entity (a dict key, so hashable) is
the store's ``QuotaEntity``, or its path (``users/alice``, ``clients/app``,
``users/alice/clients/app``, ``users/<default>``, ``clients/<default>``,
``users/<default>/clients/<default>``, ``ips/10.0.0.7``, ``ips/<default>``; names
URL-encoded as in Kafka's config paths) or Kafka's entity as pairs
(``(("user", "alice"), ("client-id", None))``, None = default; ``alter_entity_quota`` also
takes the dict form ``{"user": "alice", "client-id": None}``).  Keys:
``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate`` for user/client-id entities; ``connection_creation_rate`` for
IP entities.  The mapping is the complete desired state: entities or keys missing from it
are removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from quota.client_quota_manager import ClientQuotaManager, ClientQuotaManagerConfig
from quota.connection_quotas import (
    INT_MAX,
    ConnectionDecision,
    ConnectionQuotaConfig,
    ConnectionQuotas,
)
from quota.entity import (
    DEFAULT,
    ClientQuotaEntity,
    IpQuotaEntity,
    canonical_ip,
    parse_entity,
)
from quota.entity_quotas import (
    EntityKeyT,
    EntitySpec,
    InvalidQuotaError,
    validate_entity_quotas,
    validate_quota_value,
)
from quota.errors import QuotaConfigError
from quota.metric_config import Quota
from quota.metrics import Metrics, MetricValue
from quota.mutation_quota import ControllerMutationQuota, ControllerMutationQuotaManager
from quota.quota_type import QUOTA_TYPE_BY_CONFIG_KEY, QuotaType
from quota.request_quota import (
    NANOS_TO_PERCENTAGE_PER_SECOND,
    ClientRequestQuotaManager,
)
from quota.throttled_channel import ThrottledChannel, ThrottledChannelQueue

__all__ = ["EntityQuotaChange", "ListenerLimits", "QuotaEngine", "QuotaEngineConfig"]

_LISTENER_PREFIX: Final = "listener.name."
_LISTENER_KEYS: Final = ("max.connections", "max.connection.creation.rate")


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    max_connections: int = INT_MAX
    max_connection_creation_rate: int = INT_MAX


@dataclass(frozen=True, slots=True)
class QuotaEngineConfig:
    client: ClientQuotaManagerConfig = field(default_factory=ClientQuotaManagerConfig)
    controller: ClientQuotaManagerConfig = field(
        default_factory=ClientQuotaManagerConfig
    )
    connections: ConnectionQuotaConfig = field(default_factory=ConnectionQuotaConfig)
    # Listener name (upper case, as Kafka's ListenerName) -> its own limits.
    listeners: Mapping[str, ListenerLimits] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, settings: Mapping[str, object]) -> QuotaEngineConfig:
        """Read the quota-related broker keys; other keys are ignored, bad values raise
        ``QuotaConfigError`` naming the key."""
        client = ClientQuotaManagerConfig(
            _int(settings, "quota.window.num", 11, minimum=1),
            _int(settings, "quota.window.size.seconds", 1, minimum=1),
        )
        controller = ClientQuotaManagerConfig(
            _int(settings, "controller.quota.window.num", 11, minimum=1),
            _int(settings, "controller.quota.window.size.seconds", 1, minimum=1),
        )
        protected = settings.get("inter.broker.listener.name")
        connections = ConnectionQuotaConfig(
            max_connections=_int(settings, "max.connections", INT_MAX, minimum=0),
            max_connections_per_ip=_int(
                settings, "max.connections.per.ip", INT_MAX, minimum=0
            ),
            max_connections_per_ip_overrides=_overrides(
                settings.get("max.connections.per.ip.overrides", "")
            ),
            max_connection_creation_rate=_int(
                settings, "max.connection.creation.rate", INT_MAX, minimum=0
            ),
            protected_listener=str(protected).upper() if protected else None,
            num_quota_samples=client.num_quota_samples,
            quota_window_size_seconds=client.quota_window_size_seconds,
        )
        return cls(client, controller, connections, _listeners(settings))


def _int(settings: Mapping[str, object], key: str, default: int, minimum: int) -> int:
    raw = settings.get(key, default)
    if isinstance(raw, bool):
        raise QuotaConfigError(
            f"Invalid value {raw!r} for configuration {key}: not an integer"
        )
    try:
        value = int(raw) if isinstance(raw, int) else int(str(raw).strip())
    except ValueError:
        raise QuotaConfigError(
            f"Invalid value {raw!r} for configuration {key}: not an integer"
        ) from None
    if value < minimum:
        raise QuotaConfigError(
            f"Invalid value {value} for configuration {key}: Value must be at least {minimum}"
        )
    return value


def _overrides(raw: object) -> dict[str, int]:
    """``"ip:count,ip:count"`` (Kafka's CSV map; the count follows the last colon) or a map."""
    key = "max.connections.per.ip.overrides"
    if isinstance(raw, Mapping):
        items = [(str(ip), count) for ip, count in raw.items()]
    else:
        items = []
        for entry in str(raw).split(","):
            if not entry.strip():
                continue
            ip, sep, count = entry.strip().rpartition(":")
            if not sep:
                raise QuotaConfigError(
                    f"Invalid value {raw!r} for configuration {key}: {entry!r} is not <ip>:<count>"
                )
            items.append((ip.strip().strip("[]"), count))
    overrides: dict[str, int] = {}
    for ip, count in items:
        try:
            address = canonical_ip(ip)
        except ValueError:
            raise QuotaConfigError(
                f"Invalid value {raw!r} for configuration {key}: {ip!r} is not an IP address "
                "(host names are not resolved by the quota engine)"
            ) from None
        overrides[address] = _int({key: count}, key, 0, minimum=0)
    return overrides


def _listeners(settings: Mapping[str, object]) -> dict[str, ListenerLimits]:
    names: list[str] = []
    for entry in str(settings.get("listeners", "") or "").split(","):
        name, sep, _ = entry.strip().partition("://")
        if sep and name:
            names.append(name.upper())
    for key in settings:
        if key.startswith(_LISTENER_PREFIX):
            for suffix in _LISTENER_KEYS:
                if key.endswith("." + suffix):
                    names.append(key[len(_LISTENER_PREFIX) : -len(suffix) - 1].upper())
    limits: dict[str, ListenerLimits] = {}
    for name in dict.fromkeys(names):
        # Kafka's listener config prefix is the lower-cased name: listener.name.plaintext.
        prefix = f"{_LISTENER_PREFIX}{name.lower()}."
        scoped = {
            k[len(prefix) :]: v
            for k, v in settings.items()
            if k.lower().startswith(prefix)
        }
        limits[name] = ListenerLimits(
            _int(scoped, "max.connections", INT_MAX, minimum=1),
            _int(scoped, "max.connection.creation.rate", INT_MAX, minimum=1),
        )
    return limits


@dataclass(frozen=True, slots=True)
class EntityQuotaChange:
    """One quota that ``apply_entity_quotas`` set (``value``) or removed (``None``)."""

    entity: str
    key: str
    value: float | None


class QuotaEngine:
    def __init__(self, config: QuotaEngineConfig, now_ms: int) -> None:
        self.config = config
        self.metrics = Metrics()
        # One delay queue for every quota type: one reaper (timer) in the collector.
        self.queue: ThrottledChannelQueue[Any] = ThrottledChannelQueue()
        self.produce = ClientQuotaManager(
            config.client, self.metrics, QuotaType.PRODUCE, now_ms, self.queue
        )
        self.fetch = ClientQuotaManager(
            config.client, self.metrics, QuotaType.FETCH, now_ms, self.queue
        )
        self.request = ClientRequestQuotaManager(
            config.client, self.metrics, now_ms, self.queue
        )
        self.controller_mutation = ControllerMutationQuotaManager(
            config.controller, self.metrics, now_ms, self.queue
        )
        self._managers: dict[QuotaType, ClientQuotaManager] = {
            QuotaType.PRODUCE: self.produce,
            QuotaType.FETCH: self.fetch,
            QuotaType.REQUEST: self.request,
            QuotaType.CONTROLLER_MUTATION: self.controller_mutation,
        }
        self.connections = ConnectionQuotas(config.connections, self.metrics, now_ms)
        for name, limits in config.listeners.items():
            self.connections.add_listener(
                name,
                now_ms,
                limits.max_connections,
                limits.max_connection_creation_rate,
            )
        self._entity_quotas: dict[
            ClientQuotaEntity | IpQuotaEntity, dict[str, float]
        ] = {}

    @classmethod
    def from_config(cls, settings: Mapping[str, object], now_ms: int) -> QuotaEngine:
        return cls(QuotaEngineConfig.from_mapping(settings), now_ms)

    # -- per request -----------------------------------------------------------------------

    def record_produce_bytes(
        self, user: str, client_id: str, nbytes: int, now_ms: int
    ) -> int:
        """Bytes received from a client (Kafka: produce request size); the throttle in ms."""
        produce = self.produce
        if not produce.quota_types_enabled:
            return 0
        return produce.record_and_get_throttle_time_ms(user, client_id, nbytes, now_ms)

    def record_fetch_bytes(
        self, user: str, client_id: str, nbytes: int, now_ms: int
    ) -> int:
        """Bytes sent to a client (Kafka: fetch response size); the throttle in ms."""
        fetch = self.fetch
        if not fetch.quota_types_enabled:
            return 0
        return fetch.record_and_get_throttle_time_ms(user, client_id, nbytes, now_ms)

    def unrecord_fetch_bytes(
        self, user: str, client_id: str, nbytes: int, now_ms: int
    ) -> None:
        """A throttled fetch is answered empty: take its bytes back."""
        if self.fetch.quota_types_enabled:
            self.fetch.unrecord(user, client_id, nbytes, now_ms)

    def max_fetch_bytes(self, user: str, client_id: str, now_ms: int) -> float:
        """Clamp for fetch.max.bytes: larger is throttled even on an idle sensor (or +inf)."""
        return self.fetch.max_value_in_quota_window(user, client_id, now_ms)

    def record_request(
        self, user: str, client_id: str, request_time_ns: int, now_ms: int
    ) -> int:
        """Handler time of one request; the throttle in ms, never more than one window."""
        request = self.request
        if not request.quota_types_enabled:
            return 0
        return request.record_and_get_throttle_time_ms(
            user, client_id, request_time_ns * NANOS_TO_PERCENTAGE_PER_SECOND, now_ms
        )

    def record_network_time(
        self, user: str, client_id: str, network_time_ns: int, now_ms: int
    ) -> None:
        """Time spent writing the response, counted against the same request quota."""
        self.request.record_network_thread_time_ns(
            user, client_id, network_time_ns, now_ms
        )

    def record_exempt_request(self, request_time_ns: int, now_ms: int) -> None:
        self.request.maybe_record_exempt_ns(request_time_ns, now_ms)

    def mutation_quota(
        self, user: str, client_id: str, strict: bool, now_ms: int
    ) -> ControllerMutationQuota:
        """The controller-mutation quota of one request: ``record(permits, now_ms)`` raises
        ``ThrottlingQuotaExceededError`` (error_code 89) when strict and exhausted."""
        manager = self.controller_mutation
        if strict:
            return manager.new_strict_quota_for(user, client_id, now_ms)
        return manager.new_permissive_quota_for(user, client_id, now_ms)

    # -- throttled channels ----------------------------------------------------------------

    def throttle(
        self,
        channel: object,
        user: str,
        client_id: str,
        throttle_time_ms: int,
        now_ms: int,
        quota_type: QuotaType = QuotaType.REQUEST,
    ) -> None:
        """Hold ``channel`` muted for ``throttle_time_ms``; it comes back from ``pop_expired``.

        Kafka mutes once per response, for the larger of the byte-rate and request
        throttles, under the quota type that produced it.
        """
        self._managers[quota_type].throttle(
            user, client_id, channel, throttle_time_ms, now_ms
        )

    def pop_expired(self, now_ms: int) -> list[ThrottledChannel[Any]]:
        """Channels whose throttle is over: unmute them."""
        return self.queue.pop_expired(now_ms)

    def next_deadline_ms(self) -> int | None:
        """When to call ``pop_expired`` next (None: nothing is throttled)."""
        return self.queue.next_deadline_ms()

    # -- connections -----------------------------------------------------------------------

    def add_listener(
        self,
        listener: str,
        now_ms: int,
        max_connections: int = INT_MAX,
        max_connection_creation_rate: int = INT_MAX,
    ) -> None:
        """Register a listener not named in the settings (no-op if already known)."""
        self.connections.add_listener(
            listener.upper(), now_ms, max_connections, max_connection_creation_rate
        )

    def on_accept(self, listener: str, ip: str, now_ms: int) -> ConnectionDecision:
        return self.connections.inc(listener.upper(), ip, now_ms)

    def on_close(self, listener: str, ip: str) -> None:
        self.connections.dec(listener.upper(), ip)

    # -- configuration ---------------------------------------------------------------------

    def apply_entity_quotas(
        self, entity_quotas: Mapping[EntityKeyT, Mapping[str, object]]
    ) -> list[EntityQuotaChange]:
        """Make the configured entity quotas exactly ``entity_quotas`` (see the module doc).

        Everything is validated first; on ``InvalidQuotaError`` nothing changes.  Usage
        already recorded is kept across changes.
        """
        desired = validate_entity_quotas(entity_quotas)
        changes: list[EntityQuotaChange] = []
        for entity, settings in self._entity_quotas.items():
            for key in settings:
                if key not in desired.get(entity, {}):
                    self._apply(entity, key, None)
                    changes.append(EntityQuotaChange(entity.path, key, None))
        for entity, settings in desired.items():
            for key, value in settings.items():
                if self._entity_quotas.get(entity, {}).get(key) != value:
                    self._apply(entity, key, value)
                    changes.append(EntityQuotaChange(entity.path, key, value))
        self._entity_quotas = {entity: dict(s) for entity, s in desired.items() if s}
        return changes

    def alter_entity_quota(
        self, entity: EntitySpec, key: str, value: object | None
    ) -> None:
        """Set one quota (or remove it with ``None``), as one AlterClientQuotas op does."""
        try:
            target = parse_entity(entity)
        except ValueError as exc:
            raise InvalidQuotaError(str(exc)) from None
        new_value = (
            None
            if value is None
            else validate_quota_value(key, value, isinstance(target, IpQuotaEntity))
        )
        self._apply(target, key, new_value)
        settings = self._entity_quotas.setdefault(target, {})
        if new_value is None:
            settings.pop(key, None)
            if not settings:
                del self._entity_quotas[target]
        else:
            settings[key] = new_value

    def entity_quotas(self) -> dict[str, dict[str, float]]:
        """The configured quotas by entity path (for DescribeClientQuotas and the CLI)."""
        return {
            entity.path: dict(settings)
            for entity, settings in self._entity_quotas.items()
        }

    def _apply(
        self, entity: ClientQuotaEntity | IpQuotaEntity, key: str, value: float | None
    ) -> None:
        if isinstance(entity, IpQuotaEntity):
            ip = None if entity.ip is DEFAULT else str(entity.ip)
            self.connections.update_ip_connection_rate_quota(
                ip, None if value is None else int(value)
            )
            return
        manager = self._managers[QUOTA_TYPE_BY_CONFIG_KEY[key]]
        manager.update_quota(
            entity, None if value is None else Quota.upper_bound(value)
        )

    # -- housekeeping and observability ----------------------------------------------------

    def expire_inactive_sensors(self, now_ms: int) -> list[str]:
        """Drop sensors idle past their expiry (1 h for per-client and per-IP sensors).

        Kafka runs this every 30 s; the collector should do the same.
        """
        return self.metrics.expire_inactive_sensors(now_ms)

    def metrics_snapshot(self, now_ms: int) -> list[MetricValue]:
        """Every quota metric's value; labels are entity-level tags (user, client-id,
        listener, ip), never a client instance."""
        return self.metrics.snapshot(now_ms)
