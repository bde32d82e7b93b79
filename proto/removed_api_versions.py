"""The request versions Apache Kafka 4 no longer accepts, as data: what an upgrade to 4.x
breaks for a client that still sends them (``ktc_client_removed_api_versions_total``,
docs/prometheus.md).

Source: Apache Kafka's own message specs, release 4.4.0 (``"validVersions"`` of each
``*Request.json``; vendored whole as ``proto/specs/apis/kafka-clients-4.4.0.json``, the
source of ``proto.api_table``): every version below an API's lowest valid one is gone.
The removals are KIP-896's ("Remove old client protocol API versions in Kafka 4.0",
https://cwiki.apache.org/confluence/display/KAFKA/KIP-896%3A+Remove+old+client+protocol+API+versions+in+Kafka+4.0),
shipped in Kafka 4.0, except the share-group APIs' v0 (KIP-932's early-access version,
dropped in 4.1).  ``tests/proto/test_removed_api_versions.py`` checks this table against
the specs, both ways.  APIs removed whole (the ZooKeeper-era inter-broker LeaderAndIsr,
StopReplica, UpdateMetadata, ControlledShutdown) are not here: a request naming one is an
unknown API to a 4.x broker and to the collector, and its connection closes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from proto.api_keys import ApiKeys

__all__ = ["LOWEST_ACCEPTED", "REMOVED_BY", "is_removed"]

# api key -> the lowest version Kafka 4.x accepts (every version below it is removed).
LOWEST_ACCEPTED: Final[Mapping[int, int]] = {
    ApiKeys.PRODUCE: 3,  # v0-2
    ApiKeys.FETCH: 4,  # v0-3
    ApiKeys.LIST_OFFSETS: 1,  # v0
    ApiKeys.OFFSET_COMMIT: 2,  # v0-1
    ApiKeys.OFFSET_FETCH: 1,  # v0
    ApiKeys.CREATE_TOPICS: 2,  # v0-1
    ApiKeys.DELETE_TOPICS: 1,  # v0
    ApiKeys.OFFSET_FOR_LEADER_EPOCH: 2,  # v0-1
    ApiKeys.WRITE_TXN_MARKERS: 1,  # v0 (inter-broker)
    ApiKeys.DESCRIBE_ACLS: 1,  # v0
    ApiKeys.CREATE_ACLS: 1,  # v0
    ApiKeys.DELETE_ACLS: 1,  # v0
    ApiKeys.DESCRIBE_CONFIGS: 1,  # v0
    ApiKeys.ALTER_REPLICA_LOG_DIRS: 1,  # v0
    ApiKeys.DESCRIBE_LOG_DIRS: 1,  # v0
    ApiKeys.CREATE_DELEGATION_TOKEN: 1,  # v0
    ApiKeys.RENEW_DELEGATION_TOKEN: 1,  # v0
    ApiKeys.EXPIRE_DELEGATION_TOKEN: 1,  # v0
    ApiKeys.DESCRIBE_DELEGATION_TOKEN: 1,  # v0
    ApiKeys.ALTER_PARTITION: 2,  # v0-1 (controller)
    ApiKeys.SHARE_GROUP_HEARTBEAT: 1,  # v0 (KIP-932 early access, 4.1)
    ApiKeys.SHARE_GROUP_DESCRIBE: 1,  # v0 (KIP-932 early access, 4.1)
    ApiKeys.SHARE_FETCH: 1,  # v0 (KIP-932 early access, 4.1)
    ApiKeys.SHARE_ACKNOWLEDGE: 1,  # v0 (KIP-932 early access, 4.1)
}

# api key -> what removed its old versions (the rest: KIP-896, Kafka 4.0).
REMOVED_BY: Final[Mapping[int, str]] = {
    ApiKeys.SHARE_GROUP_HEARTBEAT: "KIP-932",
    ApiKeys.SHARE_GROUP_DESCRIBE: "KIP-932",
    ApiKeys.SHARE_FETCH: "KIP-932",
    ApiKeys.SHARE_ACKNOWLEDGE: "KIP-932",
}


def is_removed(api_key: int, version: int) -> bool:
    """Whether Kafka 4.x refuses ``version`` of ``api_key`` as too old."""
    return version < LOWEST_ACCEPTED.get(api_key, 0)
