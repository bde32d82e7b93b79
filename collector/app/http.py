"""``/metrics``, ``/healthz`` and ``/readyz`` on the server's own event loop (aiohttp).

* ``/healthz`` (liveness): the event loop is responsive.  A heartbeat callback stamps the
  time every ``heartbeat_interval_s``; the probe fails when the last stamp is older than
  ``stall_after_s`` (a loop blocked by a long synchronous call cannot even answer, but a
  loop that is merely slow shows up here).
* ``/readyz`` (readiness): every check registered by the server passes (listeners bound,
  config loaded, landing log writable), and shutdown has not begun; it flips to 503 at
  SIGTERM before the listeners close so load balancers stop sending new clients.
* ``/metrics``: the server's ``CollectorRegistry`` in Prometheus text format.

Other routes (the admin endpoints, ``collector/app/admin_http.py``) are added with
:meth:`HealthEndpoints.add_routes` before ``start``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import cast

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from clock import SYSTEM_CLOCK, Clock, Timer

__all__ = ["HealthEndpoints", "ReadinessCheck"]

ReadinessCheck = Callable[[], str | None]  # None = ready, else the reason it is not


class HealthEndpoints:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        heartbeat_interval_s: float = 1.0,
        stall_after_s: float = 10.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._clock = clock
        self._registry = registry
        self._checks: dict[str, ReadinessCheck] = {}
        self._shutting_down = False
        self._heartbeat_interval_s = heartbeat_interval_s
        self._stall_after_s = stall_after_s
        self._last_beat = clock.monotonic()
        self._beat_handle: Timer | None = None
        self._runner: web.AppRunner | None = None
        self._extra_routes: list[web.RouteDef] = []
        self.port: int | None = None

    def add_routes(self, routes: list[web.RouteDef]) -> None:
        """Serve these too (call before ``start``)."""
        self._extra_routes.extend(routes)

    def add_readiness_check(self, name: str, check: ReadinessCheck) -> None:
        self._checks[name] = check

    def begin_shutdown(self) -> None:
        self._shutting_down = True

    def readiness(self) -> dict[str, str]:
        """name -> "ok" or the reason; includes "shutdown" once shutdown began."""
        result = {}
        for name, check in self._checks.items():
            try:
                reason = check()
            except Exception as exc:  # a failing check means not ready
                reason = f"{type(exc).__name__}: {exc}"
            result[name] = reason or "ok"
        if self._shutting_down:
            result["shutdown"] = "shutting down"
        return result

    async def start(self, host: str, port: int) -> int:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_routes(self._extra_routes)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host or None, port, reuse_address=True)
        await site.start()
        # aiohttp exposes the bound sockets only on the site's asyncio server.
        server = cast(asyncio.Server, site._server)
        self.port = int(server.sockets[0].getsockname()[1])
        self._beat()
        return self.port

    async def stop(self) -> None:
        if self._beat_handle is not None:
            self._beat_handle.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _beat(self) -> None:
        self._last_beat = self._clock.monotonic()
        self._beat_handle = self._clock.call_later(
            self._heartbeat_interval_s * 1000, self._beat
        )

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _: web.Request) -> web.Response:
        lag = self._clock.monotonic() - self._last_beat
        ok = lag < self._stall_after_s
        body = {
            "status": "ok" if ok else "event loop stalled",
            "heartbeat_age_s": round(lag, 3),
        }
        return _json(body, 200 if ok else 503)

    async def _readyz(self, _: web.Request) -> web.Response:
        checks = self.readiness()
        ok = all(v == "ok" for v in checks.values())
        return _json(
            {"status": "ready" if ok else "not ready", "checks": checks},
            200 if ok else 503,
        )


def _json(body: Mapping[str, object], status: int) -> web.Response:
    return web.Response(
        text=json.dumps(body), status=status, content_type="application/json"
    )
