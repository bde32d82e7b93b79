"""When to retry an OTLP export, and how long to wait.

Classification follows the Collector's ``exporter/otlpexporter/otlp.go`` (``shouldRetry``,
``processError``): a fixed set of gRPC codes is retryable; ``RESOURCE_EXHAUSTED`` only when
the server attached a ``google.rpc.RetryInfo`` (it says it will recover); everything else is
permanent.  The wait follows ``exporter/exporterhelper/internal/retry_sender.go``: the next
exponential backoff, or the server's RetryInfo delay if that is longer.

The backoff is cenkalti/backoff's ``ExponentialBackOff`` as the Collector configures it:
each wait is ``current * (1 ± randomization_factor)``, then ``current *= multiplier``,
capped at ``max_interval``.  With the defaults (5s, x1.5, ±50%, cap 30s) the nominal waits
are 5, 7.5, 11.25, 16.9, 25.3, 30, 30, ... seconds, each drawn from [0.5x, 1.5x] of that.
"""

from __future__ import annotations

import dataclasses
import random

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from exporters.otlp.config import RetryConfig

__all__ = [
    "ALWAYS_RETRYABLE_CODES",
    "ExponentialBackoff",
    "RpcFailure",
    "classify_rpc_error",
]

ALWAYS_RETRYABLE_CODES: frozenset[grpc.StatusCode] = frozenset(
    {
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)


@dataclasses.dataclass(frozen=True, slots=True)
class RpcFailure:
    """A failed Export attempt, classified."""

    code: grpc.StatusCode
    message: str
    retryable: bool
    retry_delay_s: float | None  # from google.rpc.RetryInfo, when the server sent one


def _retry_info_delay_s(error: grpc.RpcError) -> float | None:
    """The RetryInfo delay carried in ``grpc-status-details-bin``, or None if absent."""
    try:
        status = rpc_status.from_call(error)  # type: ignore[arg-type]
    except ValueError:
        # The details' code/message disagree with the call's: the trailer is not trustworthy.
        return None
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return max(0.0, info.retry_delay.ToTimedelta().total_seconds())
    return None


def classify_rpc_error(error: grpc.RpcError) -> RpcFailure:
    code: grpc.StatusCode = error.code()  # type: ignore[attr-defined]
    message: str = error.details() or ""  # type: ignore[attr-defined]
    delay_s = _retry_info_delay_s(error)
    if code in ALWAYS_RETRYABLE_CODES:
        retryable = True
    elif code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        # Only a server that says when to come back can recover from exhaustion.
        retryable = delay_s is not None
    else:
        retryable = False
    return RpcFailure(code, message, retryable, delay_s)


class ExponentialBackoff:
    """Jittered exponential backoff.  ``rng`` is injectable so tests can pin the jitter."""

    __slots__ = ("_config", "_current_s", "_rng")

    def __init__(self, config: RetryConfig, rng: random.Random | None = None) -> None:
        self._config = config
        self._rng = rng if rng is not None else random.Random()
        self._current_s = config.initial_interval.total_seconds()

    @property
    def max_interval_s(self) -> float:
        return self._config.max_interval.total_seconds()

    def jitter(self, interval_s: float) -> float:
        """``interval_s * (1 ± randomization_factor)``, uniformly."""
        factor = self._config.randomization_factor
        low, high = interval_s * (1 - factor), interval_s * (1 + factor)
        return low + self._rng.random() * (high - low)

    def next_delay_s(self) -> float:
        delay_s = self.jitter(self._current_s)
        self._current_s = min(
            self._current_s * self._config.multiplier, self.max_interval_s
        )
        return delay_s
