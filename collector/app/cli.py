"""``ktc``: the collector's command line (click).

| command                                   | what it does                                    |
|-------------------------------------------|-------------------------------------------------|
| ``ktc serve``                             | run the collector until SIGTERM/SIGINT          |
| ``ktc gateway --upstream HOST:PORT``      | run it as a gateway in front of a Kafka cluster |
| ``ktc validate-config FILE``              | load and validate a config file, print it       |
| ``ktc subscriptions alter|describe|list|delete`` | kafka-client-metrics.sh, on the local store |
| ``ktc subscriptions alter ... --dry-run --server URL`` | what the change would do to the live clients |
| ``ktc clients --server URL``              | the live client instances (``GET /v1/clients``) |
| ``ktc users alter|describe|delete``       | kafka-configs.sh --entity-type users (SCRAM)    |
| ``ktc landing dump``                      | the landing log as JSON lines                    |
| ``ktc ingest|sql|report|thriftserver``    | the lakehouse (when its extra is installed)     |

Configuration errors exit with code 2 and a message naming the key, like click's own
usage errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import yaml

from collector.app.config import CollectorConfig, ConfigError, load_config

__all__ = ["cli", "main"]

log = logging.getLogger(__name__)

CONFIG_ERROR_EXIT = 2


def _fail_config(message: str) -> None:
    click.echo(f"ktc: configuration error: {message}", err=True)
    sys.exit(CONFIG_ERROR_EXIT)


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _load(config_file: str | None, overrides: dict[str, Any]) -> CollectorConfig:
    try:
        return load_config(config_file, overrides=overrides)
    except ConfigError as exc:
        _fail_config(str(exc))
        raise AssertionError("unreachable") from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kafka-telemetry-collector", prog_name="ktc")
def cli() -> None:
    """A KIP-714 client-telemetry collector that speaks the Kafka protocol."""


# ---------------------------------------------------------------------------- serve
@cli.command()
@click.option(
    "--config", "config_file", type=click.Path(dir_okay=False), help="YAML config file."
)
@click.option(
    "--listeners", help="Kafka-style listeners, e.g. PLAINTEXT://0.0.0.0:9092."
)
@click.option(
    "--advertised-listeners",
    help="What Metadata tells clients, e.g. PLAINTEXT://host:9092.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    help="Landing log, config store, meta.properties.",
)
@click.option("--node-id", type=int, help="This node's broker id.")
@click.option("--http-listener", help="host:port for /metrics, /healthz, /readyz.")
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False),
    hidden=True,
    help="Write the bound ports as JSON here once serving (for tests and scripts).",
)
def serve(
    config_file: str | None,
    listeners: str | None,
    advertised_listeners: str | None,
    data_dir: str | None,
    node_id: int | None,
    http_listener: str | None,
    ready_file: str | None,
) -> None:
    """Run the collector until SIGTERM or SIGINT (SIGHUP reloads subscriptions)."""
    config = _load(
        config_file,
        {
            "listeners": listeners,
            "advertised.listeners": advertised_listeners,
            "data.dir": data_dir,
            "node.id": node_id,
            "http.listener": http_listener,
        },
    )
    _setup_logging(config.log_level)
    from collector.app.server import install_uvloop

    install_uvloop()
    exit_code = asyncio.run(_serve(config, ready_file))
    sys.exit(exit_code)


async def _serve(
    config: CollectorConfig, ready_file: str | None, *, gateway: bool = False
) -> int:
    from collector.app.process_tuning import tune_serving_process
    from collector.app.server import CollectorServer, StartupError
    from collector.net.listeners import ListenerError

    server: CollectorServer
    try:
        if gateway:
            from collector.app.gateway_server import GatewayServer

            server = GatewayServer(config)
        else:
            server = CollectorServer(config)
    except StartupError as exc:
        click.echo(f"ktc: cannot start: {exc}", err=True)
        return CONFIG_ERROR_EXIT
    try:
        await server.start()
    except (StartupError, ListenerError) as exc:
        click.echo(f"ktc: cannot start: {exc}", err=True)
        await server.stop()
        return CONFIG_ERROR_EXIT
    server.install_signal_handlers()
    # GC thresholds and glibc heap trimming, as collector/app/process_tuning.py explains.
    log.debug("process tuning: %s", tune_serving_process())
    if ready_file:
        info = {
            "listeners": {name: e.port for name, e in server.bound.items()},
            "http_port": server.http_port,
            "cluster_id": server.cluster_id,
        }
        topology = getattr(server, "topology", None)
        if topology is not None:
            info["node_ports"] = {
                str(node): port for node, port in topology.ports.items()
            }
        tmp = Path(ready_file + ".tmp")
        tmp.write_text(json.dumps(info))
        tmp.replace(ready_file)
    await server.wait_stopped()
    return 0


# ---------------------------------------------------------------------------- gateway
@cli.command()
@click.option(
    "--upstream",
    help="The cluster's bootstrap servers, HOST:PORT[,HOST:PORT...] "
    "(gateway.upstream.bootstrap.servers).",
)
@click.option(
    "--listeners", help="The bootstrap listener, e.g. PLAINTEXT://0.0.0.0:9092."
)
@click.option(
    "--broker-port-start",
    type=int,
    help="Upstream node n is served on this port + n - gateway.min.node.id; 0 picks free ports "
    "(gateway.broker.port.start).",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    help="Landing log, config store, learned topology.",
)
@click.option(
    "--config", "config_file", type=click.Path(dir_okay=False), help="YAML config file."
)
@click.option(
    "--advertised-host",
    help="The host clients are sent to for every broker (gateway.advertised.host).",
)
@click.option("--http-listener", help="host:port for /metrics, /healthz, /readyz.")
@click.option("--ready-file", type=click.Path(dir_okay=False), hidden=True)
def gateway(
    upstream: str | None,
    listeners: str | None,
    broker_port_start: int | None,
    data_dir: str | None,
    config_file: str | None,
    advertised_host: str | None,
    http_listener: str | None,
    ready_file: str | None,
) -> None:
    """Run as a gateway in front of a Kafka-compatible cluster: forward clients' traffic,
    terminate their telemetry, apply quotas (SIGTERM drains, SIGHUP reloads)."""
    config = _load(
        config_file,
        {
            "gateway.upstream.bootstrap.servers": upstream,
            "listeners": listeners,
            "gateway.broker.port.start": broker_port_start,
            "data.dir": data_dir,
            "gateway.advertised.host": advertised_host,
            "http.listener": http_listener,
        },
    )
    if not config.gateway_upstream_bootstrap_servers:
        _fail_config(
            "gateway mode needs the upstream cluster: --upstream HOST:PORT[,HOST:PORT...] "
            "or gateway.upstream.bootstrap.servers in the config file"
        )
    _setup_logging(config.log_level)
    from collector.app.server import install_uvloop

    install_uvloop()
    sys.exit(asyncio.run(_serve(config, ready_file, gateway=True)))


# ---------------------------------------------------------------------------- config
@cli.command("validate-config")
@click.argument("config_file", type=click.Path(dir_okay=False))
def validate_config(config_file: str) -> None:
    """Validate FILE (plus KTC_* environment overrides) and print the effective config."""
    config = _load(config_file, {})
    from collector.net.listeners import (
        ListenerError,
        parse_listeners,
        parse_security_protocol_map,
    )

    try:
        protocols = parse_security_protocol_map(config.listener_security_protocol_map)
        parse_listeners(config.listeners, protocols)
        if config.advertised_listeners:
            parse_listeners(
                config.advertised_listeners, protocols, key="advertised.listeners"
            )
    except ListenerError as exc:
        _fail_config(str(exc))
    if config.exporters_otlp is not None:
        from pydantic import ValidationError

        from exporters.otlp import OtlpExporterConfig

        try:
            OtlpExporterConfig.model_validate(config.exporters_otlp)
        except ValidationError as exc:
            # Named problems without the values (a header may hold a token).
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}"
                for e in exc.errors(include_input=False)
            )
            _fail_config(f"exporters.otlp: {problems}")
    from collector.security.secrets import redact

    # Password-typed keys print as [hidden], as Kafka logs its configs.
    click.echo(yaml.safe_dump(redact(config.to_dotted()), sort_keys=False).rstrip())
    click.echo(f"# {config_file}: valid", err=True)


# ---------------------------------------------------------------------------- subscriptions
def _store(data_dir: str) -> Any:
    from subscriptions.store import ConfigStore

    return ConfigStore(Path(data_dir))


def _kafka_error_exit(exc: Exception) -> None:
    code = getattr(exc, "error_code", None)
    name = getattr(code, "name", code)
    click.echo(f"ktc: {name}: {exc}" if name is not None else f"ktc: {exc}", err=True)
    sys.exit(1)


_DATA_DIR = click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default="data",
    show_default=True,
    envvar="KTC_DATA_DIR",
    help="The collector's data directory (its config store).",
)


@cli.group()
def subscriptions() -> None:
    """Manage client-metrics subscriptions (like kafka-client-metrics.sh)."""


@subscriptions.command("alter")
@_DATA_DIR
@click.option("--name", help="Subscription name.")
@click.option(
    "--generate-name", is_flag=True, help="Use a random Kafka Uuid as the name."
)
@click.option(
    "--metrics", help="Comma-separated metric name prefixes; '*' = all; '' resets."
)
@click.option(
    "--interval", help="Push interval in ms (100..3600000); '' resets to 300000."
)
@click.option(
    "--match",
    help="k1=regex1,k2=regex2 over client_id, client_instance_id, "
    "client_software_name/version, client_source_address/port; '' resets.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Store nothing: print what the change would do to the live clients of --server.",
)
@click.option(
    "--server",
    help="With --dry-run: the collector's HTTP listener, e.g. http://host:8888.",
)
@click.option(
    "--admin-secret",
    envvar="KTC_HTTP_ADMIN_SECRET",
    help="With --dry-run: the collector's http.admin.secret, when it has one.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="With --dry-run: how to print the preview.",
)
def subscriptions_alter(
    data_dir: str,
    name: str | None,
    generate_name: bool,
    metrics: str | None,
    interval: str | None,
    match: str | None,
    dry_run: bool,
    server: str | None,
    admin_secret: str | None,
    output_format: str,
) -> None:
    """Create or change a subscription; options not given stay as they are.

    With --dry-run --server URL nothing is stored: the collector evaluates the change
    against its live client instances (POST /v1/subscriptions/preview) and this prints,
    per affected instance, old -> new metrics, interval and subscription id."""
    from subscriptions import admin

    if bool(name) == bool(generate_name):
        raise click.UsageError("give exactly one of --name and --generate-name")
    if dry_run != (server is not None):
        raise click.UsageError("--dry-run and --server go together")
    if dry_run:
        from collector.app.admin_client import post_preview, print_preview

        options = {
            "name": name,
            "generate_name": generate_name,
            "metrics": metrics,
            "interval": interval,
            "match": match,
        }
        assert server is not None
        print_preview(post_preview(server, admin_secret, options), output_format)
        return
    try:
        altered = admin.alter(
            _store(data_dir),
            name,
            generate_name=generate_name,
            metrics=metrics,
            interval=interval,
            match=match,
        )
    except Exception as exc:  # noqa: BLE001 - KafkaError with its code, or a store error
        _kafka_error_exit(exc)
    click.echo(f"Altered client metrics config for {altered}.")


@subscriptions.command("delete")
@_DATA_DIR
@click.option("--name", required=True, help="Subscription name.")
def subscriptions_delete(data_dir: str, name: str) -> None:
    """Delete a subscription (every key)."""
    from subscriptions import admin

    try:
        admin.delete(_store(data_dir), name)
    except Exception as exc:  # noqa: BLE001
        _kafka_error_exit(exc)
    click.echo(f"Deleted client metrics config for {name}.")


@subscriptions.command("describe")
@_DATA_DIR
@click.option("--name", help="Only this subscription.")
def subscriptions_describe(data_dir: str, name: str | None) -> None:
    """Print each subscription's keys as key=value lines."""
    from subscriptions import admin

    try:
        described = admin.describe(_store(data_dir), name)
    except Exception as exc:  # noqa: BLE001
        _kafka_error_exit(exc)
    for sub_name, configs in described:
        click.echo(f"Client metrics configs for {sub_name} are:")
        for key, value in configs.items():
            click.echo(f"  {key}={value}")


@subscriptions.command("list")
@_DATA_DIR
def subscriptions_list(data_dir: str) -> None:
    """Print subscription names, one per line."""
    from subscriptions import admin

    for sub_name in admin.list(_store(data_dir)):
        click.echo(sub_name)


# ---------------------------------------------------------------------------- quotas
# kafka-configs.sh --entity-type values for client quotas -> Kafka's entity type.
_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}


@dataclasses.dataclass(frozen=True, slots=True)
class _EntityOptions:
    """kafka-configs.sh's entity options as given, in both of its spellings:
    ``--user alice --client-defaults`` and ``--entity-type users --entity-name alice
    --entity-type clients --entity-default`` (names or defaults pair with the types in
    order; to mix a name and a default, use the first spelling)."""

    user: str | None
    user_default: bool
    client_id: str | None
    client_default: bool
    ip: str | None
    ip_default: bool
    entity_types: tuple[str, ...]
    entity_names: tuple[str, ...]
    entity_defaults: int

    def entity(self) -> dict[str, str | None]:
        """Kafka's entity map: entity type -> name, None for the default entity."""
        entity: dict[str, str | None] = {}
        for kind, name, default in (
            ("user", self.user, self.user_default),
            ("client-id", self.client_id, self.client_default),
            ("ip", self.ip, self.ip_default),
        ):
            if name is not None and default:
                raise click.UsageError(
                    f"give either --{kind} or --{kind}-defaults, not both"
                )
            if name is not None or default:
                entity[kind] = name
        if self.entity_types or self.entity_names or self.entity_defaults:
            if len(self.entity_names) + self.entity_defaults != len(self.entity_types):
                raise click.UsageError(
                    "give one --entity-name or --entity-default for each --entity-type"
                )
            if self.entity_names and self.entity_defaults:
                raise click.UsageError(
                    "to mix a name and a default, use --user/--client/--ip with "
                    "--user-defaults/--client-defaults/--ip-defaults"
                )
            names: tuple[str | None, ...] = (
                self.entity_names or (None,) * self.entity_defaults
            )
            for entity_type, name in zip(self.entity_types, names, strict=True):
                kind = _ENTITY_TYPES[entity_type]
                if kind in entity:
                    raise click.UsageError(f"the {entity_type} entity is given twice")
                entity[kind] = name
        return entity


# The click options behind _EntityOptions, in --help order; each one's parameter name is a
# field of _EntityOptions.
_ENTITY_OPTIONS = (
    click.option("--user", help="User principal name."),
    click.option(
        "--user-defaults",
        "--user-default",
        "user_default",
        is_flag=True,
        help="The default user entity.",
    ),
    click.option("--client", "--client-id", "client_id", help="Client id."),
    click.option(
        "--client-defaults",
        "--client-id-default",
        "client_default",
        is_flag=True,
        help="The default client-id entity.",
    ),
    click.option("--ip", help="Client IP address (connection_creation_rate only)."),
    click.option(
        "--ip-defaults",
        "--ip-default",
        "ip_default",
        is_flag=True,
        help="The default IP entity.",
    ),
    click.option(
        "--entity-type",
        "entity_types",
        multiple=True,
        type=click.Choice(sorted(_ENTITY_TYPES)),
        help="users, clients or ips (kafka-configs.sh style; repeat for user + client).",
    ),
    click.option(
        "--entity-name",
        "entity_names",
        multiple=True,
        help="Name for an --entity-type.",
    ),
    click.option(
        "--entity-default",
        "entity_defaults",
        count=True,
        help="The default entity of an --entity-type.",
    ),
)


def _entity_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the entity options to a command, which receives the entity they select as its
    ``entity`` parameter (options that contradict each other are a usage error, exit 2)."""

    # wraps() also copies __click_params__: the options that decorators below this one
    # attached to ``command`` stay, in their --help order.
    @functools.wraps(command)
    def with_entity(**params: Any) -> None:
        given = _EntityOptions(
            **{f.name: params.pop(f.name) for f in dataclasses.fields(_EntityOptions)}
        )
        command(entity=given.entity(), **params)

    for option in reversed(_ENTITY_OPTIONS):
        with_entity = option(with_entity)
    return with_entity


def _describe_entity(entity: Any) -> str:
    labels = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
    return ", ".join(
        f"{labels[kind]} '{'<default>' if name is None else name}'"
        for kind, name in entity.entries
    )


@cli.group()
def quotas() -> None:
    """Manage client quotas (kafka-configs.sh's options: --entity-type users|clients|ips
    --entity-name X | --entity-default, or --user/--client/--ip and their -defaults)."""


@quotas.command("alter")
@_DATA_DIR
@_entity_options
@click.option(
    "--add-config",
    default="",
    help="k1=v1,k2=v2: producer_byte_rate, consumer_byte_rate, "
    "request_percentage, controller_mutation_rate, connection_creation_rate.",
)
@click.option("--delete-config", default="", help="k1,k2: keys to remove.")
def quotas_alter(
    data_dir: str, entity: dict[str, str | None], add_config: str, delete_config: str
) -> None:
    """Set or remove quotas of one entity (a running server picks them up in about a second)."""
    to_set: dict[str, object] = {}
    for item in filter(None, (p.strip() for p in add_config.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise click.UsageError(f"--add-config: {item!r} is not key=value")
        # A number is passed as one; other text as it is, for the store to refuse with the
        # same message as a quotas.yaml value or an AlterClientQuotas request would get.
        to_set[key.strip()] = _number_or_text(value.strip())
    to_delete = [k.strip() for k in delete_config.split(",") if k.strip()]
    if not to_set and not to_delete:
        raise click.UsageError("give --add-config and/or --delete-config")
    try:
        _store(data_dir).alter_quotas(entity, to_set, to_delete)
    except Exception as exc:  # noqa: BLE001 - KafkaError with its code
        _kafka_error_exit(exc)
    click.echo("Completed updating config for the entity.")


def _number_or_text(text: str) -> object:
    """``100`` is a number; ``"100"`` (quoted) and anything else that is not a number is
    text, which the store refuses with the message it gives a quoted value in quotas.yaml."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    try:
        return float(text)
    except ValueError:
        return text


@quotas.command("describe")
@_DATA_DIR
@_entity_options
def quotas_describe(data_dir: str, entity: dict[str, str | None]) -> None:
    """Print the quotas of matching entities (no option: all)."""
    from subscriptions.quotas import QuotaFilterComponent

    components = [QuotaFilterComponent(kind, name) for kind, name in entity.items()]
    try:
        found = _store(data_dir).describe_quotas(components)
    except Exception as exc:  # noqa: BLE001
        _kafka_error_exit(exc)
    for quota_entity, values in found.items():
        rendered = ",".join(f"{k}={v}" for k, v in sorted(values.items()))
        click.echo(f"Quota configs for {_describe_entity(quota_entity)} are {rendered}")


# ---------------------------------------------------------------------------- users
def _credentials(data_dir: str) -> Any:
    from collector.security.credentials_file import DurableCredentialStore

    return DurableCredentialStore(Path(data_dir))


def _alter_users(data_dir: str, deletions: list[Any], upsertions: list[Any]) -> None:
    """Apply through Kafka's rules; a refused change exits 1 with Kafka's error."""
    from collector.security.scram_admin import alter_credentials

    try:
        results = alter_credentials(_credentials(data_dir), deletions, upsertions)
    except Exception as exc:  # noqa: BLE001 - an unreadable credentials file
        _kafka_error_exit(exc)
    failed = [r for r in results if r.error != 0]
    for result in failed:
        click.echo(f"ktc: {result.error.name}: {result.message}", err=True)
    if failed:
        sys.exit(1)


_ENTITY_NAME = click.option("--entity-name", required=True, help="The user name.")
_USERS_ENTITY_TYPE = click.option(
    "--entity-type",
    type=click.Choice(["users"]),
    default="users",
    help="Accepted for kafka-configs.sh compatibility: users only.",
)


@cli.group()
def users() -> None:
    """Manage SCRAM credentials (kafka-configs.sh --entity-type users), stored salted in
    the data dir; a running server picks changes up in about a second."""


@users.command("alter")
@_DATA_DIR
@_USERS_ENTITY_TYPE
@_ENTITY_NAME
@click.option(
    "--add-config",
    default="",
    help="'SCRAM-SHA-512=[iterations=8192,password=...],SCRAM-SHA-256=[password=...]' "
    "(iterations 4096..16384, default 4096).",
)
@click.option(
    "--delete-config", default="", help="'SCRAM-SHA-256,SCRAM-SHA-512': to remove."
)
def users_alter(
    data_dir: str,
    entity_type: str,
    entity_name: str,
    add_config: str,
    delete_config: str,
) -> None:
    """Add, change or remove a user's SCRAM credentials."""
    from collector.security.credentials import new_salt, salted_password
    from collector.security.scram_admin import CredentialDeletion, CredentialUpsertion
    from collector.security.scram_config import parse_add_config, parse_delete_config

    try:
        added = parse_add_config(add_config)
        removed = parse_delete_config(delete_config)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if not added and not removed:
        raise click.UsageError("give --add-config and/or --delete-config")
    if {c.mechanism for c in added} & set(removed):
        raise click.UsageError("a mechanism is both added and deleted")
    for config in added:  # Kafka's bounds, before any (costly) derivation
        mechanism = config.mechanism
        if (
            not mechanism.min_iterations
            <= config.iterations
            <= mechanism.max_iterations
        ):
            raise click.UsageError(
                f"{mechanism.mechanism_name}: iterations must be from {mechanism.min_iterations}"
                f" to {mechanism.max_iterations} (Kafka: UNACCEPTABLE_CREDENTIAL)"
            )
    upsertions = []
    for config in added:
        salt = new_salt()
        upsertions.append(
            CredentialUpsertion(
                entity_name,
                config.mechanism.type_id,
                config.iterations,
                salt,
                salted_password(
                    config.mechanism, config.password, salt, config.iterations
                ),
            )
        )
    # Kafka's controller takes one change per user and request (DUPLICATE_RESOURCE for a
    # second one): each mechanism is its own alteration.
    for mechanism in removed:
        _alter_users(data_dir, [CredentialDeletion(entity_name, mechanism.type_id)], [])
    for upsertion in upsertions:
        _alter_users(data_dir, [], [upsertion])
    click.echo(f"Completed updating config for user {entity_name}.")


@users.command("describe")
@_DATA_DIR
@_USERS_ENTITY_TYPE
@click.option("--entity-name", help="Only this user (default: every user).")
def users_describe(data_dir: str, entity_type: str, entity_name: str | None) -> None:
    """Print each user's SCRAM mechanisms and iterations (never a key)."""
    from collector.security.scram_admin import describe_credentials

    try:
        results = describe_credentials(
            _credentials(data_dir), [entity_name] if entity_name else None
        )
    except Exception as exc:  # noqa: BLE001
        _kafka_error_exit(exc)
    for result in results:
        if result.error != 0:
            click.echo(f"ktc: {result.error.name}: {result.message}", err=True)
            sys.exit(1)
        rendered = ", ".join(
            f"{m.mechanism_name}=iterations={i}" for m, i in result.credentials
        )
        click.echo(
            f"SCRAM credential configs for user-principal '{result.user}' are {rendered}"
        )


@users.command("delete")
@_DATA_DIR
@_USERS_ENTITY_TYPE
@_ENTITY_NAME
def users_delete(data_dir: str, entity_type: str, entity_name: str) -> None:
    """Remove every SCRAM credential of a user."""
    from collector.security.scram_admin import CredentialDeletion

    mechanisms = _credentials(data_dir).users().get(entity_name, {})
    if not mechanisms:
        click.echo(
            f"ktc: RESOURCE_NOT_FOUND: user {entity_name!r} has no SCRAM credentials",
            err=True,
        )
        sys.exit(1)
    for mechanism in list(mechanisms):
        _alter_users(data_dir, [CredentialDeletion(entity_name, mechanism.type_id)], [])
    click.echo(f"Deleted SCRAM credentials of user {entity_name}.")


# ---------------------------------------------------------------------------- landing
@cli.group()
def landing() -> None:
    """Inspect the landing log."""


@landing.command("dump")
@_DATA_DIR
@click.option("--from-offset", type=int, default=0, show_default=True)
@click.option(
    "--node-id", type=int, help="Only this node's log (default: every node's)."
)
def landing_dump(data_dir: str, from_offset: int, node_id: int | None) -> None:
    """Print landed pushes as JSON lines: offset, context, decoded metrics."""
    from exporters.landing.dump import dump_records
    from exporters.landing.layout import landing_directory, node_directories

    if node_id is not None:
        directories = [landing_directory(Path(data_dir), node_id)]
    else:
        directories = node_directories(Path(data_dir))
    for record in dump_records(directories, from_offset=from_offset):
        click.echo(json.dumps(record, separators=(",", ":")))


# The lakehouse extra's commands and what they need beyond the collector's dependencies.
LAKEHOUSE_COMMANDS = ("ingest", "sql", "report", "thriftserver", "lake")
LAKEHOUSE_MODULES = ("pyspark", "pyarrow", "matplotlib")
LAKEHOUSE_INSTALL = "pip install 'kafka-telemetry-collector[lakehouse]'"


def _missing_modules(names: tuple[str, ...]) -> list[str]:
    """The modules of ``names`` that cannot be imported, found without importing them
    (pyspark's import alone costs a tenth of a second at every ``ktc`` start)."""
    import importlib.util

    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def _unavailable_command(name: str, message: str, exit_code: int) -> click.Command:
    """A stand-in for a command that cannot run here: whatever its arguments, it says
    why and exits with ``exit_code``."""

    def explain(args: tuple[str, ...]) -> None:
        click.echo(f"ktc {name}: {message}", err=True)
        sys.exit(exit_code)

    return click.Command(
        name,
        callback=explain,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        help=f"(unavailable: {message})",
        context_settings={"ignore_unknown_options": True, "help_option_names": []},
    )


def _add_optional_commands() -> None:
    """The lakehouse commands, when the lakehouse extra is installed; without it, commands
    that say how to install it (exit 2, a usage error); when its code fails to import, commands
    that show that error (exit 1), so ``ktc serve`` still runs either way."""
    missing = _missing_modules(LAKEHOUSE_MODULES)
    if missing:
        message = f"needs the lakehouse extra ({', '.join(missing)} not installed): {LAKEHOUSE_INSTALL}"
        for name in LAKEHOUSE_COMMANDS:
            cli.add_command(_unavailable_command(name, message, CONFIG_ERROR_EXIT))
        return
    try:
        from exporters.lakehouse import cli as lake_cli
    except Exception as exc:  # noqa: BLE001 - shown by every lakehouse command instead
        message = f"the lakehouse cannot be loaded: {type(exc).__name__}: {exc}"
        for name in LAKEHOUSE_COMMANDS:
            cli.add_command(_unavailable_command(name, message, 1))
        return
    for command in (
        lake_cli.ingest_command,
        lake_cli.sql_command,
        lake_cli.report_command,
        lake_cli.thriftserver_command,
        lake_cli.lake_group,
    ):
        cli.add_command(command)


_add_optional_commands()


def _add_admin_client_commands() -> None:
    from collector.app.admin_client import clients

    cli.add_command(clients)


_add_admin_client_commands()


def _add_security_commands() -> None:
    from collector.app.acls_cli import acls

    cli.add_command(acls)


_add_security_commands()


def main() -> None:
    cli(prog_name="ktc")


if __name__ == "__main__":
    main()
