"""ssl.principal.mapping.rules with a real librdkafka client presenting a certificate: the
mapped principal in the landed push, as the quota ``user`` entity and at a real OTLP/gRPC
receiver; a certificate no rule maps is refused."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from confluent_kafka import Producer

from subscriptions.store import ConfigStore
from tests.exporters.otlp_receiver import OtlpReceiver, resource_attributes
from tests.integration.collector_harness import RunningCollector, wait_for
from tests.integration.test_quotas_real_clients import scrape
from tests.integration.test_tls import pki  # noqa: F401 - the module's CA, server and client certificates

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

# The client certificate's subject is CN=orders-app,OU=payments,O=Acme\, Inc.,C=US.
RULES = "RULE:^CN=nobody,.*$/nobody/, RULE:^CN=([^,]+),OU=([^,]+),.*$/$1@$2/U, DEFAULT"


def ssl_settings(pki: Path, **more: str) -> dict[str, str]:  # noqa: F811
    return {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki / "server-keystore.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"),
        "ssl.client.auth": "required",
        **more,
    }


def producer(bootstrap: str, pki: Path, client_id: str) -> Producer:  # noqa: F811
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki / "ca.pem"),
            "ssl.certificate.location": str(pki / "client.pem"),
            "ssl.key.location": str(pki / "client.key"),
            "log_level": 3,
        }
    )


def test_the_mapped_principal_lands_and_reaches_the_otlp_receiver(
    tmp_path: Path,
    pki: Path,  # noqa: F811
) -> None:
    data_dir = tmp_path / "data"
    store = ConfigStore(data_dir)
    store.alter_subscription(
        "tls", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )
    # A quota for the mapped user (never reached): its pushes are measured under it.
    store.alter_quotas(
        {"user": "ORDERS-APP@PAYMENTS"}, {"producer_byte_rate": 10_000_000}
    )
    with OtlpReceiver() as receiver:
        otlp = {
            "endpoint": receiver.target,
            "tls": {"insecure": True},
            "compression": "none",
        }
        settings = ssl_settings(
            pki,
            **{"ssl.principal.mapping.rules": "DEFAULT"},
            # the listener's own rules win over the broker-wide ones
            **{"listener.name.ssl.ssl.principal.mapping.rules": RULES},
        )
        with RunningCollector(
            data_dir, **settings, **{"exporters.otlp": otlp}
        ) as collector:
            client = producer(collector.bootstrap, pki, "mapped-producer")
            try:
                (record, *_) = wait_for(
                    lambda: [
                        r
                        for r in collector.landed()
                        if r.context.client_id == "mapped-producer"
                    ],
                    timeout_s=20,
                    what="a push over TLS",
                )
                (attributes, *_) = wait_for(
                    lambda: [
                        attrs
                        for rm in receiver.resource_metrics()
                        if (attrs := resource_attributes(rm)).get("client_id")
                        == "mapped-producer"
                    ],
                    timeout_s=20,
                    what="forwarded metrics",
                )
                samples = scrape(collector)
            finally:
                client.close()
    assert record.context.principal == "User:ORDERS-APP@PAYMENTS"
    assert attributes["principal"] == "User:ORDERS-APP@PAYMENTS"
    assert attributes["kafka.principal"] == "User:ORDERS-APP@PAYMENTS"
    # The quota entity is the principal's name (Kafka's <user> level of the precedence),
    # URL-encoded in the metric's tag as Kafka's Sanitizer does.
    entity = frozenset({"user": "ORDERS-APP%40PAYMENTS", "client_id": ""}.items())
    assert ("kafka_server_produce_byte_rate", entity) in samples


def test_a_certificate_no_rule_maps_is_refused(
    tmp_path: Path,
    pki: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="collector.net.protocol")
    settings = ssl_settings(
        pki, **{"ssl.principal.mapping.rules": "RULE:^CN=nobody,.*$/x/"}
    )
    with RunningCollector(tmp_path / "data", **settings) as collector:
        client = producer(collector.bootstrap, pki, "unmapped-producer")
        try:
            metadata_error = None
            try:
                client.list_topics(timeout=3)
            except Exception as exc:  # KafkaException: transport failure
                metadata_error = exc
            assert metadata_error is not None
        finally:
            client.close()
        assert not collector.landed()
    # Closed as Kafka fails the authentication, naming the subject (never a secret).
    assert (
        "failed authentication: ssl.principal.mapping.rules: No rules apply to "
        "CN=orders-app,OU=payments,O=Acme\\, Inc.,C=US, rules [RULE:^CN=nobody,.*$/x]"
    ) in caplog.text
