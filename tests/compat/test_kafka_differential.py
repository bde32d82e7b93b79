"""Apache Kafka 4.4.0 and `ktc serve`, asked the same questions, must give the same answers.

One Kafka 4.4.0 KRaft node (client telemetry on through a no-op Java plugin) and the
collector run side by side for the session (conftest.py). Each case below writes the same
request frame to both and compares every field of both answers (tests/compat/differential.py):
error codes, messages, throttle times, versions, every entry. Node ids, addresses and cluster
ids are normalised; nothing else is. Where an answer depends on time, the test controls it:
client instance ids are chosen by the test, and a request meant to arrive "too soon" follows
its predecessor by a few milliseconds while one meant to be "on time" waits past the interval.
Kafka applies admin changes asynchronously (through its metadata log), so after a change the
test waits until Kafka's own DescribeConfigs/DescribeAcls shows it before comparing what
depends on it.

A difference fails the test unless :data:`KNOWN_DIFFERENCES` names it; each entry there
carries its reason and the document that states it. The session's summary lists every
API/version compared with its count of compared fields, and this table.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import os
import re
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import cramjam
import pytest

from proto import SUPPORTED_VERSIONS, ApiKeys, CompressionType, compress
from proto.errors import Errors
from proto.messages import (
    AlterClientQuotasRequest,
    AlterUserScramCredentialsRequest,
    ApiVersionsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeConfigsRequest,
    DescribeUserScramCredentialsRequest,
    GetTelemetrySubscriptionsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
    MetadataRequest,
    PushTelemetryRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from proto.messages.alter_client_quotas_request import EntityData, EntryData, OpData
from proto.messages.alter_user_scram_credentials_request import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from proto.messages.create_acls_request import AclCreation
from proto.messages.delete_acls_request import DeleteAclsFilter
from proto.messages.describe_client_quotas_request import ComponentData
from proto.messages.describe_configs_request import DescribeConfigsResource
from proto.messages.describe_user_scram_credentials_request import UserName
from proto.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from proto.messages.metadata_request import MetadataRequestTopic
from tests.collector.collector_testkit import otlp_payload
from tests.compat.differential import CLOSED, KnownDifference, Pair, Report, Servers

pytestmark = [pytest.mark.compat, pytest.mark.timeout(300)]

CLIENT_METRICS = 16
TOPIC = 2
SET, DELETE = 0, 1
ONE_MIB = 1 << 20

# What the collector serves, every version of it (proto.SUPPORTED_VERSIONS).
SERVED = dict(SUPPORTED_VERSIONS)


def _features_only(kafka: Any, mine: Any) -> bool:
    return True


KNOWN_DIFFERENCES: tuple[KnownDifference, ...] = (
    KnownDifference(
        "apis-listed",
        ApiKeys.API_VERSIONS,
        "",
        ".api_keys (entries only Kafka lists)",
        "The collector lists only the APIs it answers (telemetry, CLIENT_METRICS configs, "
        "quotas, ACLs, SCRAM, SASL, Metadata); Kafka lists every broker API. The ranges of "
        "the APIs both list are compared.",
        "docs/protocol.md#deliberate-differences",
    ),
    KnownDifference(
        "features",
        ApiKeys.API_VERSIONS,
        "",
        ".supported_features",
        "Feature flags (metadata.version, group.version, transaction.version, ...) describe a "
        "broker's metadata log, groups and transactions, none of which the collector has.",
        "docs/protocol.md#deliberate-differences",
    ),
    KnownDifference(
        "finalized-features",
        ApiKeys.API_VERSIONS,
        "",
        ".finalized_features",
        "As above: no finalized features, epoch -1.",
        "docs/protocol.md#deliberate-differences",
    ),
    KnownDifference(
        "sasl-handshake-v0",
        ApiKeys.API_VERSIONS,
        "",
        ".api_keys[SaslHandshake].min_version",
        "SaslHandshake v0 is followed by SASL tokens without Kafka framing; clients since "
        "Kafka 1.0 and librdkafka use v1 (SaslAuthenticate), which the collector serves.",
        "docs/protocol.md#deliberate-differences",
    ),
    KnownDifference(
        "cluster-acls-only",
        ApiKeys.CREATE_ACLS,
        "non-cluster resources",
        ".results",
        "The collector's authorizer guards its admin APIs, all on the CLUSTER resource; an "
        "ACL for a topic, group or other resource it has none of is refused "
        "(INVALID_REQUEST) rather than stored and never consulted.",
        "docs/protocol.md#deliberate-differences",
    ),
    KnownDifference(
        "otlp-validated",
        ApiKeys.PUSH_TELEMETRY,
        "not otlp",
        ".error_code",
        "The collector is the broker's exporter plugin too: it parses every push as OTLP "
        "MetricsData and refuses one that is not with INVALID_RECORD, what Kafka answers when "
        "its plugin throws. The reference broker's plugin here exports nothing and parses "
        "nothing.",
        "docs/protocol.md#deliberate-differences",
    ),
    KnownDifference(
        "inflated-push",
        ApiKeys.PUSH_TELEMETRY,
        "bomb",
        ".error_code",
        "A payload that inflates past telemetry.max.bytes answers TELEMETRY_TOO_LARGE (118), "
        "as Kafka trunk does since KAFKA-21076.",
        "docs/protocol.md#deliberate-differences",
    ),
    KnownDifference(
        "oversized-push-frame",
        ApiKeys.PUSH_TELEMETRY,
        "oversized frame",
        "",
        "A PushTelemetry frame larger than telemetry.max.bytes plus its fixed fields closes "
        "the connection before its body is read, so memory stays bounded; Kafka reads up to "
        "socket.request.max.bytes and answers TELEMETRY_TOO_LARGE.",
        "docs/protocol.md#deliberate-differences",
    ),
)


# The session's report, for adjustments that count a known difference they take out.
_SESSION_REPORT: list[Report] = [Report()]


@pytest.fixture(scope="module")
def report(servers: Servers) -> Report:
    servers.report.known = KNOWN_DIFFERENCES
    _SESSION_REPORT[0] = servers.report
    return servers.report


@pytest.fixture
def checked(report: Report) -> Iterator[Report]:
    """Fails the test on a difference it produced that is not in KNOWN_DIFFERENCES."""
    before = len(report.differences)
    yield report
    new = report.differences[before:]
    assert not new, "differences from Apache Kafka 4.4.0:\n" + "\n".join(
        d.line() for d in new
    )


def _rules(servers: Servers) -> dict[str, Callable[[Any], Any]]:
    ids = {servers.kafka_cluster_id, servers.collector_cluster_id}
    return {
        "port": lambda _: "<port>",
        "cluster_id": lambda value: "<cluster id>" if value in ids else value,
        "finalized_features_epoch": lambda value: "<epoch>" if value >= 0 else value,
        "error_message": _request_string,
    }


def _request_string(message: Any) -> Any:
    """An ACL API's denial names Kafka's request object (processor, connection id, the
    session's Java object identity): the words around it are compared, not the object."""
    if not isinstance(message, str):
        return message
    return re.sub(
        r"^Request Request\(.*\) (needs \w+ permission\.|is not authorized\.)$",
        r"Request <the request> \1",
        message,
        flags=re.S,
    )


def pair(
    servers: Servers, report: Report, listener: str = "PLAINTEXT", **kwargs: Any
) -> Pair:
    return Pair(
        report,
        servers.kafka[listener],
        servers.collector[listener],
        rules=_rules(servers),
        **kwargs,
    )


# ---------------------------------------------------------------- ApiVersions


def _served_only(kafka: Any, mine: Any) -> tuple[Any, Any]:
    """Kafka's entries for the APIs the collector lists (the rest: known "apis-listed"),
    SaslHandshake's from v1 (known "sasl-handshake-v0"); each counted in the report."""
    mine_keys = {entry.api_key for entry in mine.api_keys}
    kept = tuple(entry for entry in kafka.api_keys if entry.api_key in mine_keys)
    if len(kept) != len(kafka.api_keys):
        _SESSION_REPORT[0].known_hits["apis-listed"] += 1
        kafka = dataclasses.replace(kafka, api_keys=kept)
    handshake = ApiKeys.SASL_HANDSHAKE
    if any(e.api_key == handshake and e.min_version == 0 for e in kafka.api_keys):
        _SESSION_REPORT[0].known_hits["sasl-handshake-v0"] += 1
        kafka = dataclasses.replace(
            kafka,
            api_keys=tuple(
                dataclasses.replace(e, min_version=1) if e.api_key == handshake else e
                for e in kafka.api_keys
            ),
        )
    return kafka, mine


def test_api_versions_every_version(servers: Servers, checked: Report) -> None:
    low, high = SERVED[ApiKeys.API_VERSIONS]
    for version in range(low, high + 1):
        for name, software_version in (("ktc-compat", "1.0"), ("-bad", "1")):
            with pair(servers, checked) as p:
                kafka, mine = p.exchange(
                    ApiKeys.API_VERSIONS,
                    version,
                    ApiVersionsRequest(name, software_version),
                    case=f"software {name}",
                    adjust=_served_only,
                )
                assert kafka is not CLOSED
    # A version newer than any: v0 UNSUPPORTED_VERSION listing the ApiVersions range.
    with pair(servers, checked) as p:
        frame = bytearray(
            _frame(ApiKeys.API_VERSIONS, 3, ApiVersionsRequest("ktc-compat", "1"))
        )
        struct.pack_into(">h", frame, 6, 99)
        kafka, mine = p.exchange(
            ApiKeys.API_VERSIONS, 0, None, case="unknown version", frame=bytes(frame)
        )
        assert kafka.error_code == Errors.UNSUPPORTED_VERSION


def _frame(api_key: int, version: int, message: Any, correlation_id: int = 7) -> bytes:
    from proto import encode_request

    return encode_request(api_key, version, correlation_id, "ktc-compat", message)


def test_api_versions_v5_cluster_and_node_checks(
    servers: Servers, checked: Report
) -> None:
    """KIP-1242: ClusterId and NodeId both or neither; another cluster or node answers
    REBOOTSTRAP_REQUIRED."""
    wrong = "AAAAAAAAAAAAAAAAAAAAAA"
    same_frames = [
        (None, -1),
        (None, 1),
        (None, -2),
        (wrong, -1),
        ("", -1),
        (wrong, 1),
        ("", 1),
        (wrong, -2),
    ]
    for cluster_id, node_id in same_frames:
        with pair(servers, checked) as p:
            p.exchange(
                ApiKeys.API_VERSIONS,
                5,
                ApiVersionsRequest("ktc-compat", "1", cluster_id, node_id),
                case=f"cluster {cluster_id} node {node_id}",
                adjust=_served_only,
            )
    # Each server's own cluster id, with its own node id and another.
    for node_delta in (0, 1):
        with pair(servers, checked) as p:
            p.exchange_each(
                ApiKeys.API_VERSIONS,
                5,
                (
                    ApiVersionsRequest(
                        "ktc-compat",
                        "1",
                        servers.kafka_cluster_id,
                        servers.kafka_node_id + node_delta,
                    ),
                    ApiVersionsRequest(
                        "ktc-compat",
                        "1",
                        servers.collector_cluster_id,
                        servers.collector_node_id + node_delta,
                    ),
                ),
                case=f"own cluster, node +{node_delta}",
                adjust=_served_only,
            )


# ---------------------------------------------------------------- Metadata


def test_metadata_every_version_and_unhosted_topics(
    servers: Servers, checked: Report
) -> None:
    low, high = SERVED[ApiKeys.METADATA]
    for version in range(low, high + 1):
        requests: list[tuple[str, MetadataRequest]] = [
            ("no topics", MetadataRequest(topics=())),
        ]
        # Kafka answers the names in java.util.HashSet order, a name asked twice once.
        for case, names in (
            ("unhosted topics", ("orders", "bad name!", "a" * 250, "a" * 249)),
            ("illegal names", (".", "", "..", "white space")),
            ("a name twice", ("orders", "orders", "payments")),
        ):
            requests.append(
                (
                    case,
                    MetadataRequest(
                        topics=tuple(MetadataRequestTopic(name=name) for name in names),
                        # v0-3 cannot say "don't create" (their default, true, is implied)
                        allow_auto_topic_creation=version < 4,
                    ),
                )
            )
        requests.append(
            (
                "five unhosted topics",
                MetadataRequest(
                    topics=tuple(
                        MetadataRequestTopic(name=f"topic-{i}") for i in range(5)
                    ),
                    allow_auto_topic_creation=version < 4,
                ),
            )
        )
        if version >= 1:
            requests.append(("all topics", MetadataRequest(topics=None)))
        if version >= 4:
            requests.append(
                (
                    "auto-create asked",
                    MetadataRequest(
                        topics=(MetadataRequestTopic(name="orders"),),
                        allow_auto_topic_creation=True,
                    ),
                )
            )
        if version >= 8 and version <= 10:
            requests.append(
                (
                    "authorized operations",
                    MetadataRequest(
                        topics=(MetadataRequestTopic(name="orders"),),
                        include_cluster_authorized_operations=True,
                        include_topic_authorized_operations=True,
                    ),
                )
            )
        elif version >= 8:
            requests.append(
                (
                    "authorized operations",
                    MetadataRequest(
                        topics=(MetadataRequestTopic(name="orders"),),
                        include_topic_authorized_operations=True,
                    ),
                )
            )
        if version >= 10:
            requests.append(
                (
                    "topic id",
                    MetadataRequest(
                        topics=(
                            MetadataRequestTopic(
                                topic_id=uuid.UUID(int=12345), name=None
                            ),
                        )
                    ),
                )
            )
        for case, request in requests:
            with pair(servers, checked) as p:
                if version == 0 and request.topics is None:
                    continue
                p.exchange(
                    ApiKeys.METADATA,
                    version,
                    request,
                    case=case,
                )


# ---------------------------------------------------------------- CLIENT_METRICS configs


def _alter(
    name: str,
    configs: list[tuple[str, int, str | None]],
    validate_only: bool = False,
    resource_type: int = CLIENT_METRICS,
) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type,
                name,
                tuple(AlterableConfig(key, op, value) for key, op, value in configs),
            ),
        ),
        validate_only=validate_only,
    )


def _describe(
    *names: str,
    keys: tuple[str, ...] | None = None,
    resource_type: int = CLIENT_METRICS,
) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(
        resources=tuple(
            DescribeConfigsResource(resource_type, name, keys) for name in names
        )
    )


def _kafka_describe(p: Pair, name: str) -> dict[str, str | None]:
    """Kafka's current configs of a subscription (read without comparing)."""
    from proto import decode_response, encode_request

    p.kafka.send(
        encode_request(ApiKeys.DESCRIBE_CONFIGS, 4, 1, "ktc-compat", _describe(name))
    )
    payload = p.kafka.receive()
    assert payload is not None
    result = decode_response(ApiKeys.DESCRIBE_CONFIGS, 4, payload).message.results[0]
    return {c.name: c.value for c in result.configs if c.config_source == 7}


def _wait_kafka_configs(p: Pair, name: str, expected: dict[str, str]) -> None:
    """Kafka applies an alteration through its metadata log: wait until it shows (the
    keys set; Kafka stores a LIST value normalised, so values are compared only where the
    caller's are in that form already)."""
    deadline = time.monotonic() + 10
    while True:
        shown = _kafka_describe(p, name)
        if set(shown) == set(expected) and all(
            shown[k] == v
            for k, v in expected.items()
            if "," not in v and v.strip() == v
        ):
            return
        assert time.monotonic() < deadline, f"Kafka never showed {name}={expected}"
        time.sleep(0.01)


# (case, configs, validate_only): each applied to a fresh subscription name.
ALTERATIONS: list[tuple[str, list[tuple[str, int, str | None]]]] = [
    (
        "valid all keys",
        [
            ("metrics", SET, "org.apache.kafka.producer."),
            ("interval.ms", SET, "1000"),
            ("match", SET, "client_id=nobody-.*"),
        ],
    ),
    (
        "duplicate metrics",
        [("metrics", SET, "a,a"), ("match", SET, "client_id=nobody")],
    ),
    ("duplicate match", [("match", SET, "client_id=a,client_id=a")]),
    (
        "duplicates with spaces",
        [("metrics", SET, " a, b ,a"), ("match", SET, " client_id = x ,client_id = x")],
    ),
    (
        "list with spaces",
        [("metrics", SET, "a, b"), ("match", SET, "client_id=nobody")],
    ),
    ("empty metric", [("metrics", SET, "a,,b")]),
    ("trailing comma", [("metrics", SET, "a,")]),
    ("all metrics", [("metrics", SET, "*"), ("match", SET, "client_id=nobody")]),
    ("interval low", [("interval.ms", SET, "99")]),
    ("interval min", [("interval.ms", SET, "100"), ("match", SET, "client_id=nobody")]),
    (
        "interval max",
        [("interval.ms", SET, "3600000"), ("match", SET, "client_id=nobody")],
    ),
    ("interval high", [("interval.ms", SET, "3600001")]),
    ("interval not int", [("interval.ms", SET, "1e3")]),
    ("interval overflow", [("interval.ms", SET, "2147483648")]),
    ("interval blank", [("interval.ms", SET, "")]),
    ("unknown key", [("color", SET, "blue")]),
    ("null value", [("metrics", SET, None)]),
    ("append", [("metrics", 2, "a")]),
    ("subtract", [("metrics", 3, "a")]),
    ("unknown op", [("metrics", 9, "a")]),
    ("delete absent", [("metrics", DELETE, None)]),
    ("bad selector", [("match", SET, "colour=red")]),
    ("selector without value", [("match", SET, "client_id=")]),
    ("bad regex", [("match", SET, "client_id=[")]),
    (
        "every selector",
        [
            (
                "match",
                SET,
                "client_instance_id=x,client_id=y,client_software_name=z,client_software_version=1,client_source_address=127.0.0.1,client_source_port=1",
            )
        ],
    ),
    ("duplicate key", [("metrics", SET, "a"), ("metrics", SET, "b")]),
    (
        "value at the length limit",
        [("metrics", SET, "m" * 32767), ("match", SET, "client_id=nobody")],
    ),
    (
        "interval with spaces",
        [("interval.ms", SET, " 1000 "), ("match", SET, "client_id=nobody")],
    ),
]


@pytest.mark.parametrize(
    "validate_only", [True, False], ids=["validate-only", "applied"]
)
def test_incremental_alter_configs_client_metrics(
    servers: Servers, checked: Report, validate_only: bool
) -> None:
    tag = "v" if validate_only else "a"
    with pair(servers, checked) as p:
        for index, (case, configs) in enumerate(ALTERATIONS):
            name = f"iac-{tag}-{index}"
            for version in (0, 1):
                kafka, _ = p.exchange(
                    ApiKeys.INCREMENTAL_ALTER_CONFIGS,
                    version,
                    _alter(name if version else f"{name}-v0", configs, validate_only),
                    case=case,
                )
            if validate_only or kafka.responses[0].error_code:
                continue
            expected = {k: v for k, op, v in configs if op == SET and v is not None}
            _wait_kafka_configs(p, name, expected)
            for version in (1, 2, 3, 4):
                p.exchange(
                    ApiKeys.DESCRIBE_CONFIGS,
                    version,
                    _describe(name),
                    case=f"after {case}",
                )
            # Remove it again: a subscription matching every client would leak into the
            # telemetry cases.
            p.exchange(
                ApiKeys.INCREMENTAL_ALTER_CONFIGS,
                1,
                _alter(name, [(k, DELETE, None) for k in expected]),
                case=f"delete after {case}",
            )
        # Names: empty, and resources that are not CLIENT_METRICS.
        for version in (0, 1):
            p.exchange(
                ApiKeys.INCREMENTAL_ALTER_CONFIGS,
                version,
                _alter("", [("metrics", SET, "a")], validate_only),
                case="empty name",
            )
            p.exchange(
                ApiKeys.INCREMENTAL_ALTER_CONFIGS,
                version,
                _alter(
                    "orders", [("cleanup.policy", SET, "compact")], validate_only, TOPIC
                ),
                case="unhosted topic",
            )


def test_describe_configs_and_list_config_resources(
    servers: Servers, checked: Report
) -> None:
    with pair(servers, checked) as p:
        name = "describe-me"
        configs = {
            "metrics": "org.apache.kafka.",
            "interval.ms": "2000",
            "match": "client_id=nobody",
        }
        p.exchange(
            ApiKeys.INCREMENTAL_ALTER_CONFIGS,
            1,
            _alter(name, [(k, SET, v) for k, v in configs.items()]),
            case="create",
        )
        _wait_kafka_configs(p, name, configs)
        cases = [
            ("one", _describe(name)),
            ("absent", _describe("never-made")),
            ("empty name", _describe("")),
            ("some keys", _describe(name, keys=("metrics", "match"))),
            ("unknown key", _describe(name, keys=("colour",))),
            ("no keys", _describe(name, keys=())),
            ("two", _describe(name, "never-made")),
            ("unhosted topic", _describe("orders", resource_type=TOPIC)),
            (
                "synonyms and docs",
                dataclasses.replace(
                    _describe(name), include_synonyms=True, include_documentation=True
                ),
            ),
        ]
        low, high = SERVED[ApiKeys.DESCRIBE_CONFIGS]
        for case, request in cases:
            for version in range(low, high + 1):
                if version < 3 and request.include_documentation:
                    request = dataclasses.replace(request, include_documentation=False)
                p.exchange(ApiKeys.DESCRIBE_CONFIGS, version, request, case=case)
        for version in (0, 1):
            for case, types in (
                ("client metrics", (CLIENT_METRICS,)),
                ("topics", (TOPIC,)),
                ("unknown type", (99,)),
            ) + ((("all", ()),) if version == 0 else ()):
                if version == 0 and types != ():
                    continue
                p.exchange(
                    ApiKeys.LIST_CONFIG_RESOURCES,
                    version,
                    ListConfigResourcesRequest(resource_types=types),
                    case=case,
                    adjust=_sorted_resources,
                )
        p.exchange(
            ApiKeys.INCREMENTAL_ALTER_CONFIGS,
            1,
            _alter(name, [(k, DELETE, None) for k in configs]),
            case="delete",
        )


def _sorted_resources(kafka: Any, mine: Any) -> tuple[Any, Any]:
    """ListConfigResources lists in no defined order (Kafka: hash order)."""

    def key(r: Any) -> tuple[int, str]:
        return (r.resource_type, r.resource_name)

    return (
        dataclasses.replace(
            kafka, config_resources=tuple(sorted(kafka.config_resources, key=key))
        ),
        dataclasses.replace(
            mine, config_resources=tuple(sorted(mine.config_resources, key=key))
        ),
    )


# ---------------------------------------------------------------- telemetry


def _subscribe(p: Pair, name: str, configs: dict[str, str]) -> None:
    kafka, _ = p.exchange(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        1,
        _alter(name, [(k, SET, v) for k, v in configs.items()]),
        case=f"subscribe {name}",
    )
    assert kafka.responses[0].error_code == 0, kafka
    _wait_kafka_configs(p, name, configs)
    _settle_telemetry(p)


def _unsubscribe(p: Pair, name: str, keys: tuple[str, ...]) -> None:
    p.exchange(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        1,
        _alter(name, [(k, DELETE, None) for k in keys]),
        case=f"unsubscribe {name}",
    )
    _wait_kafka_configs(p, name, {})
    _settle_telemetry(p)


def _get(p: Pair, instance: uuid.UUID, case: str) -> Any:
    kafka, mine = p.exchange(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        GetTelemetrySubscriptionsRequest(client_instance_id=instance),
        case=case,
    )
    return kafka


def _push(
    p: Pair,
    instance: uuid.UUID,
    subscription_id: int,
    case: str,
    *,
    compression: int = 0,
    metrics: bytes | None = None,
    terminating: bool = False,
) -> Any:
    kafka, _ = p.exchange(
        ApiKeys.PUSH_TELEMETRY,
        0,
        PushTelemetryRequest(
            client_instance_id=instance,
            subscription_id=subscription_id,
            terminating=terminating,
            compression_type=compression,
            metrics=otlp_payload("org.apache.kafka.producer.x")
            if metrics is None
            else metrics,
        ),
        case=case,
    )
    return kafka


def _wait_past(interval_ms: int) -> None:
    # Kafka's push-interval gate runs on its own clock: let a real interval pass.
    time.sleep(interval_ms / 1000 * 1.5)


# Long enough that a request meant to be "too soon" still is on a loaded machine (the two
# servers answer one after the other), short enough to keep the ladder's waits small.
LADDER_INTERVAL_MS = 500


def test_telemetry_ladder(servers: Servers, checked: Report) -> None:
    name = "ladder"
    configs = {
        "metrics": "org.apache.kafka.producer.",
        "interval.ms": str(LADDER_INTERVAL_MS),
        "match": "client_id=ladder-.*",
    }
    with pair(servers, checked, client_id="ladder-1") as p:
        # No subscription matches yet: the default answer, with a generated instance id.
        kafka, _ = p.exchange(
            ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
            0,
            GetTelemetrySubscriptionsRequest(),
            case="generated id",
            adjust=_generated_ids,
        )
        _subscribe(p, name, configs)
        instance = uuid.UUID("6f1c8a64-9b0e-4c39-a1b7-2b3f3b1f0001")
        first = _get(p, instance, "first get")
        assert first.error_code == 0 and first.requested_metrics, first
        sub = first.subscription_id
        _get(p, instance, "get too soon")
        _push(p, instance, sub, "push")
        _push(p, instance, sub, "push too soon")
        _wait_past(LADDER_INTERVAL_MS)
        _push(p, instance, sub + 1, "unknown subscription id")
        _push(p, instance, sub, "unsupported compression", compression=9)
        _wait_past(LADDER_INTERVAL_MS)
        _push(p, uuid.UUID(int=0), sub, "zero instance id")
        _push(
            p,
            uuid.UUID("6f1c8a64-9b0e-4c39-a1b7-2b3f3b1f0999"),
            sub,
            "unknown instance",
        )
        _push(p, instance, sub, "push on time")
        _wait_past(LADDER_INTERVAL_MS)
        _get(p, instance, "get on time")
        _push(p, instance, sub, "terminating", terminating=True)
        _push(p, instance, sub, "after terminating")
        _push(p, instance, sub, "terminating again", terminating=True)
        _get(p, instance, "get after terminating")
        # The subscription changes while the client runs.
        _subscribe(p, name, {**configs, "metrics": "org.apache.kafka.consumer."})
        other = uuid.UUID("6f1c8a64-9b0e-4c39-a1b7-2b3f3b1f0002")
        before = _get(p, other, "get before change")
        _subscribe(
            p,
            name,
            {
                **configs,
                "metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.",
            },
        )
        _push(p, other, before.subscription_id, "push with the old subscription id")
        _get(p, other, "get after change")
        _unsubscribe(p, name, tuple(configs))
        _wait_past(LADDER_INTERVAL_MS)
        _get(p, other, "get after unsubscribe")


def _generated_ids(kafka: Any, mine: Any) -> tuple[Any, Any]:
    """A generated instance id (and the subscription id hashed from it) is random: compare
    that both generated one, then the rest."""
    assert kafka.client_instance_id.int != 0 and mine.client_instance_id.int != 0
    placeholder = {"client_instance_id": uuid.UUID(int=1), "subscription_id": 1}
    return dataclasses.replace(kafka, **placeholder), dataclasses.replace(
        mine, **placeholder
    )


def test_match_selectors_and_merged_subscriptions(
    servers: Servers, checked: Report
) -> None:
    base = {"interval.ms": "60000"}
    subscriptions = {
        "sel-id": {**base, "metrics": "a.", "match": "client_id=sel-.*"},
        "sel-instance": {
            **base,
            "metrics": "b.",
            "match": "client_instance_id=6f1c8a64-9b0e-4c39-a1b7-2b3f3b1f01.*",
        },
        "sel-software": {
            **base,
            "metrics": "c.",
            "match": "client_software_name=ktc-sel,client_software_version=2\\..*",
        },
        "sel-address": {
            "interval.ms": "30000",
            "metrics": "d.,a.",
            "match": "client_source_address=127\\.0\\.0\\.1,client_id=sel-.*",
        },
        "sel-port": {**base, "metrics": "e.", "match": "client_source_port=PORT"},
    }
    with pair(servers, checked, client_id="sel-1") as p:
        subscriptions["sel-port"]["match"] = f"client_source_port={p.source_port}"
        for name, configs in subscriptions.items():
            _subscribe(p, name, configs)
        for index, (software, version) in enumerate(
            [("ktc-sel", "2.1"), ("ktc-sel", "3.0"), ("other", "2.1")]
        ):
            p.exchange(
                ApiKeys.API_VERSIONS,
                3,
                ApiVersionsRequest(software, version),
                case="software",
                adjust=_served_only,
            )
            _get(
                p,
                uuid.UUID(f"6f1c8a64-9b0e-4c39-a1b7-2b3f3b1f01{index:02d}"),
                f"merged {software} {version}",
            )
            _get(
                p,
                uuid.UUID(f"6f1c8a64-9b0e-4c39-a1b7-2b3f3b1f02{index:02d}"),
                f"no instance match {software}",
            )
    with pair(servers, checked, client_id="elsewhere") as p:
        _get(
            p,
            uuid.UUID("6f1c8a64-9b0e-4c39-a1b7-2b3f3b1f0300"),
            "other client id, other port",
        )
        for name, configs in subscriptions.items():
            _unsubscribe(p, name, tuple(configs))


def _bombs() -> dict[str, tuple[int, bytes]]:
    zeros = bytes(4 * ONE_MIB)
    snappy_block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
    xerial = (
        b"\x82SNAPPY\x00"
        + struct.pack(">ii", 1, 1)
        + (struct.pack(">i", len(snappy_block)) + snappy_block) * 128
    )
    return {
        "bomb gzip": (CompressionType.GZIP, compress(CompressionType.GZIP, zeros)),
        "bomb snappy": (
            CompressionType.SNAPPY,
            compress(CompressionType.SNAPPY, zeros),
        ),
        "bomb snappy xerial": (CompressionType.SNAPPY, xerial),
        "bomb lz4": (CompressionType.LZ4, compress(CompressionType.LZ4, zeros)),
        "bomb zstd": (CompressionType.ZSTD, compress(CompressionType.ZSTD, zeros)),
    }


def _corrupt() -> dict[str, tuple[int, bytes]]:
    payload = otlp_payload("org.apache.kafka.producer.x", attrs=20)
    cases: dict[str, tuple[int, bytes]] = {
        "corrupt snappy declares 4 GiB": (
            CompressionType.SNAPPY,
            b"\xff\xff\xff\xff\x0f\x00",
        ),
        "corrupt xerial header": (CompressionType.SNAPPY, b"\x82SNAPPY\x00\x00"),
    }
    for ctype in (
        CompressionType.GZIP,
        CompressionType.SNAPPY,
        CompressionType.LZ4,
        CompressionType.ZSTD,
    ):
        packed = compress(ctype, payload)
        cases[f"truncated {ctype.name.lower()}"] = (ctype, packed[: len(packed) // 2])
        cases[f"garbage {ctype.name.lower()}"] = (ctype, os.urandom(64))
    return cases


def _otlp_of_size(size: int) -> bytes:
    """A real OTLP MetricsData of exactly ``size`` bytes (one long attribute value)."""
    base = otlp_payload("org.apache.kafka.producer.x")
    filler = size - len(base)
    while True:
        payload = otlp_payload("org.apache.kafka.producer.x" + "y" * filler)
        if len(payload) == size:
            return payload
        filler += size - len(payload)


def test_push_every_compression_bombs_and_corrupt_frames(
    servers: Servers, checked: Report
) -> None:
    name = "codecs"
    configs = {
        "metrics": "org.apache.kafka.",
        "interval.ms": "100",
        "match": "client_id=codecs",
    }
    payload = otlp_payload("org.apache.kafka.producer.x", attrs=20)
    cases: dict[str, tuple[int, bytes]] = {
        "none": (CompressionType.NONE, payload),
        **{
            ctype.name.lower(): (ctype, compress(ctype, payload))
            for ctype in (
                CompressionType.GZIP,
                CompressionType.SNAPPY,
                CompressionType.LZ4,
                CompressionType.ZSTD,
            )
        },
        "snappy xerial": (
            CompressionType.SNAPPY,
            compress(CompressionType.SNAPPY, payload, snappy_xerial=True),
        ),
        "empty none": (CompressionType.NONE, b""),
        "not otlp": (CompressionType.NONE, b"\xff\xfe not a protobuf"),
        **_bombs(),
        **_corrupt(),
    }
    with pair(servers, checked, client_id="codecs") as p:
        _subscribe(p, name, configs)
        for index, (case, (ctype, metrics)) in enumerate(cases.items()):
            instance = uuid.UUID(int=0x6F1C8A649B0E4C39A1B72B3F3B1F0000 + 0x400 + index)
            sub = _get(p, instance, f"get for {case}").subscription_id
            _push(p, instance, sub, case, compression=ctype, metrics=metrics)
        # Largest accepted and one byte over telemetry.max.bytes (1 MiB), uncompressed.
        for index, (case, size) in enumerate(
            (("at the limit", ONE_MIB), ("one byte over", ONE_MIB + 1))
        ):
            instance = uuid.UUID(int=0x6F1C8A649B0E4C39A1B72B3F3B1F0000 + 0x500 + index)
            sub = _get(p, instance, f"get for {case}").subscription_id
            _push(p, instance, sub, case, metrics=_otlp_of_size(size))
    # A frame far over the limit: the collector closes the connection unread.
    with pair(servers, checked, client_id="codecs") as p:
        instance = uuid.UUID(int=0x6F1C8A649B0E4C39A1B72B3F3B1F0000 + 0x510)
        sub = _get(p, instance, "get for oversized").subscription_id
        _push(p, instance, sub, "oversized frame", metrics=_otlp_of_size(2 * ONE_MIB))
    with pair(servers, checked, client_id="codecs") as p:
        _unsubscribe(p, name, tuple(configs))


# ---------------------------------------------------------------- client quotas


def test_client_quotas(servers: Servers, checked: Report) -> None:
    entities = [
        ("user", (EntityData("user", "quota-alice"),)),
        ("client", (EntityData("client-id", "quota-app"),)),
        (
            "user+client",
            (EntityData("user", "quota-alice"), EntityData("client-id", "quota-app")),
        ),
        ("default user", (EntityData("user", None),)),
        ("ip", (EntityData("ip", "10.1.2.3"),)),
    ]
    alters: list[tuple[str, tuple[EntryData, ...], bool]] = []
    for label, entity in entities:
        key = "connection_creation_rate" if label == "ip" else "producer_byte_rate"
        alters.append(
            (f"set {label}", (EntryData(entity, (OpData(key, 1024.0, False),)),), False)
        )
    bad: list[tuple[str, tuple[EntryData, ...], bool]] = [
        (
            "unknown key",
            (EntryData((EntityData("user", "x"),), (OpData("colour", 1.0, False),)),),
            False,
        ),
        (
            "negative",
            (
                EntryData(
                    (EntityData("user", "x"),),
                    (OpData("producer_byte_rate", -1.0, False),),
                ),
            ),
            False,
        ),
        (
            "fraction",
            (
                EntryData(
                    (EntityData("user", "x"),),
                    (OpData("producer_byte_rate", 1.5, False),),
                ),
            ),
            False,
        ),
        (
            "zero",
            (
                EntryData(
                    (EntityData("user", "x"),),
                    (OpData("producer_byte_rate", 0.0, False),),
                ),
            ),
            True,
        ),
        (
            "unknown entity",
            (
                EntryData(
                    (EntityData("group", "x"),),
                    (OpData("producer_byte_rate", 1.0, False),),
                ),
            ),
            False,
        ),
        (
            "ip with user",
            (
                EntryData(
                    (EntityData("ip", "1.2.3.4"), EntityData("user", "x")),
                    (OpData("connection_creation_rate", 1.0, False),),
                ),
            ),
            False,
        ),
        (
            "bad ip",
            (
                EntryData(
                    (EntityData("ip", "not-an-ip"),),
                    (OpData("connection_creation_rate", 1.0, False),),
                ),
            ),
            False,
        ),
        (
            "ip key on user",
            (
                EntryData(
                    (EntityData("user", "x"),),
                    (OpData("connection_creation_rate", 1.0, False),),
                ),
            ),
            False,
        ),
        (
            "duplicate entity",
            (
                EntryData(
                    (EntityData("user", "x"), EntityData("user", "y")),
                    (OpData("producer_byte_rate", 1.0, False),),
                ),
            ),
            False,
        ),
        (
            "duplicate key",
            (
                EntryData(
                    (EntityData("user", "x"),),
                    (
                        OpData("producer_byte_rate", 1.0, False),
                        OpData("producer_byte_rate", 2.0, False),
                    ),
                ),
            ),
            False,
        ),
        (
            "remove absent",
            (
                EntryData(
                    (EntityData("user", "nobody"),),
                    (OpData("producer_byte_rate", 0.0, True),),
                ),
            ),
            False,
        ),
        (
            "empty entity",
            (EntryData((), (OpData("producer_byte_rate", 1.0, False),)),),
            False,
        ),
    ]
    with pair(servers, checked) as p:
        for version in (0, 1):
            for case, entries, validate_only in bad:
                p.exchange(
                    ApiKeys.ALTER_CLIENT_QUOTAS,
                    version,
                    AlterClientQuotasRequest(
                        entries=entries, validate_only=validate_only
                    ),
                    case=case,
                )
        for case, entries, _ in alters:
            p.exchange(
                ApiKeys.ALTER_CLIENT_QUOTAS,
                1,
                AlterClientQuotasRequest(entries=entries, validate_only=True),
                case=f"validate {case}",
            )
            p.exchange(
                ApiKeys.ALTER_CLIENT_QUOTAS,
                1,
                AlterClientQuotasRequest(entries=entries),
                case=case,
            )
        filters = [
            ("user exact", (ComponentData("user", 0, "quota-alice"),), False),
            ("user exact strict", (ComponentData("user", 0, "quota-alice"),), True),
            ("user default", (ComponentData("user", 1, None),), False),
            ("any user", (ComponentData("user", 2, None),), False),
            ("client", (ComponentData("client-id", 0, "quota-app"),), False),
            ("ip", (ComponentData("ip", 0, "10.1.2.3"),), False),
            ("nothing", (), False),
            ("unknown type", (ComponentData("group", 0, "x"),), False),
            ("bad match type", (ComponentData("user", 7, "x"),), False),
            (
                "duplicate type",
                (ComponentData("user", 0, "x"), ComponentData("user", 0, "y")),
                False,
            ),
            ("exact without name", (ComponentData("user", 0, None),), False),
        ]
        _eventually_kafka(
            p,
            ApiKeys.DESCRIBE_CLIENT_QUOTAS,
            1,
            DescribeClientQuotasRequest(
                components=(ComponentData("ip", 0, "10.1.2.3"),)
            ),
            lambda answer: bool(answer.entries),
        )
        for version in (0, 1):
            for case, components, strict in filters:
                p.exchange(
                    ApiKeys.DESCRIBE_CLIENT_QUOTAS,
                    version,
                    DescribeClientQuotasRequest(components=components, strict=strict),
                    case=case,
                    adjust=_sorted_quota_entries,
                )
        for case, entries, _ in alters:
            entity = entries[0].entity
            key = entries[0].ops[0].key
            p.exchange(
                ApiKeys.ALTER_CLIENT_QUOTAS,
                1,
                AlterClientQuotasRequest(
                    entries=(EntryData(entity, (OpData(key, 0.0, True),)),)
                ),
                case=f"remove {case}",
            )


def _sorted_quota_entries(kafka: Any, mine: Any) -> tuple[Any, Any]:
    def key(entry: Any) -> tuple[Any, ...]:
        return tuple((e.entity_type, e.entity_name or "") for e in entry.entity)

    def sort(answer: Any) -> Any:
        if answer.entries is None:
            return answer
        return dataclasses.replace(
            answer, entries=tuple(sorted(answer.entries, key=key))
        )

    return sort(kafka), sort(mine)


def _eventually_kafka(
    p: Pair, api_key: int, version: int, request: Any, done: Callable[[Any], bool]
) -> None:
    """Polls Kafka alone until ``done(answer)``: its admin changes apply asynchronously."""
    from proto import decode_response, encode_request

    deadline = time.monotonic() + 10
    while True:
        p.kafka.send(encode_request(api_key, version, 1, "ktc-compat", request))
        payload = p.kafka.receive()
        assert payload is not None
        if done(decode_response(api_key, version, payload).message):
            return
        assert time.monotonic() < deadline, f"Kafka never settled on {request}"
        time.sleep(0.01)


# ---------------------------------------------------------------- ACLs

TOPIC_RESOURCE, GROUP_RESOURCE, CLUSTER_RESOURCE = 2, 3, 4
LITERAL, PREFIXED, ANY_PATTERN, MATCH_PATTERN = 3, 4, 1, 2
READ, WRITE, ALL_OPS, ANY_OP, DESCRIBE_OP, ALTER_OP = 3, 4, 2, 1, 8, 7
ALLOW, DENY, ANY_PERMISSION = 3, 2, 1


def test_acls(servers: Servers, checked: Report) -> None:
    creations = [
        (
            "carol alter",
            AclCreation(
                CLUSTER_RESOURCE,
                "kafka-cluster",
                LITERAL,
                "User:carol",
                "*",
                ALTER_OP,
                ALLOW,
            ),
        ),
        (
            "carol describe denied",
            AclCreation(
                CLUSTER_RESOURCE,
                "kafka-cluster",
                LITERAL,
                "User:carol",
                "10.0.0.1",
                DESCRIBE_OP,
                DENY,
            ),
        ),
        (
            "dave all",
            AclCreation(
                CLUSTER_RESOURCE,
                "kafka-cluster",
                LITERAL,
                "User:dave",
                "*",
                ALL_OPS,
                ALLOW,
            ),
        ),
        (
            "bad host",
            AclCreation(
                CLUSTER_RESOURCE,
                "kafka-cluster",
                LITERAL,
                "User:erin",
                "not a host",
                ALTER_OP,
                ALLOW,
            ),
        ),
    ]
    invalid = [
        (
            "cluster wrong name",
            AclCreation(
                CLUSTER_RESOURCE, "other", LITERAL, "User:x", "*", ALTER_OP, ALLOW
            ),
        ),
        (
            "cluster prefixed",
            AclCreation(
                CLUSTER_RESOURCE,
                "kafka-cluster",
                PREFIXED,
                "User:x",
                "*",
                ALTER_OP,
                ALLOW,
            ),
        ),
        (
            "no principal type",
            AclCreation(
                CLUSTER_RESOURCE,
                "kafka-cluster",
                LITERAL,
                "carol",
                "*",
                ALTER_OP,
                ALLOW,
            ),
        ),
        (
            "empty name",
            AclCreation(CLUSTER_RESOURCE, "", LITERAL, "User:x", "*", ALTER_OP, ALLOW),
        ),
        (
            "any operation",
            AclCreation(
                CLUSTER_RESOURCE, "kafka-cluster", LITERAL, "User:x", "*", ANY_OP, ALLOW
            ),
        ),
        (
            "any permission",
            AclCreation(
                CLUSTER_RESOURCE,
                "kafka-cluster",
                LITERAL,
                "User:x",
                "*",
                ALTER_OP,
                ANY_PERMISSION,
            ),
        ),
        (
            "match pattern",
            AclCreation(
                CLUSTER_RESOURCE,
                "kafka-cluster",
                MATCH_PATTERN,
                "User:x",
                "*",
                ALTER_OP,
                ALLOW,
            ),
        ),
        (
            "operation not for cluster",
            AclCreation(
                CLUSTER_RESOURCE, "kafka-cluster", LITERAL, "User:x", "*", READ, ALLOW
            ),
        ),
    ]
    non_cluster = [
        AclCreation(TOPIC_RESOURCE, "orders", LITERAL, "User:carol", "*", READ, ALLOW),
        AclCreation(GROUP_RESOURCE, "g1", PREFIXED, "User:dave", "*", ALL_OPS, DENY),
    ]
    everything = DescribeAclsRequest(
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=ANY_PATTERN,
        principal_filter=None,
        host_filter=None,
        operation=ANY_OP,
        permission_type=ANY_PERMISSION,
    )
    with pair(servers, checked) as p:
        for version in (1, 2, 3):
            for case, creation in invalid:
                p.exchange(
                    ApiKeys.CREATE_ACLS,
                    version,
                    CreateAclsRequest(creations=(creation,)),
                    case=case,
                )
        p.exchange(
            ApiKeys.CREATE_ACLS,
            3,
            CreateAclsRequest(creations=tuple(non_cluster)),
            case="non-cluster resources",
        )
        # Kafka stored those: take them away again on Kafka alone (the collector has none).
        _kafka_only(
            p,
            ApiKeys.DELETE_ACLS,
            3,
            DeleteAclsRequest(
                filters=tuple(
                    DeleteAclsFilter(
                        r, None, ANY_PATTERN, None, None, ANY_OP, ANY_PERMISSION
                    )
                    for r in (TOPIC_RESOURCE, GROUP_RESOURCE)
                )
            ),
        )
        for version, (case, creation) in zip((1, 2, 3, 3), creations, strict=True):
            p.exchange(
                ApiKeys.CREATE_ACLS,
                version,
                CreateAclsRequest(creations=(creation,)),
                case=case,
            )
        mine = _collector_only(p, ApiKeys.DESCRIBE_ACLS, 3, everything)
        count = sum(len(r.acls) for r in mine.resources)
        _eventually_kafka(
            p,
            ApiKeys.DESCRIBE_ACLS,
            3,
            everything,
            lambda a: sum(len(r.acls) for r in a.resources) == count,
        )
        filters = [
            ("everything", everything),
            (
                "cluster match",
                dataclasses.replace(
                    everything,
                    resource_type_filter=CLUSTER_RESOURCE,
                    resource_name_filter="kafka-cluster",
                    pattern_type_filter=MATCH_PATTERN,
                ),
            ),
            (
                "topic",
                dataclasses.replace(everything, resource_type_filter=TOPIC_RESOURCE),
            ),
            ("carol", dataclasses.replace(everything, principal_filter="User:carol")),
            ("deny", dataclasses.replace(everything, permission_type=DENY)),
            ("alter", dataclasses.replace(everything, operation=ALTER_OP)),
            ("host", dataclasses.replace(everything, host_filter="10.0.0.1")),
            (
                "unknown resource type",
                dataclasses.replace(everything, resource_type_filter=0),
            ),
            (
                "bad principal filter",
                dataclasses.replace(everything, principal_filter="carol"),
            ),
        ]
        for version in (1, 2, 3):
            for case, request in filters:
                # A fresh connection each: an UNKNOWN element closes it (both servers).
                with pair(servers, checked) as q:
                    q.exchange(
                        ApiKeys.DESCRIBE_ACLS,
                        version,
                        request,
                        case=case,
                        adjust=_sorted_acls,
                    )
        delete = DeleteAclsFilter(
            resource_type_filter=CLUSTER_RESOURCE,
            resource_name_filter=None,
            pattern_type_filter=ANY_PATTERN,
            principal_filter="User:carol",
            host_filter=None,
            operation=ANY_OP,
            permission_type=ANY_PERMISSION,
        )
        p.exchange(
            ApiKeys.DELETE_ACLS,
            3,
            DeleteAclsRequest(
                filters=(
                    delete,
                    dataclasses.replace(delete, principal_filter="User:nobody"),
                )
            ),
            case="delete carol",
            adjust=_sorted_deletions,
        )
        p.exchange(
            ApiKeys.DELETE_ACLS,
            1,
            DeleteAclsRequest(
                filters=(
                    dataclasses.replace(
                        delete, resource_type_filter=1, principal_filter=None
                    ),
                )
            ),
            case="delete the rest",
            adjust=_sorted_deletions,
        )


def _collector_only(p: Pair, api_key: int, version: int, request: Any) -> Any:
    from proto import decode_response, encode_request

    p.collector.send(encode_request(api_key, version, 1, p.client_id, request))
    payload = p.collector.receive()
    assert payload is not None
    return decode_response(api_key, version, payload).message


def _kafka_only(p: Pair, api_key: int, version: int, request: Any) -> Any:
    from proto import decode_response, encode_request

    p.kafka.send(encode_request(api_key, version, 1, p.client_id, request))
    payload = p.kafka.receive()
    assert payload is not None
    return decode_response(api_key, version, payload).message


def _settle_telemetry(p: Pair) -> None:
    """Kafka's telemetry manager learns a subscription change after its DescribeConfigs
    shows it: ask both servers for a throwaway instance (on this pair's connections, so the
    same selectors apply) until they agree on what it would get."""
    deadline = time.monotonic() + 10
    while True:
        probe = GetTelemetrySubscriptionsRequest(client_instance_id=uuid.uuid4())
        kafka = _kafka_only(p, ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, probe)
        mine = _collector_only(p, ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, probe)
        if kafka == mine:
            return
        assert time.monotonic() < deadline, f"never agreed: {kafka} / {mine}"
        time.sleep(0.01)


def _sorted_acls(kafka: Any, mine: Any) -> tuple[Any, Any]:
    def sort(answer: Any) -> Any:
        resources = tuple(
            dataclasses.replace(r, acls=tuple(sorted(r.acls, key=repr)))
            for r in sorted(
                answer.resources,
                key=lambda r: (r.resource_type, r.resource_name, r.pattern_type),
            )
        )
        return dataclasses.replace(answer, resources=resources)

    return sort(kafka), sort(mine)


def _sorted_deletions(kafka: Any, mine: Any) -> tuple[Any, Any]:
    def sort(answer: Any) -> Any:
        return dataclasses.replace(
            answer,
            filter_results=tuple(
                dataclasses.replace(
                    r, matching_acls=tuple(sorted(r.matching_acls, key=repr))
                )
                for r in answer.filter_results
            ),
        )

    return sort(kafka), sort(mine)


# ---------------------------------------------------------------- SCRAM credentials


def test_scram_credentials(servers: Servers, checked: Report) -> None:
    salt = b"s" * 16
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    with pair(servers, checked) as p:
        describes = [
            ("everyone", DescribeUserScramCredentialsRequest(users=None)),
            ("alice", DescribeUserScramCredentialsRequest(users=(UserName("alice"),))),
            (
                "unknown",
                DescribeUserScramCredentialsRequest(users=(UserName("nobody"),)),
            ),
            ("empty name", DescribeUserScramCredentialsRequest(users=(UserName(""),))),
            (
                "duplicate",
                DescribeUserScramCredentialsRequest(
                    users=(UserName("bob"), UserName("bob"))
                ),
            ),
        ]
        for case, request in describes:
            p.exchange(
                ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS,
                0,
                request,
                case=case,
                adjust=_sorted_users,
            )
        alters = [
            (
                "upsert",
                AlterUserScramCredentialsRequest(
                    upsertions=(
                        ScramCredentialUpsertion("erin", 2, 4096, salt, salted),
                    )
                ),
            ),
            (
                "too few iterations",
                AlterUserScramCredentialsRequest(
                    upsertions=(
                        ScramCredentialUpsertion("erin2", 2, 100, salt, salted),
                    )
                ),
            ),
            (
                "too many iterations",
                AlterUserScramCredentialsRequest(
                    upsertions=(
                        ScramCredentialUpsertion("erin2", 2, 16385, salt, salted),
                    )
                ),
            ),
            (
                "unknown mechanism",
                AlterUserScramCredentialsRequest(
                    upsertions=(
                        ScramCredentialUpsertion("erin2", 9, 4096, salt, salted),
                    )
                ),
            ),
            (
                "empty user",
                AlterUserScramCredentialsRequest(
                    upsertions=(ScramCredentialUpsertion("", 2, 4096, salt, salted),)
                ),
            ),
            (
                "delete absent",
                AlterUserScramCredentialsRequest(
                    deletions=(ScramCredentialDeletion("nobody", 1),)
                ),
            ),
            (
                "upsert and delete same",
                AlterUserScramCredentialsRequest(
                    deletions=(ScramCredentialDeletion("erin3", 2),),
                    upsertions=(
                        ScramCredentialUpsertion("erin3", 2, 4096, salt, salted),
                    ),
                ),
            ),
        ]
        for case, alter in alters:
            p.exchange(ApiKeys.ALTER_USER_SCRAM_CREDENTIALS, 0, alter, case=case)
        _eventually_kafka(
            p,
            ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS,
            0,
            DescribeUserScramCredentialsRequest(users=(UserName("erin"),)),
            lambda a: a.results[0].error_code == 0,
        )
        p.exchange(
            ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS,
            0,
            DescribeUserScramCredentialsRequest(users=None),
            case="after upsert",
            adjust=_sorted_users,
        )
        p.exchange(
            ApiKeys.ALTER_USER_SCRAM_CREDENTIALS,
            0,
            AlterUserScramCredentialsRequest(
                deletions=(ScramCredentialDeletion("erin", 2),)
            ),
            case="delete",
        )


def _sorted_users(kafka: Any, mine: Any) -> tuple[Any, Any]:
    def sort(answer: Any) -> Any:
        return dataclasses.replace(
            answer,
            results=tuple(
                dataclasses.replace(
                    r, credential_infos=tuple(sorted(r.credential_infos, key=repr))
                )
                for r in sorted(answer.results, key=lambda r: r.user)
            ),
        )

    return sort(kafka), sort(mine)


# ---------------------------------------------------------------- SASL


def test_sasl_errors(servers: Servers, checked: Report) -> None:
    # On a PLAINTEXT listener no SASL exchange is due.
    with pair(servers, checked) as p:
        p.exchange(
            ApiKeys.SASL_HANDSHAKE,
            1,
            SaslHandshakeRequest("PLAIN"),
            case="plaintext handshake",
        )
    with pair(servers, checked) as p:
        p.exchange(
            ApiKeys.SASL_AUTHENTICATE,
            2,
            SaslAuthenticateRequest(b"x"),
            case="plaintext authenticate",
        )
    # A SASL listener: unknown mechanism, then wrong passwords.
    for version in (1,):
        with pair(servers, checked, "SASL_PLAINTEXT") as p:
            p.exchange(
                ApiKeys.SASL_HANDSHAKE,
                version,
                SaslHandshakeRequest("GSSAPI"),
                case="unknown mechanism",
            )
    for version in (0, 1, 2):
        with pair(servers, checked, "SASL_PLAINTEXT") as p:
            p.exchange(
                ApiKeys.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN"), case="plain"
            )
            p.exchange(
                ApiKeys.SASL_AUTHENTICATE,
                version,
                SaslAuthenticateRequest(b"\x00alice\x00wrong-password"),
                case="plain wrong password",
            )
    with pair(servers, checked, "SASL_PLAINTEXT") as p:
        p.exchange(
            ApiKeys.SASL_HANDSHAKE,
            1,
            SaslHandshakeRequest("SCRAM-SHA-256"),
            case="scram",
        )
        server_first: list[bytes] = []

        def nonce_and_salt(kafka: Any, mine: Any) -> tuple[Any, Any]:
            # Each server picks its own nonce (and has its own salt): compare the rest.
            server_first.extend((bytes(kafka.auth_bytes), bytes(mine.auth_bytes)))
            return _without_nonce_and_salt(kafka), _without_nonce_and_salt(mine)

        p.exchange(
            ApiKeys.SASL_AUTHENTICATE,
            2,
            SaslAuthenticateRequest(b"n,,n=alice,r=clientnonce"),
            case="scram client-first",
            adjust=nonce_and_salt,
        )
        finals = []
        for message in server_first:
            attributes = dict(
                part.split("=", 1) for part in message.decode().split(",")
            )
            without_proof = f"c=biws,r={attributes['r']}"
            proof = hmac.new(b"wrong", without_proof.encode(), "sha256").digest()
            finals.append(
                SaslAuthenticateRequest(
                    f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
                )
            )
        p.exchange_each(
            ApiKeys.SASL_AUTHENTICATE,
            2,
            (finals[0], finals[1]),
            case="scram wrong proof",
        )
    with pair(servers, checked, "SASL_PLAINTEXT") as p:
        p.exchange(
            ApiKeys.METADATA,
            12,
            MetadataRequest(topics=()),
            case="before authenticating",
        )


def _without_nonce_and_salt(answer: Any) -> Any:
    if not answer.auth_bytes:
        return answer
    parts = []
    for part in bytes(answer.auth_bytes).decode().split(","):
        key, _, value = part.partition("=")
        if key == "r":
            value = (
                "clientnonce<server nonce>"
                if value.startswith("clientnonce")
                else value
            )
        elif key == "s":
            value = "<salt>"
        parts.append(f"{key}={value}")
    return dataclasses.replace(answer, auth_bytes=",".join(parts).encode())


def test_a_principal_without_acls(servers: Servers, checked: Report) -> None:
    """bob (not a super user, no ACL) after a real SASL PLAIN login: what every API
    answers a principal the authorizer denies."""
    with pair(servers, checked, "SASL_PLAINTEXT") as p:
        p.exchange(ApiKeys.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN"), case="bob")
        kafka, _ = p.exchange(
            ApiKeys.SASL_AUTHENTICATE,
            2,
            SaslAuthenticateRequest(b"\x00bob\x00bob-secret"),
            case="bob",
        )
        assert kafka.error_code == Errors.NONE
        for version in (1, 4, 10, 12, 13):
            p.exchange(
                ApiKeys.METADATA,
                version,
                MetadataRequest(
                    topics=tuple(
                        MetadataRequestTopic(name=n)
                        for n in ("orders", "bad name!", "payments")
                    ),
                    allow_auto_topic_creation=version < 4,
                    include_topic_authorized_operations=version >= 8,
                ),
                case="bob metadata",
            )
        p.exchange(
            ApiKeys.METADATA,
            10,
            MetadataRequest(topics=None, include_cluster_authorized_operations=True),
            case="bob all topics",
        )
        p.exchange(ApiKeys.DESCRIBE_CONFIGS, 4, _describe("x"), case="bob")
        p.exchange(
            ApiKeys.INCREMENTAL_ALTER_CONFIGS,
            1,
            _alter("x", [("metrics", SET, "a")]),
            case="bob",
        )
        p.exchange(
            ApiKeys.LIST_CONFIG_RESOURCES,
            1,
            ListConfigResourcesRequest(resource_types=(CLIENT_METRICS,)),
            case="bob",
        )
        p.exchange(
            ApiKeys.DESCRIBE_CLIENT_QUOTAS,
            1,
            DescribeClientQuotasRequest(components=()),
            case="bob",
        )
        p.exchange(
            ApiKeys.ALTER_CLIENT_QUOTAS,
            1,
            AlterClientQuotasRequest(
                entries=(
                    EntryData(
                        (EntityData("user", "x"),),
                        (OpData("producer_byte_rate", 1.0, False),),
                    ),
                )
            ),
            case="bob",
        )
        p.exchange(
            ApiKeys.DESCRIBE_ACLS,
            3,
            DescribeAclsRequest(
                1, None, ANY_PATTERN, None, None, ANY_OP, ANY_PERMISSION
            ),
            case="bob",
        )
        p.exchange(
            ApiKeys.CREATE_ACLS,
            3,
            CreateAclsRequest(
                creations=(
                    AclCreation(
                        CLUSTER_RESOURCE,
                        "kafka-cluster",
                        LITERAL,
                        "User:bob",
                        "*",
                        ALTER_OP,
                        ALLOW,
                    ),
                )
            ),
            case="bob",
        )
        # Not DescribeUserScramCredentials: Kafka 4.4.0 leaves it unanswered for a
        # principal without DESCRIBE on the cluster (no answer within 15 s here).
        p.exchange(
            ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
            0,
            GetTelemetrySubscriptionsRequest(
                client_instance_id=uuid.UUID("6f1c8a64-9b0e-4c39-a1b7-2b3f3b1f0b0b")
            ),
            case="bob",
        )
