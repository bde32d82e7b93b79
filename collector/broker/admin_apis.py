"""Kafka's admin APIs for CLIENT_METRICS resources, so Kafka's own tools
(``kafka-client-metrics.sh``, ``kafka-configs.sh``) and any AdminClient manage the
collector's subscriptions over the wire.

Semantics follow the broker (KIP-714's CLIENT_METRICS config resource, KIP-1142's
ListConfigResources; ``ConfigHelper``, ``ConfigurationControlManager``,
``KafkaApis.handleListConfigResources``):

| API                           | CLIENT_METRICS behaviour                                        |
|-------------------------------|-----------------------------------------------------------------|
| DescribeConfigs (32) v1-4     | all three keys; set ones source 7 (CLIENT_METRICS_CONFIG), unset|
|                               | ones their default with source 5 (DEFAULT_CONFIG) (Kafka 4.1+); |
|                               | empty name -> INVALID_REQUEST; unknown name -> the defaults     |
| IncrementalAlterConfigs (44)  | Kafka's preprocess first (a resource named twice, a key named   |
|                               | twice, a null value on any op but DELETE -> INVALID_REQUEST);   |
|                               | SET / DELETE merged into the full map and validated as a whole  |
|                               | by the store; APPEND / SUBTRACT -> INVALID_CONFIG; an empty     |
|                               | result removes the subscription; validate_only honoured         |
| ListConfigResources (74) v0-1 | names of subscriptions that exist; v1 types outside TOPIC,      |
|                               | BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP -> UNSUPPORTED_VERSION |
| DescribeClientQuotas (48) v0-1| the store's entity quotas through Kafka's filter semantics      |
|                               | (exact name / default / any of a type; ``strict``)             |
| AlterClientQuotas (49) v0-1   | per entry: set or remove keys, validated as Kafka's controller  |
|                               | does; applied to the quota engine at once; validate_only        |

Both mutations go through the controller mutation quota of the request's (user, client-id)
(``controller_mutation_rate``, KIP-599), one permit per altered resource or quota entity,
counted after the change validated and before it is applied (a validate-only request counts
too, as Kafka's controller counts it).  Strict or permissive by request version, as Kafka's
``ControllerApis`` decides for its own mutation APIs (:data:`MUTATION_QUOTA_STRICT_SINCE`):
strict rejects a change with THROTTLING_QUOTA_EXCEEDED (89) once the bucket is empty;
permissive applies it and throttles the response.  Either way the response's
``throttle_time_ms`` is the larger of the mutation and request throttles, and the
connection is muted that long.

Other resource types answer INVALID_REQUEST naming the type: the collector has no topics,
groups or broker configs to manage.

With an authorizer (``authorizer.class.name``), each API checks what Kafka checks
(``ControllerApis.authorizeAlterResource``, ``ConfigHelper``, ``KafkaApis``), on the CLUSTER
resource: CLIENT_METRICS alterations ALTER_CONFIGS (denied per resource), CLIENT_METRICS
describes and ListConfigResources DESCRIBE_CONFIGS, AlterClientQuotas ALTER_CONFIGS,
DescribeClientQuotas DESCRIBE_CONFIGS; a denial answers CLUSTER_AUTHORIZATION_FAILED (31),
"Cluster authorization failed.".  Without one, like a Kafka broker without
``authorizer.class.name``, every principal may alter subscriptions and quotas.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Protocol, TypeVar

from collector.core.context import RequestContext
from collector.pipeline.dispatch import Api
from collector.security.acls import AclOperation
from proto import ApiKeys
from proto.errors import Errors, KafkaError
from proto.messages import alter_client_quotas_response as acq_response
from proto.messages import describe_client_quotas_response as dcq_response
from proto.messages.alter_client_quotas_request import AlterClientQuotasRequest
from proto.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from proto.messages.describe_configs_request import DescribeConfigsRequest
from proto.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from proto.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from proto.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)
from proto.messages.list_config_resources_request import ListConfigResourcesRequest
from proto.messages.list_config_resources_response import (
    ConfigResource,
    ListConfigResourcesResponse,
)
from quota import ControllerMutationQuota, ThrottlingQuotaExceededError
from quota.mutation_quota import UNBOUNDED_MUTATION_QUOTA
from subscriptions.java_hashset import JavaHashSet
from subscriptions.model import CONFIG_KEYS
from subscriptions.quota_entities import ANY, QuotaFilterComponent

__all__ = [
    "CLIENT_METRICS",
    "MUTATION_QUOTA_STRICT_SINCE",
    "AdminApis",
    "MutationQuotas",
    "cluster_allows",
]

log = logging.getLogger(__name__)

_ResourceResult = TypeVar("_ResourceResult")

# ConfigResource.Type ids
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
LISTABLE_TYPES = frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP})

# AlterConfigOp.OpType
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# DescribeConfigsResponse.ConfigSource / ConfigType
SOURCE_DEFAULT_CONFIG = 5
SOURCE_CLIENT_METRICS_CONFIG = 7
TYPE_INT, TYPE_LIST = 3, 7


# ClientMetricsConfigs.CONFIG: key -> (type, default as ConfigDef.convertToString renders
# it, documentation).
CLIENT_METRICS_KEYS: Mapping[str, tuple[int, str, str]] = {
    key.name: (
        TYPE_LIST if key.type == "LIST" else TYPE_INT,
        key.default,
        key.documentation,
    )
    for key in CONFIG_KEYS
}
# DescribeConfigs lists them in java.util.HashMap order (ConfigHelper walks the parsed
# AbstractConfig's values map), which for these three names is alphabetical.
_DESCRIBE_ORDER: Final = ("interval.ms", "match", "metrics")
TOPIC = 2
_UNKNOWN_TOPIC_MESSAGE = ""  # Kafka 4.4.0 answers UNKNOWN_TOPIC_OR_PARTITION with ""


def _unsupported(resource_type: int) -> str:
    return (
        f"resource type {resource_type} is not supported by the collector "
        f"(only CLIENT_METRICS, type {CLIENT_METRICS})"
    )


# DescribeClientQuotasRequest.ComponentData.MatchType (ClientQuotaFilterComponent)
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# The first request version whose mutations get the *strict* controller mutation quota.
# Kafka (ControllerApis, KIP-599) makes an API strict from the version that added
# THROTTLING_QUOTA_EXCEEDED to its contract, so older clients, who would not know error
# 89, get the permissive quota (applied, then throttled):
#
#     CreateTopics 6+, DeleteTopics 5+, CreatePartitions 3+    strict
#     lower versions                                          permissive
#
# Kafka applies no mutation quota to IncrementalAlterConfigs or AlterClientQuotas, so no
# version of theirs says so.  The collector applies one and draws the line at the flexible
# version, v1, the one current AdminClients negotiate (Java, librdkafka); v0 senders are
# treated as Kafka treats its pre-KIP-599 clients. [our choice, after Kafka's rule]
MUTATION_QUOTA_STRICT_SINCE: Final[Mapping[int, int]] = {
    ApiKeys.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKeys.ALTER_CLIENT_QUOTAS: 1,
}
MUTATION_PERMITS_PER_CHANGE: Final = (
    1  # one per resource / quota entity (Kafka: partitions)
)


class MutationQuotas(Protocol):
    """Where an admin request gets its controller mutation quota (the server's
    ``QuotaEnforcer``; its throttle joins the response's)."""

    def mutation_quota(
        self, context: RequestContext, strict: bool
    ) -> ControllerMutationQuota: ...


class ClusterAuthorizer(Protocol):
    """May the session do ``operation`` on the CLUSTER? (the StandardAuthorizer's)"""

    def authorize(
        self, session: Any, operation: AclOperation, *, request_name: str = ""
    ) -> bool: ...


def cluster_allows(
    authorizer: ClusterAuthorizer | None,
    ctx: RequestContext,
    operation: AclOperation,
    request_name: str,
) -> bool:
    """May ``ctx``'s session do ``operation`` on the CLUSTER?  Without an authorizer, yes."""
    return authorizer is None or authorizer.authorize(
        ctx.session, operation, request_name=request_name
    )


# Errors.CLUSTER_AUTHORIZATION_FAILED.message(), what Kafka's ApiError carries.
CLUSTER_AUTHORIZATION_FAILED_MESSAGE: Final = "Cluster authorization failed."


class AdminApis:
    def __init__(
        self,
        store: Any,
        on_quotas_changed: Callable[[], None] = lambda: None,
        mutation_quotas: MutationQuotas | None = None,
        authorizer: ClusterAuthorizer | None = None,
    ) -> None:
        self._store = store
        self._on_quotas_changed = on_quotas_changed
        self._mutation_quotas = mutation_quotas
        self._authorizer = authorizer

    def _allowed(
        self, ctx: RequestContext, operation: AclOperation, request_name: str
    ) -> bool:
        return cluster_allows(self._authorizer, ctx, operation, request_name)

    def _mutation_quota(self, ctx: RequestContext) -> ControllerMutationQuota:
        if self._mutation_quotas is None:
            return UNBOUNDED_MUTATION_QUOTA
        strict = ctx.frame.api_version >= MUTATION_QUOTA_STRICT_SINCE[ctx.frame.api_key]
        return self._mutation_quotas.mutation_quota(ctx, strict)

    def table(self) -> dict[int, Api]:
        return {
            ApiKeys.DESCRIBE_CONFIGS: Api(
                "DescribeConfigs",
                self.describe_configs,
                lambda req, err: DescribeConfigsResponse(
                    results=_each_resource_failed(
                        DescribeConfigsResult, req.resources, err
                    )
                ),
            ),
            ApiKeys.INCREMENTAL_ALTER_CONFIGS: Api(
                "IncrementalAlterConfigs",
                self.incremental_alter_configs,
                lambda req, err: IncrementalAlterConfigsResponse(
                    responses=_each_resource_failed(
                        AlterConfigsResourceResponse, req.resources, err
                    )
                ),
            ),
            ApiKeys.LIST_CONFIG_RESOURCES: Api(
                "ListConfigResources",
                self.list_config_resources,
                lambda _, err: ListConfigResourcesResponse(error_code=err),
            ),
            ApiKeys.DESCRIBE_CLIENT_QUOTAS: Api(
                "DescribeClientQuotas",
                self.describe_client_quotas,
                lambda _, err: dcq_response.DescribeClientQuotasResponse(
                    error_code=err, error_message=None, entries=None
                ),
            ),
            ApiKeys.ALTER_CLIENT_QUOTAS: Api(
                "AlterClientQuotas",
                self.alter_client_quotas,
                lambda req, err: acq_response.AlterClientQuotasResponse(
                    entries=tuple(
                        acq_response.EntryData(
                            error_code=err,
                            error_message=None,
                            entity=tuple(
                                acq_response.EntityData(e.entity_type, e.entity_name)
                                for e in entry.entity
                            ),
                        )
                        for entry in req.entries
                    )
                ),
            ),
        }

    # ------------------------------------------------------------------ 32
    def describe_configs(
        self, request: DescribeConfigsRequest, ctx: RequestContext
    ) -> DescribeConfigsResponse:
        results = []
        for resource in request.resources:
            if resource.resource_type == TOPIC:
                results.append(
                    _describe_error(
                        resource,
                        Errors.UNKNOWN_TOPIC_OR_PARTITION,
                        _UNKNOWN_TOPIC_MESSAGE,
                    )
                )
                continue
            if resource.resource_type != CLIENT_METRICS:
                results.append(
                    _describe_error(
                        resource,
                        Errors.INVALID_REQUEST,
                        _unsupported(resource.resource_type),
                    )
                )
                continue
            if not self._allowed(ctx, AclOperation.DESCRIBE_CONFIGS, "DescribeConfigs"):
                results.append(
                    _describe_error(
                        resource,
                        Errors.CLUSTER_AUTHORIZATION_FAILED,
                        CLUSTER_AUTHORIZATION_FAILED_MESSAGE,
                    )
                )
                continue
            if not resource.resource_name:
                results.append(
                    _describe_error(
                        resource,
                        Errors.INVALID_REQUEST,
                        "Client metrics subscription name must not be empty",
                    )
                )
                continue
            set_keys: Mapping[str, str] = (
                self._store.describe(resource.resource_name) or {}
            )
            wanted = resource.configuration_keys
            configs = []
            for key in _DESCRIBE_ORDER:
                config_type, default, doc = CLIENT_METRICS_KEYS[key]
                if wanted is not None and len(wanted) > 0 and key not in wanted:
                    continue
                is_set = key in set_keys
                value = set_keys[key] if is_set else default
                source = (
                    SOURCE_CLIENT_METRICS_CONFIG if is_set else SOURCE_DEFAULT_CONFIG
                )
                synonyms = (
                    (DescribeConfigsSynonym(name=key, value=value, source=source),)
                    if request.include_synonyms and is_set
                    else ()
                )
                configs.append(
                    DescribeConfigsResourceResult(
                        name=key,
                        value=value,
                        read_only=False,
                        config_source=source,
                        is_sensitive=False,
                        synonyms=synonyms,
                        config_type=config_type,
                        documentation=doc if request.include_documentation else None,
                    )
                )
            results.append(
                DescribeConfigsResult(
                    error_code=Errors.NONE,
                    error_message="",  # Kafka's ApiError.NONE.messageWithFallback()
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=tuple(configs),
                )
            )
        return DescribeConfigsResponse(results=tuple(results))

    # ------------------------------------------------------------------ 44
    def incremental_alter_configs(
        self, request: IncrementalAlterConfigsRequest, ctx: RequestContext
    ) -> IncrementalAlterConfigsResponse:
        quota = self._mutation_quota(ctx)
        # Kafka's ConfigAdminManager.preprocess: a resource named twice fails every time.
        named = Counter((r.resource_type, r.resource_name) for r in request.resources)
        responses = []
        for resource in request.resources:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                error: tuple[Errors, str | None] = (
                    Errors.INVALID_REQUEST,
                    "Each resource must appear at most once.",
                )
            else:
                error = self._alter_one(resource, request.validate_only, quota, ctx)
            responses.append(
                AlterConfigsResourceResponse(
                    error_code=error[0],
                    error_message=error[1],
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
        return IncrementalAlterConfigsResponse(responses=tuple(responses))

    def _alter_one(
        self,
        resource: Any,
        validate_only: bool,
        quota: ControllerMutationQuota,
        ctx: RequestContext,
    ) -> tuple[Errors, str | None]:
        now_ms = ctx.now_ms
        # Kafka's ConfigAdminManager.preprocess, in its order, for every resource type.
        names = [config.name for config in resource.configs]
        if len(set(names)) != len(names):
            return Errors.INVALID_REQUEST, "Error due to duplicate config keys"
        nulls = [
            c.name
            for c in resource.configs
            if c.config_operation != DELETE and c.value is None
        ]
        if nulls:
            return (
                Errors.INVALID_REQUEST,
                "Null value not supported for : " + ", ".join(nulls),
            )
        if any(c.config_operation not in _OP_NAMES for c in resource.configs):
            # OpType.forId gives null and the broker fails on it: Kafka 4.4.0 answers
            # UNKNOWN_SERVER_ERROR without a message (ApiError hides a generic one).
            return Errors.UNKNOWN_SERVER_ERROR, None
        if resource.resource_type == TOPIC:
            # What a broker answers for a topic it does not have.
            return (
                Errors.UNKNOWN_TOPIC_OR_PARTITION,
                f"The topic '{resource.resource_name}' does not exist.",
            )
        if resource.resource_type != CLIENT_METRICS:
            return Errors.INVALID_REQUEST, _unsupported(resource.resource_type)
        # The controller authorizes each resource after the broker's preprocess.
        if not self._allowed(
            ctx, AclOperation.ALTER_CONFIGS, "IncrementalAlterConfigs"
        ):
            return (
                Errors.CLUSTER_AUTHORIZATION_FAILED,
                CLUSTER_AUTHORIZATION_FAILED_MESSAGE,
            )
        name = resource.resource_name
        if not name:
            # ClientMetricsConfigs.validate
            return Errors.INVALID_REQUEST, "Subscription name can't be empty"
        to_set: dict[str, str | None] = {}
        to_delete: list[str] = []
        for config in resource.configs:
            if config.config_operation in (APPEND, SUBTRACT):
                return (
                    Errors.INVALID_CONFIG,
                    (
                        f"Can't {_OP_NAMES[config.config_operation]} to key {config.name} "
                        "because its type is not LIST."
                    ),
                )
            if config.config_operation == SET:
                to_set[config.name] = config.value
            elif config.config_operation == DELETE:
                to_delete.append(config.name)
        try:
            # The store merges into the full map and validates it as a whole under its
            # lock, like Kafka's controller (ClientMetricsConfigs.validate on all configs).
            self._store.alter_subscription(name, to_set, to_delete, validate_only=True)
            quota.record(MUTATION_PERMITS_PER_CHANGE, now_ms)
            if validate_only:
                return Errors.NONE, None
            self._store.alter_subscription(name, to_set, to_delete)
        except ThrottlingQuotaExceededError as exc:
            return Errors.THROTTLING_QUOTA_EXCEEDED, str(exc)
        except KafkaError as exc:
            return Errors(exc.error_code), str(exc)
        log.info(
            "client metrics subscription %s altered over the wire: set %s, delete %s",
            name,
            to_set,
            to_delete,
        )
        return Errors.NONE, None

    # ------------------------------------------------------------------ 74
    def describe_client_quotas(
        self, request: DescribeClientQuotasRequest, ctx: RequestContext
    ) -> dcq_response.DescribeClientQuotasResponse:
        if not self._allowed(
            ctx, AclOperation.DESCRIBE_CONFIGS, "DescribeClientQuotas"
        ):
            return dcq_response.DescribeClientQuotasResponse(
                error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                error_message=None,  # what Kafka 4.4.0 answers (tests/compat)
                entries=None,
            )
        try:
            components = [_filter_component(c) for c in request.components]
            found = self._store.describe_quotas(components, strict=request.strict)
        except _BadFilter as exc:
            return dcq_response.DescribeClientQuotasResponse(
                error_code=Errors.INVALID_REQUEST, error_message=str(exc), entries=None
            )
        except KafkaError as exc:
            return dcq_response.DescribeClientQuotasResponse(
                error_code=exc.error_code, error_message=str(exc), entries=None
            )
        entries = tuple(
            dcq_response.EntryData(
                entity=tuple(
                    dcq_response.EntityData(t, n)
                    for t, n in _in_hash_order(dict(entity.entries))
                ),
                values=tuple(
                    dcq_response.ValueData(k, float(v))
                    for k, v in _in_hash_order(values)
                ),
            )
            for entity, values in found.items()
        )
        return dcq_response.DescribeClientQuotasResponse(
            error_code=Errors.NONE, error_message="", entries=entries
        )

    def alter_client_quotas(
        self, request: AlterClientQuotasRequest, ctx: RequestContext
    ) -> acq_response.AlterClientQuotasResponse:
        if not self._allowed(ctx, AclOperation.ALTER_CONFIGS, "AlterClientQuotas"):
            return acq_response.AlterClientQuotasResponse(
                entries=tuple(
                    acq_response.EntryData(
                        error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                        error_message=CLUSTER_AUTHORIZATION_FAILED_MESSAGE,
                        entity=tuple(
                            acq_response.EntityData(c.entity_type, c.entity_name)
                            for c in entry.entity
                        ),
                    )
                    for entry in request.entries
                )
            )
        quota = self._mutation_quota(ctx)
        results = []
        changed = False
        for entry in request.entries:
            error, message = Errors.NONE, None
            # Kafka reads the entity into a map: a type named twice keeps its last name,
            # and the answer echoes the map (java.util.HashMap order).
            entity: dict[str, str | None] = {}
            for component in entry.entity:
                entity[component.entity_type] = component.entity_name
            keys = [op.key for op in entry.ops]
            if len(set(keys)) != len(keys):
                # What Kafka 4.4.0 answers for a key named twice in one entry.
                error, message = (
                    Errors.INVALID_REQUEST,
                    f"Ignoring duplicate entity {_quota_entity_string(entity)}",
                )
            if error == Errors.NONE:
                to_set = {op.key: op.value for op in entry.ops if not op.remove}
                to_delete = [op.key for op in entry.ops if op.remove]
                try:
                    self._store.alter_quotas(
                        entity, to_set, to_delete, validate_only=True
                    )
                    quota.record(MUTATION_PERMITS_PER_CHANGE, ctx.now_ms)
                    if not request.validate_only:
                        self._store.alter_quotas(entity, to_set, to_delete)
                        changed = True
                except ThrottlingQuotaExceededError as exc:
                    error, message = Errors.THROTTLING_QUOTA_EXCEEDED, str(exc)
                except KafkaError as exc:
                    error, message = Errors(exc.error_code), str(exc)
            results.append(
                acq_response.EntryData(
                    error_code=error,
                    error_message=message,
                    # AlterClientQuotasRequest.entries(): new HashMap<>(entity count)
                    entity=tuple(
                        acq_response.EntityData(t, n)
                        for t, n in _in_hash_order(entity, len(entry.entity))
                    ),
                )
            )
        if changed:
            self._on_quotas_changed()
        return acq_response.AlterClientQuotasResponse(entries=tuple(results))

    def list_config_resources(
        self, request: ListConfigResourcesRequest, ctx: RequestContext
    ) -> ListConfigResourcesResponse:
        if not self._allowed(ctx, AclOperation.DESCRIBE_CONFIGS, "ListConfigResources"):
            return ListConfigResourcesResponse(
                error_code=Errors.CLUSTER_AUTHORIZATION_FAILED
            )
        types = (
            set(request.resource_types)
            if ctx.frame.api_version >= 1
            else {CLIENT_METRICS}
        )
        if types - LISTABLE_TYPES:
            return ListConfigResourcesResponse(error_code=Errors.UNSUPPORTED_VERSION)
        names: list[str] = []
        if not types or CLIENT_METRICS in types:
            names = list(self._store.list_names())
        return ListConfigResourcesResponse(
            error_code=Errors.NONE,
            config_resources=tuple(
                ConfigResource(resource_name=n, resource_type=CLIENT_METRICS)
                for n in names
            ),
        )


class _BadFilter(Exception):
    pass


def _filter_component(component: Any) -> QuotaFilterComponent:
    """ClientQuotaFilterComponent from the wire, with Kafka's request checks and messages
    (``ClientQuotasImage.describe``, Kafka 4.4.0)."""
    if component.match_type == MATCH_EXACT:
        if component.match is None:
            raise _BadFilter(
                "Request specified MATCH_TYPE_EXACT, but set match string to null."
            )
        return QuotaFilterComponent(component.entity_type, component.match)
    if component.match_type == MATCH_DEFAULT:
        if component.match is not None:
            raise _BadFilter(
                "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
            )
        return QuotaFilterComponent(component.entity_type, None)
    if component.match_type == MATCH_SPECIFIED:
        if component.match is not None:
            raise _BadFilter(
                "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
            )
        return QuotaFilterComponent(component.entity_type, ANY)
    raise _BadFilter(f"Unknown match type {component.match_type}")


def _each_resource_failed(
    result: Callable[..., _ResourceResult], resources: Iterable[Any], error: Errors
) -> tuple[_ResourceResult, ...]:
    """The error response of a config-resource API (Kafka's ``getErrorResponse`` of
    DescribeConfigs and IncrementalAlterConfigs): every requested resource echoed back
    as a ``result`` (DescribeConfigsResult, AlterConfigsResourceResponse) with ``error``."""
    return tuple(
        result(
            error_code=error,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        for resource in resources
    )


V = TypeVar("V")


def _in_hash_order(
    items: Mapping[str, V], capacity: int | None = None
) -> list[tuple[str, V]]:
    """A map's entries in java.util.HashMap order (of a map created with ``capacity``), the
    order Kafka's answers list them."""
    order = JavaHashSet(capacity)
    order.add_all(items)
    return [(key, items[key]) for key in order]


def _quota_entity_string(entity: Mapping[str, str | None]) -> str:
    """``ClientQuotaEntity.toString()``: ``ClientQuotaEntity(entries={client-id=a, user=b})``."""
    entries = ", ".join(f"{t}={n}" for t, n in _in_hash_order(entity, len(entity)))
    return f"ClientQuotaEntity(entries={{{entries}}})"


def _describe_error(
    resource: Any, error: Errors, message: str
) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        error_code=error,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
