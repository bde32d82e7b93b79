"""Kafka's ``StandardAuthorizer``: may this connection's principal do this operation on
this resource?

The rules, in ``StandardAuthorizerData.authorize`` / ``findAclRule`` / ``findResult`` order:

| step | rule |
|---|---|
| 1 | a principal in ``super.users`` (``;``-separated, e.g. ``User:admin;User:CN=ops``) is allowed |
| 2 | the ACLs that apply to the resource: same type and a LITERAL name equal to it, a PREFIXED name it starts with, or the LITERAL wildcard ``*`` |
| 3 | an ACL matches the request if its principal is the session's or ``User:*``, its host is the client's address or ``*``, and its operation is the request's, or ALL; an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, an ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS (never for DENY) |
| 4 | a matching DENY denies, whatever else matches |
| 5 | else a matching ALLOW allows |
| 6 | else, if no ACL applies to the resource at all, ``allow.everyone.if.no.acl.found`` (default false) decides; if ACLs apply but none matched, denied |

Any principal a :class:`~collector.core.session.Session` carries works (an mTLS subject, a
SASL user): principals compare as Kafka's ``KafkaPrincipal`` (type and name).  A denial is
written to the audit log (``collector.security.audit``, Kafka's ``kafka.authorizer.logger``
line) at INFO.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

from collector.core.session import Session
from collector.security.acl_store import AclStore
from collector.security.acls import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_principal,
)

__all__ = ["StandardAuthorizer", "parse_super_users"]

audit = logging.getLogger("collector.security.audit")

# The operations an ALLOW ACL implies besides its own (StandardAuthorizerData).
_IMPLIED_BY: Final = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}
_WILDCARD_PRINCIPAL: Final = parse_principal(WILDCARD_PRINCIPAL)


def parse_super_users(value: str) -> frozenset[str]:
    """``StandardAuthorizer.getConfiguredSuperUsers``: ``;``-separated, blanks dropped,
    each ``Type:name`` (raises :class:`AclError` naming the bad one)."""
    users = set()
    for part in value.split(";"):
        principal = part.strip()
        if principal:
            parse_principal(principal)
            users.add(principal)
    return frozenset(users)


def _applies_to(binding: AclBinding, resource_type: ResourceType, name: str) -> bool:
    """Step 2: the ACL's resource pattern covers the (literal) resource."""
    if binding.resource_type != resource_type:
        return False
    if binding.pattern_type == PatternType.PREFIXED:
        return name.startswith(binding.resource_name)
    return binding.resource_name in (name, WILDCARD_RESOURCE)


def _result(
    binding: AclBinding,
    principals: tuple[tuple[str, str], ...],
    host: str,
    operation: AclOperation,
) -> AclPermissionType | None:
    """Step 3 (``findResult``): the ACL's permission if it matches the request, else None."""
    try:
        if parse_principal(binding.principal) not in principals:
            return None
    except AclError:
        return None
    if binding.host != WILDCARD_HOST and binding.host != host:
        return None
    if binding.operation != AclOperation.ALL:
        if binding.permission == AclPermissionType.ALLOW:
            if binding.operation not in _IMPLIED_BY.get(operation, (operation,)):
                return None
        elif binding.operation != operation:
            return None
    return binding.permission


class StandardAuthorizer:
    """Authorizes against the ACLs of ``acls`` (read on every call: a change is in force
    at once)."""

    def __init__(
        self,
        acls: AclStore,
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.acls = acls
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found

    def authorize(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType = ResourceType.CLUSTER,
        resource_name: str = CLUSTER_NAME,
        *,
        request_name: str = "",
    ) -> bool:
        rule, allowed = self._decide(session, operation, resource_type, resource_name)
        if not allowed:
            audit.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s:%s "
                "for request = %s with resourceRefCount = 1 based on rule %s",
                session.principal,
                operation.name,
                _host(session),
                resource_type.name,
                PatternType.LITERAL.name,
                resource_name,
                request_name,
                rule,
            )
        return allowed

    def authorized_operations(
        self,
        session: Session,
        resource_type: ResourceType,
        resource_name: str,
        operations: Iterable[AclOperation],
    ) -> int:
        """``AuthHelper.authorizedOperations``: the 32-bit field of ``operations`` the
        session may perform on the resource (bit = operation code), not audited, as Kafka
        asks with ``logIfDenied`` false."""
        bits = 0
        for operation in operations:
            if self._decide(session, operation, resource_type, resource_name)[1]:
                bits |= 1 << operation
        return bits

    def _decide(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> tuple[str, bool]:
        principal = session.principal
        if principal in self.super_users:
            return "SuperUser", True
        principals: tuple[tuple[str, str], ...]
        try:
            principals = (parse_principal(principal), _WILDCARD_PRINCIPAL)
        except AclError:
            principals = (_WILDCARD_PRINCIPAL,)
        host = _host(session)
        has_resource_acls = False
        allow: AclBinding | None = None
        for binding in self.acls.bindings():
            if not _applies_to(binding, resource_type, resource_name):
                continue
            has_resource_acls = True
            result = _result(binding, principals, host, operation)
            if result == AclPermissionType.DENY:
                return f"MatchingAcl(acl={binding})", False
            if result == AclPermissionType.ALLOW:
                allow = binding
        if allow is not None:
            return f"MatchingAcl(acl={allow})", True
        if not has_resource_acls:
            if self.allow_everyone_if_no_acl_found:
                return "DefaultAllow", True
            return "DefaultDeny", False
        return "DefaultDeny", False


def _host(session: Session) -> str:
    """The client's address as Java's ``InetAddress.getHostAddress`` writes it (what ACL
    hosts are compared with)."""
    return session.client_source_address or session.peer_ip
