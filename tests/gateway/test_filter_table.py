"""The gateway's filter table (collector/gateway/filters/__init__.py) agrees with what the
filters' wire helpers know, so adding an API touches the table and one filter and cannot
half-succeed: an API whose responses can carry broker addresses is rewritten, every API the
gateway answers itself is answered by the node, and an API Kafka does not know has no chain (the
connection closes).  The list of APIs the gateway answers itself (its dispatcher's table, the
versions it adds to ApiVersions) is derived from the table, so the two cannot disagree."""

from __future__ import annotations

from typing import Any, cast

import pytest

from clock.testing import FakeClock
from collector.gateway.addresses import SCANNERS
from collector.gateway.authentication import AuthenticationPolicy
from collector.gateway.filters import FILTERS, answered_here, build_chains
from collector.gateway.filters.answer_here import AnswerAcls, AnswerHere, AnswerScram
from collector.gateway.filters.base import (
    CONTINUE,
    Chain,
    Filter,
    LocalAnswerSettings,
)
from collector.gateway.filters.record_quotas import FetchQuota
from collector.gateway.filters.rewrite_addresses import RewriteAddresses
from collector.gateway.service import Gateway
from proto import SUPPORTED_VERSIONS, ApiKeys
from proto.api_table import API_TABLE


class Services:
    """What AnswerAcls and AnswerScram read of the gateway's services (nothing here calls a filter)."""

    def __init__(self, answers_acls: bool, answers_scram: bool = False) -> None:
        self.answers_acls = answers_acls
        self.answers_scram = answers_scram


KNOWN = {key for key, info in API_TABLE.items() if info.min_version is not None}


def chains() -> dict[int, Chain]:
    services: Any = Services(answers_acls=False)
    return build_chains(services)


def test_every_api_with_addresses_in_its_responses_is_rewritten() -> None:
    rewritten = {key for key, kinds in FILTERS.items() if RewriteAddresses in kinds}
    assert rewritten == set(SCANNERS)


def test_the_table_names_only_apis_kafka_knows() -> None:
    assert set(FILTERS) <= KNOWN


def test_telemetry_and_client_quotas_are_answered_here_and_never_forwarded() -> None:
    answered = {key for key, kinds in FILTERS.items() if AnswerHere in kinds}
    assert answered == {
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        ApiKeys.PUSH_TELEMETRY,
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        ApiKeys.ALTER_CLIENT_QUOTAS,
    }
    assert all(FILTERS[key] == (AnswerHere,) for key in answered)
    assert all(chains()[key].answered_here for key in answered)


def test_the_acl_apis_are_answered_here_only_with_an_authorizer() -> None:
    acls = {ApiKeys.DESCRIBE_ACLS, ApiKeys.CREATE_ACLS, ApiKeys.DELETE_ACLS}
    assert {key for key, kinds in FILTERS.items() if AnswerAcls in kinds} == acls
    for answers_acls in (False, True):
        services: Any = Services(answers_acls)
        built = build_chains(services)
        assert {built[key].answered_here for key in acls} == {answers_acls}


def test_the_scram_apis_are_answered_here_only_with_sasl_listeners() -> None:
    scram = {
        ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKeys.ALTER_USER_SCRAM_CREDENTIALS,
    }
    assert {key for key, kinds in FILTERS.items() if AnswerScram in kinds} == scram
    for answers_scram in (False, True):
        services: Any = Services(answers_acls=False, answers_scram=answers_scram)
        built = build_chains(services)
        assert {built[key].answered_here for key in scram} == {answers_scram}


def test_every_known_api_has_a_chain_and_an_unknown_one_none() -> None:
    built = chains()
    assert set(built) == KNOWN
    assert max(KNOWN) + 1 not in built
    assert built[ApiKeys.LIST_GROUPS] == Chain()  # opaque both ways


def test_a_chain_calls_only_the_hooks_its_filters_have() -> None:
    fetch = chains()[ApiKeys.FETCH]
    assert [type(f) for f in fetch.request] == [FetchQuota]
    assert [type(f) for f in fetch.response] == [FetchQuota, RewriteAddresses]
    assert [type(f) for f in fetch.throttled] == [FetchQuota]
    metadata = chains()[ApiKeys.METADATA]
    assert (metadata.request, metadata.throttled) == ((), ())


def test_one_instance_of_each_filter_serves_every_api() -> None:
    built = chains()
    rewriters = {
        id(f)
        for chain in built.values()
        for f in chain.response
        if isinstance(f, RewriteAddresses)
    }
    assert len(rewriters) == 1


def test_the_base_filter_passes_everything_on() -> None:
    services: Any = object()
    base = Filter(services)
    exchange: Any = object()
    body = memoryview(b"body")
    assert base.on_request(exchange) is CONTINUE
    assert base.on_response(exchange, body) is body
    assert base.on_throttled(exchange, body, 100) is None


# ---- what the gateway answers itself is derived from the table --------------------------

SETUPS = [
    LocalAnswerSettings(answers_acls=acls, answers_scram=scram)
    for acls in (False, True)
    for scram in (False, True)
]


@pytest.mark.parametrize("setup", SETUPS)
def test_the_answered_here_list_is_the_chains(setup: LocalAnswerSettings) -> None:
    built = build_chains(cast(Any, setup))
    assert answered_here(setup) == {key for key, c in built.items() if c.answered_here}
    expected = {
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        ApiKeys.PUSH_TELEMETRY,
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        ApiKeys.ALTER_CLIENT_QUOTAS,
        ApiKeys.DESCRIBE_CONFIGS,
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        ApiKeys.LIST_CONFIG_RESOURCES,
    }
    if setup.answers_acls:
        expected |= {ApiKeys.DESCRIBE_ACLS, ApiKeys.CREATE_ACLS, ApiKeys.DELETE_ACLS}
    if setup.answers_scram:
        expected |= {
            ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS,
            ApiKeys.ALTER_USER_SCRAM_CREDENTIALS,
        }
    assert answered_here(setup) == expected


def test_the_answered_here_list_follows_the_table() -> None:
    setup = LocalAnswerSettings()
    without = {k: v for k, v in FILTERS.items() if k != ApiKeys.PUSH_TELEMETRY}
    assert answered_here(setup, without) == answered_here(setup) - {
        ApiKeys.PUSH_TELEMETRY
    }
    added: dict[int, tuple[type[Filter], ...]] = {
        **FILTERS,
        ApiKeys.LIST_GROUPS: (AnswerHere,),
    }
    assert answered_here(setup, added) == answered_here(setup) | {ApiKeys.LIST_GROUPS}
    built = build_chains(cast(Any, setup), added)
    assert built[ApiKeys.LIST_GROUPS].answered_here
    # A filter that only watches (no answer here) adds nothing.
    watched: dict[int, tuple[type[Filter], ...]] = {
        **FILTERS,
        ApiKeys.LIST_GROUPS: (RewriteAddresses,),
    }
    assert answered_here(setup, watched) == answered_here(setup)


@pytest.mark.parametrize("setup", SETUPS)
def test_every_api_answered_here_has_a_filter_that_answers_it(
    setup: LocalAnswerSettings,
) -> None:
    built = build_chains(cast(Any, setup))
    for key in answered_here(setup):
        answering = [f for f in built[key].request if f.answers_here(setup)]
        assert answering, f"{ApiKeys(key).name}: no request filter answers it here"
        # What it answers with is the node's dispatcher, which serves exactly this list;
        # the versions it adds to ApiVersions are the node's.
        assert key in SUPPORTED_VERSIONS


def test_the_gateway_answers_and_advertises_exactly_the_derived_list() -> None:
    setup = LocalAnswerSettings(answers_acls=True)
    gateway = Gateway(
        dispatcher=cast(Any, None),
        quotas=cast(Any, None),
        admin=cast(Any, None),
        open_upstream=cast(Any, None),
        discover=cast(Any, None),
        clock=FakeClock(0),
        authentication=AuthenticationPolicy(
            upstream_security_protocol="PLAINTEXT", require_when_unknown=True
        ),
        answers_acls=setup.answers_acls,
        answers_scram=setup.answers_scram,
    )
    assert gateway.answered_here == answered_here(setup)
    assert {k for k, c in gateway.chains.items() if c.answered_here} == set(
        gateway.answered_here
    )
    services = gateway.chains[ApiKeys.API_VERSIONS].response[0].services
    assert set(services.local_api_versions) == gateway.answered_here
