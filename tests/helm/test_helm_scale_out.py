"""The scale-out layout (``layout: scaleOut``, docs/scale-out.md): gateway replicas with no
volume at all, what they accept on the landing topic, their subscriptions in the cluster,
the ingest reading the topic; the ReadWriteMany claim only in the landing-log layout."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from collector.app.config import load_config
from exporters.lakehouse.cli.ingest import ingest_command
from tests.helm.ktc_chart import (
    CHART_DIR,
    container,
    find,
    load_values,
    pod_environment,
    render,
)

Docs = list[dict[str, Any]]

SCALE_OUT = load_values(CHART_DIR / "examples" / "scale-out" / "values.yaml")
UPSTREAM = SCALE_OUT["gateway"]["upstream"]["bootstrapServers"]


def claims(docs: Docs) -> list[dict[str, Any]]:
    """Every claim the release creates or mounts: PersistentVolumeClaims, the
    StatefulSet's claim templates, and each pod's persistentVolumeClaim volumes."""
    found = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    statefulset = find(docs, "StatefulSet")
    found += statefulset["spec"].get("volumeClaimTemplates", [])
    for workload in (d for d in docs if d["kind"] in {"StatefulSet", "Deployment"}):
        found += [
            v
            for v in workload["spec"]["template"]["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        ]
    return found


def volumes(workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}


def mounts(workload: dict[str, Any], name: str) -> dict[str, str]:
    return {
        m["name"]: m["mountPath"] for m in container(workload, name)["volumeMounts"]
    }


def test_replicas_hold_nothing_durable(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    docs = rendered(SCALE_OUT)
    statefulset = find(docs, "StatefulSet")
    assert statefulset["spec"]["replicas"] == 3
    assert "volumeClaimTemplates" not in statefulset["spec"]
    node_volumes = volumes(statefulset)
    assert node_volumes["data"] == {"name": "data", "emptyDir": {}}
    assert "landing" not in node_volumes
    assert not [v for v in node_volumes.values() if "persistentVolumeClaim" in v]
    assert "landing" not in mounts(statefulset, "collector")
    # The only claim of the release is the ingest's lake; none is ReadWriteMany.
    assert [c["metadata"]["name"] for c in claims(docs) if "metadata" in c] == [
        "ktc-lake"
    ]
    assert not [
        c
        for c in claims(docs)
        if "ReadWriteMany" in c.get("spec", {}).get("accessModes", [])
    ]
    # Each pod, as the collector reads its config: gateway, subscriptions in the cluster,
    # telemetry on the topic (on the fronted cluster: landing.kafka.bootstrap.servers unset).
    path = tmp_path / "config.yaml"
    path.write_text(find(docs, "ConfigMap")["data"]["config.yaml"], encoding="utf-8")
    for ordinal in range(3):
        config = load_config(path, environ=pod_environment(statefulset, ordinal))
        assert config.node_id == ordinal
        assert config.gateway_subscriptions_store == "cluster"
        assert config.landing_kafka_topic == "ktc-telemetry"
        assert config.landing_kafka.bootstrap_servers is None
        assert config.gateway_upstream.bootstrap_servers == UPSTREAM
    settings = yaml.safe_load(find(docs, "ConfigMap")["data"]["config.yaml"])
    assert "landing" not in settings  # no landing-log retention for the ingest


def test_the_ingest_reads_the_topic(rendered: Callable[..., Docs]) -> None:
    ingest = find(rendered(SCALE_OUT), "Deployment", "ktc-ingest")
    args = container(ingest, "ingest")["args"]
    assert args[0] == "ingest"
    with ingest_command.make_context("ingest", list(args[1:])) as ctx:
        params: dict[str, Any] = ctx.params
    assert params["kafka_bootstrap_servers"] == UPSTREAM
    assert params["kafka_topic"] == "ktc-telemetry"
    assert params["data_dir"] == Path("/var/lib/ktc")
    assert "landing" not in volumes(ingest)
    assert "landing" not in mounts(ingest, "ingest")
    assert mounts(ingest, "ingest")["lake"] == "/var/lib/ktc/lakehouse"
    assert ingest["spec"]["replicas"] == 1


def test_one_client_metrics_folds_the_topic_for_the_fleet(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    """``ktc client-metrics`` (one replica, the replicas' config) and its Service; the
    ServiceMonitor scrapes its /metrics/clients, not the replicas'."""
    docs = rendered({**SCALE_OUT, "serviceMonitor": {"enabled": True}})
    fleet = find(docs, "Deployment", "ktc-client-metrics")
    assert fleet["spec"]["replicas"] == 1
    assert fleet["spec"]["strategy"] == {"type": "Recreate"}
    view = container(fleet, "client-metrics")
    assert view["args"] == [
        "client-metrics",
        "--config",
        "/etc/ktc/config.yaml",
        "--http-listener",
        "0.0.0.0:8714",
    ]
    assert mounts(fleet, "client-metrics")["config"] == "/etc/ktc"
    assert not [v for v in volumes(fleet).values() if "persistentVolumeClaim" in v]
    # What it reads of the config: the topic and its cluster (the fronted one).
    path = tmp_path / "config.yaml"
    path.write_text(find(docs, "ConfigMap")["data"]["config.yaml"], encoding="utf-8")
    config = load_config(path, environ={})
    assert config.landing_kafka_topic == "ktc-telemetry"
    assert config.landing_cluster().bootstrap_servers == UPSTREAM
    service = find(docs, "Service", "ktc-client-metrics")
    assert service["spec"]["selector"] == fleet["spec"]["selector"]["matchLabels"]
    assert [p["name"] for p in service["spec"]["ports"]] == ["client-metrics"]
    assert (
        service["spec"]["selector"] != find(docs, "Service", "ktc")["spec"]["selector"]
    )
    endpoints = find(docs, "ServiceMonitor")["spec"]["endpoints"]
    clients = [e for e in endpoints if e["path"] == "/metrics/clients"]
    assert [e["port"] for e in clients] == ["client-metrics"]


def test_client_metrics_runs_in_the_scale_out_layout_only(
    rendered: Callable[..., Docs],
) -> None:
    off = {**SCALE_OUT, "prometheus": {"clients": {"fleet": {"enabled": False}}}}
    landing_log = {
        "replicaCount": 2,
        "gateway": SCALE_OUT["gateway"],
        "persistence": {"landing": {"enabled": True}},
    }
    for values in (off, landing_log):
        names = [d["metadata"]["name"] for d in rendered(values)]
        assert "ktc-client-metrics" not in names, values


def test_ktc_serve_scales_out_on_the_topic_cluster_it_names(
    rendered: Callable[..., Docs],
) -> None:
    values = {
        "layout": "scaleOut",
        "replicaCount": 2,
        "config": {
            "landing.kafka.topic": "telemetry",
            "landing.kafka.bootstrap.servers": "kafka:9092",
            "subscriptions.store": "kafka",
            "subscriptions.kafka.bootstrap.servers": "kafka:9092",
        },
        "ingest": {"enabled": True},
    }
    docs = rendered(values)
    assert container(find(docs, "StatefulSet"), "collector")["args"][0] == "serve"
    args = container(find(docs, "Deployment", "ktc-ingest"), "ingest")["args"]
    assert args[args.index("--kafka-bootstrap-servers") + 1] == "kafka:9092"
    assert args[args.index("--kafka-topic") + 1] == "telemetry"
    assert [c["metadata"]["name"] for c in claims(docs) if "metadata" in c] == [
        "ktc-lake"
    ]


def test_the_landing_log_layout_keeps_its_shared_claim(
    rendered: Callable[..., Docs],
) -> None:
    """The default layout: one ReadWriteMany claim, on every node and on the ingest,
    which reads the landing logs from it (no --kafka-* flag)."""
    docs = rendered(
        {
            "replicaCount": 2,
            "gateway": SCALE_OUT["gateway"],
            "ingest": {"enabled": True},
        }
    )
    landing = find(docs, "PersistentVolumeClaim", "ktc-landing")
    assert landing["spec"]["accessModes"] == ["ReadWriteMany"]
    statefulset = find(docs, "StatefulSet")
    ingest = find(docs, "Deployment")
    for workload in (statefulset, ingest):
        claim = volumes(workload)["landing"]["persistentVolumeClaim"]
        assert claim["claimName"] == "ktc-landing"
    assert statefulset["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    assert not [a for a in container(ingest, "ingest")["args"] if "kafka" in a]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"layout": "scaleOut", **{"gateway": SCALE_OUT["gateway"]}}, "needs config"),
        (
            {"layout": "scaleOut", "config": {"landing.kafka.topic": "t"}},
            'needs config."landing.kafka.bootstrap.servers"',
        ),
        (
            {**SCALE_OUT, "configStore": {"source": "dataVolume"}},
            "configStore.source dataVolume",
        ),
        (
            {"config": {"landing.kafka.topic": "t"}, "gateway": SCALE_OUT["gateway"]},
            "set layout scaleOut",
        ),
    ],
    ids=["no-topic", "serve-without-cluster", "per-pod-store", "topic-in-log-layout"],
)
def test_an_inconsistent_layout_fails_with_a_clear_message(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm.HelmError) as caught:
        render(values)
    assert message in str(caught.value)


def test_the_schema_knows_both_layouts() -> None:
    with pytest.raises(helm.HelmError) as caught:
        render({"layout": "scale-out"})
    assert "layout" in str(caught.value)


def test_notes_say_where_the_telemetry_goes() -> None:
    notes = render(SCALE_OUT)[f"{CHART_DIR.name}/templates/NOTES.txt"]
    assert "the pods keep nothing durable" in notes
    assert f"topic ktc-telemetry on {UPSTREAM}" in notes
    assert "the ingest reads it from there" in notes
    assert "nothing durable" not in render({})[f"{CHART_DIR.name}/templates/NOTES.txt"]
