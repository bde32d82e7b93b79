"""The chart's Prometheus and Grafana objects (docs/prometheus.md): the ServiceMonitor
scrapes /metrics and /metrics/clients, the PrometheusRule is the shipped rules file, the
dashboards ConfigMap carries the shipped dashboards for the Grafana sidecar.

The ServiceMonitor is checked by doing what the Prometheus operator would do with it: a
collector is started from the rendered pod spec (test_helm_pod_run.start_pod), each of the
monitor's endpoints becomes a scrape job of a real Prometheus (its path, on the container
port behind the Service port it names), the rendered PrometheusRule is that Prometheus's
rule file, and a real librdkafka producer pushes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from tests.helm.ktc_chart import CHART_DIR, container, find, load_values
from tests.helm.test_helm_pod_run import start_pod, wait_for
from tests.prometheus.prometheus_server import PrometheusServer, promtool_binary

Docs = list[dict[str, Any]]
RULES = CHART_DIR / "files" / "prometheus" / "ktc-clients.rules.yaml"
DASHBOARDS = sorted((CHART_DIR / "files" / "grafana").glob("*.json"))
VALUES = {
    **load_values(CHART_DIR / "ci" / "servicemonitor-values.yaml"),
    "subscriptions": {
        "everything": {"metrics": "org.apache.kafka.producer.", "interval.ms": 500}
    },
}


def test_off_by_default(rendered: Callable[..., Docs]) -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in rendered()}
    assert not {k for k in kinds if k[0] == "PrometheusRule"}
    assert ("ConfigMap", "ktc-dashboards") not in kinds


def _served_and_scraped(docs: Docs) -> tuple[bool, bool]:
    """(the rendered config turns /metrics/clients on, the ServiceMonitor scrapes it)."""
    config = yaml.safe_load(find(docs, "ConfigMap", "ktc")["data"]["config.yaml"])
    monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
    paths = [e["path"] for m in monitors for e in m["spec"]["endpoints"]]
    return bool(config.get("prometheus.clients.enable")), "/metrics/clients" in paths


# values -> (served, scraped): on by default; the chart never scrapes /metrics/clients
# where it is off, and turns it on whenever the monitor scrapes it.
_MONITOR = {"serviceMonitor": {"enabled": True}}
_OFF = {"prometheus": {"clients": {"enabled": False}}}
CLIENT_METRICS_SWITCH = [
    ({}, (True, False)),
    (_MONITOR, (True, True)),
    (_OFF, (False, False)),
    # A monitor that scrapes it turns it on.
    ({**_OFF, **_MONITOR}, (True, True)),
    (
        {
            **_OFF,
            "serviceMonitor": {"enabled": True, "clientMetrics": {"enabled": False}},
        },
        (False, False),
    ),
    (
        {"serviceMonitor": {"enabled": True, "clientMetrics": {"enabled": False}}},
        (True, False),
    ),
    # Off in the chart, the operator's config may still turn it on (not scraped) ...
    ({**_OFF, "config": {"prometheus.clients.enable": True}}, (True, False)),
    # ... but cannot turn it off under a monitor that scrapes it.
    ({**_MONITOR, "config": {"prometheus.clients.enable": False}}, (True, True)),
]


@pytest.mark.parametrize(("values", "expected"), CLIENT_METRICS_SWITCH)
def test_metrics_clients_is_served_wherever_it_is_scraped(
    rendered: Callable[..., Docs],
    values: dict[str, Any],
    expected: tuple[bool, bool],
) -> None:
    assert _served_and_scraped(rendered(values)) == expected


def test_the_prometheus_rule_is_the_rules_file(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    rule = find(rendered(VALUES), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    # Rendered through the chart, the annotations' {{ $labels }} are still Prometheus's.
    rendered_rules = tmp_path / "rendered.rules.yaml"
    rendered_rules.write_text(yaml.safe_dump(rule["spec"]))
    result = subprocess.run(
        [str(promtool_binary()), "check", "rules", str(rendered_rules)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dashboards_configmap_carries_every_dashboard(
    rendered: Callable[..., Docs],
) -> None:
    configmap = find(rendered(VALUES), "ConfigMap", "ktc-dashboards")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "Kafka clients"}
    assert sorted(configmap["data"]) == [p.name for p in DASHBOARDS]
    for path in DASHBOARDS:
        assert json.loads(configmap["data"][path.name]) == json.loads(path.read_text())


def scrape_jobs(docs: Docs, http_port: int) -> dict[str, tuple[str, str]]:
    """The ServiceMonitor's endpoints as scrape jobs: each port name resolved through the
    Service to the container port the collector's HTTP listener is bound to."""
    monitor = find(docs, "ServiceMonitor")
    service = find(docs, "Service", "ktc")
    collector = container(find(docs, "StatefulSet"), "collector")
    container_ports = {p["name"]: p["containerPort"] for p in collector["ports"]}
    http_container_port = container_ports["metrics"]
    jobs = {}
    for index, endpoint in enumerate(monitor["spec"]["endpoints"]):
        port = next(
            p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]
        )
        target = port["targetPort"]
        resolved = container_ports[target] if isinstance(target, str) else target
        # The pod's HTTP listener: the one container port /metrics is served on.
        assert resolved == http_container_port
        jobs[f"endpoint-{index}"] = (f"127.0.0.1:{http_port}", endpoint["path"])
    return jobs


@pytest.fixture
def pod(rendered: Callable[..., Docs], tmp_path: Path) -> Iterator[Any]:
    running = start_pod(rendered(VALUES), 0, tmp_path)
    yield running
    running.process.kill()
    running.process.wait(10)


@pytest.mark.integration
def test_the_service_monitor_scrapes_both_paths_and_the_rules_load(
    rendered: Callable[..., Docs], pod: Any, tmp_path: Path
) -> None:
    docs = rendered(VALUES)
    jobs = scrape_jobs(docs, int(pod.ready["http_port"]))
    assert sorted(path for _, path in jobs.values()) == ["/metrics", "/metrics/clients"]
    rule_file = tmp_path / "prometheusrule.yaml"
    rule_file.write_text(yaml.safe_dump(find(docs, "PrometheusRule")["spec"]))
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{pod.kafka_port}",
            "client.id": "helm-monitor",
            "enable.metrics.push": True,
            "log_level": 3,
        }
    )
    try:
        with PrometheusServer(tmp_path / "prometheus", jobs, [rule_file]) as prometheus:
            by_path = {path: job for job, (_, path) in jobs.items()}

            def both_scraped() -> bool:
                producer.poll(0)
                pod.check_alive()
                health = prometheus.targets_healthy()
                assert set(health.values()) <= {"up", "unknown"}, health
                own = prometheus.query(
                    f'ktc_prometheus_clients_series{{job="{by_path["/metrics"]}"}}'
                )
                clients = prometheus.query(
                    "org_apache_kafka_producer_connection_creation_total"
                    f'{{job="{by_path["/metrics/clients"]}",client_id="helm-monitor"}}'
                )
                return bool(own) and bool(clients)

            wait_for(both_scraped, timeout_s=60, what="both paths scraped")
            groups = prometheus.api("/api/v1/rules")["groups"]
            loaded = {rule["name"] for group in groups for rule in group["rules"]}
            expected = {
                rule["alert"]
                for group in yaml.safe_load(RULES.read_text())["groups"]
                for rule in group["rules"]
            }
            assert loaded == expected
    finally:
        producer.close()
