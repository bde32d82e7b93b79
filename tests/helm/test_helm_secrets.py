"""The chart's ``secrets`` values: the collector's TLS files and passwords for its SSL and
SASL_SSL listeners come from one Kubernetes Secret, files mounted read-only and values as
environment variables that config.yaml refers to as ``${env:NAME}``; the ConfigMap holds
no secret, and the collector's own loader resolves the references from the environment."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

from collector.app.config import load_config
from tests.helm.ktc_chart import container, env_value, find, pod_environment

Docs = list[dict[str, Any]]
SECRET = "ktc-listener-secrets"
VALUES: dict[str, Any] = {
    "listenerName": "SASL_SSL",
    "config": {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": "/etc/ktc-secrets/keystore.pem",
        "ssl.truststore.location": "/etc/ktc-secrets/ca.pem",
        "ssl.key.password": "${env:KTC_SECRET_SSL_KEY_PASSWORD}",
    },
    "secrets": {
        "secretName": SECRET,
        "files": ["keystore.pem", "ca.pem"],
        "env": {"KTC_SECRET_SSL_KEY_PASSWORD": "key-password"},
    },
}


def test_the_secret_is_mounted_and_handed_over_as_environment(
    rendered: Callable[..., Docs],
) -> None:
    docs = rendered(VALUES)
    statefulset = find(docs, "StatefulSet")
    collector = container(statefulset, "collector")
    mount = next(m for m in collector["volumeMounts"] if m["name"] == "secrets")
    assert mount == {
        "name": "secrets",
        "mountPath": "/etc/ktc-secrets",
        "readOnly": True,
    }
    volume = next(
        v
        for v in statefulset["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "secrets"
    )
    assert volume["secret"]["secretName"] == SECRET
    assert [item["key"] for item in volume["secret"]["items"]] == [
        "keystore.pem",
        "ca.pem",
    ]
    assert env_value(collector, "KTC_SECRET_SSL_KEY_PASSWORD") == {
        "name": "KTC_SECRET_SSL_KEY_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "key-password"}},
    }


def test_config_refers_to_the_environment_and_the_collector_resolves_it(
    rendered: Callable[..., Docs],
    tmp_path: Path,
) -> None:
    docs = rendered(VALUES)
    text = find(docs, "ConfigMap")["data"]["config.yaml"]
    assert (
        "${env:KTC_SECRET_SSL_KEY_PASSWORD}" in text and "config.providers: env" in text
    )
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    environment = pod_environment(find(docs, "StatefulSet"), 0)
    # What the kubelet puts there from the Secret (secretKeyRef has no value outside a cluster).
    environment["KTC_SECRET_SSL_KEY_PASSWORD"] = "from-the-secret"
    config = load_config(path, environ=environment)
    assert config.ssl_key_password == "from-the-secret"


def test_nothing_is_mounted_without_secrets(rendered: Callable[..., Docs]) -> None:
    statefulset = find(rendered(), "StatefulSet")
    assert all(
        v["name"] != "secrets"
        for v in statefulset["spec"]["template"]["spec"]["volumes"]
    )
    assert (
        "config.providers" not in find(rendered(), "ConfigMap")["data"]["config.yaml"]
    )


def test_files_or_env_without_a_secret_name_are_refused() -> None:
    from tests.helm.ktc_chart import render

    with pytest.raises(Exception, match="secrets.secretName"):
        render({"secrets": {"env": {"X": "y"}}})
    with pytest.raises(helm.HelmValuesError):
        render({"secrets": {"env": {"not a name": "y"}, "secretName": SECRET}})
