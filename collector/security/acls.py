"""Kafka's ACL model: resource patterns, access control entries, bindings and filters.

A port of ``org.apache.kafka.common.acl`` / ``common.resource`` (``AclBinding``,
``AclBindingFilter``, ``ResourcePatternFilter.matches``, ``AccessControlEntryFilter.matches``)
with Kafka's wire codes, and the checks a new ACL passes (``AclApis.handleCreateAcls``, then
``AclControlManager.validateNewAcl``), each with Kafka's message.

The collector owns one resource Kafka authorizes its APIs against: the CLUSTER (named
``kafka-cluster``).  Bindings on other resource types would never be consulted, so they are
refused (:data:`SERVED_RESOURCE_TYPES`); every other rule is Kafka's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

__all__ = [
    "CLUSTER_NAME",
    "SERVED_RESOURCE_TYPES",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AclBinding",
    "AclBindingFilter",
    "AclError",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "parse_principal",
    "validate_new_acl",
]


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, the name matched exactly
    MATCH = 2  # filters only: every pattern that would apply to the name
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME: Final = "kafka-cluster"  # Resource.CLUSTER_NAME
WILDCARD_RESOURCE: Final = "*"  # ResourcePattern.WILDCARD_RESOURCE
WILDCARD_HOST: Final = "*"
WILDCARD_PRINCIPAL: Final = "User:*"
# The resource types whose ACLs the collector consults (see the module docstring).
SERVED_RESOURCE_TYPES: Final = frozenset({ResourceType.CLUSTER})


class AclError(Exception):
    """An ACL Kafka would refuse: INVALID_REQUEST (42) with Kafka's message."""


class AclInternalError(AclError):
    """An ACL Kafka 4.4.0's controller fails on without saying why (a pattern type,
    operation or permission of ANY/MATCH/UNKNOWN): UNKNOWN_SERVER_ERROR (-1), no message."""


def _enum_from_code(kind: type[enum.IntEnum], code: int) -> enum.IntEnum:
    """``ResourceType.fromCode`` and friends: an unknown code is UNKNOWN."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def parse_principal(text: str) -> tuple[str, str]:
    """``SecurityUtils.parseKafkaPrincipal``: ``"User:alice"`` -> ``("User", "alice")``."""
    principal_type, colon, name = text.partition(":")
    if not text or not colon:
        raise AclError(
            f"expected a string in format principalType:principalName but got {text}"
        )
    return principal_type, name


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry (``AclBinding``)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def from_codes(
        cls,
        resource_type: int,
        resource_name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission: int,
    ) -> AclBinding:
        # The codes read as a filter's are (an unknown code is UNKNOWN).
        read = AclBindingFilter.from_codes(
            resource_type,
            resource_name,
            pattern_type,
            principal,
            host,
            operation,
            permission,
        )
        return cls(
            read.resource_type,
            resource_name,
            read.pattern_type,
            principal,
            host,
            read.operation,
            read.permission,
        )

    def to_filter(self) -> AclBindingFilter:
        """The filter that matches exactly this binding (Kafka's ``AclBinding.toFilter``)."""
        return AclBindingFilter(
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission,
        )

    @property
    def pattern_key(self) -> str:
        """``CLUSTER:LITERAL:kafka-cluster``: the resource pattern as the audit log and
        the ACL file name it (type, pattern type, name; the name may hold colons)."""
        return (
            f"{self.resource_type.name}:{self.pattern_type.name}:{self.resource_name}"
        )

    def __str__(self) -> str:
        return (
            f"(pattern=ResourcePattern(resourceType={self.resource_type.name}, "
            f"name={self.resource_name}, patternType={self.pattern_type.name}), "
            f"entry=(principal={self.principal}, host={self.host}, "
            f"operation={self.operation.name}, permissionType={self.permission.name}))"
        )


def validate_new_acl(binding: AclBinding) -> None:
    """Raise :class:`AclError` for an ACL Kafka refuses to create, in Kafka's order:
    ``AclApis.handleCreateAcls`` (the cluster's name, an empty name), then
    ``AclControlManager.validateNewAcl``, then the principal's form
    (``StandardAcl.fromAclBinding``); last, a resource type the collector does not serve."""
    if (
        binding.resource_type == ResourceType.CLUSTER
        and binding.resource_name != CLUSTER_NAME
    ):
        raise AclError(
            f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        )
    if not binding.resource_name:
        raise AclError("Invalid empty resource name")
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise AclError(f"Invalid resourceType {binding.resource_type.name}")
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclInternalError(f"Invalid patternType {binding.pattern_type.name}")
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise AclInternalError(f"Invalid operation {binding.operation.name}")
    if binding.permission not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        raise AclInternalError(f"Invalid permissionType {binding.permission.name}")
    if ":" not in binding.principal:
        # StandardAcl.fromAclBinding's words for it (Kafka 4.4.0's controller)
        raise AclError(
            f"Could not parse principal from `{binding.principal}` (no colon is present "
            "separating the principal type from the principal name)"
        )
    if binding.resource_type not in SERVED_RESOURCE_TYPES:
        raise AclError(
            f"resource type {binding.resource_type.name} is not supported by the collector "
            "(only CLUSTER)"
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """``AclBindingFilter``: ``None`` name, principal or host matches any; ANY types match
    any; pattern type MATCH matches every pattern that applies to the name."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def from_codes(
        cls,
        resource_type: int,
        resource_name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclBindingFilter:
        return cls(
            ResourceType(_enum_from_code(ResourceType, resource_type)),
            resource_name,
            PatternType(_enum_from_code(PatternType, pattern_type)),
            principal,
            host,
            AclOperation(_enum_from_code(AclOperation, operation)),
            AclPermissionType(_enum_from_code(AclPermissionType, permission)),
        )

    @property
    def is_unknown(self) -> bool:
        """Any UNKNOWN element: Kafka refuses to parse such a request."""
        return (
            self.resource_type == ResourceType.UNKNOWN
            or self.pattern_type == PatternType.UNKNOWN
            or self.operation == AclOperation.UNKNOWN
            or self.permission == AclPermissionType.UNKNOWN
        )

    def matches(self, binding: AclBinding) -> bool:
        return self._pattern_matches(binding) and self._entry_matches(binding)

    def _pattern_matches(self, binding: AclBinding) -> bool:
        # ResourcePatternFilter.matches
        if (
            self.resource_type != ResourceType.ANY
            and self.resource_type != binding.resource_type
        ):
            return False
        if (
            self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
            and self.pattern_type != binding.pattern_type
        ):
            return False
        name = self.resource_name
        if name is None:
            return True
        if self.pattern_type in (PatternType.ANY, binding.pattern_type):
            return name == binding.resource_name
        # MATCH: every stored pattern that would apply to the name.
        if binding.pattern_type == PatternType.LITERAL:
            return (
                name == binding.resource_name
                or binding.resource_name == WILDCARD_RESOURCE
            )
        return name.startswith(binding.resource_name)  # PREFIXED

    def _entry_matches(self, binding: AclBinding) -> bool:
        # AccessControlEntryFilter.matches
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != binding.operation:
            return False
        return self.permission in (AclPermissionType.ANY, binding.permission)
