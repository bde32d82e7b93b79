"""The dispatcher answers PushTelemetry from a packed struct, not the generated writer;
its bytes must be exactly what encode_response gives, for every error code."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from collector_testkit import lone_connection

from collector.dispatch import Api, Dispatcher, RequestContext
from proto import ApiKeys, ClientConnection, ServerConnection, encode_response
from proto.errors import Errors
from proto.messages import PushTelemetryRequest, PushTelemetryResponse


@pytest.mark.parametrize(
    "error",
    [
        Errors.NONE,
        Errors.INVALID_REQUEST,
        Errors.THROTTLING_QUOTA_EXCEEDED,
        Errors.UNKNOWN_SUBSCRIPTION_ID,
        Errors.TELEMETRY_TOO_LARGE,
        Errors.INVALID_RECORD,
    ],
)
@pytest.mark.parametrize("correlation_id", [0, 7, 2**31 - 1])
async def test_push_answer_bytes_are_the_generated_encoding(
    error: Errors, correlation_id: int
) -> None:
    def handle(request: Any, context: RequestContext) -> PushTelemetryResponse:
        return PushTelemetryResponse(throttle_time_ms=0, error_code=error)

    def direct(request: Any, *_: Any) -> PushTelemetryResponse:
        return PushTelemetryResponse(throttle_time_ms=0, error_code=error)

    # With a direct handler, as KafkaApis registers PushTelemetry: Dispatcher._push answers.
    table = {
        ApiKeys.PUSH_TELEMETRY: Api(
            "PushTelemetry",
            handle,
            lambda _, e: PushTelemetryResponse(error_code=e),
            direct=direct,
        )
    }
    dispatcher = Dispatcher(table, clock_ms=lambda: 0)
    client = ClientConnection(client_id="pinned")
    client._next_correlation_id = correlation_id  # the id under test
    server = ServerConnection()
    server.receive_data(
        client.send_request(
            ApiKeys.PUSH_TELEMETRY, 0, PushTelemetryRequest(uuid.uuid4(), 1, False, 0, b"")
        )
    )
    frame = server.next_request()
    assert frame is not None and frame.correlation_id == correlation_id
    answer = dispatcher.handle(frame, lone_connection())
    assert answer == encode_response(
        ApiKeys.PUSH_TELEMETRY,
        0,
        correlation_id,
        PushTelemetryResponse(throttle_time_ms=0, error_code=error),
    )
