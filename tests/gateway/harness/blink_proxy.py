"""A TCP proxy in front of one Kafka broker that a test switches between passing bytes and
refusing: the "unreachable cluster" of a node that reads its subscriptions there, without
stopping the broker (the cluster fixture is shared) and without waiting for time.

    with BlinkProxy(("127.0.0.1", broker_port), refusing=True) as proxy:
        proxy.address            # "127.0.0.1:<port>": the node's bootstrap server
        proxy.open()             # pass bytes both ways from now on
        proxy.refuse()           # cut every open connection (reset); refuse new ones

Refusing keeps the port bound without listening, so the port stays the proxy's and a
connect fails at once with ECONNREFUSED, as against a stopped broker (an accept followed
by a close would look like a broker that requires SASL to the gateway's discovery).
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
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self.accepted = 0
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
