"""Secrets in the configuration: ${env:VAR} references (Kafka's EnvVarConfigProvider),
password-typed keys taken as strings and never printed, the mapping rules' keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collector.app.cli import cli
from collector.app.config import ConfigError, load_config
from collector.security.secrets import HIDDEN, is_password_key, redact

SECRET = "s3cr3t-Pa55"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ktc.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("key", "password"),
    [
        ("ssl.key.password", True),
        ("ssl.keystore.password", True),
        ("gateway.upstream.ssl.key.password", True),
        ("sasl.jaas.config", True),
        ("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config", True),
        ("sasl.oauthbearer.client.credentials.client.secret", True),
        ("ssl.keystore.location", False),
        ("ssl.principal.mapping.rules", False),
        ("password.encoder.cipher.algorithm", False),
    ],
)
def test_password_keys_are_kafkas(key: str, password: bool) -> None:
    assert is_password_key(key) is password


def test_redact_walks_maps() -> None:
    shown = redact({"ssl.key.password": SECRET, "a": {"client.secret": SECRET, "b": 1}})
    assert shown == {"ssl.key.password": HIDDEN, "a": {"client.secret": HIDDEN, "b": 1}}


def test_env_reference_resolves_with_the_provider_declared(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "config.providers: env\n"
        "config.providers.env.class: org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        "ssl.key.password: ${env:KEY_PASSWORD}\n"
        "exporters.otlp: {endpoint: 'otel:4317', headers: {authorization: 'Bearer ${env::TOKEN}'}}\n",
    )
    config = load_config(path, environ={"KEY_PASSWORD": "123456", "TOKEN": SECRET})
    assert config.ssl_key_password == "123456"
    assert config.exporters_otlp == {
        "endpoint": "otel:4317",
        "headers": {"authorization": f"Bearer {SECRET}"},
    }


def test_the_provider_may_be_declared_in_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, "ssl.key.password: ${env:KEY_PASSWORD}\n")
    environ = {"KTC_CONFIG_PROVIDERS": "env", "KEY_PASSWORD": SECRET}
    assert load_config(path, environ=environ).ssl_key_password == SECRET


@pytest.mark.parametrize(
    ("text", "environ", "message"),
    [
        (
            "config.providers: env\nssl.key.password: ${env:UNSET_VAR}\n",
            {},
            "ssl.key.password: environment variable UNSET_VAR is not set",
        ),
        (
            "ssl.key.password: ${env:KEY_PASSWORD}\n",
            {"KEY_PASSWORD": SECRET},
            "ssl.key.password: refers to config provider 'env', which is not declared",
        ),
        (
            "config.providers: env\nlanding: {dir: '${file:/etc/x:y}'}\n",
            {},
            "landing.dir: refers to config provider 'file'",
        ),
        (
            "config.providers: env\nssl.key.password: ${env:/etc:KEY}\n",
            {"KEY": SECRET},
            "ssl.key.password: ${env:...} takes no path",
        ),
        ("config.providers: env,file\n", {}, "config.providers: file not supported"),
        (
            "config.providers: env\nconfig.providers.env.class: com.example.Vault\n",
            {},
            "config.providers.env.class: must be org.apache.kafka",
        ),
    ],
)
def test_unresolvable_references_are_refused(
    tmp_path: Path, text: str, environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=r".*") as raised:
        load_config(write(tmp_path, text), environ=environ)
    assert message in str(raised.value)
    assert SECRET not in str(raised.value)


def test_a_numeric_password_from_the_environment_is_a_string() -> None:
    config = load_config(environ={"KTC_SSL_KEY_PASSWORD": "123456"})
    assert config.ssl_key_password == "123456"
    config = load_config(environ={"KTC_GATEWAY_UPSTREAM_SSL_KEY_PASSWORD": "0123"})
    assert config.gateway_upstream.ssl_key_password == "0123"


def test_an_unquoted_numeric_password_in_yaml_is_refused_without_its_value(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(write(tmp_path, "ssl.key.password: 987654\n"), environ={})
    assert "ssl.key.password: must be a string (quote it in YAML)" in str(raised.value)
    assert "987654" not in str(raised.value)


def test_validation_errors_hide_secrets() -> None:
    # A model-level error reports the whole input: the password is hidden in it.
    with pytest.raises(ConfigError) as raised:
        load_config(
            environ={
                "KTC_SSL_KEY_PASSWORD": SECRET,
                "KTC_INTER_BROKER_LISTENER_NAME": "NOPE",
            }
        )
    assert "NOPE" in str(raised.value)
    assert SECRET not in str(raised.value)


def test_the_config_repr_hides_secrets() -> None:
    config = load_config(environ={"KTC_SSL_KEY_PASSWORD": SECRET})
    assert SECRET not in repr(config)


def test_ktc_validate_config_prints_secrets_hidden(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"ssl.key.password: '{SECRET}'\ngateway.upstream.ssl.key.password: '{SECRET}'\n",
    )
    result = CliRunner().invoke(cli, ["validate-config", str(path)])
    assert result.exit_code == 0, result.output
    assert "ssl.key.password: '[hidden]'" in result.output
    assert SECRET not in result.output


def test_a_bad_otlp_exporter_setting_is_named_without_its_values(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        f"exporters.otlp: {{endpoint: 'otel:4317', headers: 'authorization: {SECRET}'}}\n",
    )
    result = CliRunner().invoke(cli, ["validate-config", str(path)])
    assert result.exit_code == 2, result.output
    assert "exporters.otlp: headers: " in result.output
    assert SECRET not in result.output


def test_mapping_rules_keys(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            "ssl.principal.mapping.rules: |\n"
            "  RULE:^CN=([^,]+),OU=ops,.*$/$1/L,\n"
            "  DEFAULT\n"
            "listener.name.internal.ssl.principal.mapping.rules: RULE:^CN=(.*)$/svc-$1/\n",
        ),
        environ={},
    )
    assert config.ssl_principal_mapper("EXTERNAL").name("CN=Ann,OU=ops,O=x") == "ann"
    assert config.ssl_principal_mapper("INTERNAL").name("CN=b") == "svc-b"
    assert config.to_dotted()["listener.name.internal.ssl.principal.mapping.rules"] == (
        "RULE:^CN=(.*)$/svc-$1/"
    )
    with pytest.raises(
        ConfigError, match="ssl.principal.mapping.rules: .*Invalid rule: `DEFAUL`"
    ):
        load_config(
            write(tmp_path, "ssl.principal.mapping.rules: DEFAUL\n"), environ={}
        )
