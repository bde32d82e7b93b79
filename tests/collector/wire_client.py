"""A raw Kafka protocol client for tests: asyncio streams + ``proto.ClientConnection``."""

from __future__ import annotations

import asyncio
from typing import Any

from proto import ClientConnection


class WireClient:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str | None,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.codec = ClientConnection(client_id=client_id)

    @classmethod
    async def connect(
        cls, port: int, client_id: str | None = "wire-test"
    ) -> WireClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, client_id)

    def send(self, api_key: int, version: int, message: Any) -> None:
        self.writer.write(self.codec.send_request(api_key, version, message))

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    async def receive(self, timeout_s: float = 5.0) -> Any:
        """The next response message (in request order)."""
        while True:
            frame = self.codec.next_response()
            if frame is not None:
                return frame.message
            data = await asyncio.wait_for(self.reader.read(65536), timeout_s)
            if not data:
                raise ConnectionError("server closed the connection")
            self.codec.receive_data(data)

    async def request(self, api_key: int, version: int, message: Any) -> Any:
        self.send(api_key, version, message)
        await self.writer.drain()
        return await self.receive()

    async def closed_by_server(self, timeout_s: float = 5.0) -> bool:
        """True once the server closed the connection (EOF or reset) without answering."""
        try:
            data = await asyncio.wait_for(self.reader.read(65536), timeout_s)
        except (ConnectionResetError, BrokenPipeError):
            return True
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass
