"""Client quota entities and values as plain, validated data (the engine lives in quota/).

Follows ``metadata/.../controller/ClientQuotaControlManager.java`` (Apache Kafka trunk)
and ``server-common/.../config/QuotaConfig.java``. An entity maps entity types to names,
``None`` being the ``<default>`` of that type:

| entity                         | file path (``quotas.yaml``)        | keys                      |
|--------------------------------|------------------------------------|---------------------------|
| ``{user: alice}``              | ``users/alice``                    | user/client keys          |
| ``{user: None}``               | ``users/<default>``                | user/client keys          |
| ``{client-id: app}``           | ``clients/app``                    | user/client keys          |
| ``{user: alice, client-id: app}`` | ``users/alice/clients/app``     | user/client keys          |
| ``{user: None, client-id: None}`` | ``users/<default>/clients/<default>`` | user/client keys     |
| ``{ip: 10.0.0.1}``             | ``ips/10.0.0.1``                   | ``connection_creation_rate`` |
| ``{ip: None}``                 | ``ips/<default>``                  | ``connection_creation_rate`` |

Names in paths are URL-encoded like Kafka's ``Sanitizer`` (``/`` -> ``%2F``), so a user
literally named ``<default>`` is ``%3Cdefault%3E``. All rejections are INVALID_REQUEST
with Kafka's messages, except an unknown filter entity type (UNSUPPORTED_VERSION).
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, unquote

from proto.errors import Errors, KafkaError
from quota.entity_quotas import InvalidQuotaError
from quota.entity_quotas import validate_quota_value as quota_value

__all__ = [
    "ANY",
    "CLIENT_ID",
    "DEFAULT_NAME",
    "IP",
    "USER",
    "QuotaEntity",
    "QuotaFilterComponent",
    "filter_quotas",
    "validate_quota_alteration",
    "validate_quota_value",
]

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
DEFAULT_NAME = "<default>"

_PATH_SEGMENTS = {"users": USER, "clients": CLIENT_ID, "ips": IP}
_SEGMENT_FOR_TYPE = {
    entity_type: segment for segment, entity_type in _PATH_SEGMENTS.items()
}
_PATH_ORDER = (USER, CLIENT_ID, IP)  # users/<u>/clients/<c>, as in ZooKeeper's layout


def _invalid(message: str) -> KafkaError:
    return KafkaError(message, Errors.INVALID_REQUEST)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A quota entity: ``(entity type, name or None for <default>)`` pairs, sorted by type."""

    entries: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, entity: Mapping[str, str | None]) -> QuotaEntity:
        """Validate like ``ClientQuotaControlManager`` (entity, then type combination)."""
        if not entity:
            raise _invalid("Invalid empty client quota entity")
        for entity_type, name in entity.items():
            if entity_type not in (USER, CLIENT_ID, IP):
                raise _invalid(f"Unhandled client quota entity type: {entity_type}")
            if name is not None and name == "":
                raise _invalid(f"Empty {entity_type} not supported")
        if IP in entity:
            if USER in entity or CLIENT_ID in entity:
                # Kafka's message, missing space included
                raise _invalid(
                    "Invalid quota entity combination, IP entity should"
                    "not be combined with User or ClientId"
                )
            ip = entity[IP]
            if ip is not None and not _is_ip_literal(ip):
                raise _invalid(f"{ip} is not a valid IP or resolvable host.")
        ordered = tuple(
            (entity_type, entity[entity_type])
            for entity_type in _PATH_ORDER
            if entity_type in entity
        )
        return cls(ordered)

    @classmethod
    def from_path(cls, path: str) -> QuotaEntity:
        """Parse ``users/alice/clients/app``-style paths (names URL-encoded)."""
        segments = path.split("/")
        if len(segments) % 2 or not segments:
            raise _invalid(
                f"Invalid quota entity path {path!r}: expected "
                "users/<name>, clients/<id>, users/<name>/clients/<id> or ips/<ip>"
            )
        entity: dict[str, str | None] = {}
        for kind, raw_name in zip(segments[::2], segments[1::2], strict=True):
            entity_type = _PATH_SEGMENTS.get(kind)
            if entity_type is None:
                raise _invalid(
                    f"Invalid quota entity path {path!r}: unknown entity kind {kind!r} "
                    "(expected users, clients or ips)"
                )
            if entity_type in entity:
                raise _invalid(
                    f"Invalid client quota entity, duplicate entity entry {entity_type}"
                )
            entity[entity_type] = (
                None if raw_name == DEFAULT_NAME else unquote(raw_name)
            )
        if list(entity) not in ([USER], [CLIENT_ID], [USER, CLIENT_ID], [IP]):
            raise _invalid(
                f"Invalid quota entity path {path!r}: expected "
                "users/<name>, clients/<id>, users/<name>/clients/<id> or ips/<ip>"
            )
        return cls.of(entity)

    @property
    def path(self) -> str:
        return "/".join(
            f"{_SEGMENT_FOR_TYPE[entity_type]}/"
            f"{DEFAULT_NAME if name is None else quote(name, safe='')}"
            for entity_type, name in self.entries
        )

    @property
    def kind(self) -> Literal["user-client", "ip"]:
        return (
            "ip"
            if any(entity_type == IP for entity_type, _ in self.entries)
            else "user-client"
        )

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.entries)

    def __str__(self) -> str:
        return ", ".join(
            f"{t}={DEFAULT_NAME if n is None else n}" for t, n in self.entries
        )


def _is_ip_literal(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def validate_quota_value(entity: QuotaEntity, key: str, value: object) -> float:
    """``ClientQuotaControlManager.validateQuotaKeyValue``, as the quota engine applies it
    (``quota.entity_quotas.validate_quota_value``, the one check): the value as a float, or
    INVALID_REQUEST with Kafka's message."""
    try:
        return quota_value(key, value, entity.kind == "ip")
    except InvalidQuotaError as exc:
        raise _invalid(str(exc)) from None


def validate_quota_alteration(
    entity: Mapping[str, str | None],
    set_values: Mapping[str, object],
    delete: Iterable[str],
) -> tuple[QuotaEntity, dict[str, float], tuple[str, ...]]:
    """Validate one ``AlterClientQuotas`` entry; returns the normalised pieces."""
    delete = tuple(delete)
    quota_entity = QuotaEntity.of(entity)
    seen: set[str] = set()
    for key in [*set_values, *delete]:
        if key in seen:
            raise _invalid(
                f"Duplicate quota key {key} not updating quota for this entity {quota_entity}"
            )
        seen.add(key)
    values = {
        key: validate_quota_value(quota_entity, key, value)
        for key, value in set_values.items()
    }
    return quota_entity, values, delete


class _Any(enum.Enum):
    ANY = "any"


ANY = _Any.ANY  # a filter component that matches any name of its type (ofEntityType)


@dataclass(frozen=True, slots=True)
class QuotaFilterComponent:
    """``ClientQuotaFilterComponent``: a name (exact), ``None`` (the default) or ``ANY``."""

    entity_type: str
    match: str | None | _Any = ANY


def filter_quotas(
    quotas: Mapping[QuotaEntity, Mapping[str, float]],
    components: Sequence[QuotaFilterComponent] = (),
    strict: bool = False,
) -> dict[QuotaEntity, dict[str, float]]:
    """``ClientQuotaControlManager.describeClientQuotas``: validate the filter, then match."""
    exact: dict[str, str | None] = {}
    of_type: set[str] = set()
    for component in components:
        entity_type = component.entity_type
        if not entity_type:
            raise _invalid("Invalid empty entity type.")
        if entity_type in exact or entity_type in of_type:
            raise _invalid(
                f"Entity type {entity_type} cannot appear more than once in the filter."
            )
        if entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaError(
                f"Unsupported entity type {entity_type}", Errors.UNSUPPORTED_VERSION
            )
        if component.match is ANY:
            of_type.add(entity_type)
        else:
            exact[entity_type] = component.match
    wanted = set(exact) | of_type
    if IP in wanted and (USER in wanted or CLIENT_ID in wanted):
        raise _invalid(
            "Invalid entity filter component combination. IP filter component should "
            "not be used with user or clientId filter component."
        )
    result: dict[QuotaEntity, dict[str, float]] = {}
    for entity, values in quotas.items():
        entries = entity.as_dict()
        if strict and len(entries) != len(wanted):
            continue
        if any(t not in entries or entries[t] != name for t, name in exact.items()):
            continue
        if any(t not in entries for t in of_type):
            continue
        result[entity] = dict(values)
    return result
