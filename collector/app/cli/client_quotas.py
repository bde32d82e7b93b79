"""``ktc quotas alter|describe``: client quotas in the collector's config store, with
kafka-configs.sh's entity options in both of its spellings (a running collector picks
changes up in about a second)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import click
from click.decorators import FC

from collector.app.cli.common import (
    DATA_DIR,
    config_store,
    kafka_error_exit,
    kept_here,
)

__all__ = ["quotas"]


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


def _default_entity(
    flag: str, alias: str, name: str, entity: str
) -> Callable[[FC], FC]:
    """kafka-configs.sh's flag for the default entity of a type, in both its spellings."""
    return click.option(
        flag, alias, name, is_flag=True, help=f"The default {entity} entity."
    )


# The click options behind _EntityOptions, in --help order; each one's parameter name is a
# field of _EntityOptions.
_ENTITY_OPTIONS = (
    click.option("--user", help="User principal name."),
    _default_entity("--user-defaults", "--user-default", "user_default", "user"),
    click.option("--client", "--client-id", "client_id", help="Client id."),
    _default_entity(
        "--client-defaults", "--client-id-default", "client_default", "client-id"
    ),
    click.option("--ip", help="Client IP address (connection_creation_rate only)."),
    _default_entity("--ip-defaults", "--ip-default", "ip_default", "IP"),
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


@click.group()
def quotas() -> None:
    """Manage client quotas (kafka-configs.sh's options: --entity-type users|clients|ips
    --entity-name X | --entity-default, or --user/--client/--ip and their -defaults)."""


@quotas.command("alter")
@DATA_DIR
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
    kept_here("quotas", data_dir)
    try:
        config_store(data_dir).alter_quotas(entity, to_set, to_delete)
    except Exception as exc:  # a KafkaError with its code
        kafka_error_exit(exc)
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
@DATA_DIR
@_entity_options
def quotas_describe(data_dir: str, entity: dict[str, str | None]) -> None:
    """Print the quotas of matching entities (no option: all)."""
    from subscriptions.quota_entities import QuotaFilterComponent

    components = [QuotaFilterComponent(kind, name) for kind, name in entity.items()]
    kept_here("quotas", data_dir)
    try:
        found = config_store(data_dir).describe_quotas(components)
    except Exception as exc:
        kafka_error_exit(exc)
    for quota_entity, values in found.items():
        rendered = ",".join(f"{k}={v}" for k, v in sorted(values.items()))
        click.echo(f"Quota configs for {_describe_entity(quota_entity)} are {rendered}")
