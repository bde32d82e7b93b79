"""A real collector on a background thread (its own event loop), bound to 127.0.0.1:0,
plus helpers that wait for landed pushes with deadlines (never fixed sleeps)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

from collector.app.config import load_config
from collector.app.gateway_server import GatewayServer
from collector.app.node import Node
from collector.app.server import CollectorServer
from exporters.landing import LandingReader, LandingRecord

T = TypeVar("T")


class RunningCollector:
    # What runs: ``ktc serve``'s server here; the gateway tests run ``ktc gateway``'s.
    server_class: type[CollectorServer | GatewayServer] = CollectorServer

    def __init__(self, data_dir: Path, **overrides: Any) -> None:
        settings = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "http.listener": "127.0.0.1:0",
            "data.dir": str(data_dir),
            "landing": {"fsync": "never"},
        }
        settings.update(overrides)
        self.config = load_config(environ={}, overrides=settings)
        self.server: Node | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="collector", daemon=True)
        self._thread.start()
        if not self._ready.wait(20):
            raise TimeoutError("collector did not start in 20 s")
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)

        async def main() -> None:
            self.server = self.server_class(self.config)
            try:
                await self.server.start()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            await self.server.wait_stopped()

        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    def stop(self) -> None:
        if (
            self._loop is not None
            and self.server is not None
            and self._thread is not None
        ):
            if self._thread.is_alive():
                asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(
                    30
                )
            self._thread.join(30)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the server's loop (the server is not thread-safe)."""
        assert self._loop is not None

        async def wrapper() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(10)

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.port()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def landing_directory(self) -> Path:
        assert self.server is not None
        return self.server.landing_directory

    def landed(self) -> list[LandingRecord]:
        directory = self.landing_directory
        if not directory.exists():
            return []
        return list(LandingReader(directory).read(0))


def wait_for(
    predicate: Callable[[], T | Literal[False] | None],
    *,
    timeout_s: float,
    what: str,
    poll_s: float = 0.05,
) -> T:
    """Poll ``predicate`` until it returns something truthy, or fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)
