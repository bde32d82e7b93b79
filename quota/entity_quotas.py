"""Validation of entity quota settings (what AlterClientQuotas / the quotas file may set).

Follows ``metadata/.../controller/ClientQuotaControlManager.java`` (``validateEntity``,
``validateQuotaKeyValue``) and the key types of ``QuotaConfig.java``.  Errors carry Kafka's
INVALID_REQUEST code and Kafka's messages, so the collector can answer AlterClientQuotas
with them directly.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Final, TypeVar

from quota.entity import ClientQuotaEntity, IpQuotaEntity, parse_entity
from quota.errors import QuotaConfigError

__all__ = [
    "INVALID_REQUEST",
    "QUOTA_KEYS",
    "EntityKeyT",
    "EntitySpec",
    "InvalidQuotaError",
    "QuotaKey",
    "ValueType",
    "validate_entity_quotas",
    "validate_quota_value",
]

# Errors.INVALID_REQUEST in clients/.../common/protocol/Errors.java.
INVALID_REQUEST: Final = 42

# What parse_entity reads: a path, an entity map, (type, name) pairs, or an object with
# such pairs in ``entries`` (the config store's QuotaEntity).
EntitySpec = object
# The key type of an entity-quotas mapping (any of the hashable shapes above).
EntityKeyT = TypeVar("EntityKeyT", bound=Hashable)


class InvalidQuotaError(QuotaConfigError):
    """An entity or quota value Kafka would refuse with INVALID_REQUEST."""

    error_code: ClassVar[int] = INVALID_REQUEST


class ValueType(enum.Enum):
    LONG = "LONG"
    INT = "INT"
    DOUBLE = "DOUBLE"


@dataclass(frozen=True, slots=True)
class QuotaKey:
    value_type: ValueType
    for_ip: bool  # an IP-entity key (else a user/client-id key)


# QuotaConfig.java: the keys an entity may carry, and their ConfigDef types.
QUOTA_KEYS: Final[dict[str, QuotaKey]] = {
    "producer_byte_rate": QuotaKey(ValueType.LONG, for_ip=False),
    "consumer_byte_rate": QuotaKey(ValueType.LONG, for_ip=False),
    "request_percentage": QuotaKey(ValueType.DOUBLE, for_ip=False),
    "controller_mutation_rate": QuotaKey(ValueType.DOUBLE, for_ip=False),
    "connection_creation_rate": QuotaKey(ValueType.INT, for_ip=True),
}

_MAX_BY_TYPE: Final = {
    ValueType.INT: float(2**31 - 1),
    ValueType.LONG: float(2**63 - 1),
}
_TYPE_ARTICLE: Final = {ValueType.INT: "an INT", ValueType.LONG: "a LONG"}


def validate_quota_value(key: str, raw: object, for_ip: bool) -> float:
    """The value of quota ``key`` as a float, or InvalidQuotaError with Kafka's message
    (``ClientQuotaControlManager.validateQuotaKeyValue``).

    The one check of a quota value: the engine applies it, the config store (file,
    ``ktc quotas alter``, AlterClientQuotas) refuses with it.  A value must already be a
    number: text such as ``"100"`` is refused, as Kafka's controller only ever sees the
    double the client sent."""
    spec = QUOTA_KEYS.get(key)
    if spec is None or spec.for_ip != for_ip:
        raise InvalidQuotaError(f"Invalid configuration key {key}")
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise InvalidQuotaError(f"Quota {key} must be a number, got {raw!r}")
    value = float(raw)
    if math.isnan(value) or math.isinf(value):
        raise InvalidQuotaError(
            f"Quota {key} must be a finite number"
        )  # Kafka would store NaN
    if value <= 0.0:
        raise InvalidQuotaError(f"Quota {key} must be greater than 0")
    if spec.value_type is not ValueType.DOUBLE:
        if value > _MAX_BY_TYPE[spec.value_type]:
            raise InvalidQuotaError(
                f"Proposed value for {key} is too large for {_TYPE_ARTICLE[spec.value_type]}."
            )
        if abs(value % 1.0) > 1e-6:
            raise InvalidQuotaError(f"{key} cannot be a fractional value.")
    return value


def validate_entity_quotas(
    entity_quotas: Mapping[EntityKeyT, Mapping[str, object]],
) -> dict[ClientQuotaEntity | IpQuotaEntity, dict[str, float]]:
    """Parse and check a whole set of entity quotas; nothing is applied on error."""
    validated: dict[ClientQuotaEntity | IpQuotaEntity, dict[str, float]] = {}
    for spec, settings in entity_quotas.items():
        try:
            entity = parse_entity(spec)
        except ValueError as exc:
            raise InvalidQuotaError(str(exc)) from None
        if entity in validated:
            raise InvalidQuotaError(f"Ignoring duplicate entity {entity.path}")
        for_ip = isinstance(entity, IpQuotaEntity)
        validated[entity] = {
            key: validate_quota_value(key, raw, for_ip) for key, raw in settings.items()
        }
    return validated
