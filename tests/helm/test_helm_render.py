"""Every scenario renders into objects Kubernetes accepts, and the golden examples are fresh.

`kubernetes-validate --strict` checks each object against the OpenAPI schema of the oldest
supported and the newest Kubernetes (strict: an unknown field is an error, as
`kubectl apply --validate=strict` would say).  The ServiceMonitor is a CRD without a
bundled schema; its shape is checked by hand.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.helm.ktc_chart import (
    KUBE_VERSIONS,
    ci_values_files,
    find,
    load_values,
    stale_examples,
)

Docs = list[dict[str, Any]]

CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}


def _validate(doc: dict[str, Any], kube_version: str) -> None:
    kubernetes_validate.validate(doc, kube_version, strict=True)


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values_file", ci_values_files(), ids=lambda p: p.name)
def test_scenario_objects_are_valid_kubernetes(
    rendered: Callable[..., Docs], values_file: Path, kube_version: str
) -> None:
    docs = rendered(load_values(values_file))
    assert docs, "nothing rendered"
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            continue
        _validate(doc, kube_version)


def test_strict_validation_is_live(rendered: Callable[..., Docs]) -> None:
    """A misspelt field in an otherwise valid StatefulSet is refused: the check can fail."""
    statefulset = copy.deepcopy(find(rendered(), "StatefulSet"))
    _validate(statefulset, KUBE_VERSIONS[0])
    statefulset["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = (
        "Always"
    )
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(statefulset, KUBE_VERSIONS[0])


def test_scenario_names_are_unique(rendered: Callable[..., Docs]) -> None:
    for values_file in ci_values_files():
        docs = rendered(load_values(values_file))
        ids = [(d["kind"], d["metadata"]["name"]) for d in docs]
        assert len(ids) == len(set(ids)), values_file.name


def test_service_monitor_shape(rendered: Callable[..., Docs]) -> None:
    docs = rendered(
        load_values(Path(ci_values_files()[0]).parent / "servicemonitor-values.yaml")
    )
    monitor = find(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    service = find(docs, "Service", "ktc")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    service_ports = {p["name"] for p in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in service_ports
    paths = [endpoint["path"] for endpoint in monitor["spec"]["endpoints"]]
    assert paths == ["/metrics", "/metrics/clients"]
    assert monitor["spec"]["endpoints"][0]["metricRelabelings"][0]["action"] == "drop"
    # The headless Service has no metrics port, so it adds no second target per pod.
    headless = find(docs, "Service", "ktc-headless")
    assert "metrics" not in {p["name"] for p in headless["spec"]["ports"]}


def test_no_service_monitor_by_default(rendered: Callable[..., Docs]) -> None:
    assert not [d for d in rendered() if d["kind"] == "ServiceMonitor"]


def test_extra_manifests_are_templated(rendered: Callable[..., Docs]) -> None:
    docs = rendered(
        load_values(Path(ci_values_files()[0]).parent / "ephemeral-values.yaml")
    )
    policy = find(docs, "NetworkPolicy", "ktc-clients")
    pod_labels = find(docs, "StatefulSet")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()


def test_golden_examples_match_a_fresh_render() -> None:
    """Regenerate with `.venv/bin/python tests/helm/ktc_chart.py --update`, then review."""
    stale = [f"{example.name}: {reason}" for example, reason in stale_examples()]
    assert stale == []
