"""Kafka error codes and the exceptions that carry them.

The code table mirrors ``clients/src/main/java/org/apache/kafka/common/protocol/Errors.java``
(Apache Kafka trunk, 4.4 era): every code, Kafka's names. Only the codes and names are taken;
Kafka's messages are not copied.

Two families of failure, handled differently by the server (see docs/protocol.md):

* ``KafkaError`` and its subclasses: "the request is wrong". Each carries the Kafka error
  code it maps to (``.error_code``); one boundary in the collector turns it into a response
  (or, where Kafka closes the connection for it, closes).
* ``FramingError``: "the peer broke framing" (size prefix negative or over the limit, a header
  that cannot be parsed). No response is possible; the connection is closed.
"""

from __future__ import annotations

import enum

__all__ = [
    "ClusterAuthorizationError",
    "CorruptRecordError",
    "Errors",
    "FramingError",
    "InvalidConfigError",
    "InvalidRecordError",
    "InvalidRequestError",
    "KafkaError",
    "PolicyViolationError",
    "ResourceNotFoundError",
    "TelemetryTooLargeError",
    "ThrottlingQuotaExceededError",
    "UnknownApiKey",
    "UnknownServerError",
    "UnknownSubscriptionIdError",
    "UnsupportedCompressionTypeError",
    "UnsupportedVersionError",
    "error_for",
]


class Errors(enum.IntEnum):
    """Every error code of Kafka's ``Errors.java``, same names, same numbers."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133
    GROUP_DELETION_FAILED = 134
    STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED = 135
    CONTROLLER_ID_NOT_REGISTERED = 136


class KafkaError(Exception):
    """An error that has a Kafka error code; one boundary turns it into a response.

    Subclasses fix ``error_code``; the base class can carry any code::

        KafkaError("bad", Errors.POLICY_VIOLATION).error_code == Errors.POLICY_VIOLATION
    """

    error_code: Errors = Errors.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", error_code: Errors | None = None) -> None:
        if error_code is not None:
            self.error_code = Errors(error_code)
        super().__init__(message or self.error_code.name)


class FramingError(Exception):
    """The peer broke framing: close the connection without a response.

    Not a ``KafkaError`` on purpose: there is no error code to send, and nothing read after
    this point can be trusted to be a frame boundary.
    """


# Named like Kafka's exception classes (``FooException`` -> ``FooError``).


class UnknownServerError(KafkaError):
    error_code = Errors.UNKNOWN_SERVER_ERROR


class CorruptRecordError(KafkaError):
    error_code = Errors.CORRUPT_MESSAGE


class ClusterAuthorizationError(KafkaError):
    error_code = Errors.CLUSTER_AUTHORIZATION_FAILED


class UnsupportedVersionError(KafkaError):
    error_code = Errors.UNSUPPORTED_VERSION


class InvalidConfigError(KafkaError):
    """Kafka's ``InvalidConfigurationException`` (INVALID_CONFIG, 40)."""

    error_code = Errors.INVALID_CONFIG


class InvalidRequestError(KafkaError):
    error_code = Errors.INVALID_REQUEST


class PolicyViolationError(KafkaError):
    error_code = Errors.POLICY_VIOLATION


class UnsupportedCompressionTypeError(KafkaError):
    error_code = Errors.UNSUPPORTED_COMPRESSION_TYPE


class InvalidRecordError(KafkaError):
    error_code = Errors.INVALID_RECORD


class ThrottlingQuotaExceededError(KafkaError):
    error_code = Errors.THROTTLING_QUOTA_EXCEEDED


class ResourceNotFoundError(KafkaError):
    error_code = Errors.RESOURCE_NOT_FOUND


class UnknownSubscriptionIdError(KafkaError):
    error_code = Errors.UNKNOWN_SUBSCRIPTION_ID


class TelemetryTooLargeError(KafkaError):
    error_code = Errors.TELEMETRY_TOO_LARGE


class UnknownApiKey(InvalidRequestError):
    """A request for an API key we do not know at all.

    Kafka (``RequestHeader.parse``) raises ``InvalidRequestException("Unknown API key")`` and
    the socket server closes the connection; hence a subclass of ``InvalidRequestError``.
    """

    def __init__(self, api_key: int) -> None:
        super().__init__(f"Unknown API key {api_key}")
        self.api_key = api_key


_EXCEPTION_FOR_CODE: dict[Errors, type[KafkaError]] = {
    cls.error_code: cls
    for cls in (
        UnknownServerError,
        CorruptRecordError,
        ClusterAuthorizationError,
        UnsupportedVersionError,
        InvalidConfigError,
        InvalidRequestError,
        PolicyViolationError,
        UnsupportedCompressionTypeError,
        InvalidRecordError,
        ThrottlingQuotaExceededError,
        ResourceNotFoundError,
        UnknownSubscriptionIdError,
        TelemetryTooLargeError,
    )
}


def error_for(code: Errors | int, message: str = "") -> KafkaError:
    """The exception for ``code``: its named subclass if there is one, else a ``KafkaError``."""
    error = Errors(code)
    cls = _EXCEPTION_FOR_CODE.get(error)
    if cls is None:
        return KafkaError(message, error)
    return cls(message)
