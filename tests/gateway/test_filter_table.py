"""The gateway's filter table (collector/gateway/filters/__init__.py) agrees with what the
filters' wire helpers know, so adding an API touches the table and one filter and cannot
half-succeed: an API whose responses can carry broker addresses is rewritten, every API the
gateway answers itself is answered by the node, and an API Kafka does not know has no chain (the
connection closes)."""

from __future__ import annotations

from typing import Any

from collector.gateway.addresses import SCANNERS
from collector.gateway.filters import FILTERS, build_chains
from collector.gateway.filters.answer_here import AnswerAcls, AnswerHere, AnswerScram
from collector.gateway.filters.base import CONTINUE, Chain, Filter
from collector.gateway.filters.quota import FetchQuota
from collector.gateway.filters.rewrite_addresses import RewriteAddresses
from proto import ApiKeys
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
