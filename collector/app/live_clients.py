"""The live client view behind ``GET /v1/clients``: the manager's cached instances, one
JSON entry each, filtered and paged.

Bounded work per request, on the event loop: the manager hands out the cache in
instance-id order from a cursor (a bisection and a slice, :meth:`instances_after`), this
module reads at most ``SCAN_BUDGET`` instances per page whatever the filters, and renders
only the page.  A page that ran out of budget before filling up still carries a cursor;
``ktc clients`` follows cursors until there is none.

The cursor is the last instance id read (the 22-character Kafka form): an instance added
or removed between two pages neither shifts nor repeats the others.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from clock import Clock
from collector.telemetry.client_metrics import (
    NEVER_MS,
    ClientMetricsInstance,
    ClientMetricsManager,
)
from proto.errors import Errors
from subscriptions.kafka_uuid import kafka_uuid_from_str, kafka_uuid_to_str

__all__ = [
    "DEFAULT_LIMIT",
    "FILTERS",
    "MAX_LIMIT",
    "SCAN_BUDGET",
    "ClientsPage",
    "FilterError",
    "clients_page",
    "instance_entry",
]

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
# Instances read per page at most, matching the filters or not (the chunk read per step is
# the page's remaining room, so an unfiltered page reads exactly ``limit``).
SCAN_BUDGET = 10_000


class FilterError(ValueError):
    """A query the endpoint refuses (unknown filter, bad limit or cursor): a 400."""


# filter name -> the instance's value it is compared with (exact match); "subscription"
# matches an instance that matched the named subscription.
FILTERS: Mapping[str, Callable[[ClientMetricsInstance], tuple[str | None, ...]]] = {
    "client_id": lambda i: (i.metadata.client_id,),
    "client_software_name": lambda i: (i.metadata.client_software_name,),
    "client_software_version": lambda i: (i.metadata.client_software_version,),
    "principal": lambda i: (i.principal,),
    "listener": lambda i: (i.listener_name,),
    "subscription": lambda i: i.matched,
}


@dataclass(frozen=True, slots=True)
class ClientsPage:
    clients: list[dict[str, Any]]
    next_cursor: str | None  # None: the last page
    scanned: int  # instances read for this page

    def to_json(self) -> dict[str, Any]:
        return {
            "clients": self.clients,
            "next_cursor": self.next_cursor,
            "scanned": self.scanned,
        }


def parse_query(query: Mapping[str, str]) -> tuple[dict[str, str], int, str | None]:
    """(filters, limit, cursor) from the request's query parameters."""
    filters: dict[str, str] = {}
    limit = DEFAULT_LIMIT
    cursor: str | None = None
    for key, value in query.items():
        if key == "limit":
            if not value.isdigit() or not 1 <= int(value) <= MAX_LIMIT:
                raise FilterError(
                    f"limit must be an integer from 1 to {MAX_LIMIT}, got {value!r}"
                )
            limit = int(value)
        elif key == "cursor":
            cursor = value or None
        elif key in FILTERS:
            filters[key] = value
        else:
            known = ", ".join([*FILTERS, "limit", "cursor"])
            raise FilterError(f"unknown query parameter {key!r} (known: {known})")
    return filters, limit, cursor


def clients_page(
    manager: ClientMetricsManager,
    clock: Clock,
    filters: Mapping[str, str],
    limit: int,
    cursor: str | None,
) -> ClientsPage:
    """One page of the instances that pass every filter, in instance-id order."""
    try:
        position = -1 if cursor is None else kafka_uuid_from_str(cursor).int
    except (ValueError, TypeError) as exc:
        raise FilterError(f"cursor {cursor!r} is not an instance id: {exc}") from None
    checks = [(FILTERS[name], value) for name, value in filters.items()]
    wall_offset_ms = clock.time_ns() // 1_000_000 - clock.now_ms()
    chosen: list[ClientMetricsInstance] = []
    scanned = 0
    exhausted = False
    while len(chosen) < limit and scanned < SCAN_BUDGET:
        chunk = manager.instances_after(
            position, min(limit - len(chosen), SCAN_BUDGET - scanned)
        )
        if not chunk:
            exhausted = True
            break
        scanned += len(chunk)
        position = chunk[-1].client_instance_id.int
        chosen.extend(
            instance
            for instance in chunk
            if all(value in read(instance) for read, value in checks)
        )
    if not exhausted and not manager.instances_after(position, 1):
        exhausted = True
    next_cursor = None if exhausted else _cursor_of(position)
    return ClientsPage(
        clients=[instance_entry(instance, wall_offset_ms) for instance in chosen],
        next_cursor=next_cursor,
        scanned=scanned,
    )


def _cursor_of(position: int) -> str:
    return kafka_uuid_to_str(uuid.UUID(int=position))


def instance_entry(
    instance: ClientMetricsInstance, wall_offset_ms: int
) -> dict[str, Any]:
    """One instance as the endpoint shows it (times as UTC ISO-8601, ``None``: never)."""
    metadata = instance.metadata
    errors = instance.errors or {}
    return {
        "client_instance_id": instance.instance_id_str,
        "client_id": metadata.client_id,
        "client_software_name": metadata.client_software_name,
        "client_software_version": metadata.client_software_version,
        "client_source_address": metadata.client_source_address,
        "client_source_port": _port(metadata.client_source_port),
        "listener": instance.listener_name,
        "principal": instance.principal,
        "subscriptions": list(instance.matched),
        "subscription_id": instance.subscription_id,
        "metrics": list(instance.metrics),
        "push_interval_ms": instance.push_interval_ms,
        "first_seen": _wall(instance.first_seen_ms, wall_offset_ms),
        "last_get": _wall(instance.last_get_answered_ms, wall_offset_ms),
        "last_push": _wall(instance.last_push_accepted_ms, wall_offset_ms),
        "pushes_accepted": instance.pushes_accepted,
        "empty_pushes": instance.empty_pushes,
        "errors": {_error_name(code): count for code, count in sorted(errors.items())},
        "throttles": instance.gated,
        "terminating": instance.terminating,
    }


def _port(port: str | None) -> int | None:
    return int(port) if port is not None and port.isdigit() else None


def _wall(monotonic_ms: int, wall_offset_ms: int) -> str | None:
    if monotonic_ms == NEVER_MS:
        return None
    moment = datetime.datetime.fromtimestamp(
        (monotonic_ms + wall_offset_ms) / 1000, tz=datetime.UTC
    )
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return str(code)
