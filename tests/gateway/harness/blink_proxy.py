"""A TCP proxy in front of one Kafka broker that a test switches between passing bytes and
refusing: the "unreachable cluster" of a node that reads its subscriptions there, without
stopping the broker (the cluster fixture is shared) and without waiting for time.

    with BlinkProxy(("127.0.0.1", broker_port), refusing=True) as proxy:
        proxy.address            # "127.0.0.1:<port>": the node's bootstrap server
        proxy.refused            # connections refused so far (an event to wait for)
        proxy.open()             # pass bytes both ways from now on
        proxy.refuse()           # cut every open connection; refuse new ones

Refusing is an accept answered by a TCP reset (SO_LINGER 0), so the port stays the
proxy's and the node's connect or read fails at once, as against a stopped broker.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Self

__all__ = ["BlinkProxy"]

_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST


class BlinkProxy:
    def __init__(self, target: tuple[str, int], *, refusing: bool = False) -> None:
        self._target = target
        self._refusing = refusing
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self.refused = 0
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.refuse()
        self._listener.close()

    def open(self) -> None:
        with self._lock:
            self._refusing = False

    def refuse(self) -> None:
        with self._lock:
            self._refusing = True
            cut, self._open = self._open, set()
        for sock in cut:
            _reset(sock)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                refusing = self._refusing
                if refusing:
                    self.refused += 1
            if refusing:
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self.accepted += 1
                self._open.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(source, sink), daemon=True
                ).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with self._lock:
                self._open.discard(sock)
            _reset(sock)


def _reset(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    except OSError:
        pass
    sock.close()
