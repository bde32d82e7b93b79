"""Config loading: defaults < file < env < flags; every error names its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.app.config import ConfigError, env_var_for, load_config


def test_embedded_defaults_are_kafkas() -> None:
    config = load_config(environ={})
    assert config.listeners == "PLAINTEXT://:9092"
    assert config.socket_request_max_bytes == 104857600
    assert config.telemetry_max_bytes == 1048576
    assert config.quota_window_num == 11
    assert config.quota_window_size_seconds == 1
    assert config.telemetry_instance_cache_max_size == 16384
    assert config.telemetry_honour_long_intervals is False


def test_file_then_env_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "ktc.yaml"
    path.write_text(
        "node.id: 3\ntelemetry.max.bytes: 2048\nlisteners: PLAINTEXT://127.0.0.1:0\n"
    )
    config = load_config(
        path,
        environ={"KTC_TELEMETRY_MAX_BYTES": "4096", "KTC_CLUSTER_ID": "abc"},
        overrides={"node.id": 7, "data.dir": None},
    )
    assert config.telemetry_max_bytes == 4096  # env beats file
    assert config.node_id == 7  # flag beats file
    assert config.cluster_id == "abc"
    assert config.listeners == "PLAINTEXT://127.0.0.1:0"


def test_env_var_names() -> None:
    assert env_var_for("telemetry.max.bytes") == "KTC_TELEMETRY_MAX_BYTES"
    assert env_var_for("exporters.otlp") == "KTC_EXPORTERS_OTLP"


def test_env_map_value_is_yaml() -> None:
    config = load_config(environ={"KTC_EXPORTERS_OTLP": '{endpoint: "127.0.0.1:4317"}'})
    assert config.exporters_otlp == {"endpoint": "127.0.0.1:4317"}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("telemetry.max.bytes: 0\n", "telemetry.max.bytes"),
        ("node.id: many\n", "node.id"),
        ("no.such.key: 1\n", "no.such.key"),
        ("http.listener: nope\n", "http.listener"),
        ("log.level: LOUD\n", "log.level"),
        ("- a list\n", "mapping"),
        ("key: [unclosed\n", "YAML"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert named in str(info.value)


def test_bad_env_value_names_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(environ={"KTC_TELEMETRY_MAX_BYTES": "-5"})
    assert "telemetry.max.bytes" in str(info.value)
    assert "KTC_TELEMETRY_MAX_BYTES" in str(info.value)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml", environ={})


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_config(path, environ={}).node_id == 1
