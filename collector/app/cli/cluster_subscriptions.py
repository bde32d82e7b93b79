"""``ktc subscriptions ... --bootstrap-server HOST:PORT``: kafka-client-metrics.sh against a
Kafka cluster (or a gateway in front of one), where a gateway keeps its subscriptions
(``gateway.subscriptions.store: cluster``).

The same options and messages as on a data directory (``subscriptions.admin``), sent as
Kafka's admin requests with the node's own admin connection
(``collector.gateway.cluster_admin``): alter is one IncrementalAlterConfigs (SET for each
option given, DELETE for one given as ``''``), delete DELETEs every key set, describe and
list read what a gateway reads (``cluster_subscriptions.read_client_metrics``). The cluster
validates and authorizes; its error code and message are printed as one line.

``--command-config FILE`` takes the Kafka client properties kafka-client-metrics.sh takes
for a secured listener: ``security.protocol``, ``sasl.mechanism`` with ``sasl.jaas.config``
(PLAIN or SCRAM, ``username="..." password="..."``), and PEM files in
``ssl.truststore.location``, ``ssl.keystore.location`` (key and certificate chain),
``ssl.key.password``, ``ssl.endpoint.identification.algorithm``.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from collector.gateway.cluster_admin import ClusterAdmin
from collector.gateway.cluster_subscriptions import (
    CLIENT_METRICS,
    NotServed,
    read_client_metrics,
)
from collector.net.kafka_cluster import (
    KafkaClusterSettings,
    SaslLogin,
    parse_host_ports,
)
from proto import ApiKeys, Errors, KafkaError
from proto.messages import IncrementalAlterConfigsRequest
from proto.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from subscriptions import admin as local_admin
from subscriptions.model import CONFIG_KEYS

__all__ = ["ClusterCommands", "CommandConfigError", "cluster_admin"]

T = TypeVar("T")

_SET, _DELETE = 0, 1
_JAAS = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


class CommandConfigError(ValueError):
    """A --command-config file the command cannot use (the message says why)."""


def cluster_admin(bootstrap: str, command_config: str | None) -> ClusterAdmin:
    """The admin connection to ``bootstrap`` with the settings of ``command_config``."""
    try:
        servers = parse_host_ports(bootstrap)
    except ValueError as exc:
        raise CommandConfigError(f"--bootstrap-server {bootstrap!r}: {exc}") from None
    settings = _read_properties(Path(command_config)) if command_config else {}
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}:
        raise CommandConfigError(f"security.protocol {protocol} is not served")
    cluster = KafkaClusterSettings(
        bootstrap,
        protocol,
        truststore=settings.get("ssl.truststore.location"),
        keystore=settings.get("ssl.keystore.location") or None,
        key_password=settings.get("ssl.key.password"),
        check_hostname=settings.get("ssl.endpoint.identification.algorithm", "https")
        != "",
    )
    try:
        context = cluster.ssl_context()
    except (OSError, ssl.SSLError) as exc:
        raise CommandConfigError(f"ssl: {exc}") from None
    login = _login(settings) if cluster.sasl else None
    return ClusterAdmin(servers, ssl_context=context, login=login, timeout_s=30.0)


class ClusterCommands:
    """The four verbs of kafka-client-metrics.sh on a cluster's client-metrics configs."""

    def __init__(self, admin: ClusterAdmin) -> None:
        self._admin = admin

    def alter(
        self,
        name: str | None,
        generate_name: bool,
        metrics: str | None,
        interval: str | None,
        match: str | None,
    ) -> str:
        subscription, to_set, to_delete = local_admin.alteration(
            name, generate_name, metrics, interval, match
        )
        self._run(lambda: self._alter(subscription, to_set, to_delete))
        return subscription

    def delete(self, name: str) -> None:
        async def delete() -> None:
            stored = (await self._read()).get(name)
            if stored is None:
                raise local_admin.AdminUsageError(
                    f"Client metrics subscription {name} does not exist."
                )
            await self._alter(name, {}, list(stored))

        self._run(delete)

    def describe(self, name: str | None) -> list[tuple[str, dict[str, str]]]:
        read = self._run(self._read)
        if name is not None and name not in read:
            raise local_admin.AdminUsageError(
                f"Client metrics subscription {name} does not exist."
            )
        names = [name] if name is not None else list(read)
        return [
            (each, {k.name: read[each].get(k.name, k.default) for k in CONFIG_KEYS})
            for each in names
        ]

    def names(self) -> list[str]:
        return list(self._run(self._read))

    # -- internals ----------------------------------------------------------------------

    async def _read(self) -> dict[str, dict[str, str]]:
        try:
            return await read_client_metrics(self._admin)
        except NotServed as exc:
            raise KafkaError(
                f"{self._admin.servers} does not serve CLIENT_METRICS configs: {exc}",
                Errors.UNSUPPORTED_VERSION,
            ) from None

    async def _alter(
        self, name: str, to_set: dict[str, str | None], to_delete: list[str]
    ) -> None:
        configs = tuple(
            AlterableConfig(name=key, config_operation=_SET, value=value)
            for key, value in to_set.items()
        ) + tuple(
            AlterableConfig(name=key, config_operation=_DELETE, value=None)
            for key in to_delete
        )
        answer = await self._admin.ask(
            ApiKeys.INCREMENTAL_ALTER_CONFIGS,
            1,
            IncrementalAlterConfigsRequest(
                resources=(
                    AlterConfigsResource(
                        resource_type=CLIENT_METRICS,
                        resource_name=name,
                        configs=configs,
                    ),
                ),
                validate_only=False,
            ),
        )
        for result in answer.responses:
            if result.error_code != 0:
                raise KafkaError(result.error_message or "", Errors(result.error_code))

    def _run(self, work: Callable[[], Awaitable[T]]) -> T:
        async def run() -> T:
            try:
                return await work()
            finally:
                self._admin.close()

        return asyncio.run(run())


def _read_properties(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandConfigError(f"--command-config {path}: {exc}") from None
    settings: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(":")
        settings[key.strip()] = value.strip()
    return settings


def _login(settings: dict[str, str]) -> SaslLogin:
    mechanism = settings.get("sasl.mechanism", "GSSAPI").upper()
    if mechanism not in {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}:
        raise CommandConfigError(
            f"sasl.mechanism {mechanism}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
        )
    found: dict[str, Any] = dict(_JAAS.findall(settings.get("sasl.jaas.config", "")))
    if "username" not in found or "password" not in found:
        raise CommandConfigError(
            'sasl.jaas.config needs username="..." and password="..."'
        )
    return SaslLogin(mechanism, found["username"], found["password"])
