"""How the collector reaches a Kafka cluster as a client: one frozen value and its renderers.

A :class:`KafkaClusterSettings` is what a configuration prefix (``gateway.upstream.*``,
``subscriptions.kafka.*``, ``landing.kafka.*``; collector/app/kafka_cluster_settings.py)
says of one cluster: its bootstrap servers, Kafka's security protocol, the SASL login and
the PEM files of TLS.  Each client of the cluster renders it in its own dialect:

- :meth:`~KafkaClusterSettings.ssl_context` and :attr:`~KafkaClusterSettings.login`: the
  collector's own Kafka connections (the gateway's upstream, the admin client);
- :meth:`~KafkaClusterSettings.librdkafka`: confluent-kafka's producer and consumers;
- :meth:`~KafkaClusterSettings.java_properties`: the Java client (``ktc ingest
  --kafka-topic``'s ``--kafka-property`` pairs).
"""

from __future__ import annotations

import dataclasses
import ssl
from typing import Any, Final

__all__ = ["KafkaClusterSettings", "SaslLogin", "parse_host_ports"]

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# The Java client's login module of each mechanism (sasl.jaas.config).
_LOGIN_MODULES: Final = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclasses.dataclass(frozen=True, slots=True)
class SaslLogin:
    """A SASL login to a cluster: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."""

    mechanism: str
    username: str
    password: str = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True)
class KafkaClusterSettings:
    """One cluster as a client reaches it (Kafka's client keys, PEM stores only)."""

    # "host:port,host:port"; None where the prefix leaves it to another (landing.kafka.*).
    bootstrap_servers: str | None = None
    security_protocol: str = "PLAINTEXT"
    login: SaslLogin | None = None
    truststore: str | None = None
    # One PEM file: the certificate chain and its private key.
    keystore: str | None = None
    key_password: str | None = dataclasses.field(default=None, repr=False)
    # ssl.endpoint.identification.algorithm "https" (Kafka's default) checks the host name.
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.security_protocol in {"SSL", "SASL_SSL"}

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL")

    def bootstrap(self) -> tuple[tuple[str, int], ...]:
        """The bootstrap servers as (host, port) pairs; ValueError says what is wrong."""
        return tuple(parse_host_ports(self.bootstrap_servers or ""))

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of a connection (SSL and SASL_SSL), or None; raises ``OSError``
        or ``ssl.SSLError`` when a PEM file cannot be used."""
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.truststore)
        if self.keystore:
            context.load_cert_chain(self.keystore, password=self.key_password)
        if not self.check_hostname:
            context.check_hostname = False
        return context

    def librdkafka(self) -> dict[str, Any]:
        """Kafka's client keys as librdkafka spells them (confluent-kafka's settings)."""
        settings: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.login is not None and self.sasl:
            settings.update(
                {
                    "sasl.mechanism": self.login.mechanism,
                    "sasl.username": self.login.username,
                    "sasl.password": self.login.password,
                }
            )
        if self.security_protocol.endswith("SSL"):
            settings["ssl.endpoint.identification.algorithm"] = (
                "https" if self.check_hostname else "none"
            )
            if self.truststore is not None:
                settings["ssl.ca.location"] = self.truststore
            if self.keystore is not None:
                settings["ssl.certificate.location"] = self.keystore
                settings["ssl.key.location"] = self.keystore
                if self.key_password is not None:
                    settings["ssl.key.password"] = self.key_password
        return settings

    def java_properties(self) -> dict[str, str]:
        """The Java client's properties (without bootstrap.servers), as ``ktc ingest
        --kafka-property KEY=VALUE`` takes them; PLAINTEXT is the Java default, so none."""
        props: dict[str, str] = {}
        if self.security_protocol != "PLAINTEXT":
            props["security.protocol"] = self.security_protocol
        if self.login is not None and self.sasl:
            module = _LOGIN_MODULES[self.login.mechanism]
            props["sasl.mechanism"] = self.login.mechanism
            props["sasl.jaas.config"] = (
                f'{module} required username="{self.login.username}" '
                f'password="{self.login.password}";'
            )
        if self.tls:
            for kind, path in (
                ("truststore", self.truststore),
                ("keystore", self.keystore),
            ):
                if path:
                    props[f"ssl.{kind}.type"] = "PEM"
                    props[f"ssl.{kind}.location"] = path
            if self.key_password is not None:
                props["ssl.key.password"] = self.key_password
            if not self.check_hostname:
                props["ssl.endpoint.identification.algorithm"] = ""
        return props


def parse_host_ports(text: str) -> list[tuple[str, int]]:
    """``"a:9092,[::1]:9093"`` -> ``[("a", 9092), ("::1", 9093)]``; ValueError says what is wrong."""
    out = []
    for item in text.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if (
            not item
            or not sep
            or not host
            or not port.isdigit()
            or not 0 < int(port) <= 65535
        ):
            raise ValueError(f"{item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    return out
