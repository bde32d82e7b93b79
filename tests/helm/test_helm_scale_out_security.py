"""Layout scaleOut on a cluster with SASL and TLS: the ingest Deployment reaches the landing
topic with the security settings the nodes land with (templates/_ingest_kafka.tpl).

The rendered ingest arguments are parsed by ``ktc ingest``'s own parser and turned into
the consumer properties the ingest uses (``IngestOptions.kafka_source``, with the pod's
environment as the rendered entries give it); the nodes' side is the rendered config.yaml
loaded by the collector's own loader and turned into the topic's client settings
(``collector.app.landing_topic.topic_settings``).  Both must name the same protocol,
mechanism, login and CA file, and no password may be on the ingest's command line; what
the chart derives for the ingest is what the nodes' ``KafkaClusterSettings`` renders as the
Java client's properties (``java_properties``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

from collector.app.config import CollectorConfig, load_config
from collector.app.landing_topic import topic_settings
from exporters.lakehouse.cli.ingest import IngestOptions, ingest_command
from tests.helm.ktc_chart import (
    CHART_DIR,
    KUBE_VERSIONS,
    container,
    find,
    pod_environment,
    render,
)

Docs = list[dict[str, Any]]

PASSWORD = (
    "landing-Pw-6b1f0e93"  # the Secret's value, as the kubelet would hand it over
)
KEY_PASSWORD = "key-Pw-2c7d8a41"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"

SASL_SSL: dict[str, Any] = {
    "layout": "scaleOut",
    "replicaCount": 2,
    "config": {
        "landing.kafka.topic": "telemetry",
        "landing.kafka.bootstrap.servers": "kafka:9093",
        "landing.kafka.security.protocol": "SASL_SSL",
        "landing.kafka.sasl.mechanism": "SCRAM-SHA-512",
        "landing.kafka.sasl.username": "ktc-landing",
        "landing.kafka.sasl.password": "${env:KTC_SECRET_LANDING_PASSWORD}",
        "landing.kafka.ssl.truststore.location": "/etc/ktc-secrets/ca.crt",
        "subscriptions.store": "kafka",
        "subscriptions.kafka.bootstrap.servers": "kafka:9093",
    },
    "secrets": {
        "secretName": "landing-login",
        "files": ["ca.crt"],
        "env": {"KTC_SECRET_LANDING_PASSWORD": "password"},
    },
    "ingest": {"enabled": True},
}

GATEWAY: dict[str, Any] = {
    "layout": "scaleOut",
    "replicaCount": 3,
    "listenerName": "SASL_PLAINTEXT",
    "gateway": {
        "enabled": True,
        "upstream": {
            "bootstrapServers": "kafka-0.kafka:9093",
            "securityProtocol": "SASL_SSL",
            "tls": {
                "secretName": "kafka-tls",
                "caKey": "ca.crt",
                "keystoreKey": "client.pem",
                "keyPasswordKey": "client.password",
                "endpointIdentification": False,
            },
        },
        "maxNodes": 3,
    },
    "config": {
        "landing.kafka.topic": "ktc-telemetry",
        "gateway.upstream.sasl.mechanism": "PLAIN",
        "gateway.upstream.sasl.username": "ktc-gateway",
    },
    "extraEnvs": [
        {
            "name": "KTC_GATEWAY_UPSTREAM_SASL_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "gw-login", "key": "password"}},
        }
    ],
    "ingest": {"enabled": True},
}


def with_config(values: Mapping[str, Any], **config: Any) -> dict[str, Any]:
    """``values`` with ``config`` keys set (None: removed)."""
    merged = {**values["config"], **config}
    return {**values, "config": {k: v for k, v in merged.items() if v is not None}}


def kubelet_env(
    entries: list[dict[str, Any]], secrets: Mapping[str, str]
) -> dict[str, str]:
    """The container's environment as the kubelet sets it: plain values, and each
    secretKeyRef from ``secrets`` ("<secret>/<key>" -> value)."""
    env = {}
    for entry in entries:
        if "value" in entry:
            env[entry["name"]] = entry["value"]
        else:
            ref = entry["valueFrom"]["secretKeyRef"]
            env[entry["name"]] = secrets[f"{ref['name']}/{ref['key']}"]
    return env


def ingest_properties(
    ingest: dict[str, Any], secrets: Mapping[str, str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The Kafka consumer properties ``ktc ingest`` runs with in that pod."""
    main = container(ingest, "ingest")
    for name, value in kubelet_env(main["env"], secrets).items():
        monkeypatch.setenv(name, value)
    with ingest_command.make_context("ingest", list(main["args"][1:])) as ctx:
        params = ctx.params
    options = IngestOptions(
        landing_dirs=tuple(params["landing_dirs"]),
        once=params["once"],
        trigger_interval=params["trigger_interval"],
        max_records_per_batch=params["max_records_per_batch"],
        maintenance_interval=params["maintenance_interval"],
        retention_days=params["retention_days"],
        flatten_processes=params["flatten_processes"],
        kafka_bootstrap_servers=params["kafka_bootstrap_servers"],
        kafka_topic=params["kafka_topic"],
        kafka_properties=tuple(params["kafka_properties"]),
    )
    source = options.kafka_source()
    assert source is not None
    return {**source.properties, "bootstrap.servers": source.bootstrap_servers}


def node_config(
    docs: Docs, secrets: Mapping[str, str], tmp_path: Path
) -> CollectorConfig:
    """Node 0's config, from the rendered config.yaml and its environment."""
    statefulset = find(docs, "StatefulSet")
    path = tmp_path / "config.yaml"
    path.write_text(find(docs, "ConfigMap")["data"]["config.yaml"], encoding="utf-8")
    environ = {
        **pod_environment(statefulset, 0),
        **kubelet_env(
            [
                e
                for e in container(statefulset, "collector")["env"]
                if "value" in e or "secretKeyRef" in e.get("valueFrom", {})
            ],
            secrets,
        ),
    }
    return load_config(path, environ=environ)


def node_client(
    docs: Docs, secrets: Mapping[str, str], tmp_path: Path
) -> dict[str, Any]:
    """The librdkafka settings node 0 lands with."""
    return dict(topic_settings(node_config(docs, secrets, tmp_path)).client)


def node_java_properties(
    docs: Docs, secrets: Mapping[str, str], tmp_path: Path
) -> dict[str, str]:
    """Node 0's landing cluster rendered as the Java client's properties."""
    cluster = node_config(docs, secrets, tmp_path).landing_cluster()
    assert cluster.bootstrap_servers is not None
    return {**cluster.java_properties(), "bootstrap.servers": cluster.bootstrap_servers}


def mounts(workload: dict[str, Any], name: str) -> dict[str, str]:
    return {
        m["name"]: m["mountPath"] for m in container(workload, name)["volumeMounts"]
    }


def secret_volumes(workload: dict[str, Any]) -> dict[str, Any]:
    return {
        v["name"]: v["secret"]
        for v in workload["spec"]["template"]["spec"]["volumes"]
        if "secret" in v
    }


def test_no_password_is_in_the_ingests_arguments(
    rendered: Callable[..., Docs],
) -> None:
    for values in (SASL_SSL, GATEWAY):
        ingest = find(rendered(values), "Deployment", "ktc-ingest")
        args = container(ingest, "ingest")["args"]
        assert "--kafka-property" in args
        assert not [a for a in args if "password=" in a and "${env:" not in a]


def test_the_ingest_logs_in_as_the_nodes_do_with_their_ca(
    rendered: Callable[..., Docs], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = rendered(SASL_SSL)
    secrets = {"landing-login/password": PASSWORD}
    ingest = find(docs, "Deployment", "ktc-ingest")
    properties = ingest_properties(ingest, secrets, monkeypatch)
    assert properties == {
        "bootstrap.servers": "kafka:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": (
            f'{SCRAM} required username="ktc-landing" password="{PASSWORD}";'
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/ktc-secrets/ca.crt",
    }
    # What the chart derives is what the nodes' settings render for the Java client.
    assert properties == node_java_properties(docs, secrets, tmp_path)
    node = node_client(docs, secrets, tmp_path)
    assert node["bootstrap.servers"] == properties["bootstrap.servers"]
    assert node["security.protocol"] == properties["security.protocol"]
    assert node["sasl.mechanism"] == properties["sasl.mechanism"]
    assert (node["sasl.username"], node["sasl.password"]) == ("ktc-landing", PASSWORD)
    assert node["ssl.ca.location"] == properties["ssl.truststore.location"]
    # The password comes from the Secret, as on the nodes; the CA file is mounted.
    env = {e["name"]: e for e in container(ingest, "ingest")["env"]}
    assert env["KTC_SECRET_LANDING_PASSWORD"]["valueFrom"] == {
        "secretKeyRef": {"name": "landing-login", "key": "password"}
    }
    assert mounts(ingest, "ingest")["secrets"] == "/etc/ktc-secrets"
    assert secret_volumes(ingest)["secrets"]["secretName"] == "landing-login"


def test_in_gateway_mode_the_ingest_uses_the_fronted_clusters_login_and_tls(
    rendered: Callable[..., Docs], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = rendered(GATEWAY)
    secrets = {"gw-login/password": PASSWORD, "kafka-tls/client.password": KEY_PASSWORD}
    ingest = find(docs, "Deployment", "ktc-ingest")
    properties = ingest_properties(ingest, secrets, monkeypatch)
    assert properties == {
        "bootstrap.servers": "kafka-0.kafka:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="ktc-gateway" password="{PASSWORD}";'
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/ktc-upstream-tls/ca.crt",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/etc/ktc-upstream-tls/client.pem",
        "ssl.key.password": KEY_PASSWORD,
        "ssl.endpoint.identification.algorithm": "",
    }
    # What the chart derives is what the nodes' settings render for the Java client.
    assert properties == node_java_properties(docs, secrets, tmp_path)
    node = node_client(docs, secrets, tmp_path)
    assert node["security.protocol"] == "SASL_SSL"
    assert (node["sasl.mechanism"], node["sasl.username"]) == ("PLAIN", "ktc-gateway")
    assert node["sasl.password"] == PASSWORD
    assert node["ssl.ca.location"] == properties["ssl.truststore.location"]
    assert node["ssl.certificate.location"] == properties["ssl.keystore.location"]
    assert node["ssl.key.password"] == KEY_PASSWORD
    assert node["ssl.endpoint.identification.algorithm"] == "none"
    assert mounts(ingest, "ingest")["upstream-tls"] == "/etc/ktc-upstream-tls"
    assert secret_volumes(ingest)["upstream-tls"]["secretName"] == "kafka-tls"


def test_a_password_written_in_config_reaches_the_ingest_through_its_environment(
    rendered: Callable[..., Docs], monkeypatch: pytest.MonkeyPatch
) -> None:
    values = with_config(SASL_SSL, **{"landing.kafka.sasl.password": PASSWORD})
    ingest = find(rendered(values), "Deployment", "ktc-ingest")
    env = {e["name"]: e for e in container(ingest, "ingest")["env"]}
    assert env["KTC_INGEST_LANDING_KAFKA_SASL_PASSWORD"] == {
        "name": "KTC_INGEST_LANDING_KAFKA_SASL_PASSWORD",
        "value": PASSWORD,
    }
    properties = ingest_properties(ingest, {}, monkeypatch)
    assert f'password="{PASSWORD}";' in properties["sasl.jaas.config"]
    assert PASSWORD not in " ".join(container(ingest, "ingest")["args"])


def test_a_plaintext_cluster_gets_no_property(
    rendered: Callable[..., Docs], monkeypatch: pytest.MonkeyPatch
) -> None:
    values = with_config(
        SASL_SSL,
        **{
            k: None
            for k in SASL_SSL["config"]
            if ".sasl." in k or ".ssl." in k or k.endswith("security.protocol")
        },
    )
    ingest = find(rendered(values), "Deployment", "ktc-ingest")
    assert ingest_properties(ingest, {}, monkeypatch) == {
        "bootstrap.servers": "kafka:9093"
    }
    assert "--kafka-property" not in container(ingest, "ingest")["args"]
    assert "secrets" not in mounts(ingest, "ingest")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            with_config(SASL_SSL, **{"landing.kafka.sasl.password": None}),
            'the ingest reads the landing topic over SASL_SSL: set config."landing.'
            'kafka.sasl.mechanism", "landing.kafka.sasl.username" and "landing.kafka.'
            'sasl.password"',
        ),
        (
            with_config(
                SASL_SSL,
                **{
                    "landing.kafka.security.protocol": "PLAINTEXT",
                    "landing.kafka.ssl.truststore.location": None,
                },
            ),
            'config."landing.kafka.sasl.*" is a login for a SASL listener, but '
            "landing.kafka.security.protocol is PLAINTEXT",
        ),
        (
            with_config(
                SASL_SSL, **{"landing.kafka.security.protocol": "SASL_PLAINTEXT"}
            ),
            'config."landing.kafka.ssl.*" is TLS material, but '
            "landing.kafka.security.protocol is SASL_PLAINTEXT",
        ),
        (
            with_config(
                SASL_SSL,
                **{
                    "landing.kafka.ssl.truststore.location": "/etc/ktc-secrets/kafka-ca"
                },
            ),
            'config."landing.kafka.ssl.truststore.location" /etc/ktc-secrets/kafka-ca '
            "is not one of secrets.files",
        ),
        (
            with_config(
                SASL_SSL, **{"landing.kafka.sasl.password": "${env:KAFKA_PASSWORD}"}
            ),
            'config."landing.kafka.sasl.password" is ${env:KAFKA_PASSWORD}, but '
            "KAFKA_PASSWORD is in neither secrets.env nor extraEnvs",
        ),
        (
            with_config(
                SASL_SSL, **{"landing.kafka.sasl.password": "pre-${env:X}-post"}
            ),
            'config."landing.kafka.sasl.password": the ingest takes a whole '
            "${env:NAME} reference here",
        ),
        (
            with_config(SASL_SSL, **{"landing.kafka.sasl.username": 'k"tc'}),
            'config."landing.kafka.sasl.username" holds a quote or a backslash',
        ),
        (
            with_config(
                SASL_SSL,
                **{
                    "landing.kafka.ssl.key.password": "${env:KTC_SECRET_LANDING_PASSWORD}"
                },
            ),
            'config."landing.kafka.ssl.key.password" is the password of the '
            'keystore\'s private key: set "landing.kafka.ssl.keystore.location"',
        ),
        (
            {
                **GATEWAY,
                "config": {"landing.kafka.topic": "ktc-telemetry"},
                "extraEnvs": [],
            },
            'the ingest reads the landing topic over SASL_SSL: set config."gateway.'
            'upstream.sasl.mechanism"',
        ),
    ],
    ids=[
        "sasl-without-password",
        "sasl-on-plaintext",
        "ca-without-tls",
        "ca-not-in-the-secret",
        "password-variable-not-given",
        "reference-inside-a-value",
        "quote-in-username",
        "key-password-without-keystore",
        "gateway-without-login",
    ],
)
def test_security_the_ingest_could_not_use_fails_in_one_line(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm.HelmError) as caught:
        render(values)
    lines = [line for line in str(caught.value).splitlines() if message in line]
    assert lines, str(caught.value)


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values", [SASL_SSL, GATEWAY], ids=["serve", "gateway"])
def test_the_secured_scale_out_passes_helm_lint_strict(
    values: dict[str, Any], kube_version: str
) -> None:
    """What `ct lint` runs on the ci/ scenarios (those load the config without the
    Secret's values, which these need)."""
    report = helm.lint(CHART_DIR, values, strict=True, kube_version=kube_version)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
