"""Handlers for the APIs the collector serves, named after Kafka's ``KafkaApis``.

| api key | API                        | handler                          |
|---------|----------------------------|----------------------------------|
| 18      | ApiVersions                | :meth:`KafkaApis.api_versions`   |
| 3       | Metadata                   | :meth:`KafkaApis.metadata`       |
| 71      | GetTelemetrySubscriptions  | :meth:`KafkaApis.get_telemetry_subscriptions` |
| 72      | PushTelemetry              | :meth:`KafkaApis.push_telemetry` |
| 17, 36  | SaslHandshake, SaslAuthenticate | ILLEGAL_SASL_STATE (34), as Kafka's ``KafkaApis`` |

SaslHandshake and SaslAuthenticate reach this table only where no SASL exchange is due: on
a PLAINTEXT or SSL listener, or on a SASL listener after authentication (without a
re-authentication to begin); a SASL listener's connection hands them to its
``collector.security.sasl.authenticator.SaslAuthenticator`` first.  Like Kafka, the node
lists both in ApiVersions on every listener.

The admin APIs (DescribeConfigs, IncrementalAlterConfigs, ListConfigResources) live in
``collector.broker.admin_apis`` and join the same table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from collector.core.context import RequestContext
from collector.net.listeners import EndPoint
from collector.pipeline.dispatch import Api
from collector.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from collector.security.authorizer import StandardAuthorizer
from collector.telemetry.client_metrics import ClientMetricsManager
from proto import SUPPORTED_VERSIONS, ZERO_UUID, ApiKeys, api_name
from proto.errors import Errors
from proto.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    MetadataRequest,
    MetadataResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)
from proto.messages.api_versions_response import ApiVersion
from proto.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponseTopic,
)
from subscriptions.java_hashset import JavaHashSet

__all__ = ["SOFTWARE_NAME_OR_VERSION", "KafkaApis", "api_name"]

# ApiVersionsRequest.isValid(): ClientSoftwareName/Version must match this (KIP-511).
SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

# AclEntry.supportedOperations (Kafka 4.4.0) of the resources Metadata reports on.
_TOPIC_OPERATIONS = (
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
)
_CLUSTER_OPERATIONS = (
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
)
_OPERATIONS_OMITTED = -2147483648  # Integer.MIN_VALUE: not asked for
# IncludeClusterAuthorizedOperations exists in v8-10 (DescribeCluster replaced it).
_CLUSTER_OPERATIONS_VERSIONS = frozenset({8, 9, 10})

# Metadata versions whose schema carries topic ids that Kafka does not look up.
_TOPIC_IDS_REFUSED = frozenset({10, 11})

# A GetTelemetrySubscriptions while the subscriptions in force are unknown.
_SUBSCRIPTIONS_UNKNOWN = GetTelemetrySubscriptionsResponse(
    throttle_time_ms=0, error_code=Errors.THROTTLING_QUOTA_EXCEEDED
)
# org.apache.kafka.common.internals.Topic: legal names.
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_TOPIC_MAX_LENGTH = 249


def _topic_name_error(name: str) -> Errors | None:
    if not name or name in {".", ".."} or len(name) > _TOPIC_MAX_LENGTH:
        return Errors.INVALID_TOPIC_EXCEPTION
    if _LEGAL_TOPIC.fullmatch(name) is None:
        return Errors.INVALID_TOPIC_EXCEPTION
    return None


class KafkaApis:
    def __init__(
        self,
        *,
        manager: ClientMetricsManager,
        node_id: int,
        cluster_id: str,
        advertised: Mapping[str, EndPoint],
        supported_versions: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self._manager = manager
        self._node_id = node_id
        self._cluster_id = cluster_id
        self._advertised = dict(advertised)
        # What ApiVersions lists: exactly the APIs in the dispatch table (set by the server
        # once the table is complete), at the versions the codec speaks.
        self._supported_versions = dict(supported_versions or {})
        self._authorizer: StandardAuthorizer | None = None
        self._api_versions_entries: tuple[Any, ...] = ()
        self._refresh_api_versions()
        # True while the subscriptions in force are unknown (kept in a Kafka cluster no
        # read of which has worked yet): see get_telemetry_subscriptions.
        self.subscriptions_unknown: Callable[[], bool] = lambda: False

    def set_served_apis(self, api_keys: frozenset[int]) -> None:
        self._supported_versions = {
            k: v for k, v in SUPPORTED_VERSIONS.items() if k in api_keys
        }
        self._refresh_api_versions()

    def set_authorizer(self, authorizer: StandardAuthorizer | None) -> None:
        """What Metadata's authorized-operations fields are computed with."""
        self._authorizer = authorizer

    def set_advertised(self, advertised: Mapping[str, EndPoint]) -> None:
        self._advertised = dict(advertised)

    def _refresh_api_versions(self) -> None:
        self._api_versions_entries = tuple(
            ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(self._supported_versions.items())
        )

    def table(self) -> dict[int, Api]:
        return {
            ApiKeys.API_VERSIONS: Api(
                "ApiVersions",
                self.api_versions,
                lambda _, error: ApiVersionsResponse(error_code=error),
            ),
            ApiKeys.METADATA: Api(
                "Metadata", self.metadata, lambda _, error: self._metadata_error(error)
            ),
            ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS: Api(
                "GetTelemetrySubscriptions",
                self.get_telemetry_subscriptions,
                lambda _, error: GetTelemetrySubscriptionsResponse(error_code=error),
                unexpected_error=Errors.INVALID_REQUEST,
            ),
            ApiKeys.PUSH_TELEMETRY: Api(
                "PushTelemetry",
                self.push_telemetry,
                lambda _, error: PushTelemetryResponse(error_code=error),
                unexpected_error=Errors.INVALID_REQUEST,
                push_manager=self._manager,
            ),
            ApiKeys.SASL_HANDSHAKE: Api(
                "SaslHandshake",
                self.sasl_handshake,
                lambda _, error: SaslHandshakeResponse(error_code=error),
            ),
            ApiKeys.SASL_AUTHENTICATE: Api(
                "SaslAuthenticate",
                self.sasl_authenticate,
                lambda _, error: SaslAuthenticateResponse(error_code=error),
            ),
        }

    # ------------------------------------------------------------------ 18 ApiVersions
    def api_versions(
        self, request: ApiVersionsRequest, ctx: RequestContext
    ) -> ApiVersionsResponse:
        """KafkaApis.handleApiVersionsRequest (v3+ validates the software name/version)."""
        if ctx.frame.api_version >= 3:
            name = request.client_software_name
            version = request.client_software_version
            if (
                SOFTWARE_NAME_OR_VERSION.fullmatch(name) is None
                or SOFTWARE_NAME_OR_VERSION.fullmatch(version) is None
            ):
                return ApiVersionsResponse(error_code=Errors.INVALID_REQUEST)
            # What the client_software_* selectors match (ClientInformation).
            ctx.session.client_software_name = name
            ctx.session.client_software_version = version
        if ctx.frame.api_version >= 5:
            error = self._intended_node_error(request)
            if error is not None:
                return ApiVersionsResponse(error_code=error)
        return ApiVersionsResponse(
            error_code=Errors.NONE, api_keys=self._api_versions_entries
        )

    def _intended_node_error(self, request: ApiVersionsRequest) -> Errors | None:
        """ApiVersions v5 (KIP-1242): a client that knows which cluster and node it meant to
        reach names both, or neither (INVALID_REQUEST); naming another cluster or node
        answers REBOOTSTRAP_REQUIRED, so the client looks its brokers up again. What Apache
        Kafka 4.4.0 answers (tests/compat/test_kafka_differential.py): "known" is a non-null
        ClusterId (the empty string included) and a NodeId other than -1."""
        names_cluster = request.cluster_id is not None
        names_node = request.node_id != -1
        if names_cluster != names_node:
            return Errors.INVALID_REQUEST
        if names_cluster and (
            request.cluster_id != self._cluster_id or request.node_id != self._node_id
        ):
            return Errors.REBOOTSTRAP_REQUIRED
        return None

    # ------------------------------------------------------------------ 17 / 36 SASL
    def sasl_handshake(
        self, _request: object, _ctx: RequestContext
    ) -> SaslHandshakeResponse:
        """KafkaApis.handleSaslHandshakeRequest: no handshake is due here."""
        return SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE)

    def sasl_authenticate(
        self, _request: object, _ctx: RequestContext
    ) -> SaslAuthenticateResponse:
        """KafkaApis.handleSaslAuthenticateRequest."""
        return SaslAuthenticateResponse(
            error_code=Errors.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
        )

    # ------------------------------------------------------------------ 3 Metadata
    def metadata(
        self, request: MetadataRequest, ctx: RequestContext
    ) -> MetadataResponse:
        """The collector is the only broker and the controller; it hosts no topics.

        Requested topics get what a Kafka broker with ``auto.create.topics.enable=false``
        answers for a topic it does not have (KafkaApis.getTopicMetadata):
        UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION for an illegal name, or
        UNKNOWN_TOPIC_ID for a lookup by id (v10+).
        """
        endpoint = self._advertised.get(ctx.session.listener_name)
        brokers: tuple[MetadataResponseBroker, ...] = ()
        if endpoint is not None:
            brokers = (
                MetadataResponseBroker(
                    node_id=self._node_id,
                    host=endpoint.host,
                    port=endpoint.port,
                    rack=None,
                ),
            )
        version = ctx.frame.api_version
        if version in _TOPIC_IDS_REFUSED and any(
            t.name is None or t.topic_id != ZERO_UUID for t in request.topics or ()
        ):
            # Topic ids came with v10 in the schema but are only served from v12: Kafka
            # 4.4.0 answers MetadataRequest.getErrorResponse(INVALID_REQUEST).
            return MetadataResponse(
                brokers=(),
                cluster_id=None,
                controller_id=-1,
                topics=tuple(
                    MetadataResponseTopic(
                        error_code=Errors.INVALID_REQUEST,
                        name=t.name or "",
                        topic_id=t.topic_id,
                    )
                    for t in request.topics or ()
                ),
            )
        topics = []
        # Names the principal may not DESCRIBE come first, in request order, answered
        # TOPIC_AUTHORIZATION_FAILED whatever the name (Kafka authorizes before it looks a
        # topic up).
        denied = [
            MetadataResponseTopic(
                error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=name
            )
            for name in dict.fromkeys(
                t.name
                for t in request.topics or ()
                if t.name is not None and not self._may_describe_topic(ctx, t.name)
            )
        ]
        refused = {t.name for t in denied}
        for topic in _in_kafka_order(request.topics or ()):
            name = topic.name
            if name in refused:
                continue
            if name is None or (
                not name and getattr(topic, "topic_id", ZERO_UUID) != ZERO_UUID
            ):
                topics.append(
                    MetadataResponseTopic(
                        error_code=Errors.UNKNOWN_TOPIC_ID,
                        name=None,
                        topic_id=topic.topic_id,
                    )
                )
                continue
            error = _topic_name_error(name) or Errors.UNKNOWN_TOPIC_OR_PARTITION
            topics.append(
                MetadataResponseTopic(
                    error_code=error,
                    name=name,
                    topic_authorized_operations=self._authorized_operations(
                        ctx, ResourceType.TOPIC, name, _TOPIC_OPERATIONS
                    )
                    if request.include_topic_authorized_operations
                    else _OPERATIONS_OMITTED,
                )
            )
        topics = denied + topics
        cluster_operations = _OPERATIONS_OMITTED
        if version in _CLUSTER_OPERATIONS_VERSIONS and (
            request.include_cluster_authorized_operations
        ):
            cluster_operations = self._authorized_operations(
                ctx, ResourceType.CLUSTER, CLUSTER_NAME, _CLUSTER_OPERATIONS
            )
        return MetadataResponse(
            brokers=brokers,
            cluster_id=self._cluster_id,
            controller_id=self._node_id,
            topics=tuple(topics),
            cluster_authorized_operations=cluster_operations,
        )

    def _may_describe_topic(self, ctx: RequestContext, name: str) -> bool:
        authorizer = self._authorizer
        return authorizer is None or authorizer.authorize(
            ctx.session,
            AclOperation.DESCRIBE,
            ResourceType.TOPIC,
            name,
            request_name="Metadata",
        )

    def _authorized_operations(
        self,
        ctx: RequestContext,
        resource_type: ResourceType,
        name: str,
        operations: tuple[AclOperation, ...],
    ) -> int:
        """AuthHelper.authorizedOperations: without an authorizer, every operation the
        resource type supports."""
        if self._authorizer is None:
            return sum(1 << op for op in operations)
        return self._authorizer.authorized_operations(
            ctx.session, resource_type, name, operations
        )

    def _metadata_error(self, error: Errors) -> MetadataResponse:
        return MetadataResponse(error_code=error)

    # ------------------------------------------------------------------ 71 / 72
    def get_telemetry_subscriptions(
        self, request: GetTelemetrySubscriptionsRequest, ctx: RequestContext
    ) -> GetTelemetrySubscriptionsResponse:
        if self.subscriptions_unknown():
            # Not the empty set as if it were the cluster's: an error every client
            # retries. THROTTLING_QUOTA_EXCEEDED is the one Kafka's Java client neither
            # disables telemetry on nor re-asks at once (ClientTelemetryUtils: it re-Gets
            # after the push interval); librdkafka re-Gets after 30 s (docs/scale-out.md).
            return _SUBSCRIPTIONS_UNKNOWN
        return self._manager.get_telemetry_subscriptions(
            request.client_instance_id, ctx.session, ctx.frame.client_id, ctx.now_ms
        )

    def push_telemetry(
        self, request: PushTelemetryRequest, ctx: RequestContext
    ) -> PushTelemetryResponse:
        return self._manager.push_telemetry(
            request,
            ctx.session,
            ctx.frame.client_id,
            ctx.frame.correlation_id,
            ctx.now_ms,
        )


def _in_kafka_order(topics: Sequence[Any]) -> list[Any]:
    """The requested topics as Kafka 4.4.0 answers them: the names through a
    ``java.util.HashSet`` (a name asked twice is answered once, in hash order), then the
    topics asked by id, in request order."""

    def by_id(topic: Any) -> bool:
        return topic.name is None or (not topic.name and topic.topic_id != ZERO_UUID)

    by_name = {t.name: t for t in topics if not by_id(t)}
    named = [by_name[name] for name in JavaHashSet.copy_of(list(by_name))]
    return named + [t for t in topics if by_id(t)]


ApiNameFn = Callable[[int], str]
