"""Client-metrics subscriptions: model, validation, matching, merging, ids, durable store.

Bit-compatible with Apache Kafka's broker (``ClientMetricsConfigs``,
``ClientMetricsInstanceMetadata``, ``ClientMetricsManager``): the same validation errors,
the same matching, the same merged ``RequestedMetrics`` order and the same SubscriptionId.
"""

from subscriptions.config_file import ConfigFileError
from subscriptions.effective import EffectiveSubscription, resolve
from subscriptions.kafka_uuid import (
    ONE_UUID,
    ZERO_UUID,
    kafka_uuid_from_str,
    kafka_uuid_hash_code,
    kafka_uuid_to_str,
    random_instance_id,
)
from subscriptions.matching import ClientMetadata, java_host_address, matches
from subscriptions.model import (
    ALL_METRICS,
    CONFIG_INTERVAL_MS,
    CONFIG_MATCH,
    CONFIG_METRICS,
    DEFAULT_INTERVAL_MS,
    SELECTORS,
    Subscription,
)
from subscriptions.quota_entities import ANY, QuotaEntity, QuotaFilterComponent
from subscriptions.store import ConfigSnapshot, ConfigStore
from subscriptions.subscription_id import compute_subscription_id

__all__ = [
    "ALL_METRICS",
    "ANY",
    "CONFIG_INTERVAL_MS",
    "CONFIG_MATCH",
    "CONFIG_METRICS",
    "DEFAULT_INTERVAL_MS",
    "ONE_UUID",
    "SELECTORS",
    "ZERO_UUID",
    "ClientMetadata",
    "ConfigFileError",
    "ConfigSnapshot",
    "ConfigStore",
    "EffectiveSubscription",
    "QuotaEntity",
    "QuotaFilterComponent",
    "Subscription",
    "compute_subscription_id",
    "java_host_address",
    "kafka_uuid_from_str",
    "kafka_uuid_hash_code",
    "kafka_uuid_to_str",
    "matches",
    "random_instance_id",
    "resolve",
]
