"""The quota engine: a port of Apache Kafka's quota subsystem, sans I/O.

Time is always a parameter (``now_ms``); the owner holds the clock (``clock.Clock``).  The
collector uses ``QuotaEngine`` (``quota/engine.py``); the building blocks are public for
tests and for reuse.  See docs/quotas.md.
"""

from quota.client_quota_manager import (
    ClientQuotaManager,
    ClientQuotaManagerConfig,
    ClientSensors,
    QuotaTypes,
)
from quota.connection_quotas import (
    ACCEPT,
    WAIT_FOR_SLOT,
    Accept,
    ConnectionDecision,
    ConnectionQuotaConfig,
    ConnectionQuotas,
    Delay,
    Reject,
    RejectReason,
    WaitForSlot,
)
from quota.engine import (
    EntityQuotaChange,
    ListenerLimits,
    QuotaEngine,
    QuotaEngineConfig,
)
from quota.entity import (
    DEFAULT,
    QUOTA_PRECEDENCE,
    ClientQuotaEntity,
    IpQuotaEntity,
    PrecedenceLevel,
    parse_entity,
)
from quota.entity_quotas import INVALID_REQUEST, QUOTA_KEYS, InvalidQuotaError
from quota.errors import (
    THROTTLING_QUOTA_EXCEEDED,
    QuotaConfigError,
    QuotaViolationError,
    ThrottlingQuotaExceededError,
)
from quota.metric import KafkaMetric, MetricName
from quota.metric_config import MetricConfig, Quota
from quota.metrics import Metrics, MetricValue
from quota.mutation_quota import (
    ControllerMutationQuota,
    ControllerMutationQuotaManager,
    PermissiveControllerMutationQuota,
    StrictControllerMutationQuota,
    UnboundedControllerMutationQuota,
)
from quota.quota_type import QuotaType
from quota.rate import Rate
from quota.request_quota import ClientRequestQuotaManager
from quota.sampled_stat import Avg, Max, SampledStat, WindowedCount, WindowedSum
from quota.sensor import Sensor
from quota.stat import CumulativeSum, MeasurableStat
from quota.throttle import (
    bounded_throttle_time_ms,
    max_value_in_quota_window,
    rate_throttle_time_ms,
    throttle_time_ms,
    token_bucket_throttle_time_ms,
)
from quota.throttled_channel import ThrottledChannel, ThrottledChannelQueue
from quota.token_bucket import TokenBucket

__all__ = [
    "ACCEPT",
    "DEFAULT",
    "INVALID_REQUEST",
    "QUOTA_KEYS",
    "QUOTA_PRECEDENCE",
    "THROTTLING_QUOTA_EXCEEDED",
    "WAIT_FOR_SLOT",
    "Accept",
    "Avg",
    "ClientQuotaEntity",
    "ClientQuotaManager",
    "ClientQuotaManagerConfig",
    "ClientRequestQuotaManager",
    "ClientSensors",
    "ConnectionDecision",
    "ConnectionQuotaConfig",
    "ConnectionQuotas",
    "ControllerMutationQuota",
    "ControllerMutationQuotaManager",
    "CumulativeSum",
    "Delay",
    "EntityQuotaChange",
    "InvalidQuotaError",
    "IpQuotaEntity",
    "KafkaMetric",
    "ListenerLimits",
    "Max",
    "MeasurableStat",
    "MetricConfig",
    "MetricName",
    "MetricValue",
    "Metrics",
    "PermissiveControllerMutationQuota",
    "PrecedenceLevel",
    "Quota",
    "QuotaConfigError",
    "QuotaEngine",
    "QuotaEngineConfig",
    "QuotaType",
    "QuotaTypes",
    "QuotaViolationError",
    "Rate",
    "Reject",
    "RejectReason",
    "SampledStat",
    "Sensor",
    "StrictControllerMutationQuota",
    "ThrottledChannel",
    "ThrottledChannelQueue",
    "ThrottlingQuotaExceededError",
    "TokenBucket",
    "UnboundedControllerMutationQuota",
    "WaitForSlot",
    "WindowedCount",
    "WindowedSum",
    "bounded_throttle_time_ms",
    "max_value_in_quota_window",
    "parse_entity",
    "rate_throttle_time_ms",
    "throttle_time_ms",
    "token_bucket_throttle_time_ms",
]
