"""Render the ktc chart offline with the real Helm engine, and keep its golden examples.

The engine is Helm's own Go SDK (v4) through ``helm-python-sdk`` (ctypes over
``libhelm_c.so``): no ``helm`` binary, no cluster.  ``helm template`` and this render
the same manifests.

Regenerate the golden examples after a chart change (then review the diff)::

    .venv/bin/python tests/helm/ktc_chart.py --update

Without ``--update`` it checks them and exits 1 when one is stale.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

__all__ = [
    "CHART_DIR",
    "KUBE_VERSIONS",
    "NAMESPACE",
    "POD_INDEX_LABEL",
    "RELEASE",
    "ci_values_files",
    "container",
    "env_value",
    "example_dirs",
    "find",
    "load_values",
    "pod_environment",
    "render",
    "render_documents",
    "rendered_example_files",
    "stale_examples",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = REPO_ROOT / "helm" / "ktc"
EXAMPLES_DIR = CHART_DIR / "examples"

# Release name and namespace every golden file and test renders with.
RELEASE = "ktc"
NAMESPACE = "telemetry"

# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion: the pod-index label
# is on by default from 1.28) and the newest schema kubernetes-validate ships.
KUBE_VERSIONS = ("1.28.0", "1.37.0")

NOTES = "NOTES.txt"


def load_values(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else {}


def render(
    values: Mapping[str, Any] | None = None,
    *,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> dict[str, str]:
    """Template path -> rendered text, exactly as ``helm template`` produces them.

    Schema validation runs first, as in ``helm install``: bad values raise
    ``helm_python.HelmValuesError`` naming the key.
    """
    with helm.Chart.load(CHART_DIR) as chart:
        chart.validate_schema(dict(values or {}))
        return chart.render(dict(values or {}), name=release, namespace=namespace)


def render_documents(
    values: Mapping[str, Any] | None = None, **kwargs: Any
) -> list[dict[str, Any]]:
    """Every Kubernetes object the chart renders, parsed, in template order."""
    docs: list[dict[str, Any]] = []
    for name, text in sorted(render(values, **kwargs).items()):
        if name.endswith(NOTES):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def find(
    docs: list[dict[str, Any]], kind: str, name: str | None = None
) -> dict[str, Any]:
    """The one rendered object of ``kind`` (and ``name``); AssertionError otherwise."""
    hits = [
        d
        for d in docs
        if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, rendered {len(hits)}"
    return hits[0]


def container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    hits = [
        c
        for c in workload["spec"]["template"]["spec"]["containers"]
        if c["name"] == name
    ]
    assert len(hits) == 1, f"expected one container {name}"
    return hits[0]


def env_value(container_spec: dict[str, Any], name: str) -> dict[str, Any]:
    """The env entry ``name`` of a container (with ``value`` or ``valueFrom``)."""
    hits = [e for e in container_spec.get("env", []) if e["name"] == name]
    assert len(hits) == 1, f"expected one env var {name}"
    return hits[0]


POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def pod_environment(statefulset: dict[str, Any], ordinal: int) -> dict[str, str]:
    """The collector container's environment in pod <name>-<ordinal>, as the kubelet builds it.

    fieldRefs resolve against the pod's metadata (the StatefulSet controller sets the
    pod-index label); `$(VAR)` expands only variables defined *earlier* in the list, and
    an unknown reference stays literal (Kubernetes' rule), so order mistakes show up.
    Secret and ConfigMap references have no value outside a cluster and are left out.
    """
    pod_metadata = {
        "metadata.name": f"{statefulset['metadata']['name']}-{ordinal}",
        "metadata.namespace": statefulset["metadata"]["namespace"],
        f"metadata.labels['{POD_INDEX_LABEL}']": str(ordinal),
    }
    env: dict[str, str] = {}
    for entry in container(statefulset, "collector").get("env", []):
        source = entry.get("valueFrom")
        if source is None:
            value = entry.get("value", "")
            env[entry["name"]] = _VAR_REF.sub(
                lambda m: env.get(m.group(1), m.group(0)), value
            )
        elif "fieldRef" in source:
            env[entry["name"]] = pod_metadata[source["fieldRef"]["fieldPath"]]
    return env


def ci_values_files() -> list[Path]:
    """The chart-testing scenarios: ``ci/*-values.yaml``."""
    return sorted((CHART_DIR / "ci").glob("*-values.yaml"))


def example_dirs() -> list[Path]:
    return sorted(p for p in EXAMPLES_DIR.iterdir() if (p / "values.yaml").is_file())


def _file_name(template_path: str) -> str:
    # "ktc/templates/statefulset.yaml" -> "statefulset.yaml"
    return template_path.split("/templates/", 1)[1].replace("/", "_")


def rendered_example_files(example: Path) -> dict[str, str]:
    """What ``examples/<name>/rendered/`` must hold: one file per non-empty template."""
    out: dict[str, str] = {}
    for name, text in sorted(render(load_values(example / "values.yaml")).items()):
        if name.endswith(NOTES) or not text.strip():
            continue
        out[_file_name(name)] = text.strip() + "\n"
    return out


def stale_examples() -> Iterator[tuple[Path, str]]:
    """(example, reason) for every golden directory that differs from a fresh render."""
    for example in example_dirs():
        expected = rendered_example_files(example)
        rendered_dir = example / "rendered"
        actual = {
            p.name: p.read_text(encoding="utf-8")
            for p in sorted(rendered_dir.glob("*.yaml"))
        }
        for name in sorted(set(expected) | set(actual)):
            if name not in actual:
                yield example, f"rendered/{name} is missing"
            elif name not in expected:
                yield example, f"rendered/{name} is no longer rendered"
            elif actual[name] != expected[name]:
                yield example, f"rendered/{name} differs from a fresh render"


def update_examples() -> None:
    for example in example_dirs():
        rendered_dir = example / "rendered"
        rendered_dir.mkdir(exist_ok=True)
        expected = rendered_example_files(example)
        for old in rendered_dir.glob("*.yaml"):
            if old.name not in expected:
                old.unlink()
        for name, text in expected.items():
            (rendered_dir / name).write_text(text, encoding="utf-8")
        print(f"{example.relative_to(REPO_ROOT)}: {len(expected)} files")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--update", action="store_true", help="rewrite examples/*/rendered"
    )
    args = parser.parse_args(argv)
    if args.update:
        update_examples()
        return 0
    stale = list(stale_examples())
    for example, reason in stale:
        print(f"{example.relative_to(REPO_ROOT)}: {reason}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
