"""Which clients a subscription applies to.

Follows ``server/.../metrics/ClientMetricsInstanceMetadata.java``: the attributes are
captured once when the client instance is created, every selector of a subscription
must fully match (Java ``Matcher.matches()``; RE2, see match_pattern.py), an empty selector list
matches every client, and an attribute that is null never matches.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from subscriptions.model import Subscription

__all__ = ["UNKNOWN_SOFTWARE", "ClientMetadata", "java_host_address", "matches"]

# ClientInformation.UNKNOWN_NAME_OR_VERSION: what a client that sent ApiVersions < v3 has.
UNKNOWN_SOFTWARE = "unknown"


@dataclass(frozen=True, slots=True)
class ClientMetadata:
    """The attributes selectors see, as Kafka renders them.

    ``client_instance_id`` is the 22-char base64url Kafka Uuid string;
    ``client_source_address`` Java's ``InetAddress.getHostAddress()`` form (dotted quad, or
    uncompressed IPv6 such as ``0:0:0:0:0:0:0:1``); ``client_source_port`` the decimal
    port. ``None`` means Kafka has no value (e.g. a null client id).
    """

    client_instance_id: str
    client_id: str | None
    client_software_name: str | None = UNKNOWN_SOFTWARE
    client_software_version: str | None = UNKNOWN_SOFTWARE
    client_source_address: str | None = None
    client_source_port: str | None = None

    def attribute(self, selector: str) -> str | None:
        """The value a selector is matched against (selector names are Kafka's)."""
        value: str | None = getattr(self, selector)
        return value


def matches(subscription: Subscription, metadata: ClientMetadata) -> bool:
    """True if every selector of ``subscription`` fully matches ``metadata``."""
    for selector, pattern in subscription.patterns.items():
        value = metadata.attribute(selector)
        if value is None or not pattern.fullmatches(value):
            return False
    return True


def java_host_address(address: str) -> str:
    """Render a peer address as Java's ``InetAddress.getHostAddress()`` does.

    IPv4 stays dotted; IPv6 is written as eight lower-case hex groups without ``::``
    compression (``::1`` -> ``0:0:0:0:0:0:0:1``), keeping a ``%scope`` suffix; an
    IPv4-mapped IPv6 address becomes the IPv4 address (Java returns an Inet4Address).
    Operators write ``client_source_address`` regexes against this form.
    """
    host, _, scope = address.partition("%")
    parsed = ipaddress.ip_address(host)
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        groups = ":".join(f"{int(group, 16):x}" for group in parsed.exploded.split(":"))
        return f"{groups}%{scope}" if scope else groups
    return str(parsed)
