"""The optional Spark ingest Deployment reads exactly what the collectors write."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporters.lakehouse.cli.ingest import ingest_command
from exporters.lakehouse.cli.thriftserver import thriftserver_command
from exporters.lakehouse.ingest import CONSUMER_NAME
from exporters.lakehouse.session import LakehouseConfig
from tests.helm.ktc_chart import CHART_DIR, container, find, load_values

Docs = list[dict[str, Any]]

# The ingest's committed position in each landing directory (consumers/<name>.json); the
# chart writes this name into the collectors' config.
INGEST_CONSUMER = CONSUMER_NAME


def _mounts(workload: dict[str, Any], name: str) -> dict[str, str]:
    return {
        m["name"]: m["mountPath"] for m in container(workload, name)["volumeMounts"]
    }


def _claims(workload: dict[str, Any]) -> dict[str, str]:
    return {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in workload["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }


def test_ingest_is_off_by_default(rendered: Callable[..., Docs]) -> None:
    assert not [d for d in rendered() if d["kind"] == "Deployment"]


def test_ingest_reads_the_collectors_landing_claim_at_the_same_path(
    rendered: Callable[..., Docs],
) -> None:
    docs = rendered(load_values(CHART_DIR / "ci" / "ingest-values.yaml"))
    statefulset = find(docs, "StatefulSet")
    ingest = find(docs, "Deployment", "ktc-ingest")
    assert (
        _claims(ingest)["landing"]
        == _claims(statefulset)["landing"]
        == "telemetry-landing-nfs"
    )
    assert (
        _mounts(ingest, "ingest")["landing"]
        == _mounts(statefulset, "collector")["landing"]
    )

    args = container(ingest, "ingest")["args"]
    assert args[0] == "ingest"
    # `--data-dir D` finds every node's D/landing/node-<id>/ on the shared mount.
    data_dir = args[args.index("--data-dir") + 1]
    assert _mounts(ingest, "ingest")["landing"] == f"{data_dir}/landing"
    assert args[args.index("--trigger-interval") + 1] == "30s"
    confs = [args[i + 1] for i, a in enumerate(args) if a == "--conf"]
    assert "spark.sql.shuffle.partitions=4" in confs
    assert "--master" not in args
    assert args[args.index("--compact-interval") + 1] == "1h"
    assert "--retention-days" not in args


def test_ingest_arguments_are_accepted_by_ktc_ingest(
    rendered: Callable[..., Docs],
) -> None:
    """Parse the rendered args with the real `ktc ingest` command (without running it)."""
    values = {
        "ingest": {
            "enabled": True,
            "master": "local[2]",
            "retentionDays": 30,
            "sparkConf": {"spark.sql.shuffle.partitions": 2},
        }
    }
    args = container(find(rendered(values), "Deployment"), "ingest")["args"]
    assert args[0] == "ingest"
    with ingest_command.make_context("ingest", list(args[1:])) as ctx:
        params: dict[str, Any] = ctx.params
    assert params["data_dir"] == Path("/var/lib/ktc")
    assert params["trigger_interval"] == "10s"
    assert params["master"] == "local[2]"
    assert params["retention_days"] == 30
    assert list(params["conf"]) == ["spark.sql.shuffle.partitions=2"]


def test_collectors_keep_landed_data_until_the_ingest_has_it(
    rendered: Callable[..., Docs],
) -> None:
    """Landing retention must not delete segments the ingest has not read yet, even
    before its first commit: the chart names its consumer as required."""

    def required(values: dict[str, Any]) -> list[str]:
        config = yaml.safe_load(
            find(rendered(values), "ConfigMap")["data"]["config.yaml"]
        )
        return list(config.get("landing", {}).get("retention_required_consumers", []))

    assert required({}) == []
    assert required({"ingest": {"enabled": True}}) == [INGEST_CONSUMER]
    keep_mine = (
        {"enabled": True},
        {"landing": {"retention_required_consumers": ["audit"]}},
    )
    assert required({"ingest": keep_mine[0], "config": keep_mine[1]}) == [
        "audit",
        INGEST_CONSUMER,
    ]
    # Given explicitly, it is not added twice.
    twice = {"landing": {"retention_required_consumers": [INGEST_CONSUMER]}}
    assert required({"ingest": {"enabled": True}, "config": twice}) == [INGEST_CONSUMER]


@pytest.mark.parametrize(
    ("values", "image"),
    [
        ({}, "ktc:0.1.0"),
        ({"image": {"repository": "r/ktc", "tag": "1.2"}}, "r/ktc:1.2"),
        (
            {
                "image": {"repository": "r/ktc", "tag": "1.2"},
                "ingest": {"image": {"tag": "1.2-lakehouse"}},
            },
            "r/ktc:1.2-lakehouse",
        ),
        ({"ingest": {"image": {"repository": "r/spark-ktc"}}}, "r/spark-ktc:0.1.0"),
    ],
)
def test_ingest_image_defaults_to_the_collector_image(
    rendered: Callable[..., Docs], values: dict[str, Any], image: str
) -> None:
    merged = {**values, "ingest": {"enabled": True, **values.get("ingest", {})}}
    assert container(find(rendered(merged), "Deployment"), "ingest")["image"] == image


def test_one_ingest_at_a_time(rendered: Callable[..., Docs]) -> None:
    """Exactly-once needs a single writer: never two pods, not even during a rollout."""
    ingest = find(rendered({"ingest": {"enabled": True}}), "Deployment")
    assert ingest["spec"]["replicas"] == 1
    assert ingest["spec"]["strategy"] == {"type": "Recreate"}


def test_lake_claim_is_where_the_ingest_keeps_the_lakehouse(
    rendered: Callable[..., Docs],
) -> None:
    docs = rendered(
        {"ingest": {"enabled": True, "master": "spark://spark-master:7077"}}
    )
    ingest = find(docs, "Deployment")
    claim = find(docs, "PersistentVolumeClaim", "ktc-lake")
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert _claims(ingest)["lake"] == "ktc-lake"
    spec = container(ingest, "ingest")
    args = spec["args"]
    # The ingest's own layout: the catalog and the warehouse under <data-dir>/lakehouse.
    lake = LakehouseConfig.for_data_dir(Path(args[args.index("--data-dir") + 1]))
    assert _mounts(ingest, "ingest")["lake"] == str(lake.lake_dir)
    assert spec["workingDir"] == str(lake.lake_dir)
    assert args[args.index("--master") + 1] == "spark://spark-master:7077"
    assert spec["securityContext"]["readOnlyRootFilesystem"] is True
    assert _mounts(ingest, "ingest")["tmp"] == "/tmp"


def test_ingest_pods_are_not_collector_endpoints(rendered: Callable[..., Docs]) -> None:
    docs = rendered({"ingest": {"enabled": True}})
    ingest_labels = find(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    for service in (d for d in docs if d["kind"] == "Service"):
        assert not service["spec"]["selector"].items() <= ingest_labels.items()
    pdb = find(docs, "PodDisruptionBudget")
    assert not pdb["spec"]["selector"]["matchLabels"].items() <= ingest_labels.items()


POSTGRES_METASTORE = {
    "spark.sql.catalog.lake.uri": "jdbc:postgresql://db:5432/lake",
}


def test_thrift_server_shares_the_lake_and_the_catalog(
    rendered: Callable[..., Docs],
) -> None:
    values = {
        "ingest": {
            "enabled": True,
            "sparkConf": POSTGRES_METASTORE,
            "thriftServer": {"enabled": True, "port": 10001},
        }
    }
    docs = rendered(values)
    ingest = find(docs, "Deployment")
    thrift = container(ingest, "thriftserver")
    assert _mounts(ingest, "thriftserver")["lake"] == _mounts(ingest, "ingest")["lake"]
    args = thrift["args"]
    assert args[0] == "thriftserver"
    # The same catalog as the ingest: the same --conf settings, in the same order.
    ingest_confs = [a for a in container(ingest, "ingest")["args"] if "=" in a]
    assert [a for a in args if "=" in a] == ingest_confs
    assert args[args.index("--bind-host") + 1] == "0.0.0.0"
    service = find(docs, "Service", "ktc-sql")
    assert (
        service["spec"]["selector"].items()
        <= ingest["spec"]["template"]["metadata"]["labels"].items()
    )
    (port,) = service["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (10001, "jdbc")
    assert {"name": "jdbc", "containerPort": 10001, "protocol": "TCP"} in thrift[
        "ports"
    ]


def test_thrift_server_arguments_are_accepted_by_ktc_thriftserver(
    rendered: Callable[..., Docs],
) -> None:
    values = {
        "ingest": {
            "enabled": True,
            "sparkConf": POSTGRES_METASTORE,
            "thriftServer": {"enabled": True},
        }
    }
    args = container(find(rendered(values), "Deployment"), "thriftserver")["args"]
    with thriftserver_command.make_context("thriftserver", list(args[1:])) as ctx:
        params: dict[str, Any] = ctx.params
    assert (params["port"], params["bind_host"]) == (10000, "0.0.0.0")
    assert params["data_dir"] == Path("/var/lib/ktc")


def test_thrift_server_runs_beside_the_ingest_on_the_embedded_catalog(
    rendered: Callable[..., Docs],
) -> None:
    """The embedded Iceberg catalog (SQLite in WAL mode on the lake claim) serves the
    ingest and the Thrift server at once: no external catalog is required."""
    values = {"ingest": {"enabled": True, "thriftServer": {"enabled": True}}}
    ingest = find(rendered(values), "Deployment")
    assert container(ingest, "thriftserver")["args"][0] == "thriftserver"
