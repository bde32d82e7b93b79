"""The states a Kafka Streams client pushes as numbers, by name.

KIP-1091 (Kafka 4.0+) has a Streams application push ``org.apache.kafka.stream.client.state``
(its admin client's instance; data-point attributes ``application_id``, since 4.2 by
KIP-1221, and ``process_id``) and ``org.apache.kafka.stream.thread.thread.state`` (each stream
thread's main consumer; ``process_id``, ``thread_id``) as gauges whose value is the state's
enum ordinal: the names never arrive.  These tables give the names back, in ordinal order,
as declared in Kafka's ``streams/src/main/java/org/apache/kafka/streams/KafkaStreams.java``
(``enum State``) and ``.../processor/internals/StreamThread.java`` (``enum State``); the same
order from 4.0 (the first release with the metrics) to 4.4.
``tests/proto/test_streams_states.py`` reads the enums from the kafka-streams 4.4.0 jar and
fails when they move.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLIENT_STATE_METRIC",
    "KAFKA_STREAMS_STATES",
    "STREAM_THREAD_STATES",
    "THREAD_STATE_METRIC",
    "state_name",
]

CLIENT_STATE_METRIC: Final = "org.apache.kafka.stream.client.state"
THREAD_STATE_METRIC: Final = "org.apache.kafka.stream.thread.thread.state"

# org.apache.kafka.streams.KafkaStreams.State, by ordinal.
KAFKA_STREAMS_STATES: Final = (
    "CREATED",
    "REBALANCING",
    "RUNNING",
    "PENDING_SHUTDOWN",
    "NOT_RUNNING",
    "PENDING_ERROR",
    "ERROR",
)

# org.apache.kafka.streams.processor.internals.StreamThread.State, by ordinal.
STREAM_THREAD_STATES: Final = (
    "CREATED",
    "STARTING",
    "PARTITIONS_REVOKED",
    "PARTITIONS_ASSIGNED",
    "RUNNING",
    "PENDING_SHUTDOWN",
    "DEAD",
)


def state_name(states: tuple[str, ...], value: float) -> str | None:
    """The name of the state whose ordinal ``value`` is; None for a value no state has."""
    if value != value or not float(value).is_integer():  # NaN, or not an ordinal
        return None
    index = int(value)
    return states[index] if 0 <= index < len(states) else None
