"""The admin endpoints on the HTTP listener (next to ``/metrics`` and the probes):

| method and path                  | what                                            |
|----------------------------------|-------------------------------------------------|
| ``GET /v1/clients``              | the live client instances (``live_clients``)    |
| ``GET /v1/clients/inventory``    | every client's connections, telemetry and request versions (``client_inventory``); 404 with ``clients.inventory.enable: false`` |
| ``GET /v1/clients/conformance``  | every client library graded against KIP-714 (``conformance``); 404 with ``clients.conformance.enable: false`` |
| ``GET /v1/applications``         | the live instances joined into Streams applications, consumer and share groups (``applications``); 404 with ``clients.applications.enable: false`` |
| ``POST /v1/subscriptions/preview`` | a subscription change's effect, nothing stored (``subscription_preview``) |

Who may call them (the HTTP listener has no Kafka principal to check ACLs for, so
``http.admin.secret`` stands for the operator):

| ``http.admin.secret`` | authorizer (``authorizer.class.name``) | a request to ``/v1/...``                        |
|-----------------------|-----------------------------------------|-------------------------------------------------|
| set                   | either                                  | needs ``Authorization: Bearer <secret>`` (else 401) |
| not set               | configured                              | served to loopback peers only (else 403)        |
| not set               | none                                    | served to anyone who reaches the listener, like ``/metrics`` |
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from clock import Clock
from collector.app.applications import applications_json
from collector.app.client_inventory import ClientInventory
from collector.app.conformance import conformance
from collector.app.live_clients import FilterError, clients_page, parse_query
from collector.app.subscription_preview import PreviewRequestError, preview
from collector.telemetry.client_metrics import ClientMetricsManager
from proto.errors import KafkaError
from subscriptions.admin import AdminUsageError
from subscriptions.cluster_store import SubscriptionStore

__all__ = ["AdminAccess", "AdminEndpoints"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# path -> what it answers (404) when configuration switches the view off.
_SWITCHED_OFF = {
    "/v1/clients/inventory": "the inventory is off (clients.inventory.enable)",
    "/v1/clients/conformance": "the conformance view is off (clients.conformance.enable)",
    "/v1/applications": "the applications view is off (clients.applications.enable)",
}


@dataclass(frozen=True, slots=True)
class AdminAccess:
    """Who may call the admin endpoints (the table above): with ``http.admin.secret``, a
    request bearing it; else, with an authorizer, loopback peers; else anyone."""

    secret: bytes | None
    loopback_only: bool

    @classmethod
    def configured(
        cls, secret: str | None, *, authorizer_configured: bool
    ) -> AdminAccess:
        token = secret.encode() if secret else None
        return cls(token, loopback_only=token is None and authorizer_configured)

    def refusal(self, request: web.Request) -> web.Response | None:
        """The answer refusing ``request``; None when it may be served."""
        if self.secret is not None:
            scheme, _, given = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode(), self.secret
            ):
                return _json(
                    {
                        "error": "this endpoint needs Authorization: Bearer <http.admin.secret>"
                    },
                    401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            return None
        if self.loopback_only and not _is_loopback(request.remote):
            return _json(
                {
                    "error": "an authorizer is configured and http.admin.secret is not set: "
                    "the admin endpoints answer loopback clients only"
                },
                403,
            )
        return None


class AdminEndpoints:
    def __init__(
        self,
        manager: ClientMetricsManager,
        store: SubscriptionStore,
        clock: Clock,
        *,
        secret: str | None,
        authorizer_configured: bool,
        inventory: ClientInventory | None = None,
        conformance: bool = True,
        applications: bool = True,
        capped_ids: Callable[[], Collection[str]] = tuple,
    ) -> None:
        """``capped_ids``: the instances /metrics/clients holds at their series cap."""
        self._access = AdminAccess.configured(
            secret, authorizer_configured=authorizer_configured
        )
        self._manager = manager
        self._capped_ids = capped_ids
        self._inventory = inventory
        self._store = store
        self._clock = clock
        views_on = {
            "/v1/clients/inventory": inventory is not None,
            "/v1/clients/conformance": conformance,
            "/v1/applications": applications,
        }
        # path -> its 404, for the views configuration switches off.
        self._off = {
            path: message
            for path, message in _SWITCHED_OFF.items()
            if not views_on[path]
        }

    def routes(self) -> list[web.RouteDef]:
        views: list[tuple[Callable[[str, Handler], web.RouteDef], str, Handler]] = [
            (web.get, "/v1/clients", self._clients),
            (web.get, "/v1/clients/inventory", self._inventory_page),
            (web.get, "/v1/clients/conformance", self._conformance),
            (web.post, "/v1/subscriptions/preview", self._preview),
            (web.get, "/v1/applications", self._applications),
        ]
        return [
            route(path, self._guarded(path, handler)) for route, path, handler in views
        ]

    def _guarded(self, path: str, handler: Handler) -> Handler:
        off = self._off.get(path)

        async def guarded(request: web.Request) -> web.StreamResponse:
            refusal = self._access.refusal(request)
            if refusal is not None:
                return refusal
            if off is not None:
                return _json({"error": off}, 404)
            return await handler(request)

        return guarded

    async def _clients(self, request: web.Request) -> web.Response:
        try:
            filters, limit, cursor = parse_query(request.query)
            page = clients_page(self._manager, self._clock, filters, limit, cursor)
        except FilterError as exc:
            return _json({"error": str(exc)}, 400)
        return _json(page.to_json(), 200)

    async def _inventory_page(self, request: web.Request) -> web.Response:
        assert self._inventory is not None  # else switched off (_guarded)
        # Bounded by clients.inventory.max.series: built on the loop, like a /metrics scrape.
        return _json(self._inventory.to_json(), 200)

    async def _conformance(self, request: web.Request) -> web.Response:
        if request.query:
            return _json({"error": "this endpoint takes no query parameters"}, 400)
        # Reads every cached instance once, on the loop, like a /metrics scrape.
        return _json(conformance(self._manager.instances(), self._capped_ids()), 200)

    async def _applications(self, request: web.Request) -> web.Response:
        # Every cached instance read once (the join is linear; built on the loop, like a
        # /metrics scrape of the same instances).
        wall_offset_ms = self._clock.time_ns() // 1_000_000 - self._clock.now_ms()
        return _json(applications_json(self._manager.instances(), wall_offset_ms), 200)

    async def _preview(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError as exc:
            return _json({"error": f"the body is not JSON: {exc}"}, 400)
        if not isinstance(body, dict):
            return _json({"error": "the body must be a JSON object"}, 400)
        try:
            answer = await preview(self._store, self._manager, body)
        except (PreviewRequestError, AdminUsageError) as exc:
            return _json({"error": str(exc)}, 400)
        except KafkaError as exc:
            return _json({"error": str(exc), "error_code": exc.error_code.name}, 400)
        return _json(answer, 200)


def _is_loopback(remote: str | None) -> bool:
    if not remote:
        return False
    try:
        address = ipaddress.ip_address(remote.partition("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _json(
    body: Mapping[str, Any], status: int, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        text=json.dumps(body),
        status=status,
        content_type="application/json",
        headers=headers,
    )
