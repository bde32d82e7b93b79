"""The gateway's filters and the table that says which run for which API.

:data:`FILTERS` is the one place an API's handling at the gateway is decided: its filters,
in the order they run (``base.py`` says what a filter is).  An API that Kafka 4.4 knows and
the table does not name is forwarded as opaque bytes both ways (with the request-time quota
every forwarded request gets); an API Kafka does not know closes the connection, as a broker
does.

| API | filters |
|---|---|
| GetTelemetrySubscriptions, PushTelemetry | AnswerHere (telemetry ends here) |
| DescribeClientQuotas, AlterClientQuotas | AnswerHere (the gateway's quotas) |
| ApiVersions | CapApiVersions |
| Metadata, DescribeCluster | LearnCluster, RewriteAddresses |
| FindCoordinator, DescribeQuorum, ShareFetch, ShareAcknowledge | RewriteAddresses |
| Produce | ProduceQuota, RewriteAddresses |
| Fetch | FetchQuota, RewriteAddresses |
| CreateTopics, CreatePartitions, DeleteTopics | MutationQuota |
| SaslHandshake, SaslAuthenticate | ObserveSasl |
| DescribeConfigs, IncrementalAlterConfigs, ListConfigResources | SplitClientMetrics |
| DescribeAcls, CreateAcls, DeleteAcls | AnswerAcls (here when the gateway has an authorizer) |
| DescribeUserScramCredentials, AlterUserScramCredentials | AnswerScram (here when the gateway has SASL listeners) |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from collector.gateway.filters.answer_here import AnswerAcls, AnswerHere, AnswerScram
from collector.gateway.filters.base import (
    Chain,
    Filter,
    GatewayServices,
    LocalAnswers,
)
from collector.gateway.filters.cap_api_versions import CapApiVersions
from collector.gateway.filters.learn_cluster import LearnCluster
from collector.gateway.filters.observe_sasl import ObserveSasl
from collector.gateway.filters.record_quotas import (
    FetchQuota,
    MutationQuota,
    ProduceQuota,
)
from collector.gateway.filters.rewrite_addresses import RewriteAddresses
from collector.gateway.filters.split_client_metrics import SplitClientMetrics
from proto import ApiKeys
from proto.api_table import API_TABLE

__all__ = ["FILTERS", "FilterTable", "answered_here", "build_chains"]

# api key -> its filters, in the order they run.
FilterTable = Mapping[int, tuple[type[Filter], ...]]

FILTERS: Final[FilterTable] = {
    ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS: (AnswerHere,),
    ApiKeys.PUSH_TELEMETRY: (AnswerHere,),
    ApiKeys.DESCRIBE_CLIENT_QUOTAS: (AnswerHere,),
    ApiKeys.ALTER_CLIENT_QUOTAS: (AnswerHere,),
    ApiKeys.API_VERSIONS: (CapApiVersions,),
    ApiKeys.METADATA: (LearnCluster, RewriteAddresses),
    ApiKeys.FIND_COORDINATOR: (RewriteAddresses,),
    ApiKeys.DESCRIBE_CLUSTER: (LearnCluster, RewriteAddresses),
    ApiKeys.DESCRIBE_QUORUM: (RewriteAddresses,),
    ApiKeys.SHARE_FETCH: (RewriteAddresses,),
    ApiKeys.SHARE_ACKNOWLEDGE: (RewriteAddresses,),
    ApiKeys.PRODUCE: (ProduceQuota, RewriteAddresses),
    ApiKeys.FETCH: (FetchQuota, RewriteAddresses),
    ApiKeys.CREATE_TOPICS: (MutationQuota,),
    ApiKeys.CREATE_PARTITIONS: (MutationQuota,),
    ApiKeys.DELETE_TOPICS: (MutationQuota,),
    ApiKeys.SASL_HANDSHAKE: (ObserveSasl,),
    ApiKeys.SASL_AUTHENTICATE: (ObserveSasl,),
    ApiKeys.DESCRIBE_CONFIGS: (SplitClientMetrics,),
    ApiKeys.INCREMENTAL_ALTER_CONFIGS: (SplitClientMetrics,),
    ApiKeys.LIST_CONFIG_RESOURCES: (SplitClientMetrics,),
    ApiKeys.DESCRIBE_ACLS: (AnswerAcls,),
    ApiKeys.CREATE_ACLS: (AnswerAcls,),
    ApiKeys.DELETE_ACLS: (AnswerAcls,),
    ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS: (AnswerScram,),
    ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: (AnswerScram,),
}


def answered_here(
    answers: LocalAnswers, table: FilterTable = FILTERS
) -> frozenset[int]:
    """The APIs the gateway answers itself, at least in part: those with a filter in
    ``table`` that answers here on a gateway that answers ``answers``.  The gateway adds
    their versions to ApiVersions, its dispatcher serves exactly them, and a client that has
    not authenticated is refused them where authentication is required."""
    return frozenset(
        key
        for key, kinds in table.items()
        if any(kind.answers_here(answers) for kind in kinds)
    )


def build_chains(
    services: GatewayServices, table: FilterTable = FILTERS
) -> dict[int, Chain]:
    """Every API the gateway accepts -> its chain: one instance of each filter, shared by
    every API and connection of this gateway."""
    instances: dict[type[Filter], Filter] = {}

    def made(kind: type[Filter]) -> Filter:
        if kind not in instances:
            instances[kind] = kind(services)
        return instances[kind]

    known = {key for key, info in API_TABLE.items() if info.min_version is not None}
    return {
        key: Chain.of(tuple(made(kind) for kind in table.get(key, ())), services)
        for key in sorted(known | set(table))
    }
