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

Values are Kafka config strings (numbers and lists are converted); every subscription
is validated exactly as Kafka's controller would, every quota as
``ClientQuotaControlManager`` would. A file that fails validation is rejected as a
whole: at start-up ``load()`` raises, on reload the last good state stays in force and
the error is logged (and kept in ``last_error``).

Changes through the API (``alter_subscription``, ``alter_quotas``...) rewrite the file
atomically; hand edits are picked up by ``watch()`` (filesystem events, including the
symlink swap of a Kubernetes ConfigMap) or ``reload()`` (what SIGHUP calls); each file
is applied whole or not at all, independently of the other.
Every change of the effective state bumps ``snapshot().version``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from proto.errors import Errors, KafkaError
from subscriptions.config_file import TMP_MARKER, ConfigDocument, ConfigFileError, Located
from subscriptions.model import CONFIG_KEYS, Subscription
from subscriptions.quotas import (
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
    header = ("# Client-metrics subscriptions (KIP-714). Edit freely: the collector reloads this\n"
              "# file on change or SIGHUP. Keys: metrics, interval.ms, match (Kafka config strings).\n")

    def empty(self) -> SubscriptionConfigs:
        return {}

    def parse_entries(self, entries: Mapping[Any, Located]) -> SubscriptionConfigs:
        result: SubscriptionConfigs = {}
        for name, located in entries.items():
            if not isinstance(name, str):
                raise self.fail(located.line, str(name), "a subscription name must be a string")
            body = located.value
            if body is None:
                continue  # `name:` with nothing under it: no configs = no subscription
            if not isinstance(body, dict):
                raise self.fail(located.line, name, "expected a mapping of config keys")
            configs: dict[str, str] = {}
            for key, value in body.items():
                text = _config_string(value.value)
                if text is None:
                    raise self.fail(value.line, f"{name}.{key}",
                                    "expected a string, an integer or a list of strings")
                configs[str(key)] = text
            try:
                Subscription.from_configs(name, configs)
            except KafkaError as exc:
                raise self.fail(located.line, name, exc) from None
            if configs:
                result[name] = configs
        return result

    def render(self, state: SubscriptionConfigs) -> dict[str, Any]:
        return {name: dict(configs) for name, configs in state.items()}


class QuotasDocument(ConfigDocument[Quotas]):
    filename = QUOTAS_FILE
    top_key = "quotas"
    header = ("# Client quotas, as Kafka's kafka-configs --entity-type users/clients/ips.\n"
              "# Paths: users/<u>, clients/<c>, users/<u>/clients/<c>, ips/<ip>; <default> allowed.\n")

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
                raise self.fail(located.line, str(path), "the same entity is written twice")
            body = located.value
            if body is None:
                continue
            if not isinstance(body, dict):
                raise self.fail(located.line, str(path), "expected a mapping of quota keys")
            values: dict[str, float] = {}
            for key, value in body.items():
                try:
                    values[str(key)] = validate_quota_value(entity, str(key), value.value)
                except KafkaError as exc:
                    raise self.fail(value.line, f"{path}.{key}", exc) from None
            if values:
                result[entity] = values
        return result

    def render(self, state: Quotas) -> dict[str, Any]:
        return {
            entity.path: {key: int(value) if value.is_integer() else value for key, value in values.items()}
            for entity, values in state.items()
        }


@dataclass(frozen=True, slots=True)
class ConfigSnapshot:
    """One immutable, validated view of both documents; ``version`` grows on every change."""

    version: int
    subscriptions: tuple[Subscription, ...]  # document order (= creation order)
    subscription_configs: Mapping[str, Mapping[str, str]] = field(repr=False)
    quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(repr=False)

    def subscription(self, name: str) -> Subscription | None:
        return next((s for s in self.subscriptions if s.name == name), None)


def _freeze(version: int, configs: SubscriptionConfigs, quotas: Quotas) -> ConfigSnapshot:
    return ConfigSnapshot(
        version=version,
        subscriptions=tuple(Subscription.from_configs(name, c) for name, c in configs.items()),
        subscription_configs=MappingProxyType(
            {name: MappingProxyType(dict(c)) for name, c in configs.items()}),
        quotas=MappingProxyType({e: MappingProxyType(dict(v)) for e, v in quotas.items()}),
    )


OnChange = Callable[[ConfigSnapshot], Awaitable[None] | None]


class ConfigStore:
    """Subscriptions and quotas under ``<data_dir>/config``, durable and hot-reloaded.

    The constructor loads both files (raising ConfigFileError if one is invalid). Thread-safe; every public method is synchronous and cheap (files are small) except
    ``watch``, a coroutine to run as a task.
    """

    def __init__(self, data_dir: str | Path) -> None:
        self.config_dir = Path(data_dir) / "config"
        self.config_dir.mkdir(parents=True, exist_ok=True)
        self._client_metrics = ClientMetricsDocument(self.config_dir)
        self._quotas = QuotasDocument(self.config_dir)
        self._lock = threading.RLock()
        self._configs: SubscriptionConfigs = {}
        self._quota_values: Quotas = {}
        self._snapshot = _freeze(0, {}, {})
        # The current snapshot's version as a plain attribute: the collector asks it on
        # every request (collector/telemetry/subscription_source.py), a method call costs more.
        self.version = 0
        self.last_error: str | None = None
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
                log.error("config file not reloaded, its last good content stays in force: %s", error)
            self.last_error = "; ".join(errors) or None
            if configs == self._configs and quotas == self._quota_values:
                return False
            self._install(configs, quotas)
            log.info("config reloaded: %d subscriptions, %d quota entities (version %d)",
                     len(configs), len(quotas), self._snapshot.version)
            return True

    def snapshot(self) -> ConfigSnapshot:
        return self._snapshot

    async def watch(self, on_change: OnChange, stop_event: asyncio.Event | None = None,
                    *, debounce_ms: int = 300, force_polling: bool | None = None,
                    ready: asyncio.Event | None = None) -> None:
        """Reload whenever something in the config directory changes; call ``on_change``.

        Watches the directory, not the files, so editors that write-and-rename and the
        Kubernetes ConfigMap ``..data`` symlink swap are both seen. Runs until
        ``stop_event`` is set (or the task is cancelled).  ``ready`` is set once the
        operating system watches the directory: a change made after that is seen.
        """
        import watchfiles  # imported here: only the server needs the watcher

        changes_of = watchfiles.awatch(
            self.config_dir, stop_event=stop_event, debounce=debounce_ms, step=50,
            force_polling=force_polling, recursive=True,
        )
        # The generator's first step registers the watch (watchfiles creates its notifier
        # before its first wait); the task runs that step before this one resumes.
        pending = asyncio.ensure_future(anext(changes_of))
        try:
            await asyncio.sleep(0)
            if ready is not None:
                ready.set()
            while True:
                try:
                    changes = await pending
                except StopAsyncIteration:
                    return
                pending = asyncio.ensure_future(anext(changes_of))
                if all(TMP_MARKER in Path(path).name for _, path in changes):
                    continue  # our own temp files
                if await asyncio.to_thread(self.reload):
                    result = on_change(self._snapshot)
                    if inspect.isawaitable(result):
                        await result
        finally:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
            await changes_of.aclose()

    # -- subscriptions ----------------------------------------------------------------

    def list_names(self) -> list[str]:
        return list(self._snapshot.subscription_configs)

    def describe(self, name: str, include_defaults: bool = False) -> dict[str, str]:
        """The set keys as stored (Kafka before 4.1); with defaults for the rest (4.1+)."""
        stored = dict(self._snapshot.subscription_configs.get(name, {}))
        if not include_defaults:
            return {key.name: stored[key.name] for key in CONFIG_KEYS if key.name in stored}
        return {key.name: stored.get(key.name, key.default) for key in CONFIG_KEYS}

    def alter_subscription(self, name: str, set: Mapping[str, str | None],
                           delete: Iterable[str] = (), validate_only: bool = False
                           ) -> Subscription | None:
        """IncrementalAlterConfigs on one CLIENT_METRICS resource (SET / DELETE ops).

        The resulting full config map is validated like Kafka's controller; an empty map
        removes the subscription (returns None). Raises KafkaError with Kafka's code.
        """
        delete = list(delete)
        nulls = [key for key, value in set.items() if value is None]
        if nulls:
            raise KafkaError("Null value not supported for : " + ", ".join(nulls), Errors.INVALID_REQUEST)
        if len({*set, *delete}) != len(set) + len(delete):
            raise KafkaError("Error due to duplicate config keys", Errors.INVALID_REQUEST)
        with self._lock:
            merged = dict(self._configs.get(name, {}))
            merged.update({key: value for key, value in set.items() if value is not None})
            for key in delete:
                merged.pop(key, None)
            subscription = Subscription.from_configs(name, merged)
            if validate_only:
                return subscription if merged else None
            configs = dict(self._configs)
            if merged:
                configs[name] = merged  # an existing name keeps its position
            else:
                configs.pop(name, None)
            self._write_subscriptions(configs)
            return subscription if merged else None

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

    def alter_quotas(self, entity: Mapping[str, str | None], set: Mapping[str, object],
                     delete: Iterable[str] = (), validate_only: bool = False) -> None:
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

    def describe_quotas(self, components: Sequence[QuotaFilterComponent] = (),
                        strict: bool = False) -> dict[QuotaEntity, dict[str, float]]:
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
            raise KafkaError(f"cannot write {document.path}: {exc}", Errors.UNKNOWN_SERVER_ERROR) from exc

    def _install(self, configs: SubscriptionConfigs, quotas: Quotas) -> None:
        self._configs = configs
        self._quota_values = quotas
        self._snapshot = _freeze(self._snapshot.version + 1, configs, quotas)
        self.version = self._snapshot.version
