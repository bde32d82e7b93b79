"""The upstream cluster's start-time decisions (collector/gateway/upstream_cluster.py, its
table): which setups of the gateway's listeners against the cluster are refused, when the
cluster is asked whether it requires authentication, and what its answer teaches; and the
TLS context every upstream connection gets.  No network: the question is replaced."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from collector.gateway import upstream_cluster
from collector.gateway.authentication import UpstreamAuthentication
from collector.gateway.upstream_cluster import (
    UpstreamCluster,
    UpstreamClusterError,
    UpstreamSettings,
)
from collector.gateway.upstream_login import UpstreamLogin
from collector.net.kafka_cluster import KafkaClusterSettings

BOOTSTRAP = (("127.0.0.1", 1),)
PLAIN = {"PLAINTEXT": "PLAINTEXT"}
SASL = {"SASL": "SASL_PLAINTEXT"}
LOGIN = UpstreamLogin("PLAIN", "gateway", "secret")


def upstream(protocol: str = "PLAINTEXT", **settings: Any) -> KafkaClusterSettings:
    """gateway.upstream.* at BOOTSTRAP."""
    return KafkaClusterSettings("127.0.0.1:1", protocol, **settings)


def learn(
    settings: UpstreamSettings,
    listeners: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    answer: bool | None = None,
) -> tuple[UpstreamCluster, list[Any]]:
    """The cluster after learn_authentication, and the questions asked (the cluster's
    answer: True closes the connection, False answers, None cannot be reached)."""
    asked: list[Any] = []

    async def ask(bootstrap: Any, **kwargs: Any) -> tuple[bool | None, None]:
        asked.append(bootstrap)
        return answer, None

    monkeypatch.setattr(upstream_cluster, "ask_authentication", ask)
    cluster = UpstreamCluster(settings)
    asyncio.run(cluster.learn_authentication(listeners))
    return cluster, asked


def test_the_gateways_own_login_needs_every_listener_to_authenticate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = UpstreamSettings(upstream("SASL_PLAINTEXT", login=LOGIN))
    with pytest.raises(UpstreamClusterError, match="PLAINTEXT does not"):
        learn(settings, {**SASL, **PLAIN}, monkeypatch)
    cluster, asked = learn(settings, SASL, monkeypatch)
    assert (
        asked == [] and cluster.authentication.state is UpstreamAuthentication.REQUIRED
    )


def test_sasl_listeners_in_front_of_a_sasl_cluster_without_a_login_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    told = UpstreamSettings(upstream("SASL_PLAINTEXT"))
    with pytest.raises(UpstreamClusterError, match="requires SASL too"):
        learn(told, SASL, monkeypatch)
    with pytest.raises(UpstreamClusterError, match="closed the connection"):
        learn(UpstreamSettings(upstream()), SASL, monkeypatch, answer=True)


@pytest.mark.parametrize(
    ("answer", "state"),
    [
        (True, UpstreamAuthentication.REQUIRED),
        (False, UpstreamAuthentication.NOT_REQUIRED),
        (None, UpstreamAuthentication.UNKNOWN),
    ],
)
def test_not_told_the_cluster_is_asked_and_its_answer_teaches(
    monkeypatch: pytest.MonkeyPatch, answer: bool | None, state: UpstreamAuthentication
) -> None:
    cluster, asked = learn(UpstreamSettings(upstream()), PLAIN, monkeypatch, answer)
    assert asked == [BOOTSTRAP]
    assert cluster.authentication.state is state


def test_nothing_is_asked_when_nothing_depends_on_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    told = UpstreamSettings(upstream("SASL_SSL"))
    cluster, asked = learn(told, PLAIN, monkeypatch)
    assert (
        asked == [] and cluster.authentication.state is UpstreamAuthentication.REQUIRED
    )
    lenient = UpstreamSettings(upstream(), require_authentication_when_unknown=False)
    cluster, asked = learn(lenient, PLAIN, monkeypatch)
    assert (
        asked == [] and cluster.authentication.state is UpstreamAuthentication.UNKNOWN
    )


def test_tls_only_for_ssl_protocols_and_a_bad_truststore_refused() -> None:
    assert UpstreamCluster(UpstreamSettings(upstream())).ssl_context is None
    context = UpstreamCluster(
        UpstreamSettings(upstream("SSL", check_hostname=False))
    ).ssl_context
    assert context is not None and not context.check_hostname
    with pytest.raises(UpstreamClusterError, match="gateway.upstream.ssl"):
        UpstreamCluster(UpstreamSettings(upstream("SSL", truststore="/nonexistent")))


def test_the_subscriptions_are_read_with_a_login_where_the_cluster_requires_one() -> (
    None
):
    required = UpstreamCluster(UpstreamSettings(upstream("SASL_PLAINTEXT")))
    assert required.subscriptions_admin("local") is None
    with_login = UpstreamCluster(
        UpstreamSettings(upstream("SASL_PLAINTEXT"), subscriptions_login=LOGIN)
    )
    admin = with_login.subscriptions_admin("local")
    assert admin is not None
    admin.close()
