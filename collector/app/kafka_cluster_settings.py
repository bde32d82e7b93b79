"""The configuration keys of a Kafka cluster the collector is a client of, declared once.

Three prefixes name such a cluster: ``gateway.upstream.*`` (the fronted cluster),
``subscriptions.kafka.*`` (where ``ktc serve`` keeps its subscriptions) and
``landing.kafka.*`` (the landing topic's).  Each has the same keys after its prefix
(:class:`KafkaClusterKeys`), read by one sub-model per prefix (:data:`CLUSTER_PREFIXES`),
a field of ``CollectorConfig`` whose alias is the prefix: the file and the ``KTC_*`` variables keep their flat dotted keys
(``gateway.upstream.security.protocol``, ``KTC_GATEWAY_UPSTREAM_SECURITY_PROTOCOL``),
gathered under the prefix before validation (:func:`gather_cluster_keys`) and flattened back
by ``CollectorConfig.to_dotted``; an error names the flat key.  One rule checks a login
(:func:`check_login`); :func:`check_clusters` says what the prefixes need of each other.  A sub-model's :meth:`~KafkaClusterKeys.settings` is the frozen
:class:`~collector.net.kafka_cluster.KafkaClusterSettings` its clients render.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from collector.net.kafka_cluster import (
    SASL_MECHANISMS,
    SECURITY_PROTOCOLS,
    KafkaClusterSettings,
    SaslLogin,
    parse_host_ports,
)

__all__ = [
    "CLUSTER_PREFIXES",
    "GatewayUpstreamKeys",
    "KafkaClusterKeys",
    "LandingKafkaKeys",
    "SubscriptionsKafkaKeys",
    "check_clusters",
    "check_login",
    "cluster_keys_of",
    "flatten_cluster_keys",
    "gather_cluster_keys",
]

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class KafkaClusterKeys(BaseModel):
    """The keys after a prefix; each prefix's sub-model below says how it reads them."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    bootstrap_servers: str | None = Field(None, alias="bootstrap.servers", min_length=1)
    # The cluster's listener, as Kafka names security protocols: PLAINTEXT or SSL (the
    # transport), SASL_PLAINTEXT or SASL_SSL (the same with a login).
    security_protocol: str = Field("PLAINTEXT", alias="security.protocol")
    sasl_mechanism: str | None = Field(None, alias="sasl.mechanism")
    sasl_username: str | None = Field(None, alias="sasl.username", min_length=1)
    sasl_password: str | None = Field(None, alias="sasl.password", repr=False)
    ssl_truststore_location: str | None = Field(None, alias="ssl.truststore.location")
    # One PEM file: the certificate chain and its private key.
    ssl_keystore_location: str | None = Field(None, alias="ssl.keystore.location")
    ssl_key_password: str | None = Field(None, alias="ssl.key.password", repr=False)
    # "https" checks the broker's certificate names its host (Kafka's default); "" does not.
    ssl_endpoint_identification_algorithm: str = Field(
        "https", alias="ssl.endpoint.identification.algorithm"
    )

    @property
    def login(self) -> SaslLogin | None:
        if self.sasl_mechanism is None:
            return None
        assert self.sasl_username is not None and self.sasl_password is not None
        return SaslLogin(self.sasl_mechanism, self.sasl_username, self.sasl_password)

    def settings(self, bootstrap_servers: str | None = None) -> KafkaClusterSettings:
        """The value the clients render (``bootstrap_servers`` where the prefix has none)."""
        return KafkaClusterSettings(
            bootstrap_servers=self.bootstrap_servers or bootstrap_servers,
            security_protocol=self.security_protocol,
            login=self.login if self.security_protocol.startswith("SASL") else None,
            truststore=self.ssl_truststore_location,
            keystore=self.ssl_keystore_location,
            key_password=self.ssl_key_password,
            check_hostname=self.ssl_endpoint_identification_algorithm != "",
        )


class GatewayUpstreamKeys(KafkaClusterKeys):
    """``gateway.upstream.*``: any case, the bootstrap servers checked as given, and the
    login optional on a SASL cluster (unset: clients' SASL passes through)."""

    @pydantic.field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, value: str | None) -> str | None:
        if value is not None:
            parse_host_ports(value)
        return value

    @pydantic.field_validator("security_protocol")
    @classmethod
    def _protocol(cls, value: str) -> str:
        if value.upper() not in SECURITY_PROTOCOLS:
            raise ValueError("must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
        return value.upper()

    @pydantic.field_validator("sasl_mechanism")
    @classmethod
    def _mechanism(cls, value: str | None) -> str | None:
        if value is not None and value.upper() not in SASL_MECHANISMS:
            raise ValueError("must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        return None if value is None else value.upper()

    @pydantic.field_validator("ssl_endpoint_identification_algorithm")
    @classmethod
    def _endpoint_identification(cls, value: str) -> str:
        if value.lower() not in {"https", ""}:
            raise ValueError('must be "https" or "" (Kafka\'s two choices)')
        return value.lower()


class SubscriptionsKafkaKeys(KafkaClusterKeys):
    """``subscriptions.kafka.*``: Kafka's names as written, and a login on SASL."""

    security_protocol: Protocol = Field("PLAINTEXT", alias="security.protocol")
    sasl_mechanism: Mechanism | None = Field(None, alias="sasl.mechanism")


class LandingKafkaKeys(SubscriptionsKafkaKeys):
    """``landing.kafka.*``: as ``subscriptions.kafka.*``, the host-name check one of
    Kafka's two choices as written."""

    ssl_endpoint_identification_algorithm: Literal["https", ""] = Field(
        "https", alias="ssl.endpoint.identification.algorithm"
    )


LoginKeys = tuple[str | None, str | None, str | None]


# The prefixes that name a Kafka cluster the collector is a client of, and their keys.
CLUSTER_PREFIXES: dict[str, type[KafkaClusterKeys]] = {
    "gateway.upstream": GatewayUpstreamKeys,
    "subscriptions.kafka": SubscriptionsKafkaKeys,
    "landing.kafka": LandingKafkaKeys,
}


def check_login(
    prefix: str,
    login: LoginKeys,
    protocol: str | None,
    *,
    optional_for: str | None = None,
) -> None:
    """The one rule of a login (``<prefix>.sasl.mechanism``, ``.username``, ``.password``),
    ValueError naming the keys: all three or none; with a protocol, none unless it is SASL,
    and on SASL all three unless the login is ``optional_for`` a purpose (then it says so
    when incomplete)."""
    given = any(v is not None for v in login)
    complete = all(v is not None for v in login)
    if optional_for is not None:
        if given and not complete:
            raise ValueError(
                f"{prefix}.sasl.mechanism, .username and .password: all three or "
                f"none ({optional_for})"
            )
        if protocol is not None and given and not protocol.startswith("SASL"):
            raise ValueError(
                f"{prefix}.sasl.mechanism needs {prefix}.security.protocol "
                "SASL_PLAINTEXT or SASL_SSL"
            )
        return
    assert protocol is not None
    if complete != protocol.startswith("SASL") or (given and not complete):
        raise ValueError(
            f"{prefix}.sasl.mechanism, .username and .password: all three "
            f"with {prefix}.security.protocol SASL_PLAINTEXT or SASL_SSL, "
            "none otherwise"
        )


def _login_keys(keys: KafkaClusterKeys) -> LoginKeys:
    return keys.sasl_mechanism, keys.sasl_username, keys.sasl_password


def check_clusters(
    upstream: KafkaClusterKeys,
    kafka: KafkaClusterKeys,
    landing: KafkaClusterKeys,
    *,
    subscriptions_store: str,
    landing_topic: str | None,
    gateway_subscriptions_login: LoginKeys,
) -> None:
    """What the three prefixes need of each other and of the settings using them (the
    gateway's subscriptions login, the subscriptions' store, the landing topic)."""
    check_login(
        "gateway.upstream",
        _login_keys(upstream),
        upstream.security_protocol,
        optional_for="the gateway's own login to the cluster",
    )
    check_login(
        "gateway.subscriptions",
        gateway_subscriptions_login,
        None,
        optional_for="the login the gateway reads the subscriptions with",
    )
    if subscriptions_store == "kafka" and not kafka.bootstrap_servers:
        raise ValueError(
            "subscriptions.store kafka needs subscriptions.kafka.bootstrap.servers "
            "(the cluster whose client-metrics configs are the subscriptions)"
        )
    check_login("subscriptions.kafka", _login_keys(kafka), kafka.security_protocol)
    if landing_topic is None:
        return
    if landing.bootstrap_servers is None and upstream.bootstrap_servers is None:
        raise ValueError(
            "landing.kafka.topic needs landing.kafka.bootstrap.servers (in gateway "
            "mode it defaults to gateway.upstream.bootstrap.servers)"
        )
    if landing.bootstrap_servers is not None:
        parse_host_ports(landing.bootstrap_servers)
    elif upstream.security_protocol.startswith("SASL") and upstream.login is None:
        # Clients' SASL passes through to the cluster: the gateway has no login of its
        # own to produce with.
        raise ValueError(
            "landing.kafka.topic on a SASL cluster needs a login: "
            "gateway.upstream.sasl.*, or landing.kafka.bootstrap.servers with "
            "landing.kafka.sasl.*"
        )
    check_login("landing.kafka", _login_keys(landing), landing.security_protocol)


def cluster_keys_of(prefix: str, model: type[KafkaClusterKeys]) -> list[str]:
    """The flat dotted keys of one prefix: ``gateway.upstream.security.protocol`` ..."""
    return [f"{prefix}.{f.alias}" for f in model.model_fields.values() if f.alias]


def gather_cluster_keys(
    data: Mapping[str, Any], prefixes: Mapping[str, type[KafkaClusterKeys]]
) -> dict[str, Any]:
    """``{"landing.kafka.security.protocol": ...}`` -> ``{"landing.kafka":
    {"security.protocol": ...}}`` for each prefix's keys; every other key as it is."""
    rest = dict(data)
    for prefix, model in prefixes.items():
        gathered = {
            key.removeprefix(prefix + "."): rest.pop(key)
            for key in cluster_keys_of(prefix, model)
            if key in rest
        }
        if gathered or prefix not in rest:
            rest[prefix] = {**rest.get(prefix, {}), **gathered}
    return rest


def flatten_cluster_keys(
    dumped: Mapping[str, Any], prefixes: Mapping[str, type[KafkaClusterKeys]]
) -> dict[str, Any]:
    """The inverse of :func:`gather_cluster_keys` on a ``model_dump(by_alias=True)``."""
    out: dict[str, Any] = {}
    for key, value in dumped.items():
        if key in prefixes:
            out.update((f"{key}.{sub}", v) for sub, v in value.items())
        else:
            out[key] = value
    return out
