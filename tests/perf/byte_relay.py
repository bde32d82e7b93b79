"""The floor for bench_gateway.py: a TCP relay that only copies bytes between sockets.

Same process model as ``ktc gateway`` (one process, asyncio Protocols on uvloop, one upstream
connection per client connection, TCP_NODELAY both ways, backpressure both ways through
asyncio's flow-control callbacks), but no Kafka protocol at all: no framing, no request
headers, no response parsing, no address rewriting, no quotas, no telemetry.  Whatever the
gateway costs beyond this relay is the price of understanding the protocol.

A relay cannot rewrite Metadata, so it keeps clients on itself only if the brokers advertise
the relay's addresses: one relay listener per broker with a fixed address map
(``--map LISTEN_PORT=HOST:PORT``), and bench_gateway.py gives each Kafka node an extra
listener whose advertised address is that node's relay port (the relay connects to that
listener), the way an L4 proxy is deployed in front of Kafka.

Run: ``python tests/perf/byte_relay.py --map 0=127.0.0.1:9092 --ready-file /tmp/ports``
(port 0 picks a free port; the ready file lists the bound ports in ``--map`` order, JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import cast


def _nodelay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Side(asyncio.Protocol):
    """One socket of a relayed pair: what it reads is written to its peer."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self._early: list[bytes] = []  # client bytes read before the upstream connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        _nodelay(transport)

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.write(data)
        else:
            self._early.append(data)

    def eof_received(self) -> bool | None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    # The peer is not draining what this side reads: stop reading until it does.
    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def paired(self, peer: _Side) -> None:
        self.peer = peer
        early, self._early = self._early, []
        if early and peer.transport is not None:
            peer.transport.writelines(early)


class _Client(_Side):
    def __init__(self, host: str, port: int) -> None:
        super().__init__()
        self._target = (host, port)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, upstream = await loop.create_connection(_Side, *self._target)
        except OSError:
            if self.transport is not None:
                self.transport.abort()
            return
        if self.transport is None or self.transport.is_closing():
            if upstream.transport is not None:
                upstream.transport.close()
            return
        upstream.peer = self
        self.paired(upstream)


async def serve(mapping: list[tuple[int, str, int]], ready_file: Path | None) -> None:
    loop = asyncio.get_running_loop()
    servers = []
    for listen_port, host, port in mapping:
        servers.append(
            await loop.create_server(
                lambda host=host, port=port: _Client(host, port),  # type: ignore[misc]
                "127.0.0.1",
                listen_port,
                backlog=1024,
            )
        )
    ports = [server.sockets[0].getsockname()[1] for server in servers]
    if ready_file is not None:
        tmp = ready_file.with_name(ready_file.name + ".tmp")
        tmp.write_text(json.dumps(ports))
        os.replace(tmp, ready_file)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--map",
        action="append",
        required=True,
        metavar="LISTEN_PORT=HOST:PORT",
        help="one relay listener (repeat per broker)",
    )
    parser.add_argument("--ready-file", type=Path)
    args = parser.parse_args()
    mapping = []
    for item in args.map:
        listen, _, target = item.partition("=")
        host, _, port = target.rpartition(":")
        mapping.append((int(listen), host, int(port)))
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        asyncio.run(serve(mapping, args.ready_file))
    else:
        uvloop.run(serve(mapping, args.ready_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
