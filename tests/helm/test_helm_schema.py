"""values.schema.json refuses what the collector would refuse, before anything is deployed,
and stays in step with the collector's own configuration models."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import helm_python as helm
import pytest

from collector.app.config import known_keys
from collector.app.listener_keys import is_connection_quota_key
from exporters.landing import LandingOptions
from exporters.otlp.config import OtlpExporterConfig
from tests.helm.ktc_chart import CHART_DIR, render

SCHEMA: dict[str, Any] = json.loads(
    (CHART_DIR / "values.schema.json").read_text("utf-8")
)

# Config keys the chart derives itself; the schema refuses them under `config`
# (see templates/_config.tpl for where each one comes from).
CHART_OWNED_CONFIG_KEYS = {
    "node.id",
    "advertised.listeners",
    "listeners",
    "http.listener",
    "data.dir",
    # gateway mode: from the `gateway` values (TLS files from their Secret mount)
    "gateway.upstream.bootstrap.servers",
    "gateway.broker.port.start",
    "gateway.min.node.id",
    "gateway.max.nodes",
    "gateway.advertised.host",
    "gateway.upstream.security.protocol",
    "gateway.upstream.ssl.truststore.location",
    "gateway.upstream.ssl.keystore.location",
    "gateway.upstream.ssl.key.password",
    "gateway.upstream.ssl.endpoint.identification.algorithm",
    "gateway.subscriptions.store",
    "gateway.subscriptions.refresh.ms",
}

OTLP = {"endpoint": "otel:4317"}
GATEWAY: dict[str, Any] = {
    "enabled": True,
    "upstream": {"bootstrapServers": "kafka:9092"},
}

# values -> a fragment of Helm's error message (it names the key and the rule).
REJECTED: list[tuple[str, dict[str, Any], str]] = [
    ("unknown top-level key", {"replicas": 3}, "replicas"),
    ("unknown nested key", {"image": {"repository": "ktc", "tagg": "1"}}, "tagg"),
    ("string for an integer", {"replicaCount": "two"}, "replicaCount"),
    ("negative replicas", {"replicaCount": -1}, "replicaCount"),
    ("bad listener name", {"listenerName": "PLAIN-TEXT"}, "listenerName"),
    ("relative data dir", {"dataDir": "data"}, "dataDir"),
    (
        "port out of range",
        {"ports": {"kafka": {"containerPort": 70000}}},
        "containerPort",
    ),
    (
        "misspelt config key",
        {"config": {"telemetry.max.byte": 10}},
        "telemetry.max.byte",
    ),
    ("chart-owned node.id", {"config": {"node.id": 3}}, "node.id"),
    (
        "chart-owned listeners",
        {"config": {"listeners": "PLAINTEXT://:9093"}},
        "listeners",
    ),
    (
        "zero telemetry.max.bytes",
        {"config": {"telemetry.max.bytes": 0}},
        "telemetry.max.bytes",
    ),
    (
        "string for a bool",
        {"config": {"telemetry.honour.long.intervals": "yes"}},
        "honour",
    ),
    ("unknown log level", {"config": {"log.level": "TRACE"}}, "log.level"),
    (
        "otlp without endpoint",
        {"config": {"exporters.otlp": {"compression": "gzip"}}},
        "endpoint",
    ),
    (
        "otlp unknown key",
        {"config": {"exporters.otlp": {**OTLP, "endpoints": "x"}}},
        "endpoints",
    ),
    (
        "otlp bare-number duration",
        {"config": {"exporters.otlp": {**OTLP, "timeout": 5}}},
        "timeout",
    ),
    (
        "otlp bad duration",
        {"config": {"exporters.otlp": {**OTLP, "timeout": "5 seconds"}}},
        "timeout",
    ),
    (
        "otlp retry typo",
        {
            "config": {
                "exporters.otlp": {
                    **OTLP,
                    "retry_on_failure": {"max_elapsed_tme": "1m"},
                }
            }
        },
        "max_elapsed_tme",
    ),
    (
        "landing typo",
        {"config": {"landing": {"retention_hours": 5}}},
        "retention_hours",
    ),
    ("landing fsync", {"config": {"landing": {"fsync": "sometimes"}}}, "fsync"),
    ("subscription unknown key", {"subscriptions": {"s": {"metric": "a."}}}, "metric"),
    (
        "subscription interval too short",
        {"subscriptions": {"s": {"interval.ms": 50}}},
        "interval",
    ),
    (
        "unknown match selector",
        {"subscriptions": {"s": {"match": ["client=x"]}}},
        "match",
    ),
    (
        "duplicate metric prefix",
        {"subscriptions": {"s": {"metrics": ["a.", "a."]}}},
        "metrics",
    ),
    (
        "quota unknown entity",
        {"quotas": {"groups/g": {"producer_byte_rate": 1}}},
        "groups/g",
    ),
    (
        "quota unknown key",
        {"quotas": {"users/a": {"producer_rate": 1}}},
        "producer_rate",
    ),
    (
        "quota not positive",
        {"quotas": {"users/a": {"producer_byte_rate": 0}}},
        "producer_byte_rate",
    ),
    (
        "fractional byte rate",
        {"quotas": {"users/a": {"producer_byte_rate": 1.5}}},
        "integer",
    ),
    (
        "ip quota on a user",
        {"quotas": {"users/a": {"connection_creation_rate": 5}}},
        "connection",
    ),
    (
        "user quota on an ip",
        {"quotas": {"ips/10.0.0.1": {"request_percentage": 5}}},
        "request_",
    ),
    (
        "ip combined with user",
        {"quotas": {"users/a/ips/1.2.3.4": {"request_percentage": 5}}},
        "ips",
    ),
    ("unknown config store", {"configStore": {"source": "etcd"}}, "source"),
    (
        "bad access mode",
        {"persistence": {"landing": {"accessModes": ["RWX"]}}},
        "accessModes",
    ),
    ("bad size", {"persistence": {"data": {"size": "lots"}}}, "size"),
    (
        "bad trigger interval",
        {"ingest": {"enabled": True, "triggerInterval": "soon"}},
        "trigger",
    ),
    ("bad pdb", {"podDisruptionBudget": {"maxUnavailable": "half"}}, "maxUnavailable"),
    ("gateway without upstream", {"gateway": {"enabled": True}}, "bootstrapServers"),
    (
        "gateway with empty upstream",
        {"gateway": {"enabled": True, "upstream": {"bootstrapServers": ""}}},
        "bootstrapServers",
    ),
    (
        "gateway upstream not host:port",
        {"gateway": {**GATEWAY, "upstream": {"bootstrapServers": "kafka"}}},
        "bootstrapServers",
    ),
    (
        "gateway unknown key",
        {"gateway": {**GATEWAY, "brokerPortStrat": 9093}},
        "brokerPortStrat",
    ),
    (
        "gateway upstream unknown key",
        {"gateway": {"enabled": True, "upstream": {"bootstrapServer": "kafka:9092"}}},
        "bootstrapServer",
    ),
    (
        "gateway tls unknown key",
        {
            "gateway": {
                **GATEWAY,
                "upstream": {**GATEWAY["upstream"], "tls": {"caFile": "x"}},
            }
        },
        "caFile",
    ),
    (
        "gateway SASL upstream",
        {
            "gateway": {
                **GATEWAY,
                "upstream": {**GATEWAY["upstream"], "securityProtocol": "SASL"},
            }
        },
        "securityProtocol",
    ),
    (
        "gateway OS-chosen ports",
        {"gateway": {**GATEWAY, "brokerPortStart": 0}},
        "brokerPortStart",
    ),
    ("gateway no nodes", {"gateway": {**GATEWAY, "maxNodes": 0}}, "maxNodes"),
    (
        "gateway negative node id",
        {"gateway": {**GATEWAY, "minNodeId": -1}},
        "minNodeId",
    ),
    (
        "chart-owned gateway key",
        {"config": {"gateway.upstream.bootstrap.servers": "kafka:9092"}},
        "gateway.upstream.bootstrap.servers",
    ),
]


@pytest.mark.parametrize(
    ("values", "fragment"), [r[1:] for r in REJECTED], ids=[r[0] for r in REJECTED]
)
def test_schema_rejects(values: dict[str, Any], fragment: str) -> None:
    with (
        helm.Chart.load(CHART_DIR) as chart,
        pytest.raises(helm.HelmValuesError) as caught,
    ):
        chart.validate_schema(values)
    assert fragment in str(caught.value)


ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("defaults", {}),
    ("otlp block", {"config": {"exporters.otlp": {**OTLP, "timeout": "1m30s"}}}),
    ("otlp disabled", {"config": {"exporters.otlp": None}}),
    (
        "landing options",
        {"config": {"landing": {"fsync": "always", "retention_ms": -1}}},
    ),
    (
        "subscription as lists",
        {"subscriptions": {"s": {"metrics": ["a.", "b."], "match": []}}},
    ),
    (
        "match list",
        {
            "subscriptions": {
                "s": {"match": ["client_id=app-.*", " client_source_port = 1"]}
            }
        },
    ),
    ("interval as Kafka string", {"subscriptions": {"s": {"interval.ms": "60000"}}}),
    (
        "default entities",
        {"quotas": {"users/<default>/clients/<default>": {"request_percentage": 5}}},
    ),
    ("pdb percentage", {"podDisruptionBudget": {"maxUnavailable": "25%"}}),
    (
        "quantities",
        {"persistence": {"landing": {"size": "1.5Ti"}, "data": {"size": "500Mi"}}},
    ),
    ("gateway off without upstream", {"gateway": {"enabled": False}}),
    ("gateway", {"gateway": GATEWAY}),
    (
        "gateway tuning",
        {"gateway": GATEWAY, "config": {"gateway.upstream.max.response.bytes": 2048}},
    ),
]


@pytest.mark.parametrize(
    ("values",), [r[1:] for r in ACCEPTED], ids=[r[0] for r in ACCEPTED]
)
def test_schema_accepts(values: dict[str, Any]) -> None:
    assert render(values)


def test_config_schema_covers_every_collector_key() -> None:
    """Each key the collector reads is either settable under `config` or set by the chart,
    and the schema offers nothing the collector would refuse (it forbids unknown keys)."""
    collector_keys = set(known_keys())
    config_schema = SCHEMA["properties"]["config"]
    assert config_schema["additionalProperties"] is False
    settable = set(config_schema["properties"])
    missing = collector_keys - settable - CHART_OWNED_CONFIG_KEYS
    assert not missing, (
        f"collector config keys {sorted(missing)} cannot be set through the chart: add them "
        "to config.properties in helm/ktc/values.schema.json"
    )
    # Keys accepted outside the model's fields (Kafka's connection-quota keys) count too.
    unknown = {
        key for key in settable - collector_keys if not is_connection_quota_key(key)
    }
    for pattern in config_schema.get("patternProperties", {}):
        assert pattern.startswith("^listener\\.name\\."), pattern
    assert not unknown, (
        f"the chart schema offers keys the collector refuses: {sorted(unknown)}"
    )
    assert not settable & CHART_OWNED_CONFIG_KEYS


def test_otlp_schema_matches_the_exporter_model() -> None:
    otlp_schema = SCHEMA["properties"]["config"]["properties"]["exporters.otlp"]
    assert set(otlp_schema["properties"]) == set(OtlpExporterConfig.model_fields)
    for section in ("tls", "retry_on_failure", "sending_queue"):
        model = OtlpExporterConfig.model_fields[section].annotation
        assert set(otlp_schema["properties"][section]["properties"]) == set(
            model.model_fields  # type: ignore[union-attr]
        ), section


def test_landing_schema_matches_the_landing_log_options() -> None:
    """`landing` becomes LandingOptions.from_mapping(landing): the schema offers exactly
    its options."""
    landing_schema = SCHEMA["properties"]["config"]["properties"]["landing"]
    options = {field.name for field in dataclasses.fields(LandingOptions)}
    assert set(landing_schema["properties"]) == options


def test_every_object_in_the_schema_is_closed() -> None:
    """additionalProperties: false everywhere except pass-through Kubernetes objects."""
    open_objects: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if "properties" in node and node.get("additionalProperties") is not False:
                open_objects.append(path)
            for key, child in node.items():
                # if/then only add conditions to the (closed) object they sit on.
                if key not in ("if", "then"):
                    walk(child, f"{path}/{key}")
        elif isinstance(node, list):
            for index, child in enumerate(node):
                walk(child, f"{path}/{index}")

    walk(SCHEMA, "#")
    # Env entries are core/v1 EnvVar: only `name` is constrained here.
    assert open_objects == ["#/definitions/envList/items"]
