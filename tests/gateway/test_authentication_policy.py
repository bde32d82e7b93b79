"""The gateway's rule for clients that have not authenticated (collector/gateway/
authentication.py), row by row: what the cluster requires (told, learned or unknown) and
``gateway.telemetry.require.authentication`` decide whether a request closes the connection."""

from __future__ import annotations

import pytest

from collector.gateway.authentication import (
    AuthenticationPolicy,
    UpstreamAuthentication,
)
from proto import ApiKeys

SASL_AND_VERSIONS = (
    ApiKeys.API_VERSIONS,
    ApiKeys.SASL_HANDSHAKE,
    ApiKeys.SASL_AUTHENTICATE,
)
LOCAL = (ApiKeys.PUSH_TELEMETRY, ApiKeys.INCREMENTAL_ALTER_CONFIGS)
FORWARDED = (ApiKeys.METADATA, ApiKeys.PRODUCE)


def policy(protocol: str = "PLAINTEXT", require: bool = True) -> AuthenticationPolicy:
    return AuthenticationPolicy(
        upstream_security_protocol=protocol, require_when_unknown=require
    )


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("require", [True, False])
def test_told_sasl_refuses_what_the_gateway_answers_and_leaves_the_rest_to_the_cluster(
    protocol: str, require: bool
) -> None:
    told = policy(protocol, require)
    assert told.told and told.state is UpstreamAuthentication.REQUIRED
    for api_key in SASL_AND_VERSIONS:
        assert not told.refuses(api_key, local=False)
    for api_key in LOCAL:
        assert told.refuses(api_key, local=True)
    for api_key in FORWARDED:  # the cluster closes the connection itself
        assert not told.refuses(api_key, local=False)
    # Nothing a client shows unteaches it.
    told.learned_not_required("a test")
    assert told.state is UpstreamAuthentication.REQUIRED


@pytest.mark.parametrize("require", [True, False])
def test_unknown_refuses_local_answers_as_configured_and_forwards_the_rest(
    require: bool,
) -> None:
    unknown = policy("PLAINTEXT", require)
    assert unknown.state is UpstreamAuthentication.UNKNOWN
    for api_key in LOCAL:
        assert unknown.refuses(api_key, local=True) is require
    for api_key in (*FORWARDED, *SASL_AND_VERSIONS):
        assert not unknown.refuses(api_key, local=False)


def test_learned_not_required_serves_everything() -> None:
    learned = policy("SSL")
    learned.learned_not_required("a test")
    assert learned.state is UpstreamAuthentication.NOT_REQUIRED
    for api_key in LOCAL:
        assert not learned.refuses(api_key, local=True)


def test_learned_required_wins_over_not_required() -> None:
    learned = policy()
    learned.learned_not_required("answered")
    learned.learned_required("a SaslHandshake served")
    assert learned.state is UpstreamAuthentication.REQUIRED
    learned.learned_not_required("answered again")
    assert learned.state is UpstreamAuthentication.REQUIRED
    assert learned.refuses(ApiKeys.PUSH_TELEMETRY, local=True)
    assert not learned.refuses(ApiKeys.SASL_HANDSHAKE, local=False)
