"""``ktc`` commands through click's CliRunner (in-process) with real files."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from collector.app.cli import cli
from exporters.context import TelemetryContext
from exporters.landing import LandingLog, landing_directory
from tests.collector.collector_testkit import otlp_payload


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_validate_config_prints_the_effective_config(tmp_path: Path) -> None:
    path = tmp_path / "ktc.yaml"
    path.write_text("node.id: 4\nlisteners: PLAINTEXT://127.0.0.1:9093\n")
    code, out, err = run(
        "validate-config", str(path), env={"KTC_TELEMETRY_MAX_BYTES": "2048"}
    )
    assert code == 0, err
    assert "node.id: 4" in out and "telemetry.max.bytes: 2048" in out
    assert "valid" in err


def test_validate_config_error_names_the_key_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "ktc.yaml"
    path.write_text("telemetry.max.bytes: 0\n")
    code, _, err = run("validate-config", str(path))
    assert code == 2
    assert "telemetry.max.bytes" in err


def test_validate_config_checks_listener_strings(tmp_path: Path) -> None:
    path = tmp_path / "ktc.yaml"
    path.write_text("listeners: 127.0.0.1:9092\n")
    code, _, err = run("validate-config", str(path))
    assert code == 2 and "listeners" in err


def test_serve_with_a_bad_config_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "ktc.yaml"
    path.write_text("no.such.key: 1\n")
    code, _, err = run("serve", "--config", str(path))
    assert code == 2 and "no.such.key" in err


def test_serve_sasl_ssl_without_a_keystore_exits_2(tmp_path: Path) -> None:
    code, _, err = run(
        "serve",
        "--listeners",
        "SASL_SSL://127.0.0.1:0",
        "--data-dir",
        str(tmp_path),
        env={"KTC_HTTP_LISTENER": "null"},
    )
    assert code == 2 and "ssl.keystore.location" in err


def test_serve_ssl_without_a_keystore_exits_2(tmp_path: Path) -> None:
    code, _, err = run(
        "serve",
        "--listeners",
        "SSL://127.0.0.1:0",
        "--data-dir",
        str(tmp_path),
        env={"KTC_HTTP_LISTENER": "null"},
    )
    assert code == 2 and "ssl.keystore.location" in err


def test_subscriptions_alter_describe_list_delete(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    code, out, err = run(
        "subscriptions",
        "alter",
        "--data-dir",
        data,
        "--name",
        "producers",
        "--metrics",
        "org.apache.kafka.producer.",
        "--interval",
        "5000",
    )
    assert code == 0, err
    assert out.strip() == "Altered client metrics config for producers."
    code, out, _ = run("subscriptions", "list", "--data-dir", data)
    assert out.split() == ["producers"]
    code, out, _ = run(
        "subscriptions", "describe", "--data-dir", data, "--name", "producers"
    )
    assert out.splitlines() == [
        "Client metrics configs for producers are:",
        "  metrics=org.apache.kafka.producer.",
        "  interval.ms=5000",
        "  match=",
    ]
    # An empty value resets the key to its default, as kafka-client-metrics.sh does.
    run(
        "subscriptions",
        "alter",
        "--data-dir",
        data,
        "--name",
        "producers",
        "--interval",
        "",
    )
    _, out, _ = run("subscriptions", "describe", "--data-dir", data)
    assert "  interval.ms=300000" in out.splitlines()
    code, out, _ = run(
        "subscriptions", "delete", "--data-dir", data, "--name", "producers"
    )
    assert code == 0 and "Deleted" in out
    _, out, _ = run("subscriptions", "list", "--data-dir", data)
    assert out == ""


def test_subscriptions_errors_carry_kafkas_code(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    code, _, err = run(
        "subscriptions", "alter", "--data-dir", data, "--name", "x", "--interval", "5"
    )
    assert code == 1 and "INVALID_REQUEST" in err
    code, _, err = run("subscriptions", "alter", "--data-dir", data, "--metrics", "*")
    assert code == 2 and "--name" in err
    code, _, err = run(
        "subscriptions", "delete", "--data-dir", data, "--name", "absent"
    )
    assert code == 1 and "absent" in err


def test_generate_name(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    code, out, _ = run(
        "subscriptions",
        "alter",
        "--data-dir",
        data,
        "--generate-name",
        "--metrics",
        "*",
    )
    assert code == 0
    name = out.split("for ")[1].rstrip(".\n")
    assert len(name) == 22


def test_landing_dump_prints_json_lines(tmp_path: Path) -> None:
    data = tmp_path / "data"
    context = TelemetryContext(
        client_instance_id="VQQTF4UpT8qqtooenFFlgA",
        client_id="app",
        client_software_name="sw",
        client_software_version="1",
        client_source_address="127.0.0.1",
        client_source_port=1,
        listener_name="PLAINTEXT",
        security_protocol="PLAINTEXT",
        principal="User:ANONYMOUS",
        push_interval_ms=1000,
        terminating=False,
        received_time_unix_nano=1,
        node_id=1,
        cluster_id="c",
        subscription_id=3,
        compression_type=0,
    )
    with LandingLog(landing_directory(data, 1), housekeeping=False) as log:
        log.append(context, otlp_payload("org.apache.kafka.producer.a"))
        log.append(context, otlp_payload("org.apache.kafka.producer.b"))
    code, out, err = run("landing", "dump", "--data-dir", str(data))
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["offset"] for line in lines] == [0, 1]
    assert lines[0]["context"]["client_id"] == "app"
    assert "org.apache.kafka.producer.b" in json.dumps(lines[1]["metrics"])
    _, out, _ = run("landing", "dump", "--data-dir", str(data), "--from-offset", "1")
    assert len(out.splitlines()) == 1


def test_quotas_alter_and_describe(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    code, out, err = run(
        "quotas",
        "alter",
        "--data-dir",
        data,
        "--client-id",
        "app",
        "--add-config",
        "request_percentage=25,producer_byte_rate=1048576",
    )
    assert code == 0, err
    run(
        "quotas",
        "alter",
        "--data-dir",
        data,
        "--user-default",
        "--add-config",
        "consumer_byte_rate=2048",
    )
    _, out, _ = run("quotas", "describe", "--data-dir", data)
    assert out.splitlines() == [
        "Quota configs for client-id 'app' are producer_byte_rate=1048576.0,request_percentage=25.0",
        "Quota configs for user-principal '<default>' are consumer_byte_rate=2048.0",
    ]
    _, out, _ = run("quotas", "describe", "--data-dir", data, "--client-id", "app")
    assert len(out.splitlines()) == 1
    code, _, err = run(
        "quotas",
        "alter",
        "--data-dir",
        data,
        "--client-id",
        "app",
        "--add-config",
        "request_percentage=-1",
    )
    assert code == 1 and "INVALID_REQUEST" in err
    code, _, err = run(
        "quotas",
        "alter",
        "--data-dir",
        data,
        "--client-id",
        "app",
        "--client-id-default",
        "--add-config",
        "request_percentage=1",
    )
    assert code == 2
    run(
        "quotas",
        "alter",
        "--data-dir",
        data,
        "--client-id",
        "app",
        "--delete-config",
        "request_percentage,producer_byte_rate",
    )
    _, out, _ = run("quotas", "describe", "--data-dir", data, "--client-id", "app")
    assert out == ""


def test_a_mistyped_config_key_gets_the_nearest_valid_key(tmp_path: Path) -> None:
    path = tmp_path / "ktc.yaml"
    path.write_text("telemetry.max.byte: 2048\nlog.levle: DEBUG\n")
    code, _, err = run("validate-config", str(path))
    assert code == 2
    assert err.count("\n") == 1  # one line
    assert "unknown key log.levle (did you mean log.level?)" in err
    assert "unknown key telemetry.max.byte (did you mean telemetry.max.bytes?)" in err
    assert "listeners" not in err  # no list of every key


def test_a_config_file_that_is_not_yaml_is_one_line_naming_where(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ktc.yaml"
    path.write_text("node.id: 1\nlisteners: [PLAINTEXT://127.0.0.1:9092\n")
    code, _, err = run("validate-config", str(path))
    assert code == 2
    assert err.count("\n") == 1
    assert "not valid YAML" in err and "(line 3, column 1)" in err


def test_dry_run_asks_the_same_default_server_as_ktc_clients() -> None:
    from collector.app.cli.clients import clients
    from collector.app.cli.subscriptions import subscriptions

    alter = subscriptions.commands["alter"]

    def server_option(command: object) -> tuple[object, object]:
        (option,) = [p for p in command.params if p.name == "server"]  # type: ignore[attr-defined]
        return option.default, option.envvar

    assert server_option(alter) == server_option(clients)
    assert server_option(clients) == ("http://127.0.0.1:8714", "KTC_SERVER")


def test_server_without_dry_run_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run(
        "subscriptions", "alter", "--data-dir", str(tmp_path), "--name", "s",
        "--metrics", "a.", "--server", "http://127.0.0.1:1",
    )  # fmt: skip
    assert code == 2
    assert "--server is for --dry-run" in err
