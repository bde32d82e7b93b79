"""``QuotaType``: which resource a client quota manager throttles.

Follows ``server-common/.../quota/QuotaType.java`` (the client-facing four; replication and
tiered-storage throttles have no place in a collector).  The value is Kafka's display name,
used as the metric group and sensor-name prefix (``Produce-alice:app-1``).
"""

from __future__ import annotations

import enum

__all__ = ["QUOTA_TYPE_BY_CONFIG_KEY", "QuotaType"]


class QuotaType(enum.Enum):
    FETCH = "Fetch"
    PRODUCE = "Produce"
    REQUEST = "Request"
    CONTROLLER_MUTATION = "ControllerMutation"

    def __str__(self) -> str:
        return self.value


# Entity config keys (QuotaConfig.java) -> the manager they configure.  connection_creation_rate
# is an IP-entity key handled by ConnectionQuotas, not a client quota type.
QUOTA_TYPE_BY_CONFIG_KEY: dict[str, QuotaType] = {
    "producer_byte_rate": QuotaType.PRODUCE,
    "consumer_byte_rate": QuotaType.FETCH,
    "request_percentage": QuotaType.REQUEST,
    "controller_mutation_rate": QuotaType.CONTROLLER_MUTATION,
}
