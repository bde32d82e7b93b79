"""``ktc users alter|describe|delete``: SCRAM credentials (kafka-configs.sh --entity-type
users), stored salted in the data directory; a running collector picks changes up in about a
second."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from collector.app.cli.common import DATA_DIR, kafka_error_exit, kept_here

__all__ = ["users"]


def _credentials(data_dir: str) -> Any:
    from collector.security.credentials_file import DurableCredentialStore

    return DurableCredentialStore(Path(data_dir))


def _alter_users(data_dir: str, deletions: list[Any], upsertions: list[Any]) -> None:
    """Apply through Kafka's rules; a refused change exits 1 with Kafka's error."""
    from collector.security.scram_admin import alter_credentials

    try:
        results = alter_credentials(_credentials(data_dir), deletions, upsertions)
    except Exception as exc:  # an unreadable credentials file
        kafka_error_exit(exc)
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


@click.group()
def users() -> None:
    """Manage SCRAM credentials (kafka-configs.sh --entity-type users), stored salted in
    the data dir; a running server picks changes up in about a second."""


@users.command("alter")
@DATA_DIR
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
    kept_here("users", data_dir)
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
@DATA_DIR
@_USERS_ENTITY_TYPE
@click.option("--entity-name", help="Only this user (default: every user).")
def users_describe(data_dir: str, entity_type: str, entity_name: str | None) -> None:
    """Print each user's SCRAM mechanisms and iterations (never a key)."""
    from collector.security.scram_admin import describe_credentials

    kept_here("users", data_dir)
    try:
        results = describe_credentials(
            _credentials(data_dir), [entity_name] if entity_name else None
        )
    except Exception as exc:
        kafka_error_exit(exc)
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
@DATA_DIR
@_USERS_ENTITY_TYPE
@_ENTITY_NAME
def users_delete(data_dir: str, entity_type: str, entity_name: str) -> None:
    """Remove every SCRAM credential of a user."""
    from collector.security.scram_admin import CredentialDeletion

    kept_here("users", data_dir)
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
