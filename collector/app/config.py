"""The collector's configuration: one YAML file, Kafka's key names, env overrides.

Keys are flat and dotted exactly as in Kafka's ``server.properties`` wherever Kafka has the
setting (``node.id``, ``listeners``, ``telemetry.max.bytes``, ``quota.window.num`` ...); the
collector's own settings follow the same style (``data.dir``, ``http.listener``).  Values that
are themselves structured (``landing``, ``exporters.otlp``) are YAML maps.

Precedence, lowest first: embedded defaults < the YAML file < ``KTC_*`` environment variables
< command-line flags.  An environment variable is the key upper-cased with dots turned into
underscores: ``telemetry.max.bytes`` -> ``KTC_TELEMETRY_MAX_BYTES``.  Its value is read as a
YAML scalar or flow mapping, so ``KTC_NODE_ID=3`` is the integer 3 and
``KTC_EXPORTERS_OTLP='{endpoint: "otel:4317"}'`` is a map.

Every problem is reported as a :class:`ConfigError` whose message names the key; the CLI
turns it into exit code 2.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from collector.app.config_sources import (
    ConfigError,
    env_overrides,
    env_var_for,
    read_config_file,
    resolve_config_references,
)
from collector.app.kafka_cluster_settings import (
    CLUSTER_PREFIXES,
    GatewayUpstreamKeys,
    LandingKafkaKeys,
    SubscriptionsKafkaKeys,
    check_clusters,
    cluster_keys_of,
    flatten_cluster_keys,
    gather_cluster_keys,
)
from collector.app.listener_keys import (
    PROTECTED_LISTENER_KEY,
    check_each_listener,
    check_mapping_rules,
    expand_listener_keys,
    gather_listener_keys,
    is_listener_key,
    listener_mapping_rules_key,
    listener_sasl_mechanisms_key,
    mechanism_list,
    principal_mapper,
)
from collector.net.kafka_cluster import KafkaClusterSettings, parse_host_ports
from collector.security.secrets import (
    redact,
)
from collector.security.ssl_principal_mapper import SslPrincipalMapper

__all__ = [
    "CollectorConfig",
    "ConfigError",
    "env_var_for",
    "known_keys",
    "load_config",
    "parse_host_ports",
]

# Kafka's listener.security.protocol.map default (KafkaConfig / SocketServerConfigs).
DEFAULT_SECURITY_PROTOCOL_MAP = (
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
)


class CollectorConfig(BaseModel):
    """Validated settings.  Field aliases are the dotted names used in files and env vars."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, arbitrary_types_allowed=True
    )

    # --- Kafka broker identity and listeners -------------------------------------------
    node_id: int = Field(1, alias="node.id", ge=0)
    # Kafka's default binds every interface on 9092; an empty host means "all interfaces",
    # and when advertised, the machine's canonical host name (as Kafka does).
    listeners: str = Field("PLAINTEXT://:9092", alias="listeners", min_length=1)
    advertised_listeners: str | None = Field(None, alias="advertised.listeners")
    listener_security_protocol_map: str = Field(
        DEFAULT_SECURITY_PROTOCOL_MAP, alias="listener.security.protocol.map"
    )
    # None: generated once and kept in ``<data.dir>/meta.properties`` like a KRaft broker.
    cluster_id: str | None = Field(None, alias="cluster.id", min_length=1)

    # --- TLS for SSL listeners (Kafka's names; PEM stores only) ----------------------------
    ssl_keystore_type: str = Field("PEM", alias="ssl.keystore.type")
    ssl_keystore_location: str | None = Field(None, alias="ssl.keystore.location")
    ssl_key_password: str | None = Field(None, alias="ssl.key.password", repr=False)
    ssl_truststore_type: str = Field("PEM", alias="ssl.truststore.type")
    ssl_truststore_location: str | None = Field(None, alias="ssl.truststore.location")
    ssl_client_auth: str = Field("none", alias="ssl.client.auth")
    ssl_enabled_protocols: str = Field("TLSv1.2,TLSv1.3", alias="ssl.enabled.protocols")

    # --- SASL on SASL_PLAINTEXT / SASL_SSL listeners (collector/security/sasl/) -----------
    # Kafka's default is GSSAPI, which the collector does not serve: SCRAM by default (PLAIN
    # sends the password itself, so it is opt-in).  Per listener with
    # listener.name.<name>.sasl.enabled.mechanisms, kept in the map below.
    sasl_enabled_mechanisms: str = Field(
        "SCRAM-SHA-256,SCRAM-SHA-512", alias="sasl.enabled.mechanisms"
    )
    sasl_enabled_mechanisms_overrides: dict[str, str] = Field(default_factory=dict)
    # KIP-368: a SASL session's lifetime, after which the client re-authenticates on the
    # same connection (0: sessions never expire).
    connections_max_reauth_ms: int = Field(0, alias="connections.max.reauth.ms", ge=0)
    # How long a failed authentication's answer and close wait (Kafka's default).
    connection_failed_authentication_delay_ms: int = Field(
        100, alias="connection.failed.authentication.delay.ms", ge=0
    )
    # SASL/OAUTHBEARER (collector/security/sasl/oauthbearer.py): Kafka's
    # OAuthBearerValidatorCallbackHandler keys.  The JWKS (file:, http: or https: URL) is
    # required once OAUTHBEARER is enabled; it is read again every refresh.ms.
    sasl_oauthbearer_jwks_endpoint_url: str | None = Field(
        None, alias="sasl.oauthbearer.jwks.endpoint.url", min_length=1
    )
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = Field(
        3600000, alias="sasl.oauthbearer.jwks.endpoint.refresh.ms", ge=1000
    )
    sasl_oauthbearer_expected_issuer: str | None = Field(
        None, alias="sasl.oauthbearer.expected.issuer", min_length=1
    )
    # Kafka's list type: comma-separated; a token's aud must name one of them.
    sasl_oauthbearer_expected_audience: str = Field(
        "", alias="sasl.oauthbearer.expected.audience"
    )
    sasl_oauthbearer_sub_claim_name: str = Field(
        "sub", alias="sasl.oauthbearer.sub.claim.name", min_length=1
    )
    sasl_oauthbearer_scope_claim_name: str = Field(
        "scope", alias="sasl.oauthbearer.scope.claim.name", min_length=1
    )
    sasl_oauthbearer_clock_skew_seconds: int = Field(
        30, alias="sasl.oauthbearer.clock.skew.seconds", ge=0
    )
    # Client certificate subject -> principal name on SSL listeners (Kafka's rule syntax,
    # collector/security/ssl_principal_mapper.py); per listener with
    # listener.name.<name>.ssl.principal.mapping.rules, kept in the map below.
    ssl_principal_mapping_rules: str = Field(
        "DEFAULT", alias="ssl.principal.mapping.rules"
    )
    ssl_principal_mapping_rules_overrides: dict[str, str] = Field(default_factory=dict)

    # --- authorization (StandardAuthorizer; collector/security/authorizer.py) -----------
    # Any non-empty value (Kafka's org.apache.kafka.metadata.authorizer.StandardAuthorizer)
    # turns ACL checks on; the collector has one authorizer, its StandardAuthorizer port.
    authorizer_class_name: str = Field("", alias="authorizer.class.name")
    super_users: str = Field("", alias="super.users")
    allow_everyone_if_no_acl_found: bool = Field(
        False, alias="allow.everyone.if.no.acl.found"
    )

    # --- request limits (SocketServerConfigs / QuotaConfig / MetricConfigs) -------------
    socket_request_max_bytes: int = Field(
        104857600, alias="socket.request.max.bytes", ge=1
    )
    telemetry_max_bytes: int = Field(1048576, alias="telemetry.max.bytes", ge=1)
    quota_window_num: int = Field(11, alias="quota.window.num", ge=1)
    quota_window_size_seconds: int = Field(1, alias="quota.window.size.seconds", ge=1)
    max_connections: int = Field(2147483647, alias="max.connections", ge=0)
    max_connections_per_ip: int = Field(
        2147483647, alias="max.connections.per.ip", ge=0
    )
    # "ip:count,ip:count" (Kafka's format).
    max_connections_per_ip_overrides: str = Field(
        "", alias="max.connections.per.ip.overrides"
    )
    max_connection_creation_rate: int = Field(
        2147483647, alias="max.connection.creation.rate", ge=0
    )
    # inter.broker.listener.name and listener.name.<name>.max.connection* (see above).
    connection_quota_overrides: dict[str, Any] = Field(default_factory=dict)
    # Pipelined requests a single connection may have outstanding before we stop reading
    # from it (Kafka's broker-wide equivalent is queued.max.requests = 500).
    connection_max_inflight_requests: int = Field(
        64, alias="connection.max.inflight.requests", ge=1
    )
    # The bytes of requests held across all connections (a request counts at its announced
    # size from its first bytes until it is handed on); when they reach this, the server stops
    # reading until they fall below.  Kafka's key (its default, -1, is unbounded): 100 MiB is
    # one request at socket.request.max.bytes, and a fifth of the 512 MiB memory limit the
    # Helm chart sets (docs/operations.md, Memory).
    queued_max_request_bytes: int = Field(
        104857600, alias="queued.max.request.bytes", ge=1
    )
    # Close connections with no traffic for this long (Kafka's default); -1 never does.
    connections_max_idle_ms: int = Field(600000, alias="connections.max.idle.ms")

    # --- telemetry (ClientMetricsManager) -----------------------------------------------
    telemetry_instance_cache_max_size: int = Field(
        16384, alias="telemetry.instance.cache.max.size", ge=1
    )
    telemetry_instance_cache_expiry_ms: int = Field(
        60000, alias="telemetry.instance.cache.expiry.ms", ge=1
    )
    # Kafka caps the effective push interval at 300000 ms (its merge starts from the
    # default and takes the minimum); true delivers configured intervals up to 3600000 ms.
    telemetry_honour_long_intervals: bool = Field(
        False, alias="telemetry.honour.long.intervals"
    )
    # Client libraries (their client_software_name) answered [""] instead of Kafka's ["*"]
    # for a subscription of every metric: the KIP's spelling of "all", the only one they
    # read as all (franz-go's kgo reads ["*"] as the name "*" and pushes nothing).
    # docs/subscriptions.md, "Client libraries that read * as a name".
    subscriptions_wildcard_as_empty_prefix_for: tuple[str, ...] = Field(
        ("kgo",), alias="subscriptions.wildcard.as.empty.prefix.for"
    )
    # Kafka tags per-instance sensors with client_instance_id; in Prometheus that label is
    # unbounded (a new id per client restart), so it is opt-in.
    telemetry_metrics_instance_labels: bool = Field(
        False, alias="telemetry.metrics.instance.labels"
    )

    # --- gateway mode (``ktc gateway``; see docs/gateway.md) -------------------------------
    # The upstream cluster: gateway.upstream.bootstrap.servers ("host:port,host:port"),
    # .security.protocol (SASL_PLAINTEXT or SASL_SSL: every client of the gateway must log
    # in, its SASL exchange passing through to the cluster), .sasl.* (the gateway's own
    # login for clients that log in at its SASL listeners, every listener then SASL;
    # unset: clients' SASL passes through) and .ssl.* (kafka_cluster_settings.py).
    gateway_upstream: GatewayUpstreamKeys = Field(
        default_factory=lambda: GatewayUpstreamKeys.model_validate({}),
        alias="gateway.upstream",
    )
    # Upstream node n is served on port start + n - gateway.min.node.id (0: OS-chosen ports).
    gateway_broker_port_start: int = Field(
        9093, alias="gateway.broker.port.start", ge=0, le=65535
    )
    gateway_min_node_id: int = Field(0, alias="gateway.min.node.id", ge=0)
    # How many node ids the port range holds (node ids above min + this are refused).
    gateway_max_nodes: int = Field(64, alias="gateway.max.nodes", ge=1, le=4096)
    # The host clients are sent to for every broker; None: the bootstrap listener's
    # advertised host.
    gateway_advertised_host: str | None = Field(
        None, alias="gateway.advertised.host", min_length=1
    )
    # Whether a client must have authenticated before the gateway answers it itself
    # (telemetry, client-metrics, quota and ACL administration) when the gateway cannot tell
    # whether the cluster requires authentication (the protocol above says PLAINTEXT or SSL
    # and the cluster has not answered yet). Secure by default; false serves such clients
    # until the cluster is known to require SASL.
    gateway_telemetry_require_authentication: bool = Field(
        True, alias="gateway.telemetry.require.authentication"
    )
    gateway_upstream_connect_timeout_ms: int = Field(
        10000, alias="gateway.upstream.connect.timeout.ms", ge=1
    )
    # The largest upstream response a client pair buffers (a Fetch answer is at most the
    # client's fetch.max.bytes, 50 MiB by default, plus framing).
    gateway_upstream_max_response_bytes: int = Field(
        104857600, alias="gateway.upstream.max.response.bytes", ge=1024
    )
    # Where the gateway's client-metrics subscriptions live: "cluster", the fronted cluster's
    # own CLIENT_METRICS configs (read every refresh.ms and at once after an alter the
    # gateway forwarded; a cluster that does not serve them is said in one log line and the
    # local store used, the cluster asked again every refresh.ms), or "local",
    # <data.dir>/config/client-metrics.yaml.
    gateway_subscriptions_store: Literal["cluster", "local"] = Field(
        "cluster", alias="gateway.subscriptions.store"
    )
    gateway_subscriptions_refresh_ms: int = Field(
        2000, alias="gateway.subscriptions.refresh.ms", ge=100
    )
    # How old the last set read may be (the cluster unreachable meanwhile) before a replica
    # says it may not be the cluster's any more: a WARNING, ktc_subscriptions_cluster_stale.
    gateway_subscriptions_stale_after_ms: int = Field(
        60000, alias="gateway.subscriptions.stale.after.ms", ge=100
    )
    # The login the gateway reads the cluster's subscriptions with, where the cluster
    # requires SASL and clients' SASL passes through (gateway.upstream.sasl.* unset): a user
    # allowed DESCRIBE_CONFIGS on the cluster. All three or none.
    gateway_subscriptions_sasl_mechanism: (
        Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None
    ) = Field(None, alias="gateway.subscriptions.sasl.mechanism")
    gateway_subscriptions_sasl_username: str | None = Field(
        None, alias="gateway.subscriptions.sasl.username", min_length=1
    )
    gateway_subscriptions_sasl_password: str | None = Field(
        None, alias="gateway.subscriptions.sasl.password", repr=False
    )

    # --- subscriptions kept in a Kafka cluster (``ktc serve``; the gateway's are above) ----
    # "local": <data.dir>/config/client-metrics.yaml; "kafka": the client-metrics configs of
    # the cluster at subscriptions.kafka.bootstrap.servers, read every refresh.ms, so every
    # node of a fleet serves the same set (altered at the cluster: kafka-client-metrics.sh,
    # ktc subscriptions --bootstrap-server).
    subscriptions_store: Literal["local", "kafka"] = Field(
        "local", alias="subscriptions.store"
    )
    # The cluster (subscriptions.kafka.bootstrap.servers) and the collector's listener and
    # login to it, as gateway.upstream.* (a login required on SASL).
    subscriptions_kafka: SubscriptionsKafkaKeys = Field(
        default_factory=lambda: SubscriptionsKafkaKeys.model_validate({}),
        alias="subscriptions.kafka",
    )
    subscriptions_kafka_refresh_ms: int = Field(
        2000, alias="subscriptions.kafka.refresh.ms", ge=100
    )
    # As gateway.subscriptions.stale.after.ms, for ktc serve.
    subscriptions_kafka_stale_after_ms: int = Field(
        60000, alias="subscriptions.kafka.stale.after.ms", ge=100
    )
    # --- /metrics/clients (docs/prometheus.md) -------------------------------------------
    # On by default: folded from what landed in a process of its own, at a lower priority
    # than the push path (docs/prometheus.md, "Where the fold runs").
    prometheus_clients_enable: bool = Field(True, alias="prometheus.clients.enable")
    # Series one scrape shows at most (a histogram's buckets, _sum and _count each count).
    prometheus_clients_max_series: int = Field(
        25_000, alias="prometheus.clients.max.series", ge=1, le=10_000_000
    )
    # Series one client instance holds at most, so one cannot take the budget from the
    # fleet (at most the budget; the default: about twice a Kafka Streams application's
    # busiest instance at DEBUG recording level, docs/prometheus.md, "Bounds per instance").
    prometheus_clients_max_series_per_instance: int = Field(
        5_000, alias="prometheus.clients.max.series.per.instance", ge=1, le=10_000_000
    )
    # A series no push refreshed for this long is removed (otelcol's metric_expiration).
    prometheus_clients_series_expiry_ms: int = Field(
        300_000, alias="prometheus.clients.series.expiry.ms", ge=1, le=604_800_000
    )
    # The identity labels shown (comma-separated; unset: all of them).
    prometheus_clients_labels: str | None = Field(
        None, alias="prometheus.clients.labels"
    )
    # OTLP metric-name prefixes shown (comma-separated; unset: every pushed metric).
    prometheus_clients_metrics: str | None = Field(
        None, alias="prometheus.clients.metrics"
    )

    # --- the inventory of client connections (docs/prometheus.md, "Inventory") ----------
    # Request headers only (no payload decoded), so on by default.
    clients_inventory_enable: bool = Field(True, alias="clients.inventory.enable")
    # ktc_client_requests_total series kept at most (one per identity, API and version).
    clients_inventory_max_series: int = Field(
        10_000, alias="clients.inventory.max.series", ge=1, le=1_000_000
    )

    # What the push path reads of each payload for the live views (docs/conformance.md,
    # docs/insights.md "Applications"): a sample of its shape, and the few metrics of a
    # Kafka Streams client's state.  Measured within the push path's noise: on by default.
    clients_conformance_enable: bool = Field(True, alias="clients.conformance.enable")
    clients_applications_enable: bool = Field(True, alias="clients.applications.enable")

    # --- ours -----------------------------------------------------------------------------
    data_dir: Path = Field(Path("data"), alias="data.dir")
    # host:port for /metrics, /healthz, /readyz; null disables the HTTP endpoint.
    http_listener: str | None = Field("0.0.0.0:8714", alias="http.listener")
    # The bearer secret of the admin endpoints (/v1/clients, /v1/subscriptions/preview):
    # required of every caller when set; unset, an authorizer limits them to loopback.
    http_admin_secret: str | None = Field(None, alias="http.admin.secret", repr=False)
    shutdown_timeout_seconds: float = Field(
        25.0, alias="shutdown.timeout.seconds", gt=0
    )
    log_level: str = Field("INFO", alias="log.level")
    landing: dict[str, Any] = Field(default_factory=dict, alias="landing")
    # --- telemetry on a Kafka topic (docs/landing-log.md, "Telemetry on a Kafka topic") ---
    # Set: every accepted push is produced to this topic (idempotent, acks=all) before it
    # is answered, instead of the local landing log, and the forwarder reads it from there.
    landing_kafka_topic: str | None = Field(
        None, alias="landing.kafka.topic", min_length=1, max_length=249
    )
    # landing.kafka.bootstrap.servers and the collector's listener and login to it, as
    # subscriptions.kafka.*; unset bootstrap servers in gateway mode: the fronted cluster,
    # with gateway.upstream.*'s security.
    landing_kafka: LandingKafkaKeys = Field(
        default_factory=lambda: LandingKafkaKeys.model_validate({}),
        alias="landing.kafka",
    )
    # When the topic is created here (missing at start); -1: the cluster's default.
    landing_kafka_topic_partitions: int = Field(
        6, alias="landing.kafka.topic.partitions", ge=1, le=100_000
    )
    landing_kafka_topic_replication_factor: int = Field(
        -1, alias="landing.kafka.topic.replication.factor", ge=-1, le=32767
    )
    # A push whose record is not acknowledged by every in-sync replica within this is
    # answered 89 (retriable): librdkafka's message.timeout.ms.
    landing_kafka_delivery_timeout_ms: int = Field(
        10_000, alias="landing.kafka.delivery.timeout.ms", ge=100
    )
    # The OTLP forwarder's consumer group on the topic.
    landing_kafka_forwarder_group_id: str = Field(
        "ktc-otlp-forwarder", alias="landing.kafka.forwarder.group.id", min_length=1
    )
    exporters_otlp: dict[str, Any] | None = Field(None, alias="exporters.otlp")

    @pydantic.model_validator(mode="before")
    @classmethod
    def _gather_listener_keys(cls, data: Any) -> Any:
        return gather_listener_keys(data) if isinstance(data, Mapping) else data

    @pydantic.field_validator("ssl_principal_mapping_rules")
    @classmethod
    def _valid_mapping_rules(cls, value: str) -> str:
        return check_mapping_rules(value)

    @pydantic.field_validator("ssl_principal_mapping_rules_overrides")
    @classmethod
    def _valid_listener_mapping_rules(cls, value: dict[str, str]) -> dict[str, str]:
        return check_each_listener(
            value, listener_mapping_rules_key, check_mapping_rules
        )

    def ssl_principal_mapper(self, listener_name: str) -> SslPrincipalMapper:
        """The mapping rules of one listener: its own key, else ssl.principal.mapping.rules."""
        rules = self.ssl_principal_mapping_rules_overrides.get(
            listener_name.lower(), self.ssl_principal_mapping_rules
        )
        return principal_mapper(rules)

    @pydantic.field_validator("super_users")
    @classmethod
    def _valid_super_users(cls, value: str) -> str:
        for part in value.split(";"):
            if part.strip() and ":" not in part:
                raise ValueError(
                    "expected a string in format principalType:principalName but got "
                    f"{part.strip()} (principals are separated by ';')"
                )
        return value

    @pydantic.field_validator("sasl_enabled_mechanisms")
    @classmethod
    def _served_mechanisms(cls, value: str) -> str:
        mechanism_list(value)
        return value

    @pydantic.field_validator("sasl_enabled_mechanisms_overrides")
    @classmethod
    def _served_listener_mechanisms(cls, value: dict[str, str]) -> dict[str, str]:
        return check_each_listener(value, listener_sasl_mechanisms_key, mechanism_list)

    @pydantic.field_validator("sasl_oauthbearer_jwks_endpoint_url")
    @classmethod
    def _jwks_url(cls, value: str | None) -> str | None:
        from collector.security.jwks import check_jwks_url

        return None if value is None else check_jwks_url(value)

    @pydantic.model_validator(mode="after")
    def _oauthbearer_has_keys(self) -> CollectorConfig:
        if (
            self.oauthbearer_enabled()
            and self.sasl_oauthbearer_jwks_endpoint_url is None
        ):
            raise ValueError(
                "sasl.oauthbearer.jwks.endpoint.url: required when OAUTHBEARER is in "
                "sasl.enabled.mechanisms (the collector checks signed tokens only; Kafka's "
                "unsecured validator is not served)"
            )
        return self

    @pydantic.model_validator(mode="before")
    @classmethod
    def _gather_cluster_keys(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        return gather_cluster_keys(data, CLUSTER_PREFIXES)

    @pydantic.model_validator(mode="after")
    def _clusters_complete(self) -> CollectorConfig:
        check_clusters(
            self.gateway_upstream,
            self.subscriptions_kafka,
            self.landing_kafka,
            subscriptions_store=self.subscriptions_store,
            landing_topic=self.landing_kafka_topic,
            gateway_subscriptions_login=(
                self.gateway_subscriptions_sasl_mechanism,
                self.gateway_subscriptions_sasl_username,
                self.gateway_subscriptions_sasl_password,
            ),
        )
        return self

    def landing_cluster(self) -> KafkaClusterSettings:
        """The landing topic's cluster: landing.kafka.*, else (gateway mode) the fronted
        cluster with gateway.upstream.*'s security."""
        if self.landing_kafka.bootstrap_servers is not None:
            return self.landing_kafka.settings()
        return self.gateway_upstream.settings()

    def oauthbearer_enabled(self) -> bool:
        """Whether any listener's mechanisms include OAUTHBEARER."""
        lists = [
            self.sasl_enabled_mechanisms,
            *self.sasl_enabled_mechanisms_overrides.values(),
        ]
        return any("OAUTHBEARER" in mechanism_list(text) for text in lists)

    def oauthbearer_audiences(self) -> tuple[str, ...]:
        return tuple(
            a.strip()
            for a in self.sasl_oauthbearer_expected_audience.split(",")
            if a.strip()
        )

    def sasl_mechanisms(self, listener_name: str) -> tuple[str, ...]:
        """A SASL listener's mechanisms: its own key, else sasl.enabled.mechanisms."""
        return mechanism_list(
            self.sasl_enabled_mechanisms_overrides.get(
                listener_name.lower(), self.sasl_enabled_mechanisms
            )
        )

    @pydantic.field_validator("connection_quota_overrides")
    @classmethod
    def _valid_connection_quotas(cls, value: dict[str, Any]) -> dict[str, Any]:
        from quota import QuotaConfigError, QuotaEngineConfig

        for key, setting in value.items():
            try:  # the checks the quota engine makes at start, one key at a time
                QuotaEngineConfig.from_mapping({key: setting})
            except QuotaConfigError as exc:
                raise ValueError(f"{key}: {exc}") from None
        return value

    @pydantic.model_validator(mode="after")
    def _protected_listener_exists(self) -> CollectorConfig:
        protected = self.connection_quota_overrides.get(PROTECTED_LISTENER_KEY)
        names = {
            entry.partition("://")[0].strip().upper()
            for entry in self.listeners.split(",")
        }
        if protected is not None and str(protected).upper() not in names:
            raise ValueError(
                f"{PROTECTED_LISTENER_KEY} {protected!r} is not a listener in "
                f"listeners ({', '.join(sorted(names))})"
            )
        return self

    @pydantic.field_validator("connections_max_idle_ms")
    @classmethod
    def _idle_ms(cls, value: int) -> int:
        if value < 1 and value != -1:
            raise ValueError(
                "must be a positive number of milliseconds, or -1 (never close)"
            )
        return value

    @pydantic.field_validator("ssl_keystore_type", "ssl_truststore_type")
    @classmethod
    def _pem_only(cls, value: str) -> str:
        if value.upper() != "PEM":
            raise ValueError("only PEM stores are supported (JKS/PKCS12 need a JVM)")
        return "PEM"

    @pydantic.field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return level

    @pydantic.field_validator(
        "subscriptions_wildcard_as_empty_prefix_for", mode="before"
    )
    @classmethod
    def _software_names(cls, value: object) -> object:
        # A YAML list, or one comma-separated string (KTC_..._FOR=kgo,other); empty: none.
        if value is None:
            return ()
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @pydantic.field_validator("prometheus_clients_labels")
    @classmethod
    def _known_identity_labels(cls, value: str | None) -> str | None:
        from collector.telemetry.prometheus.client_series import ClientSeriesSettings

        ClientSeriesSettings.parse(1, value, None)  # ValueError names the unknown label
        return value

    @pydantic.field_validator("http_admin_secret")
    @classmethod
    def _long_enough_secret(cls, value: str | None) -> str | None:
        if value is not None and len(value) < 16:
            raise ValueError(
                "must be at least 16 characters (a bearer secret anyone can guess protects nothing)"
            )
        return value

    @pydantic.field_validator("http_listener")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is None:
            return None
        _host, sep, port = value.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise ValueError(
                "must be host:port, e.g. 0.0.0.0:8714 (port 0 picks a free port)"
            )
        return value

    def with_overrides(self, overrides: Mapping[str, Any]) -> CollectorConfig:
        """A copy with dotted-key overrides applied (CLI flags), validated again."""
        merged = self.to_dotted()
        merged.update({k: v for k, v in overrides.items() if v is not None})
        return _validate(merged, source="command line")

    def to_dotted(self) -> dict[str, Any]:
        data = flatten_cluster_keys(self.model_dump(by_alias=True), CLUSTER_PREFIXES)
        data["data.dir"] = str(self.data_dir)
        return expand_listener_keys(data)

    @property
    def http_host_port(self) -> tuple[str, int] | None:
        if self.http_listener is None:
            return None
        host, _, port = self.http_listener.rpartition(":")
        return host.strip("[]"), int(port)


def known_keys() -> list[str]:
    keys: list[str] = []
    for field in CollectorConfig.model_fields.values():
        if field.alias in CLUSTER_PREFIXES:
            keys += cluster_keys_of(field.alias, CLUSTER_PREFIXES[field.alias])
        elif field.alias:
            keys.append(field.alias)
    return keys


def _unknown_key_message(key: str) -> str:
    """``unknown key X``, with the nearest known key when one is close (a typo)."""
    nearest = difflib.get_close_matches(key, known_keys(), n=1, cutoff=0.75)
    hint = f" (did you mean {nearest[0]}?)" if nearest else ""
    return f"unknown key {key}{hint}"


def _validate(data: Mapping[str, Any], *, source: str) -> CollectorConfig:
    unknown = sorted(
        key for key in set(data) - set(known_keys()) if not is_listener_key(key)
    )
    if unknown:
        raise ConfigError(
            f"{source}: "
            + "; ".join(_unknown_key_message(key) for key in unknown)
            + " (every key: docs/configuration.md)"
        )
    try:
        return CollectorConfig.model_validate(dict(data))
    except pydantic.ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "<root>"
            shown = redact(err.get("input"), key)  # a secret's value is never printed
            problems.append(f"{key}: {err['msg']} (got {shown!r})")
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> CollectorConfig:
    """Defaults < file < environment < overrides; raises :class:`ConfigError`."""
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        data.update(read_config_file(path))
    environ = os.environ if environ is None else environ
    env = env_overrides(environ, [*known_keys(), PROTECTED_LISTENER_KEY])
    if env:
        source = f"{source} + environment ({', '.join(env_var_for(k) for k in env)})"
    data.update(env)
    data = resolve_config_references(data, environ, source)
    if overrides:
        data.update({k: v for k, v in overrides.items() if v is not None})
        source = f"{source} + command line"
    return _validate(data, source=source)
