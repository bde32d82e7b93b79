"""Kafka's keys with a listener's name in them, each kind gathered into one map.

Kafka reads some keys per listener first (``listener.name.<name lower case>.<key>``): the
connection quotas (``.max.connections``, ``.max.connection.creation.rate``, with the
protected ``inter.broker.listener.name``), the principal mapping rules of an SSL listener
and the SASL mechanisms of a SASL listener.  ``CollectorConfig`` keeps each kind in one map
field (:data:`LISTENER_KEY_MAPS`): :func:`gather_listener_keys` moves the keys of a file
into them before validation, :func:`expand_listener_keys` turns them back into keys.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from collector.security.ssl_principal_mapper import (
    InvalidMappingRule,
    SslPrincipalMapper,
)

__all__ = [
    "LISTENER_KEY_MAPS",
    "PROTECTED_LISTENER_KEY",
    "check_each_listener",
    "check_mapping_rules",
    "expand_listener_keys",
    "gather_listener_keys",
    "is_connection_quota_key",
    "is_listener_key",
    "listener_mapping_rules_key",
    "listener_sasl_mechanisms_key",
    "mechanism_list",
    "principal_mapper",
]

# Kafka's connection-quota keys with a variable part: per-listener limits and the protected
# listener.  Kept as given in ``connection_quota_overrides`` and read by the quota engine
# (which validates them: a bad value stops the server at start).
PROTECTED_LISTENER_KEY: Final = "inter.broker.listener.name"
_LISTENER_QUOTA_KEY = re.compile(
    r"listener\.name\.[a-z0-9_-]+\.(?:max\.connections|max\.connection\.creation\.rate)"
)


def is_connection_quota_key(key: str) -> bool:
    return (
        key == PROTECTED_LISTENER_KEY or _LISTENER_QUOTA_KEY.fullmatch(key) is not None
    )


def _listener_key(
    suffix: str,
) -> tuple[Callable[[str], str | None], Callable[[str], str]]:
    """``listener.name.<name>.<suffix>``: the listener of a key (None: not one), and the
    key of a listener."""
    pattern = re.compile(r"listener\.name\.([a-z0-9_-]+)\." + re.escape(suffix))

    def listener_of(key: str) -> str | None:
        match = pattern.fullmatch(key)
        return None if match is None else match.group(1)

    def key_of(listener_name: str) -> str:
        return f"listener.name.{listener_name.lower()}.{suffix}"

    return listener_of, key_of


_rules_listener, listener_mapping_rules_key = _listener_key(
    "ssl.principal.mapping.rules"
)
_mechanisms_listener, listener_sasl_mechanisms_key = _listener_key(
    "sasl.enabled.mechanisms"
)

# CollectorConfig's map field of each kind: the map's key of a dotted key (None: not of
# this kind), and the dotted key of a map's key.
LISTENER_KEY_MAPS: Final[
    dict[str, tuple[Callable[[str], str | None], Callable[[str], str]]]
] = {
    "connection_quota_overrides": (
        lambda key: key if is_connection_quota_key(key) else None,
        lambda key: key,
    ),
    "sasl_enabled_mechanisms_overrides": (
        _mechanisms_listener,
        listener_sasl_mechanisms_key,
    ),
    "ssl_principal_mapping_rules_overrides": (
        _rules_listener,
        listener_mapping_rules_key,
    ),
}


def is_listener_key(key: str) -> bool:
    return any(of(key) is not None for of, _ in LISTENER_KEY_MAPS.values())


def gather_listener_keys(data: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """Each listener key of ``data`` moved into its kind's map field."""
    for field, (of, _) in LISTENER_KEY_MAPS.items():
        gathered = {
            name: value
            for key, value in data.items()
            if (name := of(str(key))) is not None
        }
        if gathered:
            rest = {k: v for k, v in data.items() if of(str(k)) is None}
            rest[field] = {**rest.get(field, {}), **gathered}
            data = rest
    return data


def expand_listener_keys(data: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`gather_listener_keys` on a dump (the maps' keys appended)."""
    for field, (_, key_of) in LISTENER_KEY_MAPS.items():
        data.update((key_of(name), value) for name, value in data.pop(field).items())
    return data


def check_each_listener(
    value: dict[str, str], key_of: Callable[[str], str], check: Callable[[str], object]
) -> dict[str, str]:
    """``check`` of every listener's value; its ValueError prefixed with the listener's key."""
    for listener, text in value.items():
        try:
            check(text)
        except ValueError as exc:
            raise ValueError(f"{key_of(listener)}: {exc}") from None
    return value


def check_mapping_rules(rules: str) -> str:
    """Kafka's principal mapping rules; ValueError says which rule is wrong."""
    try:
        SslPrincipalMapper(rules)
    except InvalidMappingRule as exc:
        raise ValueError(str(exc)) from None
    return rules


@functools.lru_cache(maxsize=64)
def principal_mapper(rules: str) -> SslPrincipalMapper:
    # Asked on every SSL connection: the rules are parsed once.
    return SslPrincipalMapper(rules)


def mechanism_list(text: str) -> tuple[str, ...]:
    """``"PLAIN, SCRAM-SHA-512"`` -> ("PLAIN", "SCRAM-SHA-512"); ValueError names what is not
    served (Kafka's list type: commas, blanks trimmed)."""
    from collector.security.sasl.servers import MECHANISMS

    mechanisms = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    if not mechanisms:
        raise ValueError("no SASL mechanism given")
    unserved = [m for m in mechanisms if m not in MECHANISMS]
    if unserved:
        raise ValueError(
            f"{', '.join(unserved)} not served (the collector serves {', '.join(MECHANISMS)})"
        )
    return mechanisms
