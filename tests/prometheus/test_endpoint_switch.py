"""``prometheus.clients.enable``: on (the default), the HTTP listener serves
/metrics/clients and /metrics carries the endpoint's own series; off, neither, and pushes
are not folded for it."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from clock.testing import FakeClock
from collector.app.config import load_config
from collector.app.server import CollectorServer

pytestmark = pytest.mark.timeout(60)


async def get(server: CollectorServer, path: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{server.http_port}{path}"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


# The setting as given (None: not given) -> whether the endpoint is on.
SWITCH = [(True, True), (False, False), (None, True)]


@pytest.mark.parametrize(("setting", "enabled"), SWITCH)
async def test_the_switch(tmp_path: Path, setting: bool | None, enabled: bool) -> None:
    overrides: dict[str, object] = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "http.listener": "127.0.0.1:0",
        "data.dir": str(tmp_path / "data"),
        "landing": {"fsync": "never"},
    }
    if setting is not None:
        overrides["prometheus.clients.enable"] = setting
    config = load_config(environ={}, overrides=overrides)
    server = CollectorServer(config, clock=FakeClock())
    await server.start()
    try:
        status, body = await get(server, "/metrics/clients")
        assert status == (200 if enabled else 404)
        if enabled:
            assert body == ""  # no client yet: no series
        _, own = await get(server, "/metrics")
        assert ("ktc_prometheus_clients_series_limit 25000.0" in own) is enabled
        assert (server.client_series is not None) is enabled
    finally:
        await server.stop()
