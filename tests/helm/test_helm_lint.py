"""The chart passes what `ct lint` runs: `helm lint --strict` per scenario, yamllint, plus
the chart's own house rules (a comment above every value, Chart.yaml fields)."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from yamllint import linter
from yamllint.config import YamlLintConfig

from tests.helm.ktc_chart import (
    CHART_DIR,
    KUBE_VERSIONS,
    ci_values_files,
    example_dirs,
    load_values,
)

LINT_CONFIG = CHART_DIR.parent / "lintconf.yaml"

# Severities in helm's lint report: 1 info, 2 warning, 3 error.  --strict fails on 2+.
WARNING = 2

# Values whose whole map is one setting (a Kubernetes object passed through as is): the
# comment sits above the key, not above each field inside.
FREE_FORM_VALUES = {
    ("podSecurityContext",),
    ("securityContext",),
    ("livenessProbe",),
    ("readinessProbe",),
    ("startupProbe",),
    ("statefulset", "updateStrategy"),
}


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values_file", ci_values_files(), ids=lambda p: p.name)
def test_helm_lint_strict(values_file: Path, kube_version: str) -> None:
    report = helm.lint(
        CHART_DIR, load_values(values_file), strict=True, kube_version=kube_version
    )
    assert report["errors"] == []
    problems = [m for m in report["messages"] if m["severity"] >= WARNING]
    assert problems == []


def test_helm_lint_reports_a_broken_template(tmp_path: Path) -> None:
    """The linter is live: the same chart with one bad template fails."""
    with helm.Chart.load(CHART_DIR) as chart:
        copy_dir = Path(chart.save_dir(tmp_path))
    (copy_dir / "templates" / "broken.yaml").write_text("{{ .Values.nope.deeper }}\n")
    report = helm.lint(copy_dir, strict=True)
    assert any("nil pointer" in e or "nope" in e for e in report["errors"]), report


def _yaml_sources() -> list[Path]:
    return [
        CHART_DIR / "Chart.yaml",
        CHART_DIR / "values.yaml",
        *ci_values_files(),
        *(d / "values.yaml" for d in example_dirs()),
    ]


@pytest.mark.parametrize(
    "path", _yaml_sources(), ids=lambda p: str(p.relative_to(CHART_DIR))
)
def test_yamllint(path: Path) -> None:
    config = YamlLintConfig(file=str(LINT_CONFIG))
    problems = list(linter.run(path.read_text(encoding="utf-8"), config, str(path)))
    assert [f"{p.line}:{p.column} {p.message}" for p in problems] == []


def _leaf_keys(
    node: yaml.MappingNode, path: tuple[str, ...]
) -> list[tuple[tuple[str, ...], int]]:
    """(key path, 0-based line of the key) of every documented value in values.yaml."""
    out: list[tuple[tuple[str, ...], int]] = []
    for key_node, value_node in node.value:
        key_path = (*path, key_node.value)
        is_section = (
            isinstance(value_node, yaml.MappingNode)
            and value_node.value
            and key_path not in FREE_FORM_VALUES
        )
        if is_section:
            out.extend(_leaf_keys(value_node, key_path))
        else:
            out.append((key_path, key_node.start_mark.line))
    return out


def test_every_value_has_a_comment_above_it() -> None:
    text = (CHART_DIR / "values.yaml").read_text(encoding="utf-8")
    lines = text.splitlines()
    root = yaml.compose(text)
    assert isinstance(root, yaml.MappingNode)
    undocumented = []
    for key_path, line in _leaf_keys(root, ()):
        above = lines[line - 1].strip() if line > 0 else ""
        if not above.startswith("#"):
            undocumented.append(".".join(key_path))
    assert undocumented == []


def test_packaged_chart_renders_like_the_directory(tmp_path: Path) -> None:
    """`helm package` keeps what installs need and drops the golden examples (.helmignore)."""
    archive = Path(helm.package(CHART_DIR, destination=tmp_path))
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {"ktc/Chart.yaml", "ktc/values.yaml", "ktc/values.schema.json"} <= names
    assert not [n for n in names if n.startswith("ktc/examples/")]
    values = {"replicaCount": 2, "ingest": {"enabled": True}}
    with helm.Chart.load(archive) as packaged, helm.Chart.load(CHART_DIR) as directory:
        assert packaged.render(values, name="ktc") == directory.render(
            values, name="ktc"
        )


def test_chart_metadata() -> None:
    with helm.Chart.load(CHART_DIR) as chart:
        meta: dict[str, Any] = chart.metadata
        assert chart.schema is not None
    assert meta["apiVersion"] == "v2"
    assert meta["appVersion"] == "0.1.0"
    assert meta["type"] == "application"
    # Older clusters lack the apps.kubernetes.io/pod-index label node.id comes from.
    assert meta["kubeVersion"] == ">=1.28.0-0"
