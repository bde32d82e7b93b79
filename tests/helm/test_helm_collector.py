"""What the rendered collector pods will actually do, checked on the rendered objects.

The per-pod values are resolved the way the kubelet resolves them (downward API fields,
then `$(VAR)` expansion in env order), and the resulting config file plus environment is
fed to the collector's real configuration loader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from collector.app.config import CollectorConfig, load_config
from collector.net.listeners import (
    EndPoint,
    parse_listeners,
    parse_security_protocol_map,
)
from exporters.landing import LandingLog, LandingOptions
from exporters.otlp.config import OtlpExporterConfig
from subscriptions.quota_entities import QuotaEntity
from subscriptions.store import ConfigStore
from tests.helm.ktc_chart import (
    CHART_DIR,
    NAMESPACE,
    POD_INDEX_LABEL,
    RELEASE,
    container,
    env_value,
    find,
    load_values,
    pod_environment,
    render,
)

Docs = list[dict[str, Any]]
CI = CHART_DIR / "ci"


def collector_configmap(docs: Docs) -> dict[str, Any]:
    """The ConfigMap with the collector's config.yaml (the dashboards ConfigMap may render
    beside it)."""
    configs = [
        d
        for d in docs
        if d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {})
    ]
    assert len(configs) == 1, f"expected one config.yaml, rendered {len(configs)}"
    return configs[0]


def config_yaml(docs: Docs) -> str:
    return str(collector_configmap(docs)["data"]["config.yaml"])


def collector_config(docs: Docs, ordinal: int, tmp_path: Path) -> CollectorConfig:
    """The configuration pod <ordinal> runs with: the rendered file + the pod's environment,
    through the collector's own loader (which raises on anything it would refuse)."""
    path = tmp_path / "config.yaml"
    path.write_text(config_yaml(docs), encoding="utf-8")
    environment = pod_environment(find(docs, "StatefulSet"), ordinal)
    return load_config(path, environ=environment)


def endpoints(config: CollectorConfig, text: str | None) -> list[EndPoint]:
    """Listeners as the collector parses them (names resolved through the protocol map)."""
    assert text is not None
    return parse_listeners(
        text, parse_security_protocol_map(config.listener_security_protocol_map)
    )


def checksum(docs: Docs) -> str | None:
    annotations = find(docs, "StatefulSet")["spec"]["template"]["metadata"].get(
        "annotations"
    )
    return (annotations or {}).get("checksum/config")


# --- identity: node.id and the advertised listener --------------------------------------


@pytest.mark.parametrize("ordinal", [0, 1, 2])
def test_each_pod_gets_its_ordinal_as_node_id_and_advertises_itself(
    rendered: Callable[..., Docs], ordinal: int, tmp_path: Path
) -> None:
    docs = rendered({"replicaCount": 3})
    config = collector_config(docs, ordinal, tmp_path)
    assert config.node_id == ordinal
    assert config.advertised_listeners == (
        f"PLAINTEXT://{RELEASE}-{ordinal}.{RELEASE}-headless.{NAMESPACE}.svc:9092"
    )
    # The collector's own listener parser accepts both, and they name the same listener.
    (bound,) = endpoints(config, config.listeners)
    (advertised,) = endpoints(config, config.advertised_listeners)
    assert (bound.listener_name, bound.port) == (
        advertised.listener_name,
        advertised.port,
    )
    assert bound.host == "0.0.0.0"


def test_node_id_comes_from_the_pod_index_label(rendered: Callable[..., Docs]) -> None:
    collector = container(find(rendered(), "StatefulSet"), "collector")
    field = env_value(collector, "KTC_NODE_ID")["valueFrom"]["fieldRef"]["fieldPath"]
    assert field == f"metadata.labels['{POD_INDEX_LABEL}']"


def test_advertised_name_resolves_through_the_headless_service(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    """<pod>.<service>.<namespace>.svc exists only if the StatefulSet's serviceName is a
    headless Service selecting these pods and serving the advertised port."""
    docs = rendered({"replicaCount": 2, "clusterDomain": "cluster.local"})
    statefulset = find(docs, "StatefulSet")
    headless = find(docs, "Service", statefulset["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    pod_labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert headless["spec"]["selector"].items() <= pod_labels.items()

    config = collector_config(docs, 1, tmp_path)
    (advertised,) = endpoints(config, config.advertised_listeners)
    pod, service, namespace, *domain = advertised.host.split(".")
    assert (pod, service, namespace) == (
        f"{RELEASE}-1",
        headless["metadata"]["name"],
        NAMESPACE,
    )
    assert domain == ["svc", "cluster", "local"]
    assert advertised.port in {p["port"] for p in headless["spec"]["ports"]}


def test_a_listener_name_flows_into_bind_and_advertise(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    values = {
        "listenerName": "CLIENT",
        "ports": {"kafka": {"containerPort": 9094}},
        "config": {"listener.security.protocol.map": "CLIENT:PLAINTEXT"},
    }
    config = collector_config(rendered(values), 0, tmp_path)
    assert config.listeners == "CLIENT://0.0.0.0:9094"
    (bound,) = endpoints(config, config.listeners)
    (advertised,) = endpoints(config, config.advertised_listeners)
    assert bound.security_protocol == advertised.security_protocol == "PLAINTEXT"
    assert str(advertised) == "CLIENT://ktc-0.ktc-headless.telemetry.svc:9094"


def test_cluster_id_is_shared_stable_and_a_kafka_uuid(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    docs = rendered({"replicaCount": 3})
    ids = {collector_config(docs, n, tmp_path).cluster_id for n in range(3)}
    assert len(ids) == 1
    (cluster_id,) = ids
    # Kafka's Uuid.toString(): 16 bytes, URL-safe base64 without padding = 22 characters.
    assert cluster_id is not None and re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
    assert (
        cluster_id
        == collector_config(rendered({"replicaCount": 1}), 0, tmp_path).cluster_id
    )
    other = render_config(release="other")
    assert other["cluster.id"] != cluster_id
    chosen = render_config(values={"config": {"cluster.id": "my-cluster"}})
    assert chosen["cluster.id"] == "my-cluster"


def render_config(
    values: Mapping[str, Any] | None = None, release: str = RELEASE
) -> Any:
    out = render(values, release=release)
    (configmap,) = [t for n, t in out.items() if n.endswith("/configmap.yaml")]
    return yaml.safe_load(yaml.safe_load(configmap)["data"]["config.yaml"])


# --- every scenario's config is one the collector accepts --------------------------------


@pytest.mark.parametrize(
    "values_file", sorted(CI.glob("*-values.yaml")), ids=lambda p: p.name
)
def test_scenario_config_loads_in_the_collector(
    rendered: Callable[..., Docs], values_file: Path, tmp_path: Path
) -> None:
    values = load_values(values_file)
    docs = rendered(values)
    replicas = int(find(docs, "StatefulSet")["spec"]["replicas"])
    for ordinal in range(replicas):
        config = collector_config(docs, ordinal, tmp_path)
        assert config.node_id == ordinal
        assert str(config.data_dir) == values.get("dataDir", "/var/lib/ktc")
        if config.exporters_otlp is not None:
            OtlpExporterConfig.model_validate(config.exporters_otlp)
    # `landing` becomes the landing log's options at start-up: they must be accepted.
    options = LandingOptions.from_mapping(config.landing)
    LandingLog(tmp_path / "landing", options, housekeeping=False).close()
    # Extra KTC_ variables are config overrides too: they were part of what just loaded.
    environment = pod_environment(find(docs, "StatefulSet"), 0)
    for entry in values.get("extraEnvs", []):
        if "value" in entry:
            assert environment[entry["name"]] == entry["value"]


def test_an_extra_env_override_wins_over_the_file(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    values = {
        "config": {"telemetry.max.bytes": 1048576},
        "extraEnvs": [{"name": "KTC_TELEMETRY_MAX_BYTES", "value": "2097152"}],
    }
    assert (
        collector_config(rendered(values), 0, tmp_path).telemetry_max_bytes == 2097152
    )


def test_a_secret_exporter_block_can_come_from_the_environment(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    """docs/helm.md: the whole exporters.otlp map from a Secret via KTC_EXPORTERS_OTLP
    (here as a plain value: a secretKeyRef resolves to the same string in the pod)."""
    secret = '{endpoint: "otel:4317", headers: {x-api-key: s3cr3t}}'
    values = {"extraEnvs": [{"name": "KTC_EXPORTERS_OTLP", "value": secret}]}
    config = collector_config(rendered(values), 0, tmp_path)
    otlp = OtlpExporterConfig.model_validate(config.exporters_otlp)
    assert (otlp.target, otlp.headers) == ("otel:4317", {"x-api-key": "s3cr3t"})


def test_operator_config_reaches_the_collector(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    docs = rendered(load_values(CI / "otlp-values.yaml"))
    config = collector_config(docs, 0, tmp_path)
    assert config.telemetry_max_bytes == 2097152
    assert config.exporters_otlp is not None
    otlp = OtlpExporterConfig.model_validate(config.exporters_otlp)
    assert otlp.target == "otel-collector.observability.svc:4317"
    assert otlp.tls.ca_file == "/etc/otlp-tls/ca.crt"
    assert otlp.sending_queue.queue_size == 2000


# --- ports, probes, and the HTTP endpoint -------------------------------------------------


def test_probes_hit_the_http_listener(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    docs = rendered()
    collector = container(find(docs, "StatefulSet"), "collector")
    ports = {p["name"]: p["containerPort"] for p in collector["ports"]}
    config = collector_config(docs, 0, tmp_path)
    assert config.http_host_port == ("0.0.0.0", ports["metrics"])
    (listener,) = endpoints(config, config.listeners)
    assert listener.port == ports["kafka"]

    expected = {
        "livenessProbe": "/healthz",
        "readinessProbe": "/readyz",
        "startupProbe": "/healthz",
    }
    for probe, path in expected.items():
        http_get = collector[probe]["httpGet"]
        assert (http_get["path"], http_get["port"]) == (path, "metrics"), probe


def test_moving_the_http_port_moves_listener_probes_and_service(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    docs = rendered({"ports": {"metrics": {"containerPort": 9100, "servicePort": 80}}})
    config = collector_config(docs, 0, tmp_path)
    assert config.http_host_port == ("0.0.0.0", 9100)
    collector = container(find(docs, "StatefulSet"), "collector")
    assert {"name": "metrics", "containerPort": 9100, "protocol": "TCP"} in collector[
        "ports"
    ]
    service_port = [
        p
        for p in find(docs, "Service", RELEASE)["spec"]["ports"]
        if p["name"] == "metrics"
    ]
    assert service_port == [
        {
            "name": "metrics",
            "port": 80,
            "targetPort": "metrics",
            "protocol": "TCP",
            "appProtocol": "http",
        }
    ]


def test_without_the_http_endpoint_there_are_no_probes(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    docs = rendered(load_values(CI / "no-http-values.yaml"))
    collector = container(find(docs, "StatefulSet"), "collector")
    assert not {"livenessProbe", "readinessProbe", "startupProbe"} & set(collector)
    assert collector_config(docs, 0, tmp_path).http_listener is None
    assert [p["name"] for p in find(docs, "Service", RELEASE)["spec"]["ports"]] == [
        "kafka"
    ]


def test_services_target_declared_container_ports(
    rendered: Callable[..., Docs],
) -> None:
    docs = rendered()
    container_ports = {
        p["name"] for p in container(find(docs, "StatefulSet"), "collector")["ports"]
    }
    for service in (d for d in docs if d["kind"] == "Service"):
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in container_ports, service["metadata"]["name"]


# --- config checksum ----------------------------------------------------------------------


def test_checksum_changes_with_the_config(rendered: Callable[..., Docs]) -> None:
    base = checksum(rendered())
    assert base is not None and re.fullmatch(r"[0-9a-f]{64}", base)
    assert checksum(rendered({"config": {"telemetry.max.bytes": 2097152}})) != base
    assert checksum(rendered({"ports": {"kafka": {"containerPort": 9093}}})) != base
    assert (
        checksum(rendered({"terminationGracePeriodSeconds": 60})) != base
    )  # drain time
    # Deterministic: the same values give the same checksum.
    assert checksum(rendered({"config": {"log.level": "INFO"}})) == base


def test_checksum_ignores_hot_reloaded_subscriptions_and_quotas(
    rendered: Callable[..., Docs],
) -> None:
    values = load_values(CI / "subscriptions-quotas-values.yaml")
    assert checksum(rendered(values)) == checksum(rendered())


def test_checksum_can_be_turned_off(rendered: Callable[..., Docs]) -> None:
    assert checksum(rendered({"enableConfigChecksumAnnotation": False})) is None


# --- subscriptions and quotas -------------------------------------------------------------


def test_subscriptions_and_quotas_are_mounted_for_the_store(
    rendered: Callable[..., Docs],
) -> None:
    values = load_values(CI / "subscriptions-quotas-values.yaml")
    docs = rendered(values)
    data = collector_configmap(docs)["data"]
    # The store's file format: one top-level key per file (subscriptions/store.py).
    assert yaml.safe_load(data["client-metrics.yaml"]) == {
        "subscriptions": values["subscriptions"]
    }
    assert yaml.safe_load(data["quotas.yaml"]) == {"quotas": values["quotas"]}

    statefulset = find(docs, "StatefulSet")
    mounts = {m["name"]: m for m in container(statefulset, "collector")["volumeMounts"]}
    # A directory mount, never subPath: only then do ConfigMap updates reach the pod.
    assert mounts["client-config"] == {
        "name": "client-config",
        "mountPath": "/var/lib/ktc/config",
        "readOnly": True,
    }
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    items = {i["key"] for i in volumes["client-config"]["configMap"]["items"]}
    assert items == {"client-metrics.yaml", "quotas.yaml"}


@pytest.mark.parametrize(
    "values_file", sorted(CI.glob("*-values.yaml")), ids=lambda p: p.name
)
def test_scenario_store_files_load_in_the_collectors_store(
    rendered: Callable[..., Docs], values_file: Path, tmp_path: Path
) -> None:
    """The config store (which validates like Kafka's controller) accepts what the chart
    mounts at <dataDir>/config, and sees exactly the values' subscriptions and quotas."""
    values = load_values(values_file)
    data = collector_configmap(rendered(values))["data"]
    if "client-metrics.yaml" not in data:  # configStore.source: dataVolume
        return
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    for name in ("client-metrics.yaml", "quotas.yaml"):
        (config_dir / name).write_text(data[name], encoding="utf-8")
    snapshot = ConfigStore(tmp_path).load()
    assert sorted(s.name for s in snapshot.subscriptions) == sorted(
        values.get("subscriptions", {})
    )
    quota_paths = {entity.path for entity in snapshot.quotas}
    assert quota_paths == {
        QuotaEntity.from_path(p).path for p in values.get("quotas", {})
    }


def test_data_volume_store_is_writable_and_not_from_the_configmap(
    rendered: Callable[..., Docs],
) -> None:
    docs = rendered(load_values(CI / "ephemeral-values.yaml"))
    assert set(find(docs, "ConfigMap")["data"]) == {"config.yaml"}
    statefulset = find(docs, "StatefulSet")
    mounts = {m["name"] for m in container(statefulset, "collector")["volumeMounts"]}
    assert "client-config" not in mounts
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {}}
    assert "volumeClaimTemplates" not in statefulset["spec"]


# --- storage ------------------------------------------------------------------------------


def test_landing_is_one_shared_claim_under_the_data_dir(
    rendered: Callable[..., Docs],
) -> None:
    docs = rendered({"replicaCount": 3})
    claim = find(docs, "PersistentVolumeClaim", "ktc-landing")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    statefulset = find(docs, "StatefulSet")
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    assert volumes["landing"]["persistentVolumeClaim"]["claimName"] == "ktc-landing"
    mounts = {
        m["name"]: m["mountPath"]
        for m in container(statefulset, "collector")["volumeMounts"]
    }
    # <data.dir>/landing/node-<node.id>/ is where each node writes: on the shared claim.
    assert mounts["landing"] == mounts["data"] + "/landing"
    (template,) = statefulset["spec"]["volumeClaimTemplates"]
    assert template["metadata"]["name"] == "data"
    assert template["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_existing_landing_claim_is_used_not_created(
    rendered: Callable[..., Docs],
) -> None:
    docs = rendered({"persistence": {"landing": {"existingClaim": "nfs-landing"}}})
    assert not [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    volumes = find(docs, "StatefulSet")["spec"]["template"]["spec"]["volumes"]
    assert {
        "name": "landing",
        "persistentVolumeClaim": {"claimName": "nfs-landing"},
    } in volumes


# --- security and shutdown ----------------------------------------------------------------


def test_runs_unprivileged_on_a_read_only_root(rendered: Callable[..., Docs]) -> None:
    statefulset = find(rendered(), "StatefulSet")
    pod = statefulset["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["automountServiceAccountToken"] is False
    collector = container(statefulset, "collector")
    assert collector["securityContext"]["readOnlyRootFilesystem"] is True
    assert collector["securityContext"]["allowPrivilegeEscalation"] is False
    assert collector["securityContext"]["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"]: m["name"] for m in collector["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/tmp"]] == {"name": "tmp", "emptyDir": {}}


def test_drain_ends_before_the_kill(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    docs = rendered({"terminationGracePeriodSeconds": 60})
    grace = find(docs, "StatefulSet")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ]
    assert grace == 60
    assert collector_config(docs, 0, tmp_path).shutdown_timeout_seconds == 55


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {
                "terminationGracePeriodSeconds": 20,
                "config": {"shutdown.timeout.seconds": 20},
            },
            "must be below terminationGracePeriodSeconds",
        ),
        (
            {"terminationGracePeriodSeconds": 5},
            "terminationGracePeriodSeconds must be above 5",
        ),
        ({"ports": {"kafka": {"enabled": False}}}, "ports.kafka.enabled must be true"),
        (
            {
                "ingest": {"enabled": True},
                "persistence": {"landing": {"enabled": False}},
            },
            "ingest.enabled needs persistence.landing.enabled",
        ),
        (
            {
                "serviceMonitor": {"enabled": True},
                "ports": {"metrics": {"enabled": False}},
            },
            "serviceMonitor.enabled needs ports.metrics.enabled",
        ),
        ({"configMap": {"create": False}}, "configMap.existingName is required"),
        ({"listenerName": "CLIENT"}, "listenerName CLIENT has no entry"),
    ],
    ids=[
        "drain-too-long",
        "grace-too-short",
        "no-kafka-port",
        "ingest-without-landing",
        "monitor-without-metrics",
        "no-configmap-name",
        "unmapped-listener",
    ],
)
def test_inconsistent_values_fail_with_a_clear_message(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm.HelmError) as caught:
        render(values)
    assert message in str(caught.value)


# --- defaults and NOTES ------------------------------------------------------------------


def test_chart_defaults_are_the_collectors_defaults() -> None:
    """The values.yaml `config` examples restate the collector's defaults: installing the
    chart with no values behaves like `ktc serve` with no config (listeners aside)."""
    config_defaults = load_values(CHART_DIR / "values.yaml")["config"]
    fields = {f.alias: f for f in CollectorConfig.model_fields.values()}
    for key, value in config_defaults.items():
        assert fields[key].default == value, key


def test_notes_tell_clients_where_to_connect() -> None:
    notes = render({"replicaCount": 3})[f"{CHART_DIR.name}/templates/NOTES.txt"]
    assert "bootstrap.servers=ktc.telemetry.svc:9092" in notes
    assert "PLAINTEXT://ktc-<ordinal>.ktc-headless.telemetry.svc:9092" in notes
    assert "OTLP forwarding is off" in notes
    with_otlp = render({"config": {"exporters.otlp": {"endpoint": "otel:4317"}}})
    assert (
        "OTLP forwarding is off"
        not in with_otlp[f"{CHART_DIR.name}/templates/NOTES.txt"]
    )


# --- names --------------------------------------------------------------------------------


def test_long_release_names_stay_within_kubernetes_limits(
    rendered: Callable[..., Docs],
) -> None:
    release = "telemetry-" * 5 + "abc"  # 53 characters: Helm's maximum
    assert len(release) == 53
    helm.validate_release_name(release)
    docs = [
        d
        for d in yaml.safe_load_all(
            "\n---\n".join(
                t
                for n, t in render(
                    {"ingest": {"enabled": True}}, release=release
                ).items()
                if not n.endswith("NOTES.txt")
            )
        )
        if d
    ]
    for doc in docs:
        assert len(doc["metadata"]["name"]) <= 63, doc["metadata"]["name"]
    statefulset = find(docs, "StatefulSet")
    # Pod names add "-<ordinal>", the controller-revision-hash label about 11 more.
    assert len(statefulset["metadata"]["name"]) <= 52
