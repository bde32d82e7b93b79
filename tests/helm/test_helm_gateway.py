"""Gateway mode (`gateway.enabled`): the rendered pods run `ktc gateway` with the config the
values describe, and every port the gateway can bind for an upstream node is a container
port and a port of both Services, at the number the gateway itself computes."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import helm_python as helm
import pytest

from collector.app.cli import cli
from collector.app.config import CollectorConfig, load_config
from collector.gateway.topology import Topology, TopologyError
from tests.helm.ktc_chart import (
    CHART_DIR,
    NAMESPACE,
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
GATEWAY_CI = sorted(CI.glob("gateway*-values.yaml"))
NODE_PORT = re.compile(r"node-(\d+)")


def gateway_values(**gateway: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "enabled": True,
        "upstream": {"bootstrapServers": "kafka:9092"},
    }
    values.update(gateway)
    return {"gateway": values}


def pod_config(docs: Docs, ordinal: int, tmp_path: Path) -> CollectorConfig:
    """config.yaml plus pod <ordinal>'s environment, through the collector's own loader."""
    path = tmp_path / "config.yaml"
    path.write_text(find(docs, "ConfigMap")["data"]["config.yaml"], encoding="utf-8")
    return load_config(
        path, environ=pod_environment(find(docs, "StatefulSet"), ordinal)
    )


def node_ports(ports: list[dict[str, Any]], key: str) -> dict[int, int]:
    """node id -> port number of the `node-<id>` entries of a port list."""
    out = {}
    for port in ports:
        match = NODE_PORT.fullmatch(port["name"])
        if match:
            out[int(match.group(1))] = int(port[key])
    return out


def gateway_topology(config: CollectorConfig) -> Topology:
    """The gateway's own port plan for this config (binding = taking the wanted port)."""
    return Topology(
        bootstrap=[("upstream", 9092)],
        broker_port_start=config.gateway_broker_port_start,
        min_node_id=config.gateway_min_node_id,
        max_nodes=config.gateway_max_nodes,
        advertised_host=config.gateway_advertised_host or "pod",
        bind_node=lambda _node, port: port,
        state_dir=None,
    )


# --- the command and its configuration ---------------------------------------------------


@pytest.mark.parametrize("values_file", GATEWAY_CI, ids=lambda p: p.name)
def test_the_pod_runs_ktc_gateway_with_the_values_config(
    rendered: Callable[..., Docs], values_file: Path, tmp_path: Path
) -> None:
    values = load_values(values_file)
    gateway = values["gateway"]
    docs = rendered(values)
    spec = container(find(docs, "StatefulSet"), "collector")
    args = [spec["command"][0], *spec["args"]]
    assert args[:2] == ["ktc", "gateway"]
    # The real `ktc gateway` accepts the rendered arguments, and reads the mounted file.
    gateway_command = cli.get_command(click.Context(cli), "gateway")
    assert gateway_command is not None
    with gateway_command.make_context("gateway", list(args[2:])) as ctx:
        assert ctx.params["config_file"] == "/etc/ktc/config.yaml"
    mounts = {m["mountPath"]: m["name"] for m in spec["volumeMounts"]}
    assert mounts["/etc/ktc"] == "config"

    for ordinal in range(int(values.get("replicaCount", 1))):
        config = pod_config(docs, ordinal, tmp_path)
        assert (
            config.gateway_upstream.bootstrap_servers
            == gateway["upstream"]["bootstrapServers"]
        )
        assert config.gateway_broker_port_start == gateway["brokerPortStart"]
        assert config.gateway_min_node_id == gateway["minNodeId"]
        assert config.gateway_max_nodes == gateway["maxNodes"]
        assert config.gateway_upstream.security_protocol == gateway["upstream"].get(
            "securityProtocol", "PLAINTEXT"
        )
        assert config.node_id == ordinal


def test_serve_mode_has_no_gateway_keys(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    docs = rendered()
    assert container(find(docs, "StatefulSet"), "collector")["args"][0] == "serve"
    assert "gateway." not in find(docs, "ConfigMap")["data"]["config.yaml"]
    assert pod_config(docs, 0, tmp_path).gateway_upstream.bootstrap_servers is None
    ports = container(find(docs, "StatefulSet"), "collector")["ports"]
    assert [p["name"] for p in ports] == ["kafka", "metrics"]


def test_tuning_keys_pass_through_config(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    values = {
        **gateway_values(),
        "config": {"gateway.upstream.connect.timeout.ms": 2500},
    }
    assert (
        pod_config(rendered(values), 0, tmp_path).gateway_upstream_connect_timeout_ms
        == 2500
    )


# --- per-broker ports ---------------------------------------------------------------------


@pytest.mark.parametrize("values_file", GATEWAY_CI, ids=lambda p: p.name)
def test_every_port_the_gateway_binds_is_exposed(
    rendered: Callable[..., Docs], values_file: Path, tmp_path: Path
) -> None:
    """For each node id the gateway can serve, the gateway's own Topology picks a port; the
    container declares it as node-<id> and both Services route that number to it.  The id
    just past the range is refused by the gateway and has no port in the chart."""
    docs = rendered(load_values(values_file))
    config = pod_config(docs, 0, tmp_path)
    topology = gateway_topology(config)
    first = config.gateway_min_node_id
    ids = range(first, first + config.gateway_max_nodes)
    for node_id in ids:
        topology.learn(node_id, f"broker-{node_id}", 9092, persist=False)
    with pytest.raises(TopologyError):
        topology.learn(
            first + config.gateway_max_nodes, "broker-x", 9092, persist=False
        )

    statefulset = find(docs, "StatefulSet")
    declared = node_ports(container(statefulset, "collector")["ports"], "containerPort")
    assert declared == topology.ports
    for name in (RELEASE, f"{RELEASE}-headless"):
        service_ports = find(docs, "Service", name)["spec"]["ports"]
        assert node_ports(service_ports, "port") == topology.ports, name
        for port in service_ports:
            if NODE_PORT.fullmatch(port["name"]):
                assert port["targetPort"] == port["name"]
                assert port["appProtocol"] == "kafka"


def test_bootstrap_and_http_listeners_are_unchanged(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    """Gateway mode keeps the bootstrap listener on ports.kafka and the probes on /healthz
    and /readyz of the HTTP listener."""
    docs = rendered(load_values(CI / "gateway-values.yaml"))
    spec = container(find(docs, "StatefulSet"), "collector")
    config = pod_config(docs, 0, tmp_path)
    ports = {p["name"]: p["containerPort"] for p in spec["ports"]}
    assert config.listeners == f"PLAINTEXT://0.0.0.0:{ports['kafka']}"
    assert config.http_host_port == ("0.0.0.0", ports["metrics"])
    default_spec = container(find(rendered(), "StatefulSet"), "collector")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert spec[probe] == default_spec[probe], probe
    assert spec["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert spec["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}


def test_node_port_services_keep_the_advertised_numbers(
    rendered: Callable[..., Docs],
) -> None:
    """With a NodePort Service the numbers clients are sent to are node ports: each Kafka
    port's nodePort is its own number."""
    values = {
        **gateway_values(
            brokerPortStart=30093, maxNodes=3, advertisedHost="kafka.example.com"
        ),
        "service": {"type": "NodePort"},
        "ports": {"kafka": {"servicePort": 30092}},
    }
    service = find(rendered(values), "Service", RELEASE)
    node_ports_by_name = {
        p["name"]: p.get("nodePort") for p in service["spec"]["ports"]
    }
    assert node_ports_by_name == {
        "kafka": 30092,
        "metrics": None,
        "node-0": 30093,
        "node-1": 30094,
        "node-2": 30095,
    }
    # Other Service types leave node ports to Kubernetes.
    lb = find(
        rendered({**values, "service": {"type": "LoadBalancer"}}), "Service", RELEASE
    )
    assert all("nodePort" not in p for p in lb["spec"]["ports"])


# --- where clients are sent ---------------------------------------------------------------


def test_without_an_advertised_host_each_pod_sends_clients_to_itself(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    """The gateway falls back to its bootstrap listener's advertised host: the pod's own
    headless-Service name, which carries the per-broker ports too."""
    docs = rendered(load_values(CI / "gateway-values.yaml"))
    for ordinal in range(3):
        config = pod_config(docs, ordinal, tmp_path)
        assert config.gateway_advertised_host is None
        assert config.advertised_listeners == (
            f"PLAINTEXT://{RELEASE}-{ordinal}.{RELEASE}-headless.{NAMESPACE}.svc:9092"
        )


def test_an_advertised_host_goes_to_every_pod(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    docs = rendered(load_values(CI / "gateway-external-values.yaml"))
    assert (
        pod_config(docs, 0, tmp_path).gateway_advertised_host
        == "kafka-gateway.example.com"
    )
    assert find(docs, "Service", RELEASE)["spec"]["type"] == "LoadBalancer"


# --- upstream TLS -------------------------------------------------------------------------


def test_upstream_tls_files_come_from_the_secret_mount(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    values = load_values(CI / "gateway-external-values.yaml")
    tls = values["gateway"]["upstream"]["tls"]
    docs = rendered(values)
    statefulset = find(docs, "StatefulSet")
    spec = container(statefulset, "collector")
    config = pod_config(docs, 0, tmp_path)
    assert config.gateway_upstream.security_protocol == "SSL"
    assert config.gateway_upstream.ssl_endpoint_identification_algorithm == "https"

    (mount,) = [m for m in spec["volumeMounts"] if m["name"] == "upstream-tls"]
    assert mount["readOnly"] is True
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    secret = volumes["upstream-tls"]["secret"]
    assert secret["secretName"] == tls["secretName"]
    files = {
        f"{mount['mountPath']}/{item['path']}": item["key"] for item in secret["items"]
    }
    assert files[str(config.gateway_upstream.ssl_truststore_location)] == tls["caKey"]
    assert (
        files[str(config.gateway_upstream.ssl_keystore_location)] == tls["keystoreKey"]
    )
    # The key password never enters the ConfigMap: the pod reads it from the Secret.
    password = env_value(spec, "KTC_GATEWAY_UPSTREAM_SSL_KEY_PASSWORD")["valueFrom"]
    assert password == {
        "secretKeyRef": {"name": tls["secretName"], "key": tls["keyPasswordKey"]}
    }
    assert "password" not in find(docs, "ConfigMap")["data"]["config.yaml"]


def test_upstream_ssl_without_a_secret_uses_the_system_cas(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    values = gateway_values(
        upstream={
            "bootstrapServers": "kafka:9093",
            "securityProtocol": "SSL",
            "tls": {"endpointIdentification": False},
        }
    )
    docs = rendered(values)
    config = pod_config(docs, 0, tmp_path)
    assert config.gateway_upstream.security_protocol == "SSL"
    assert config.gateway_upstream.ssl_truststore_location is None
    assert config.gateway_upstream.ssl_endpoint_identification_algorithm == ""
    volumes = find(docs, "StatefulSet")["spec"]["template"]["spec"]["volumes"]
    assert "upstream-tls" not in {v["name"] for v in volumes}


# --- refused combinations and the rest ----------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            gateway_values(brokerPortStart=65530, maxNodes=8),
            "must end at 65535 or below",
        ),
        (
            gateway_values(brokerPortStart=9090, maxNodes=8),
            "ports.kafka.containerPort 9092 lies in the gateway's per-broker port range",
        ),
        (
            gateway_values(brokerPortStart=8711, maxNodes=8),
            "ports.metrics.containerPort 8714 lies in",
        ),
        (
            gateway_values(
                upstream={"bootstrapServers": "k:9092", "tls": {"secretName": "s"}}
            ),
            "needs gateway.upstream.securityProtocol SSL",
        ),
        (
            gateway_values(
                upstream={
                    "bootstrapServers": "k:9093",
                    "securityProtocol": "SSL",
                    "tls": {"keystoreKey": "client.pem"},
                }
            ),
            "set it",
        ),
        (
            gateway_values(
                upstream={
                    "bootstrapServers": "k:9093",
                    "securityProtocol": "SSL",
                    "tls": {"secretName": "s", "keyPasswordKey": "pw"},
                }
            ),
            "set keystoreKey",
        ),
        (
            gateway_values(
                upstream={
                    "bootstrapServers": "k:9093",
                    "securityProtocol": "SSL",
                    "tls": {"secretName": "s", "caKey": ""},
                }
            ),
            "neither caKey nor keystoreKey",
        ),
    ],
    ids=[
        "range-past-65535",
        "range-covers-bootstrap",
        "range-covers-http",
        "tls-secret-on-plaintext",
        "keystore-without-secret",
        "password-without-keystore",
        "secret-without-keys",
    ],
)
def test_inconsistent_gateway_values_fail_with_a_clear_message(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm.HelmError) as caught:
        render(values)
    assert message in str(caught.value)


def test_a_gateway_change_rolls_the_pods(rendered: Callable[..., Docs]) -> None:
    def checksum(values: dict[str, Any]) -> str:
        template = find(rendered(values), "StatefulSet")["spec"]["template"]
        return str(template["metadata"]["annotations"]["checksum/config"])

    base = checksum(gateway_values())
    assert checksum(gateway_values(maxNodes=4)) != base
    assert checksum(gateway_values(upstream={"bootstrapServers": "other:9092"})) != base


def test_notes_tell_clients_where_to_connect() -> None:
    notes_path = f"{CHART_DIR.name}/templates/NOTES.txt"
    external = render(load_values(CI / "gateway-external-values.yaml"))[notes_path]
    assert "bootstrap.servers=kafka-gateway.example.com:9092" in external
    assert "(ports 9093-9100)" in external
    internal = render(load_values(CI / "gateway-values.yaml"))[notes_path]
    assert "bootstrap.servers=ktc.telemetry.svc:9092" in internal
    assert "ktc-<ordinal>.ktc-headless.telemetry.svc" in internal
    assert "port 9093 + n - 1 (ports 9093-9095)" in internal
