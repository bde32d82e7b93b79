"""The shipped alert rules (helm/ktc/files/prometheus/ktc-clients.rules.yaml): promtool
accepts them, and its unit tests (rules/ktc-clients.test.yaml) pass with series that fire
every alert and series that fire none.  So that those tests cannot pass by accident, each
alert in turn is replaced by one that never fires, and promtool must then fail."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.prometheus.prometheus_server import promtool_binary

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "helm" / "ktc" / "files" / "prometheus" / "ktc-clients.rules.yaml"
RULE_TESTS = Path(__file__).resolve().parent / "rules" / "ktc-clients.test.yaml"


def alerts() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"]]


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool_binary()), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", str(RULES), cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    result = promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    tests: list[dict[str, Any]] = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    firing = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    quiet = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if not case["exp_alerts"]
    }
    assert firing == set(alerts()) == quiet


@pytest.mark.parametrize("alert", alerts())
def test_the_firing_case_depends_on_the_rule(alert: str, tmp_path: Path) -> None:
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule["alert"] == alert:
                rule["expr"] = "vector(1) > 2"  # never fires
    mutated = tmp_path / "helm" / "ktc" / "files" / "prometheus" / RULES.name
    mutated.parent.mkdir(parents=True)
    mutated.write_text(yaml.safe_dump(rules))
    tests_dir = tmp_path / "tests" / "prometheus" / "rules"
    tests_dir.mkdir(parents=True)
    shutil.copy(RULE_TESTS, tests_dir)
    result = promtool("test", "rules", RULE_TESTS.name, cwd=tests_dir)
    assert result.returncode != 0
    assert alert in result.stdout + result.stderr
