"""``queued.max.request.bytes``: one budget for the request bytes every connection holds.

Kafka's broker takes a buffer for each request from one memory pool
(``queued.max.request.bytes``, ``SimpleMemoryPool``) as soon as the request's size is read,
and while the pool is empty it stops reading from every connection that would need a new
buffer; connections already holding one finish their request.  This is the same pool,
shared by a node's :class:`~collector.net.protocol.KafkaProtocol` objects:

* **What is counted.** A request is counted at its announced size the moment its size
  prefix (and api key) is read and it has not arrived whole, if the budget has room:
  reserved, as Kafka allocates, rather than counted as its bytes arrive.  One that begins
  while the budget is used up is not admitted: it counts only the bytes read with its
  prefix, and its connection waits until there is room.  Counting arrivals would let requests that hold
  memory stall each other forever once the budget is full (none could complete); a
  reservation lets every admitted request complete, and the bound holds: the bytes held
  never exceed the budget by more than the requests admitted just before it ran out
  (Kafka's pool is not strict either: the last allocation may overshoot).  A request that
  arrives whole in one read is handed on in that read and is counted only if it waits
  (its connection is muted by a throttle).
* **When it is released.** When the request leaves the codec for its handler (from then on
  its bytes are the handler's: a push staged for the landing log, a forwarded request in
  the upstream connection's buffer, each bounded by its own back-pressure), or when the
  connection closes.
* **What happens when it runs out.** Every connection that is not in the middle of an
  admitted request stops reading (``KafkaProtocol.hold_for_memory``); answers keep being
  written and requests already read keep being handled.  The listeners stop accepting
  (``room`` is clear; new connections wait in the kernel's backlog): asyncio reads a new
  connection's first bytes whatever its protocol asks in ``connection_made``, so accepting
  would let each new connection add a read (up to 256 KiB) the budget never admitted.
  When the bytes held fall below the budget, every connection held for it reads again and
  the listeners accept again.

The bound: the bytes held exceed the budget by at most the requests admitted before it ran
out (each at most its API's limit), and the first read of each connection that was being
opened when it ran out.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

__all__ = ["MemoryHolder", "RequestMemory"]


class MemoryHolder(Protocol):
    """What the budget needs of a connection (KafkaProtocol is one)."""

    @property
    def memory_granted(self) -> bool:
        """In the middle of a request admitted while the budget had room."""
        ...

    def hold_for_memory(self, held: bool) -> None: ...


class RequestMemory:
    """The bytes of requests held across a node's connections, against ``limit``."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"queued.max.request.bytes must be >= 1, got {limit}")
        self.limit = limit
        self.held = 0
        self.exhausted = False
        # Times the budget ran out (a metric: how often reading stopped for memory).
        self.exhaustions = 0
        self._connections: dict[int, MemoryHolder] = {}
        self._waiting: dict[int, MemoryHolder] = {}  # held for memory, by connection id
        # Set while the budget has room (the acceptors wait on it).
        self.room = asyncio.Event()
        self.room.set()

    @property
    def waiting(self) -> int:
        """Connections not read from because the budget is used up."""
        return len(self._waiting)

    def register(self, connection_id: int, connection: MemoryHolder) -> None:
        self._connections[connection_id] = connection

    def unregister(self, connection_id: int) -> None:
        self._connections.pop(connection_id, None)
        self._waiting.pop(connection_id, None)

    def hold(self, connection_id: int) -> None:
        """Stop reading from this connection until the budget has room again."""
        connection = self._connections.get(connection_id)
        if connection is not None and connection_id not in self._waiting:
            self._waiting[connection_id] = connection
            connection.hold_for_memory(True)

    def adjust(self, delta: int) -> None:
        """A connection now holds ``delta`` more bytes (negative: fewer)."""
        self.held += delta
        exhausted = self.held >= self.limit
        if exhausted == self.exhausted:
            return
        self.exhausted = exhausted
        if exhausted:
            self.room.clear()
            self.exhaustions += 1
            for connection_id, connection in list(self._connections.items()):
                if not connection.memory_granted:
                    self.hold(connection_id)
        else:
            self.room.set()
            self._release_waiting()

    def _release_waiting(self) -> None:
        # A connection read again may reserve enough to run the budget out again: the rest
        # then keep waiting.
        for connection_id in list(self._waiting):
            if self.exhausted:
                return
            connection = self._waiting.pop(connection_id, None)
            if connection is not None:
                connection.hold_for_memory(False)
