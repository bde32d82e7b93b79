"""TLS for ``SSL`` listeners: Kafka's broker SSL settings (PEM stores) -> ``ssl.SSLContext``,
and the client principal Kafka derives from a client certificate.

| Kafka key                  | here                                                          |
|----------------------------|---------------------------------------------------------------|
| ``ssl.keystore.type``      | ``PEM`` only (JKS/PKCS12 need a JVM keystore reader)          |
| ``ssl.keystore.location``  | PEM file with the private key and the certificate chain       |
| ``ssl.key.password``       | password of that key, if encrypted                            |
| ``ssl.truststore.type``    | ``PEM`` only                                                  |
| ``ssl.truststore.location``| PEM file of CA certificates that sign client certificates     |
| ``ssl.client.auth``        | ``none`` / ``requested`` / ``required`` (Kafka's values)      |
| ``ssl.enabled.protocols``  | lowest of the list is the minimum version (TLSv1.2 default)   |

The principal follows Kafka's ``DefaultKafkaPrincipalBuilder``: ``User:`` + the client
certificate's subject as an RFC 2253 distinguished name (``X500Principal.getName()``: most
specific RDN first, short attribute names, ``,`` between RDNs) mapped by the listener's
``ssl.principal.mapping.rules`` (``DEFAULT``: as it is), or ``User:ANONYMOUS`` when the
client sent none.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any

from collector.security.ssl_principal_mapper import SslPrincipalMapper

__all__ = ["TlsError", "rfc2253_subject", "server_ssl_context", "ssl_principal"]

ANONYMOUS = "User:ANONYMOUS"

_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_TLS_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
# Python's getpeercert() long names -> the keywords X500Principal.getName(RFC2253) prints;
# others are printed by OID there, by their long name here.
_RFC2253_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_RFC2253_SPECIAL = set(',+"\\<>;')


class TlsError(ValueError):
    """A TLS setting is unusable; the message names the key."""


def server_ssl_context(
    *,
    keystore_location: str | None,
    key_password: str | None,
    truststore_location: str | None,
    client_auth: str,
    enabled_protocols: Sequence[str],
) -> ssl.SSLContext:
    if not keystore_location:
        raise TlsError(
            "ssl.keystore.location: required for an SSL listener (a PEM file)"
        )
    if client_auth not in _CLIENT_AUTH:
        raise TlsError(
            f"ssl.client.auth: {client_auth!r} is not one of none, requested, required"
        )
    versions = [v.strip() for v in enabled_protocols if v.strip()]
    unknown = [v for v in versions if v not in _TLS_VERSIONS]
    if unknown or not versions:
        raise TlsError(
            f"ssl.enabled.protocols: {', '.join(unknown) or 'empty'} not supported "
            "(TLSv1.2, TLSv1.3)"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = min(
        (_TLS_VERSIONS[v] for v in versions), key=lambda v: v.value
    )
    context.maximum_version = max(
        (_TLS_VERSIONS[v] for v in versions), key=lambda v: v.value
    )
    try:
        context.load_cert_chain(keystore_location, password=key_password)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(
            f"ssl.keystore.location: cannot load {keystore_location}: {exc}"
        ) from exc
    context.verify_mode = _CLIENT_AUTH[client_auth]
    if context.verify_mode != ssl.CERT_NONE:
        if not truststore_location:
            raise TlsError(
                f"ssl.truststore.location: required when ssl.client.auth is {client_auth}"
            )
        try:
            context.load_verify_locations(cafile=truststore_location)
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(
                f"ssl.truststore.location: cannot load {truststore_location}: {exc}"
            ) from exc
    return context


def _escape(value: str) -> str:
    out = []
    for i, char in enumerate(value):
        if (
            char in _RFC2253_SPECIAL
            or (i == 0 and char in " #")
            or (i == len(value) - 1 and char == " ")
        ):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def rfc2253_subject(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """``getpeercert()['subject']`` (certificate order) -> RFC 2253 (reversed)."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append(
            "+".join(
                f"{_RFC2253_KEYWORDS.get(name, name)}={_escape(value)}"
                for name, value in rdn
            )
        )
    return ",".join(rdns)


def ssl_principal(
    peercert: dict[str, Any] | None, mapper: SslPrincipalMapper | None = None
) -> str:
    """Raises ``NoMatchingRule`` when no mapping rule applies (Kafka then fails the
    authentication and closes the connection)."""
    if not peercert or not peercert.get("subject"):
        return ANONYMOUS
    subject = rfc2253_subject(peercert["subject"])
    return "User:" + (subject if mapper is None else mapper.name(subject))
