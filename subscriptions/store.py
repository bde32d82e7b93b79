"""The durable config store: subscriptions and client quotas, hot-reloaded.

Two hand-editable files under ``<data-dir>/config/``:

``client-metrics.yaml``::

    subscriptions:
      producers:                       # subscription name
        metrics: org.apache.kafka.producer.,org.apache.kafka.consumer.
        interval.ms: 60000
        match: client_software_name=librdkafka,client_software_version=2\\..*
      everything-for-one-app:
        metrics: ["*"]                 # a YAML list is joined with "," (Kafka LIST)
        match: [client_id=orders-.*]

``quotas.yaml``::

    quotas:
      users/alice: {producer_byte_rate: 1048576, request_percentage: 50}
      users/<default>/clients/<default>: {consumer_byte_rate: 2097152}
      ips/<default>: {connection_creation_rate: 100}

Values are Kafka config strings (numbers and lists are converted). Loading follows a
Kafka broker applying stored configs (KAFKA-19851): unknown subscription keys are
ignored, and a subscription whose values do not validate is skipped with one log line
(``ConfigSnapshot.skipped``) while the others apply; it stays in the file as written.
A file that is not a well-formed document (YAML, shape, value types), and a quota that
``ClientQuotaControlManager`` would refuse, reject the file as a whole: at start-up
``load()`` raises, on reload the last good state stays in force and the error is logged
(and kept in ``last_error``).

Alterations are validated strictly, as Kafka's controller does: the full resulting
config map, stored unknown keys included; a changed value longer than 32767 characters
is refused; an alteration that changes no value writes nothing and keeps the version.

Changes through the API (``alter_subscription``, ``alter_quotas``...) rewrite the file
atomically; hand edits are picked up by ``watch()`` (filesystem events, including the
symlink swap of a Kubernetes ConfigMap) or ``reload()`` (what SIGHUP calls); each file
is applied whole or not at all, independently of the other.
Every change of the effective state bumps ``snapshot().version``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from proto.errors import Errors, KafkaError
from subscriptions.config_file import ConfigDocument, ConfigFileError, Located
from subscriptions.durable_store import DurableConfigStore
from subscriptions.model import (
    CONFIG_KEYS,
    Subscription,
    check_altered_value_length,
    normalise_config_value,
)
from subscriptions.quota_entities import (
    QuotaEntity,
    QuotaFilterComponent,
    filter_quotas,
    validate_quota_alteration,
    validate_quota_value,
)

__all__ = [
    "CLIENT_METRICS_FILE",
    "QUOTAS_FILE",
    "ConfigSnapshot",
    "ConfigStore",
]

log = logging.getLogger(__name__)

CLIENT_METRICS_FILE = "client-metrics.yaml"
QUOTAS_FILE = "quotas.yaml"

SubscriptionConfigs = dict[str, dict[str, str]]  # name -> {key: Kafka config string}
Quotas = dict[QuotaEntity, dict[str, float]]


def _config_string(value: Any) -> str | None:
    """A YAML value as a Kafka config string: str as is, int, list of str joined by ','."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return ",".join(value)
    return None


class ClientMetricsDocument(ConfigDocument[SubscriptionConfigs]):
    filename = CLIENT_METRICS_FILE
    top_key = "subscriptions"
    header = (
        "# Client-metrics subscriptions (KIP-714). Edit freely: the collector reloads this\n"
        "# file on change or SIGHUP. Keys: metrics, interval.ms, match (Kafka config strings).\n"
    )

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.entry_lines: dict[str, int] = {}  # name -> line, of the latest file read

    def parse_text(self, text: str) -> SubscriptionConfigs:
        self.entry_lines = {}
        return super().parse_text(text)

    def empty(self) -> SubscriptionConfigs:
        return {}

    def parse_entries(self, entries: Mapping[Any, Located]) -> SubscriptionConfigs:
        result: SubscriptionConfigs = {}
        for name, located in entries.items():
            if not isinstance(name, str):
                raise self.fail(
                    located.line, str(name), "a subscription name must be a string"
                )
            body = located.value
            if body is None:
                continue  # `name:` with nothing under it: no configs = no subscription
            if not isinstance(body, dict):
                raise self.fail(located.line, name, "expected a mapping of config keys")
            configs: dict[str, str] = {}
            for key, value in body.items():
                text = _config_string(value.value)
                if text is None:
                    raise self.fail(
                        value.line,
                        f"{name}.{key}",
                        "expected a string, an integer or a list of strings",
                    )
                configs[str(key)] = text
            # Kept as written: the values are validated when applied (_freeze), one
            # subscription at a time, so a bad one is skipped and never lost on a rewrite.
            if configs:
                result[name] = configs
                self.entry_lines[name] = located.line
        return result

    def render(self, state: SubscriptionConfigs) -> dict[str, Any]:
        return {name: dict(configs) for name, configs in state.items()}


class QuotasDocument(ConfigDocument[Quotas]):
    filename = QUOTAS_FILE
    top_key = "quotas"
    header = (
        "# Client quotas, as Kafka's kafka-configs --entity-type users/clients/ips.\n"
        "# Paths: users/<u>, clients/<c>, users/<u>/clients/<c>, ips/<ip>; <default> allowed.\n"
    )

    def empty(self) -> Quotas:
        return {}

    def parse_entries(self, entries: Mapping[Any, Located]) -> Quotas:
        result: Quotas = {}
        for path, located in entries.items():
            try:
                entity = QuotaEntity.from_path(str(path))
            except KafkaError as exc:
                raise self.fail(located.line, str(path), exc) from None
            if entity in result:
                raise self.fail(
                    located.line, str(path), "the same entity is written twice"
                )
            body = located.value
            if body is None:
                continue
            if not isinstance(body, dict):
                raise self.fail(
                    located.line, str(path), "expected a mapping of quota keys"
                )
            values: dict[str, float] = {}
            for key, value in body.items():
                try:
                    values[str(key)] = validate_quota_value(
                        entity, str(key), value.value
                    )
                except KafkaError as exc:
                    raise self.fail(value.line, f"{path}.{key}", exc) from None
            if values:
                result[entity] = values
        return result

    def render(self, state: Quotas) -> dict[str, Any]:
        return {
            entity.path: {
                key: int(value) if value.is_integer() else value
                for key, value in values.items()
            }
            for entity, values in state.items()
        }


@dataclass(frozen=True, slots=True)
class ConfigSnapshot:
    """One immutable, validated view of both documents; ``version`` grows on every change."""

    version: int
    subscriptions: tuple[
        Subscription, ...
    ]  # in force, document order (= creation order)
    # Every stored subscription as written, the skipped ones and unknown keys included.
    subscription_configs: Mapping[str, Mapping[str, str]] = field(repr=False)
    quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(repr=False)
    # Stored but not in force: name -> why ("<Kafka's message> (<error name>)").
    skipped: Mapping[str, str] = field(default_factory=dict, repr=False)
    # Unknown keys of subscriptions in force, ignored: name -> keys.
    ignored_keys: Mapping[str, tuple[str, ...]] = field(
        default_factory=dict, repr=False
    )

    def subscription(self, name: str) -> Subscription | None:
        return next((s for s in self.subscriptions if s.name == name), None)

    def describe(self, name: str, include_defaults: bool = False) -> dict[str, str]:
        """A subscription's set keys as stored (Kafka before 4.1); with defaults for
        the rest (4.1+)."""
        stored = self.subscription_configs.get(name, {})
        if not include_defaults:
            return {
                key.name: stored[key.name] for key in CONFIG_KEYS if key.name in stored
            }
        return {key.name: stored.get(key.name, key.default) for key in CONFIG_KEYS}


_KNOWN_KEYS = frozenset(key.name for key in CONFIG_KEYS)


def _freeze(
    version: int, configs: SubscriptionConfigs, quotas: Quotas
) -> ConfigSnapshot:
    """Apply stored subscriptions as a broker applies stored configs (KAFKA-19851):
    unknown keys ignored, a subscription that does not validate skipped, never the rest."""
    subscriptions: list[Subscription] = []
    skipped: dict[str, str] = {}
    ignored_keys: dict[str, tuple[str, ...]] = {}
    for name, stored in configs.items():
        known = {key: value for key, value in stored.items() if key in _KNOWN_KEYS}
        try:
            subscriptions.append(Subscription.from_configs(name, known))
        except KafkaError as exc:
            skipped[name] = f"{exc} ({exc.error_code.name})"
            continue
        if len(known) != len(stored):
            ignored_keys[name] = tuple(key for key in stored if key not in _KNOWN_KEYS)
    return ConfigSnapshot(
        version=version,
        subscriptions=tuple(subscriptions),
        subscription_configs=MappingProxyType(
            {name: MappingProxyType(dict(c)) for name, c in configs.items()}
        ),
        quotas=MappingProxyType(
            {e: MappingProxyType(dict(v)) for e, v in quotas.items()}
        ),
        skipped=MappingProxyType(skipped),
        ignored_keys=MappingProxyType(ignored_keys),
    )


OnChange = Callable[[ConfigSnapshot], Awaitable[None] | None]


class ConfigStore(DurableConfigStore):
    """Subscriptions and quotas under ``<data_dir>/config``, durable and hot-reloaded
    (``subscriptions.durable_store``).

    The constructor loads both files (raising ConfigFileError if one is invalid). Thread-safe; every public method is synchronous and cheap (files are small) except
    ``watch``, a coroutine to run as a task.
    """

    def __init__(self, data_dir: str | Path) -> None:
        super().__init__(data_dir)
        self._client_metrics = ClientMetricsDocument(self.config_dir)
        self._quotas = QuotasDocument(self.config_dir)
        self._lock = threading.RLock()
        self._configs: SubscriptionConfigs = {}
        self._quota_values: Quotas = {}
        self._snapshot = _freeze(0, {}, {})
        # The current snapshot's version as a plain attribute: the collector asks it on
        # every request (collector/telemetry/subscription_source.py), a method call costs more.
        self.version = 0
        # Loaded now, so an invalid file fails start-up (or the CLI) with a clear error and
        # no write can ever replace a file that was never read.
        self.load()

    # -- loading ---------------------------------------------------------------------

    def load(self) -> ConfigSnapshot:
        """Read and validate both files; raise ConfigFileError (file, line, key) if invalid."""
        with self._lock:
            configs = self._client_metrics.load()
            quotas = self._quotas.load()
            self._install(configs, quotas)
            self.last_error = None
            return self._snapshot

    def reload(self) -> bool:
        """Re-read both files (SIGHUP); True if the effective state changed.

        Each file is taken as a whole or not at all: a file with invalid content is
        logged and ignored (its last good content stays in force), the other file is
        still applied. ``last_error`` holds the problems of the latest reload, or None.
        """
        with self._lock:
            errors: list[str] = []
            configs, quotas = self._configs, self._quota_values
            try:
                configs = self._client_metrics.load()
            except ConfigFileError as exc:
                errors.append(str(exc))
            try:
                quotas = self._quotas.load()
            except ConfigFileError as exc:
                errors.append(str(exc))
            for error in errors:
                log.error(
                    "config file not reloaded, its last good content stays in force: %s",
                    error,
                )
            self.last_error = "; ".join(errors) or None
            if configs == self._configs and quotas == self._quota_values:
                return False
            self._install(configs, quotas)
            log.info(
                "config reloaded: %d subscriptions, %d quota entities (version %d)",
                len(configs),
                len(quotas),
                self._snapshot.version,
            )
            return True

    def snapshot(self) -> ConfigSnapshot:
        return self._snapshot

    async def watch(
        self,
        on_change: OnChange,
        stop_event: asyncio.Event | None = None,
        *,
        debounce_ms: int = 300,
        force_polling: bool | None = None,
        ready: asyncio.Event | None = None,
    ) -> None:
        """Reload whenever something in the config directory changes; call ``on_change``.

        Watches the directory, not the files, so editors that write-and-rename and the
        Kubernetes ConfigMap ``..data`` symlink swap are both seen. Runs until
        ``stop_event`` is set (or the task is cancelled).  ``ready`` is set once the
        operating system watches the directory: a change made after that is seen.
        """
        await self.watch_directory(
            lambda: on_change(self._snapshot),
            stop_event,
            debounce_ms=debounce_ms,
            force_polling=force_polling,
            ready=ready,
        )

    # -- subscriptions ----------------------------------------------------------------

    def list_names(self) -> list[str]:
        return list(self._snapshot.subscription_configs)

    def describe(self, name: str, include_defaults: bool = False) -> dict[str, str]:
        """The set keys as stored (Kafka before 4.1); with defaults for the rest (4.1+)."""
        return self._snapshot.describe(name, include_defaults)

    def alter_subscription(
        self,
        name: str,
        set: Mapping[str, str | None],
        delete: Iterable[str] = (),
        validate_only: bool = False,
    ) -> Subscription | None:
        """IncrementalAlterConfigs on one CLIENT_METRICS resource (SET / DELETE ops).

        The resulting full config map is validated like Kafka's controller; an empty map
        removes the subscription (returns None). Raises KafkaError with Kafka's code.
        """
        with self._lock:
            stored, merged, subscription = self._altered(name, set, delete)
            if validate_only or merged == stored:
                # Kafka's controller writes a ConfigRecord only for a value that changes:
                # the same value again is no change, no new version, no re-evaluation.
                return subscription if merged else None
            configs = dict(self._configs)
            if merged:
                configs[name] = merged  # an existing name keeps its position
            else:
                configs.pop(name, None)
            self._write_subscriptions(configs)
            return subscription if merged else None

    def proposed_subscriptions(
        self, name: str, set: Mapping[str, str | None], delete: Iterable[str] = ()
    ) -> tuple[Subscription, ...]:
        """The subscriptions that would be in force after ``alter_subscription(name, set,
        delete)``, computed by the same validation and the same loading rules; nothing is
        written.  Raises what the alteration would raise."""
        with self._lock:
            _, merged, _ = self._altered(name, set, delete)
            configs = dict(self._configs)
            if merged:
                configs[name] = merged
            else:
                configs.pop(name, None)
            return _freeze(
                self._snapshot.version + 1, configs, self._quota_values
            ).subscriptions

    def _altered(
        self, name: str, set: Mapping[str, str | None], delete: Iterable[str]
    ) -> tuple[dict[str, str], dict[str, str], Subscription]:
        """(stored configs, configs after the alteration, the subscription they make),
        validated as Kafka's controller validates an IncrementalAlterConfigs."""
        delete = list(delete)
        nulls = [key for key, value in set.items() if value is None]
        if nulls:
            raise KafkaError(
                "Null value not supported for : " + ", ".join(nulls),
                Errors.INVALID_REQUEST,
            )
        if len({*set, *delete}) != len(set) + len(delete):
            raise KafkaError(
                "Error due to duplicate config keys", Errors.INVALID_REQUEST
            )
        stored = self._configs.get(name, {})
        for key, value in set.items():
            if value is not None and value != stored.get(key):
                check_altered_value_length(value)
        merged = dict(stored)
        merged.update(
            {
                key: normalise_config_value(key, value)
                for key, value in set.items()
                if value is not None
            }
        )
        for key in delete:
            merged.pop(key, None)
        return stored, merged, Subscription.from_configs(name, merged)

    def delete_subscription(self, name: str) -> bool:
        """Remove a subscription (Kafka: DELETE every key); False if it did not exist."""
        with self._lock:
            if name not in self._configs:
                return False
            configs = dict(self._configs)
            del configs[name]
            self._write_subscriptions(configs)
            return True

    # -- quotas -----------------------------------------------------------------------

    def alter_quotas(
        self,
        entity: Mapping[str, str | None],
        set: Mapping[str, object],
        delete: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        """AlterClientQuotas for one entity (``None`` name = ``<default>``)."""
        quota_entity, values, removed = validate_quota_alteration(entity, set, delete)
        with self._lock:
            merged = dict(self._quota_values.get(quota_entity, {}))
            merged.update(values)
            for key in removed:
                merged.pop(key, None)
            if validate_only:
                return
            quotas = dict(self._quota_values)
            if merged:
                quotas[quota_entity] = merged
            else:
                quotas.pop(quota_entity, None)
            self._persist(self._quotas, quotas)
            self._install(self._configs, quotas)

    def describe_quotas(
        self, components: Sequence[QuotaFilterComponent] = (), strict: bool = False
    ) -> dict[QuotaEntity, dict[str, float]]:
        """DescribeClientQuotas semantics (exact name, ``None`` = default, ``ANY``)."""
        return filter_quotas(self._snapshot.quotas, components, strict)

    # -- internals --------------------------------------------------------------------

    def _write_subscriptions(self, configs: SubscriptionConfigs) -> None:
        self._persist(self._client_metrics, configs)
        self._install(configs, self._quota_values)

    @staticmethod
    def _persist(document: ConfigDocument[Any], state: Any) -> None:
        try:
            document.save(state)
        except OSError as exc:
            raise KafkaError(
                f"cannot write {document.path}: {exc}", Errors.UNKNOWN_SERVER_ERROR
            ) from exc

    def _install(self, configs: SubscriptionConfigs, quotas: Quotas) -> None:
        previous = self._snapshot
        self._configs = configs
        self._quota_values = quotas
        self._snapshot = _freeze(previous.version + 1, configs, quotas)
        self.version = self._snapshot.version
        self._log_not_applied(previous)

    def _log_not_applied(self, previous: ConfigSnapshot) -> None:
        """One line per subscription newly skipped, or newly with ignored keys."""
        snapshot = self._snapshot
        path = self._client_metrics.path
        lines = self._client_metrics.entry_lines
        for name, reason in snapshot.skipped.items():
            if previous.skipped.get(name) != reason:
                log.error(
                    "%s, line %s at %r: subscription skipped, its configs do not validate: %s",
                    path,
                    lines.get(name, "?"),
                    name,
                    reason,
                )
        for name, keys in snapshot.ignored_keys.items():
            if previous.ignored_keys.get(name) != keys:
                log.warning(
                    "%s, line %s at %r: unknown client metrics configuration ignored: %s",
                    path,
                    lines.get(name, "?"),
                    name,
                    ", ".join(keys),
                )
