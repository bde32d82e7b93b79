"""The dispatcher answers PushTelemetry v0 from a packed struct, not the generated writer;
its bytes must be exactly what encode_response gives, for every error code."""

from __future__ import annotations

import pytest

from collector.dispatch import push_response_v0
from proto import ApiKeys, encode_response
from proto.errors import Errors
from proto.messages import PushTelemetryResponse


@pytest.mark.parametrize("error", list(Errors))
@pytest.mark.parametrize("correlation_id", [0, 7, -1, 2**31 - 1, -(2**31)])
def test_push_answer_bytes_are_the_generated_encoding(error: Errors, correlation_id: int) -> None:
    assert push_response_v0(correlation_id, error) == encode_response(
        ApiKeys.PUSH_TELEMETRY,
        0,
        correlation_id,
        PushTelemetryResponse(throttle_time_ms=0, error_code=error),
    )
