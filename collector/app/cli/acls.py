"""``ktc acls add|list|remove``: the collector's ACLs in its data directory, with
``kafka-acls.sh``'s flags and output (``AclCommand``) for the resource the collector owns,
the CLUSTER.  A running collector picks changes up at once (the file is watched).

    ktc acls add --data-dir DIR --allow-principal User:CN=ops --operation AlterConfigs --cluster
    ktc acls list --data-dir DIR [--cluster] [--principal User:CN=ops]
    ktc acls remove --data-dir DIR --cluster [--allow-principal ... --operation ...]
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import click
from click.decorators import FC

from collector.app.cli.common import data_dir_option, kafka_error_exit, kept_here
from collector.security.acls import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_principal,
)

__all__ = ["acls"]

_DATA_DIR = data_dir_option("The collector's data directory (config/acls.yaml).")


def _operation(name: str) -> AclOperation:
    """``SecurityUtils.operation``: ``AlterConfigs``, ``alter-configs`` or ``ALTER_CONFIGS``."""
    wanted = name.replace("_", "").replace("-", "").lower()
    for operation in AclOperation:
        if operation.name.replace("_", "").lower() == wanted and operation not in (
            AclOperation.UNKNOWN,
            AclOperation.ANY,
        ):
            return operation
    raise click.BadParameter(
        f"{name} is not a valid operation", param_hint="--operation"
    )


def _pattern_type(name: str) -> PatternType:
    try:
        return PatternType[name.upper()]
    except KeyError:
        raise click.BadParameter(
            f"{name} is not a valid pattern type", param_hint="--resource-pattern-type"
        ) from None


@dataclass(frozen=True, slots=True)
class _Entries:
    """The entry options of ``add`` and ``remove`` as given (AclCommand's flags)."""

    allow_principal: tuple[str, ...]
    deny_principal: tuple[str, ...]
    allow_host: tuple[str, ...]
    deny_host: tuple[str, ...]
    operation: tuple[str, ...]
    cluster: bool
    resource_pattern_type: str

    @property
    def principals(self) -> tuple[str, ...]:
        return (*self.allow_principal, *self.deny_principal)

    def require_cluster(self) -> None:
        """The collector's ACLs are on the CLUSTER: without ``--cluster``, a usage error."""
        if not self.cluster:
            raise click.UsageError(
                "--cluster is required: the collector's ACLs are on the CLUSTER"
            )

    def pattern_type(self) -> PatternType:
        return _pattern_type(self.resource_pattern_type)

    def bindings(
        self, pattern_type: PatternType, operation: Iterable[str]
    ) -> list[AclBinding]:
        """AclCommand.getAcls: principals x hosts ('*' when none) x operations, per
        permission."""
        operations = [_operation(name) for name in operation]
        bindings = []
        for permission, principals, hosts in (
            (AclPermissionType.ALLOW, self.allow_principal, self.allow_host),
            (AclPermissionType.DENY, self.deny_principal, self.deny_host),
        ):
            for principal in principals:
                for host in hosts or (WILDCARD_HOST,):
                    for op in operations:
                        bindings.append(
                            AclBinding(
                                ResourceType.CLUSTER,
                                CLUSTER_NAME,
                                pattern_type,
                                principal,
                                host,
                                op,
                                permission,
                            )
                        )
        return bindings


def _repeatable(flag: str, help: str) -> Callable[[FC], FC]:
    """An entry option that may be given more than once, as AclCommand's may."""
    return click.option(flag, multiple=True, help=f"{help}; repeatable.")


# The click options behind _Entries, in --help order; each one's parameter name is a field
# of _Entries.
_ENTRY_OPTIONS = (
    _repeatable("--allow-principal", "Principal (Type:name) the ACL allows"),
    _repeatable("--deny-principal", "Principal (Type:name) the ACL denies"),
    _repeatable("--allow-host", "Host allowed ('*' if none)"),
    _repeatable("--deny-host", "Host denied ('*' if none)"),
    click.option(
        "--operation",
        multiple=True,
        help="Operation, e.g. AlterConfigs, DescribeConfigs, Alter, Describe, All.",
    ),
    click.option(
        "--cluster", is_flag=True, help="The CLUSTER resource (kafka-cluster)."
    ),
    click.option(
        "--resource-pattern-type",
        default="LITERAL",
        show_default=True,
        help="LITERAL or PREFIXED (list and remove: also ANY, MATCH).",
    ),
)


def _entry_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the entry options to a command, which receives them as its ``entries``
    parameter (an :class:`_Entries`)."""

    # wraps() also copies __click_params__: the options that decorators below this one
    # attached to ``command`` stay, in their --help order.
    @functools.wraps(command)
    def with_entries(**params: Any) -> None:
        entries = _Entries(**{f.name: params.pop(f.name) for f in fields(_Entries)})
        command(entries=entries, **params)

    for option in reversed(_ENTRY_OPTIONS):
        with_entries = option(with_entries)
    return with_entries


def _pattern(resource_type: ResourceType, name: str, pattern_type: PatternType) -> str:
    return (
        f"ResourcePattern(resourceType={resource_type.name}, name={name}, "
        f"patternType={pattern_type.name})"
    )


def _entry(binding: AclBinding) -> str:
    return (
        f"(principal={binding.principal}, host={binding.host}, "
        f"operation={binding.operation.name}, permissionType={binding.permission.name})"
    )


def _print_acls(bindings: Iterable[AclBinding]) -> None:
    by_pattern: dict[str, list[AclBinding]] = {}
    for binding in bindings:
        key = _pattern(
            binding.resource_type, binding.resource_name, binding.pattern_type
        )
        by_pattern.setdefault(key, []).append(binding)
    for pattern, entries in by_pattern.items():
        click.echo(f"Current ACLs for resource `{pattern}`: ")
        click.echo("".join(f" \t{_entry(b)} \n" for b in entries))


def _store(data_dir: str):  # type: ignore[no-untyped-def]
    from collector.security.acls_file import DurableAclStore

    kept_here("acls", data_dir)
    try:
        return DurableAclStore(Path(data_dir))
    except Exception as exc:
        kafka_error_exit(exc)


@click.group()
def acls() -> None:
    """ACLs for the collector's StandardAuthorizer (kafka-acls.sh flags)."""


@acls.command("add")
@_DATA_DIR
@_entry_options
def acls_add(data_dir: str, entries: _Entries) -> None:
    """Add ACLs on the CLUSTER resource."""
    entries.require_cluster()
    if not entries.operation:
        raise click.UsageError("--operation is required with add")
    if not entries.principals:
        raise click.UsageError("give --allow-principal or --deny-principal")
    pattern_type = entries.pattern_type()
    for principal in entries.principals:
        try:
            # AclCommand parses each principal first (SecurityUtils.parseKafkaPrincipal).
            parse_principal(principal)
        except AclError as error:
            click.echo(f"ktc: INVALID_REQUEST: {error}", err=True)
            sys.exit(1)
    bindings = entries.bindings(pattern_type, entries.operation)
    store = _store(data_dir)
    click.echo(
        f"Adding ACLs for resource `{_pattern(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type)}`: "
    )
    click.echo("".join(f" \t{_entry(b)} \n" for b in bindings))
    errors = [
        (b, e) for b, e in zip(bindings, store.create(bindings), strict=True) if e
    ]
    for binding, problem in errors:
        click.echo(f"ktc: INVALID_REQUEST: {problem} ({_entry(binding)})", err=True)
    _print_acls(
        store.acls(AclBindingFilter(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    )
    if errors:
        sys.exit(1)


@acls.command("list")
@_DATA_DIR
@click.option("--principal", help="Only the ACLs of this principal.")
@click.option(
    "--cluster", is_flag=True, help="Only the CLUSTER resource (kafka-cluster)."
)
@click.option(
    "--resource-pattern-type",
    default="ANY",
    show_default=True,
    help="LITERAL, PREFIXED, ANY or MATCH.",
)
def acls_list(
    data_dir: str, principal: str | None, cluster: bool, resource_pattern_type: str
) -> None:
    """List ACLs (all, or of the CLUSTER resource)."""
    pattern_type = _pattern_type(resource_pattern_type)
    acl_filter = AclBindingFilter(
        ResourceType.CLUSTER if cluster else ResourceType.ANY,
        CLUSTER_NAME if cluster else None,
        pattern_type,
        principal,
    )
    _print_acls(_store(data_dir).acls(acl_filter))


@acls.command("remove")
@_DATA_DIR
@_entry_options
def acls_remove(data_dir: str, entries: _Entries) -> None:
    """Remove the named ACLs of the CLUSTER resource (all of them if no principal is given)."""
    entries.require_cluster()
    pattern_type = entries.pattern_type()
    store = _store(data_dir)
    if entries.principals:
        filters = [
            b.to_filter()
            for b in entries.bindings(pattern_type, entries.operation or ("All",))
        ]
        if not entries.operation:  # AclCommand: no --operation removes every operation
            filters = [replace(f, operation=AclOperation.ANY) for f in filters]
    else:
        filters = [AclBindingFilter(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type)]
    removed = [binding for matched in store.delete(filters) for binding in matched]
    click.echo(
        f"Removing ACLs from resource `{_pattern(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type)}`: "
    )
    click.echo("".join(f" \t{_entry(b)} \n" for b in removed))
    _print_acls(
        store.acls(AclBindingFilter(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    )
