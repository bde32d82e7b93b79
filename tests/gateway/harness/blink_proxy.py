"""A TCP proxy in front of one Kafka broker that a test switches between passing bytes and
refusing: the "unreachable cluster" of a node that reads its subscriptions there, without
stopping the broker (the cluster fixture is shared) and without waiting for time.

    with BlinkProxy(("127.0.0.1", broker_port), refusing=True) as proxy:
        proxy.address            # "127.0.0.1:<port>": the node's bootstrap server
        proxy.open()             # pass bytes both ways from now on
        proxy.refuse()           # cut every open connection (reset); refuse new ones
        proxy.fail(74, -1)       # every ListConfigResources answered UNKNOWN_SERVER_ERROR
        proxy.rewritten          # answers rewritten so far (an event to wait for)
        proxy.fail(None)         # pass the broker's answers as they are again

Refusing keeps the port bound without listening, so the port stays the proxy's and a
connect fails at once with ECONNREFUSED, as against a stopped broker (an accept followed
by a close would look like a broker that requires SASL to the gateway's discovery).
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Final, Self

__all__ = ["BlinkProxy"]

_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST
# Where a flexible response (header v1) whose body starts ThrottleTimeMs int32, ErrorCode
# int16 (ListConfigResources v1, what the node's reads send to Kafka 4.4.0) has its error
# code: CorrelationId int32, an empty tagged-field section (one byte), ThrottleTimeMs.
_ERROR_AT: Final = 4 + 1 + 4


class BlinkProxy:
    def __init__(self, target: tuple[str, int], *, refusing: bool = False) -> None:
        self._target = target
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self.accepted = 0
        self.rewritten = 0
        self._fault: tuple[int, int] | None = None  # (api key, error code)
        self._socket = _bound(0)
        self.port: int = self._socket.getsockname()[1]
        self._refusing = True
        if not refusing:
            self.open()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.refuse()
        self._socket.close()

    def open(self) -> None:
        """Accept and pass bytes both ways."""
        with self._lock:
            if not self._refusing:
                return
            self._refusing = False
            self._socket.listen()
            listener = self._socket
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def refuse(self) -> None:
        """Cut every open connection (a reset) and refuse new ones: the port stays bound
        and does not listen, so a connect gets ECONNREFUSED, as from a stopped broker."""
        with self._lock:
            if self._refusing:
                return
            self._refusing = True
            self._socket.close()  # the accept thread ends
            cut, self._open = self._open, set()
            for sock in cut:  # before the port is bound again: they hold it too
                _reset(sock)
            self._socket = _bound(self.port)

    def fail(self, api_key: int | None, error_code: int = 0) -> None:
        """From now on answer every request of ``api_key`` with ``error_code`` in place of
        the broker's (see _ERROR_AT for the responses this fits); None: stop."""
        with self._lock:
            self._fault = None if api_key is None else (api_key, error_code)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed: refusing
            try:
                upstream = socket.create_connection(self._target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                if self._refusing:
                    _reset(client)
                    _reset(upstream)
                    continue
                self.accepted += 1
                self._open.update((client, upstream))
            asked: dict[int, int] = {}  # correlation id -> api key, this connection's
            threading.Thread(
                target=self._pump, args=(client, upstream, asked, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(upstream, client, asked, False), daemon=True
            ).start()

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        asked: dict[int, int],
        requests: bool,
    ) -> None:
        """Copy Kafka frames from ``source`` to ``sink``: requests noting each one's api
        key, responses rewritten where the fault says so."""
        try:
            while frame := _frame(source):
                if requests:
                    (api_key,) = struct.unpack_from(">h", frame, 4)
                    (correlation,) = struct.unpack_from(">i", frame, 8)
                    asked[correlation] = api_key
                else:
                    frame = self._maybe_rewrite(frame, asked)
                sink.sendall(frame)
        except OSError:
            pass
        for sock in (source, sink):
            with self._lock:
                self._open.discard(sock)
            _reset(sock)

    def _maybe_rewrite(self, frame: bytes, asked: dict[int, int]) -> bytes:
        (correlation,) = struct.unpack_from(">i", frame, 4)
        api_key = asked.pop(correlation, None)
        with self._lock:
            fault = self._fault
            if fault is None or fault[0] != api_key:
                return frame
            self.rewritten += 1
        at = 4 + _ERROR_AT
        return frame[:at] + struct.pack(">h", fault[1]) + frame[at + 2 :]


def _frame(sock: socket.socket) -> bytes:
    """One size-prefixed Kafka frame, prefix included; b"" at the end of the stream."""
    head = _exactly(sock, 4)
    if not head:
        return b""
    (size,) = struct.unpack(">i", head)
    body = _exactly(sock, size)
    if len(body) < size:
        return b""
    return head + body


def _exactly(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            return b""
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _bound(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def _reset(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    except OSError:
        pass
    sock.close()
