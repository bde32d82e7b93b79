"""Quota entities and the eight-level precedence that picks the one applying to a client.

Follows ``ClientQuotaManager.DefaultQuotaCallback`` (server/.../quota/ClientQuotaManager.java,
core ``ClientQuotaManager.scala`` on older trunks), written as a table instead of nested ifs.

A client quota is configured for a *user* (principal), a *client-id*, or both, each either
a name or ``<default>``.  For a connection with user U and client-id C the most specific
configured entity wins, in this order (Kafka's documentation order):

    rank  entity                                      metric tags (user, client-id)
    1     /config/users/U/clients/C                   (U, C)
    2     /config/users/U/clients/<default>           (U, C)
    3     /config/users/U                             (U, "")
    4     /config/users/<default>/clients/C           (U, C)
    5     /config/users/<default>/clients/<default>   (U, C)
    6     /config/users/<default>                     (U, "")
    7     /config/clients/C                           ("", C)
    8     /config/clients/<default>                   ("", C)

Clients resolving to the same metric tags share one sensor, hence one quota: every client
of user U shares a rank-3 quota, but each (U, C) pair gets its own rank-2 quota.  The limit
of a sensor is found again from its tags: among the ranks whose tag *shape* matches (both
tags, user only, client-id only), the first configured one.

Names: Kafka keys users by their URL-encoded ("sanitized") name and client-ids raw.
Entity values here are raw names as operators write them; ``sanitize_user`` is applied
when they become keys or tags.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

__all__ = [
    "DEFAULT",
    "QUOTA_PRECEDENCE",
    "ClientQuotaEntity",
    "Default",
    "EntityKey",
    "IpQuotaEntity",
    "Part",
    "PrecedenceLevel",
    "canonical_ip",
    "parse_entity",
    "sanitize_user",
]

DEFAULT_NAME = "<default>"


class Default(enum.Enum):
    """The ``<default>`` entity name of a level (a sentinel: a real name can't collide)."""

    DEFAULT = DEFAULT_NAME

    def __repr__(self) -> str:
        return DEFAULT_NAME


DEFAULT = Default.DEFAULT

# One side of an entity: absent (None), <default>, or a name.
EntityName = str | Default | None
# Internal key of a client entity: (sanitized user part, client-id part).
EntityKey = tuple[EntityName, EntityName]


def sanitize_user(user: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encode all but ``[A-Za-z0-9._~-]``.

    Java's URLEncoder plus Sanitizer's fix-ups (``+`` -> ``%20``, ``*`` -> ``%2A``,
    ``%7E`` -> ``~``) leave exactly the set ``quote(safe="")`` leaves.
    """
    return quote(user, safe="")


def canonical_ip(ip: str) -> str:
    """The canonical text of an IP address (``::0001`` -> ``::1``); ValueError if not one."""
    return ipaddress.ip_address(ip.strip()).compressed


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """A (user, client-id) quota entity; ``None`` = that side is absent, ``DEFAULT`` = <default>."""

    user: EntityName = None
    client_id: EntityName = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a client quota entity needs a user, a client-id or both")

    @property
    def key(self) -> EntityKey:
        user = self.user
        return (sanitize_user(user) if isinstance(user, str) else user, self.client_id)

    @property
    def path(self) -> str:
        """Kafka's config path form, e.g. ``users/alice/clients/<default>``."""
        parts = []
        if self.user is not None:
            parts.append(f"users/{_name(self.user)}")
        if self.client_id is not None:
            parts.append(f"clients/{_name(self.client_id)}")
        return "/".join(parts)


@dataclass(frozen=True, slots=True)
class IpQuotaEntity:
    """An IP entity (``ips/<ip>`` or ``ips/<default>``) for ``connection_creation_rate``."""

    ip: str | Default

    @property
    def path(self) -> str:
        return f"ips/{_name(self.ip)}"


def _name(name: str | Default) -> str:
    """A path segment: ``<default>``, or the name with the characters that would make the
    path ambiguous (``%``, ``/``, ``<``) percent-encoded; ``parse_entity`` decodes any."""
    if isinstance(name, Default):
        return DEFAULT_NAME
    return name.replace("%", "%25").replace("/", "%2F").replace("<", "%3C")


class Part(enum.Enum):
    """How one side of a precedence level is matched against a client's user/client-id."""

    EXACT = "name"
    DEFAULT = "<default>"
    ABSENT = "absent"


@dataclass(frozen=True, slots=True)
class PrecedenceLevel:
    rank: int
    path: str
    user: Part
    client_id: Part

    def entity_key(self, sanitized_user: str, client_id: str) -> EntityKey:
        """The configured entity this level would use for the given client."""
        return (_pick(self.user, sanitized_user), _pick(self.client_id, client_id))

    def metric_tags(self, sanitized_user: str, client_id: str) -> tuple[str, str]:
        """The (user, client-id) tags of the sensor a client at this level records into."""
        return (
            "" if self.user is Part.ABSENT else sanitized_user,
            "" if self.client_id is Part.ABSENT else client_id,
        )

    @property
    def tag_shape(self) -> tuple[bool, bool]:
        return (self.user is not Part.ABSENT, self.client_id is not Part.ABSENT)


def _pick(part: Part, name: str) -> EntityName:
    if part is Part.EXACT:
        return name
    if part is Part.DEFAULT:
        return DEFAULT
    return None


QUOTA_PRECEDENCE: tuple[PrecedenceLevel, ...] = (
    PrecedenceLevel(
        1, "/config/users/<user>/clients/<client-id>", Part.EXACT, Part.EXACT
    ),
    PrecedenceLevel(
        2, "/config/users/<user>/clients/<default>", Part.EXACT, Part.DEFAULT
    ),
    PrecedenceLevel(3, "/config/users/<user>", Part.EXACT, Part.ABSENT),
    PrecedenceLevel(
        4, "/config/users/<default>/clients/<client-id>", Part.DEFAULT, Part.EXACT
    ),
    PrecedenceLevel(
        5, "/config/users/<default>/clients/<default>", Part.DEFAULT, Part.DEFAULT
    ),
    PrecedenceLevel(6, "/config/users/<default>", Part.DEFAULT, Part.ABSENT),
    PrecedenceLevel(7, "/config/clients/<client-id>", Part.ABSENT, Part.EXACT),
    PrecedenceLevel(8, "/config/clients/<default>", Part.ABSENT, Part.DEFAULT),
)

# Entity type names as Kafka's ClientQuotaEntity uses them (and DescribeClientQuotas sends).
_ENTITY_TYPES = {
    "user": "user",
    "users": "user",
    "client-id": "client-id",
    "clients": "client-id",
    "ip": "ip",
    "ips": "ip",
}


def parse_entity(spec: object) -> ClientQuotaEntity | IpQuotaEntity:
    """Read an entity from the config store's path form or Kafka's entity-map form.

    Accepted shapes:

    * a path: ``"users/alice"``, ``"clients/app-1"``, ``"users/alice/clients/app-1"``,
      ``"users/<default>"``, ``"ips/10.0.0.7"``, ``"ips/<default>"`` (an optional leading
      ``/config/`` is ignored).  Names are URL-encoded as Kafka's ``Sanitizer`` writes them
      in config paths (``users/CN%3Dalice``), so a user literally called ``<default>`` is
      ``users/%3Cdefault%3E``;
    * Kafka's entity map, ``None`` meaning the default: ``{"user": "alice", "client-id":
      None}``, or the same as ``(type, name)`` pairs, or any object whose ``entries`` holds
      those pairs (the config store's ``QuotaEntity``).  Names here are plain, not encoded.

    Raises ValueError naming the problem (Kafka's messages where it has one).
    """
    pairs: list[tuple[str, str | None]]
    entries = getattr(spec, "entries", None)
    if isinstance(spec, str):
        pairs = _pairs_from_path(spec)
    elif isinstance(spec, Mapping):
        pairs = list(spec.items())
    elif isinstance(entries, tuple):
        pairs = list(entries)
    elif isinstance(spec, Iterable):
        pairs = list(spec)
    else:
        raise ValueError(f"not a quota entity: {spec!r}")
    components: dict[str, str | Default] = {}
    for raw_type, raw_name in pairs:
        entity_type = _ENTITY_TYPES.get(raw_type)
        if entity_type is None:
            raise ValueError(
                f"Unhandled client quota entity type: {raw_type} (in {spec!r})"
            )
        if entity_type in components:
            raise ValueError(
                f"Invalid client quota entity, duplicate entity entry {entity_type}"
            )
        if raw_name == "":
            raise ValueError(f"Empty {entity_type} not supported")
        components[entity_type] = DEFAULT if raw_name is None else raw_name
    if "ip" in components:
        if len(components) != 1:
            raise ValueError(
                "Invalid quota entity combination, IP entity should not be combined with "
                f"User or ClientId: {spec!r}"
            )
        ip = components["ip"]
        if isinstance(ip, str):
            try:
                ip = canonical_ip(ip)
            except ValueError:
                raise ValueError(f"{ip} is not a valid IP address") from None
        return IpQuotaEntity(ip)
    if not components:
        raise ValueError(f"Invalid empty client quota entity {spec!r}")
    return ClientQuotaEntity(components.get("user"), components.get("client-id"))


def _pairs_from_path(path: str) -> list[tuple[str, str | None]]:
    rest = path.strip()
    for prefix in ("/config/", "config/", "/"):
        if rest.startswith(prefix):
            rest = rest[len(prefix) :]
            break
    if rest.startswith("users/") and "/clients/" in rest:
        user, client_id = rest[len("users/") :].split("/clients/", 1)
        return [("user", _decode(user)), ("client-id", _decode(client_id))]
    entity_type, sep, name = rest.partition("/")
    if sep and name:
        return [(entity_type, _decode(name))]
    if sep and not name and entity_type in _ENTITY_TYPES:
        return [(entity_type, "")]  # "users/": Kafka's "Empty user not supported"
    raise ValueError(
        f"quota entity {path!r} is not one of users/<u>, clients/<c>, "
        "users/<u>/clients/<c>, ips/<ip> (use <default> for a default)"
    )


def _decode(segment: str) -> str | None:
    """A path segment: ``<default>`` is the default (None), anything else URL-decoded."""
    return None if segment == DEFAULT_NAME else unquote(segment)
