"""Kafka-style ``listeners`` / ``advertised.listeners`` strings.

Follows Kafka's ``CoreUtils.listenerListToEndPoints`` / ``EndPoint.parseEndpoint``:
``NAME://host:port`` entries separated by commas; IPv6 hosts in brackets; an empty host
binds every interface; the listener name maps to a security protocol through
``listener.security.protocol.map``.  Two collector-specific rules:

* port 0 binds a free port, and the advertised port is then the bound one (tests bind
  ``PLAINTEXT://127.0.0.1:0``);
* an advertised listener with an empty host advertises the machine's canonical host name,
  as Kafka does (``InetAddress.getLocalHost.getCanonicalHostName``); a listener bound to a
  wildcard address with no advertised entry does the same.
"""

from __future__ import annotations

import dataclasses
import re
import socket

__all__ = [
    "EndPoint",
    "ListenerError",
    "advertised_endpoint",
    "parse_listeners",
    "parse_security_protocol_map",
]

# Kafka's SecurityProtocol names; the collector serves every one (SASL: PLAIN, SCRAM and
# OAUTHBEARER, collector/security/sasl/).
KNOWN_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})

# EndPoint.uriParseExp in Kafka: ^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


class ListenerError(ValueError):
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class EndPoint:
    listener_name: str
    host: str  # "" = every interface
    port: int
    security_protocol: str

    def with_port(self, port: int) -> EndPoint:
        return dataclasses.replace(self, port=port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


def parse_security_protocol_map(text: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in KNOWN_SECURITY_PROTOCOLS:
            raise ListenerError(
                f"listener.security.protocol.map: bad entry {item!r} (want NAME:PROTOCOL with "
                f"PROTOCOL one of {', '.join(sorted(KNOWN_SECURITY_PROTOCOLS))})"
            )
        mapping[name] = protocol
    return mapping


def parse_listeners(
    text: str, security_protocol_map: dict[str, str], *, key: str = "listeners"
) -> list[EndPoint]:
    endpoints: list[EndPoint] = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        match = _ENDPOINT.match(item)
        if match is None:
            raise ListenerError(f"{key}: cannot parse {item!r} (want NAME://host:port)")
        name, host, port_text = match.group(1).upper(), match.group(2), match.group(3)
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ListenerError(f"{key}: port out of range in {item!r}")
        protocol = security_protocol_map.get(name)
        if protocol is None:
            raise ListenerError(
                f"{key}: listener name {name!r} has no entry in listener.security.protocol.map"
            )
        endpoints.append(EndPoint(name, host, port, protocol))
    if not endpoints:
        raise ListenerError(f"{key}: no listener given")
    names = [e.listener_name for e in endpoints]
    if len(set(names)) != len(names):
        raise ListenerError(
            f"{key}: each listener name must appear once, got {', '.join(names)}"
        )
    return endpoints


def advertised_endpoint(bound: EndPoint, advertised: EndPoint | None) -> EndPoint:
    """What Metadata tells clients for a listener bound at ``bound`` (port already real)."""
    if advertised is None:
        host = bound.host if bound.host not in _WILDCARDS else socket.getfqdn()
        return EndPoint(bound.listener_name, host, bound.port, bound.security_protocol)
    host = advertised.host if advertised.host else socket.getfqdn()
    port = advertised.port if advertised.port != 0 else bound.port
    return EndPoint(advertised.listener_name, host, port, advertised.security_protocol)
