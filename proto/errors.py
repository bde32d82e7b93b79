"""Kafka error codes (Errors.java) and exceptions that carry them.

PROVISIONAL: the proto helper replaces this with the complete table from Errors.java,
keeping these names.
"""

from __future__ import annotations

import enum

__all__ = ["Errors", "KafkaError", "error_for"]


class Errors(enum.IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    CORRUPT_MESSAGE = 2
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    UNSUPPORTED_COMPRESSION_TYPE = 76
    INVALID_RECORD = 87
    THROTTLING_QUOTA_EXCEEDED = 89
    RESOURCE_NOT_FOUND = 91
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118


class KafkaError(Exception):
    """An error with a Kafka error code; one boundary turns it into a response."""

    error_code: Errors = Errors.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", error_code: Errors | None = None) -> None:
        super().__init__(message or (error_code or self.error_code).name)
        if error_code is not None:
            self.error_code = error_code


def error_for(code: Errors, message: str = "") -> KafkaError:
    return KafkaError(message, code)
