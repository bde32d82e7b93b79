"""The dispatcher answers PushTelemetry v0 from a packed struct, not the generated writer;
its bytes must be exactly what encode_response gives, for every error code."""

from __future__ import annotations

import pytest

from collector.pipeline.dispatch import push_response_v0
from proto import ApiKeys, encode_response
from proto.errors import Errors
from proto.messages import PushTelemetryResponse


@pytest.mark.parametrize("error", list(Errors))
@pytest.mark.parametrize("correlation_id", [0, 7, -1, 2**31 - 1, -(2**31)])
def test_push_answer_bytes_are_the_generated_encoding(
    error: Errors, correlation_id: int
) -> None:
    assert push_response_v0(correlation_id, error) == encode_response(
        ApiKeys.PUSH_TELEMETRY,
        0,
        correlation_id,
        PushTelemetryResponse(throttle_time_ms=0, error_code=error),
    )


@pytest.mark.parametrize("error_code", [-2, 200, 32767])
def test_a_code_kafka_does_not_define_is_packed_whole(error_code: int) -> None:
    assert push_response_v0(5, error_code) == encode_response(
        ApiKeys.PUSH_TELEMETRY, 0, 5, PushTelemetryResponse(error_code=error_code)
    )
