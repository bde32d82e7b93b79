"""The Kafka-cluster keys of the three prefixes: one value, one login rule, the renderers."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.app.cli.cluster_subscriptions import CommandConfigError, cluster_admin
from collector.app.config import ConfigError, env_var_for, load_config
from collector.app.parts.errors import StartupError
from collector.net.kafka_cluster import KafkaClusterSettings, SaslLogin

PREFIXES = ("gateway.upstream", "subscriptions.kafka", "landing.kafka")
# What each prefix needs besides its own keys to be checked.
CONTEXT = {
    "gateway.upstream": {},
    "subscriptions.kafka": {"subscriptions.store": "kafka"},
    "landing.kafka": {"landing.kafka.topic": "telemetry"},
}


def every_key(prefix: str) -> dict[str, str]:
    return {
        f"{prefix}.bootstrap.servers": "kafka-0:9093,kafka-1:9093",
        f"{prefix}.security.protocol": "SASL_SSL",
        f"{prefix}.sasl.mechanism": "SCRAM-SHA-512",
        f"{prefix}.sasl.username": "ktc",
        f"{prefix}.sasl.password": "123456",
        f"{prefix}.ssl.truststore.location": "/etc/ktc/ca.pem",
        f"{prefix}.ssl.keystore.location": "/etc/ktc/client.pem",
        f"{prefix}.ssl.key.password": "0123",
        f"{prefix}.ssl.endpoint.identification.algorithm": "",
    }


@pytest.mark.parametrize("prefix", PREFIXES)
def test_each_prefix_keeps_its_keys_and_environment_variables(prefix: str) -> None:
    keys = every_key(prefix)
    from_env = load_config(
        # A variable is a YAML value: "" is the empty string, an empty variable unset.
        environ={
            env_var_for(k): v or '""' for k, v in {**CONTEXT[prefix], **keys}.items()
        }
    )
    from_flags = load_config(environ={}, overrides={**CONTEXT[prefix], **keys})
    assert from_env == from_flags
    assert {k: from_env.to_dotted()[k] for k in keys} == keys
    assert from_env.with_overrides({}) == from_env
    settings = from_env.landing_cluster() if prefix == "landing.kafka" else None
    cluster = getattr(from_env, prefix.replace(".", "_")).settings()
    assert settings in (None, cluster)
    assert cluster == KafkaClusterSettings(
        "kafka-0:9093,kafka-1:9093",
        "SASL_SSL",
        SaslLogin("SCRAM-SHA-512", "ktc", "123456"),
        truststore="/etc/ktc/ca.pem",
        keystore="/etc/ktc/client.pem",
        key_password="0123",
        check_hostname=False,
    )


@pytest.mark.parametrize("prefix", [*PREFIXES, "gateway.subscriptions"])
@pytest.mark.parametrize("missing", ["username", "password"])
def test_a_login_is_all_three_keys(prefix: str, missing: str) -> None:
    login = {
        f"{prefix}.sasl.mechanism": "PLAIN",
        f"{prefix}.sasl.username": "ktc",
        f"{prefix}.sasl.password": "123456",
    }
    del login[f"{prefix}.sasl.{missing}"]
    protocol = (
        {}
        if prefix == "gateway.subscriptions"
        else {
            f"{prefix}.bootstrap.servers": "kafka:9093",
            f"{prefix}.security.protocol": "SASL_PLAINTEXT",
        }
    )
    given = {**CONTEXT.get(prefix, {}), **protocol, **login}
    with pytest.raises(ConfigError) as raised:
        load_config(environ={}, overrides=given)
    assert f"{prefix}.sasl.mechanism, .username and .password: all three" in str(
        raised.value
    )
    assert "123456" not in str(raised.value)  # the password is never shown


def test_the_login_rules_one_line_each() -> None:
    """The messages of the one rule, as each prefix has always said them."""
    cases = {
        "gateway.upstream": (
            {"gateway.upstream.sasl.mechanism": "PLAIN"},
            "<root>: Value error, gateway.upstream.sasl.mechanism, .username and "
            ".password: all three or none (the gateway's own login to the cluster) "
            "(got {'gateway.upstream.sasl.mechanism': 'PLAIN'})",
        ),
        "subscriptions.kafka": (
            {"subscriptions.kafka.security.protocol": "SASL_SSL"},
            "<root>: Value error, subscriptions.kafka.sasl.mechanism, .username and "
            ".password: all three with subscriptions.kafka.security.protocol "
            "SASL_PLAINTEXT or SASL_SSL, none otherwise "
            "(got {'subscriptions.kafka.security.protocol': 'SASL_SSL'})",
        ),
    }
    for given, message in cases.values():
        with pytest.raises(ConfigError) as raised:
            load_config(environ={}, overrides=given)
        assert str(raised.value) == f"defaults + command line: {message}"
    with pytest.raises(
        ConfigError,
        match=r"^defaults \+ command line: gateway\.upstream"
        r"\.security\.protocol: Value error, must be PLAINTEXT",
    ):
        load_config(environ={}, overrides={"gateway.upstream.security.protocol": "TLS"})


def test_the_landing_topic_lands_on_the_fronted_cluster_without_its_own() -> None:
    config = load_config(
        environ={},
        overrides={
            "landing.kafka.topic": "telemetry",
            "gateway.upstream.bootstrap.servers": "kafka:9092",
            "gateway.upstream.security.protocol": "sasl_ssl",
            "gateway.upstream.sasl.mechanism": "plain",
            "gateway.upstream.sasl.username": "gw",
            "gateway.upstream.sasl.password": "secret",
        },
    )
    assert config.landing_cluster() == KafkaClusterSettings(
        "kafka:9092", "SASL_SSL", SaslLogin("PLAIN", "gw", "secret")
    )


SECURED = KafkaClusterSettings(
    "kafka:9093",
    "SASL_SSL",
    SaslLogin("SCRAM-SHA-256", "ktc", "pw"),
    truststore="/ca.pem",
    keystore="/client.pem",
    key_password="kp",
    check_hostname=False,
)


def test_librdkafka_settings() -> None:
    assert SECURED.librdkafka() == {
        "bootstrap.servers": "kafka:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "ktc",
        "sasl.password": "pw",
        "ssl.endpoint.identification.algorithm": "none",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/client.pem",
        "ssl.key.location": "/client.pem",
        "ssl.key.password": "kp",
    }
    assert KafkaClusterSettings("kafka:9092").librdkafka() == {
        "bootstrap.servers": "kafka:9092",
        "security.protocol": "PLAINTEXT",
    }


def test_java_properties() -> None:
    assert SECURED.java_properties() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="ktc" password="pw";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/client.pem",
        "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "",
    }
    assert KafkaClusterSettings("kafka:9092").java_properties() == {}


def test_a_tls_context_only_for_ssl_protocols() -> None:
    assert KafkaClusterSettings("kafka:9092", "SASL_PLAINTEXT").ssl_context() is None
    context = KafkaClusterSettings("k:1", "SSL", check_hostname=False).ssl_context()
    assert context is not None and not context.check_hostname
    checked = KafkaClusterSettings("k:1", "SASL_SSL").ssl_context()
    assert checked is not None and checked.check_hostname
    with pytest.raises(OSError):
        KafkaClusterSettings("k:1", "SSL", truststore="/nonexistent").ssl_context()
    assert repr(SECURED).count("pw") == 0 and "kp" not in repr(SECURED)


def test_an_unusable_pem_file_is_one_line_naming_its_prefix(tmp_path: Path) -> None:
    """Each admin client renders the same value; its error names where the file was set."""
    from collector.app.modes.serve import kafka_store_admin

    config = load_config(
        environ={},
        overrides={
            "subscriptions.store": "kafka",
            "subscriptions.kafka.bootstrap.servers": "kafka:9093",
            "subscriptions.kafka.security.protocol": "SSL",
            "subscriptions.kafka.ssl.truststore.location": str(tmp_path / "none.pem"),
        },
    )
    with pytest.raises(StartupError, match=r"^subscriptions\.kafka\.ssl: "):
        kafka_store_admin(config)
    properties = tmp_path / "admin.properties"
    properties.write_text(
        f"security.protocol=SSL\nssl.truststore.location={tmp_path / 'none.pem'}\n",
        encoding="utf-8",
    )
    with pytest.raises(CommandConfigError, match=r"^ssl: "):
        cluster_admin("kafka:9093", str(properties))
