"""``ClientRequestQuotaManager``: ``request_percentage`` of request-handling thread time.

Follows ``ClientRequestQuotaManager`` (core ``kafka/server/ClientRequestQuotaManager.scala``)
and KIP-124.

Time is recorded as a percentage of one thread for one second (``100 / 1e9`` per ns): 10 ms
of thread time is 1 %, so ``request_percentage = 1`` allows 10 ms of handling per second.
Usage counts handler time (checked) plus network time (recorded afterwards, unchecked).

The throttle is capped at one quota window so a single expensive request, or a GC pause,
never holds a client for long.  With a 1 % quota, one 500 ms request records 50 %; over the
padded 10 s window that is a rate of 5 and X = (5 − 1) / 1 × 10 s = 40 s; the cap makes it
1 s (``quota.window.size.seconds``).

Requests the broker itself makes (or that must never be throttled) are recorded on the
never-expiring ``exempt`` sensor so operators still see the time they take.
"""

from __future__ import annotations

from typing import Any, Final

from quota.client_quota_manager import ClientQuotaManager, ClientQuotaManagerConfig
from quota.errors import QuotaViolationError
from quota.metric import MetricName
from quota.metrics import Metrics
from quota.quota_type import QuotaType
from quota.rate import Rate
from quota.throttle import bounded_throttle_time_ms
from quota.throttled_channel import ThrottledChannelQueue

__all__ = [
    "NANOS_TO_PERCENTAGE_PER_SECOND",
    "ClientRequestQuotaManager",
    "nanos_to_percentage",
]

NANOS_TO_PERCENTAGE_PER_SECOND: Final = 100.0 / 1_000_000_000
EXEMPT_SENSOR_NAME: Final = f"exempt-{QuotaType.REQUEST}"


def nanos_to_percentage(nanos: float) -> float:
    return nanos * NANOS_TO_PERCENTAGE_PER_SECOND


class ClientRequestQuotaManager(ClientQuotaManager):
    quota_metric_name_str = "request-time"
    quota_metric_description = "Tracking request-time per user/client-id"

    def __init__(
        self,
        config: ClientQuotaManagerConfig,
        metrics: Metrics,
        now_ms: int,
        queue: ThrottledChannelQueue[Any] | None = None,
    ) -> None:
        super().__init__(config, metrics, QuotaType.REQUEST, now_ms, queue)
        self.max_throttle_time_ms = config.quota_window_size_seconds * 1000
        # One sensor for all clients, so it never expires.
        self.exempt_sensor = metrics.sensor(EXEMPT_SENSOR_NAME, now_ms)
        self.exempt_sensor.add(
            MetricName(
                "exempt-request-time",
                str(QuotaType.REQUEST),
                description="Tracking exempt-request-time utilization percentage",
            ),
            Rate(),
        )

    def maybe_record_request_time_ns(
        self, user: str, client_id: str, request_thread_time_ns: int, now_ms: int
    ) -> int:
        """Record handler time if request quotas exist; the throttle time in ms (capped)."""
        if not self.quota_types_enabled:
            return 0
        return self.record_and_get_throttle_time_ms(
            user,
            client_id,
            request_thread_time_ns * NANOS_TO_PERCENTAGE_PER_SECOND,
            now_ms,
        )

    def record_network_thread_time_ns(
        self, user: str, client_id: str, network_thread_time_ns: int, now_ms: int
    ) -> None:
        """Add the time spent sending the response, without a check (Kafka's callback)."""
        if self.quota_types_enabled:
            self.record_no_throttle(
                user,
                client_id,
                network_thread_time_ns * NANOS_TO_PERCENTAGE_PER_SECOND,
                now_ms,
            )

    def maybe_record_exempt_ns(self, thread_time_ns: int, now_ms: int) -> None:
        """Account time of a request that is never throttled (only while quotas exist)."""
        if self.quota_types_enabled:
            self.exempt_sensor.record(
                thread_time_ns * NANOS_TO_PERCENTAGE_PER_SECOND, now_ms
            )

    def _throttle_time_ms(self, violation: QuotaViolationError, now_ms: int) -> int:
        return bounded_throttle_time_ms(violation, self.max_throttle_time_ms, now_ms)
