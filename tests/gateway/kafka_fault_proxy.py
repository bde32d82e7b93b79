"""A TCP proxy in front of one Kafka broker that reads the protocol's framing and, when
armed, loses the answer to the Nth Produce request of one client after the broker wrote
it: the response is dropped and the client's connection closed, as a network that failed
at the worst moment; or, while switched on, refuses every Produce request of one client:
never forwarded (the broker never sees it), the connection closed, as a broker that went
away.  Everything else is forwarded unchanged, frame by frame.

The broker advertises the proxy (``advertised.listeners``: the proxy binds port 0 first,
the broker starts advertising it), so every client that bootstraps anywhere ends up
here; the upstream address is asked for on each connection (the broker's port is picked
when its cluster starts).

    proxy = FaultProxy(lambda: ("127.0.0.1", cluster.node_ports[1]["PLAINTEXT"]))
    proxy.start()                                  # proxy.port
    proxy.drop_produce_answer(nth=1, client_id="ktc-landing")
    proxy.answers_dropped                          # 1 once it happened
    proxy.produce_acks("ktc-landing")              # the acks of every Produce it saw
    proxy.refuse_produce("ktc-landing")            # until refuse_produce(None)
    proxy.produce_refused                          # the Produce requests it refused

Framing (Kafka's protocol guide): every request and response is an int32 length and that
many bytes; a request starts with api_key int16, api_version int16, correlation_id int32,
client_id nullable string (int16 length); a response starts with its request's
correlation id, and a connection's responses come in request order.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

PRODUCE: Final = 0
# Produce v9 and later are flexible: the header's tagged fields follow client_id, and
# transactional_id is a compact string.
_FIRST_FLEXIBLE_PRODUCE: Final = 9
_LENGTH = struct.Struct(">i")
_HEADER = struct.Struct(
    ">hhih"
)  # api_key, api_version, correlation_id, client_id length


@dataclass(frozen=True, slots=True)
class RequestSeen:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    acks: int | None  # Produce only


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def parse_request(body: bytes) -> RequestSeen:
    """The header of one request (the bytes after its length) and a Produce's acks."""
    api_key, api_version, correlation_id, client_id_len = _HEADER.unpack_from(body)
    pos = _HEADER.size
    client_id = None
    if client_id_len >= 0:
        client_id = body[pos : pos + client_id_len].decode()
        pos += client_id_len
    acks = None
    if api_key == PRODUCE:
        if api_version >= _FIRST_FLEXIBLE_PRODUCE:
            tagged, pos = _uvarint(body, pos)  # the header's tagged fields
            for _ in range(tagged):
                _, pos = _uvarint(body, pos)
                size, pos = _uvarint(body, pos)
                pos += size
            length_plus_one, pos = _uvarint(body, pos)  # transactional_id
            pos += max(length_plus_one - 1, 0)
        else:
            (length,) = struct.unpack_from(">h", body, pos)
            pos += 2 + max(length, 0)
        (acks,) = struct.unpack_from(">h", body, pos)
    return RequestSeen(api_key, api_version, correlation_id, client_id, acks)


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
        (size,) = _LENGTH.unpack(head)
        return head + await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


class FaultProxy:
    def __init__(self, upstream: Callable[[], tuple[str, int]]) -> None:
        self._upstream = upstream
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._lock = threading.Lock()
        self.port = 0
        self.requests: list[RequestSeen] = []
        self.answers_dropped = 0
        self.produce_refused = 0
        # Whose Produce requests are refused (never forwarded) while set.
        self._refusing: str | None = None
        # Armed: (client id, how many more of its Produce requests pass first).
        self._armed: tuple[str, int] | None = None

    # ------------------------------------------------------------ control
    def start(self) -> FaultProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def drop_produce_answer(self, *, nth: int, client_id: str) -> None:
        """Loses the answer to ``client_id``'s ``nth`` Produce request from now on."""
        with self._lock:
            self._armed = (client_id, nth - 1)

    def refuse_produce(self, client_id: str | None) -> None:
        """From now on every Produce request of ``client_id`` is refused (None: none)."""
        with self._lock:
            self._refusing = client_id

    def produce_acks(self, client_id: str) -> list[int | None]:
        with self._lock:
            return [
                r.acks
                for r in self.requests
                if r.api_key == PRODUCE and r.client_id == client_id
            ]

    # ------------------------------------------------------------ forwarding
    def _refused(self, request: RequestSeen) -> bool:
        """True (and counted) when ``request`` is a Produce of the refused client."""
        with self._lock:
            refusing = self._refusing
            if (
                refusing is None
                or request.api_key != PRODUCE
                or request.client_id != refusing
            ):
                return False
            self.produce_refused += 1
            return True

    def _doomed(self, request: RequestSeen) -> bool:
        """Records ``request``; True when its answer is the one to lose."""
        with self._lock:
            self.requests.append(request)
            armed = self._armed
            if (
                armed is None
                or request.api_key != PRODUCE
                or request.client_id != armed[0]
            ):
                return False
            if armed[1] > 0:
                self._armed = (armed[0], armed[1] - 1)
                return False
            self._armed = None
            return True

    async def _serve(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        host, port = self._upstream()
        try:
            broker_reader, broker_writer = await asyncio.open_connection(host, port)
        except OSError:
            client_writer.close()
            return
        doomed: set[int] = set()  # correlation ids whose answers are lost

        async def requests() -> None:
            with contextlib.suppress(ConnectionError):
                while (frame := await _read_frame(client_reader)) is not None:
                    request = parse_request(frame[4:])
                    if self._refused(request):
                        return  # never forwarded; the connection closes
                    if self._doomed(request):
                        doomed.add(request.correlation_id)
                    broker_writer.write(frame)
                    await broker_writer.drain()

        async def responses() -> None:
            with contextlib.suppress(ConnectionError):
                while (frame := await _read_frame(broker_reader)) is not None:
                    (correlation_id,) = struct.unpack_from(">i", frame, 4)
                    if correlation_id in doomed:
                        # Written by the broker, never answered: the client sees its
                        # connection fail with the request in flight.
                        with self._lock:
                            self.answers_dropped += 1
                        return
                    client_writer.write(frame)
                    await client_writer.drain()

        pumps = [asyncio.create_task(requests()), asyncio.create_task(responses())]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            for writer in (client_writer, broker_writer):
                writer.close()
