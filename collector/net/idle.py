"""``connections.max.idle.ms``: close connections that have had no traffic for that long.

Kafka's ``Selector`` notes the time of every connection's last I/O and, on each poll, closes
the one quiet the longest once it has been quiet for ``connections.max.idle.ms`` (600000 by
default; a negative value turns expiry off).  It makes no exception for a connection waiting
on a throttle or on its own pending response: the broker counts on those waits being far
shorter than ten minutes.  Here they are exceptions (``KafkaProtocol.busy``): a gateway
forwards requests an upstream broker may hold for as long as the client asked (a JoinGroup
waits out a rebalance, up to the group's ``max.poll.interval.ms``), and a quota can throttle
for longer than any fixed bound; closing such a connection would turn a slow answer into a
lost one.  A connection not read from because the request budget
(``queued.max.request.bytes``) is used up is not an exception, as in Kafka: it is quiet.

The sweep is sans-IO: the node calls :meth:`IdleConnections.sweep` with its clock's time
every :func:`sweep_period_ms`; a connection's traffic is seen as a change of its
``activity`` counter between two sweeps, so it closes between ``connections.max.idle.ms``
and that plus one period after its last byte (Kafka's check runs every poll, about as
coarse).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

__all__ = ["IdleConnections", "IdleWatched", "sweep_period_ms"]

# The sweep looks at every connection; once a second is cheap for tens of thousands.
_MAX_SWEEP_PERIOD_MS = 1000


def sweep_period_ms(max_idle_ms: int) -> int:
    """How often to sweep: a tenth of the idle limit, at most once a second."""
    return max(1, min(_MAX_SWEEP_PERIOD_MS, max_idle_ms // 10))


class IdleWatched(Protocol):
    """What the sweep needs of a connection (KafkaProtocol is one)."""

    @property
    def activity(self) -> int: ...

    @property
    def busy(self) -> bool: ...

    def close_for(self, reason: str, quiet: bool = False) -> None: ...


class IdleConnections:
    """Closes the connections of ``connections()`` (connection id -> connection) that have
    been quiet for ``max_idle_ms``."""

    def __init__(
        self,
        max_idle_ms: int,
        connections: Callable[[], Iterable[tuple[int, IdleWatched]]],
    ) -> None:
        if max_idle_ms < 1:
            raise ValueError(
                f"connections.max.idle.ms must be >= 1 here, got {max_idle_ms}"
            )
        self.max_idle_ms = max_idle_ms
        self._connections = connections
        # connection id -> (its activity count, when that count was first seen)
        self._seen: dict[int, tuple[int, int]] = {}
        self.closed = 0  # connections closed for idleness (a metric)

    def sweep(self, now_ms: int) -> None:
        seen: dict[int, tuple[int, int]] = {}
        previous = self._seen
        for connection_id, connection in self._connections():
            activity = connection.activity
            last = previous.get(connection_id)
            if last is None or last[0] != activity or connection.busy:
                seen[connection_id] = (activity, now_ms)
            elif now_ms - last[1] >= self.max_idle_ms:
                self.closed += 1
                connection.close_for(
                    f"idle for {now_ms - last[1]} ms (connections.max.idle.ms={self.max_idle_ms})"
                )
            else:
                seen[connection_id] = last
        self._seen = seen
