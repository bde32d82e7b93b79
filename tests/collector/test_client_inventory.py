"""The inventory of client connections (collector/app/client_inventory.py) on its own:
identities, the connection that moves once its software is known, telemetry, the versions
Kafka 4 removed, the series budget and its overflow rule, and ``ktc clients --inventory``'s
one-line errors.  No network: frames and sessions are built here."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from collector.app.cli import cli
from collector.app.client_inventory import OVERFLOW, ClientInventory
from collector.core.handler import FunctionHandler
from collector.core.scrape import ScrapeCollector
from collector.core.session import Session
from proto import ApiKeys, RequestFrame

PRODUCE, FETCH, API_VERSIONS, PUSH = (
    ApiKeys.PRODUCE,
    ApiKeys.FETCH,
    ApiKeys.API_VERSIONS,
    ApiKeys.PUSH_TELEMETRY,
)


def session(connection_id: int, software: str = "", principal: str = "") -> Session:
    made = Session(connection_id, "PLAINTEXT", "PLAINTEXT")
    if software:
        name, _, version = software.partition(" ")
        made.client_software_name, made.client_software_version = name, version
    if principal:
        made.set_principal(principal)
    return made


def frame(api_key: int, version: int, client_id: str = "app") -> RequestFrame:
    return RequestFrame(api_key, version, 1, client_id, 0, b"")


def samples(inventory: ClientInventory) -> dict[tuple[str, tuple[Any, ...]], float]:
    registry = CollectorRegistry()
    registry.register(ScrapeCollector(inventory.collect))
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(inventory: ClientInventory, name: str, **labels: str) -> float | None:
    for (found, found_labels), v in samples(inventory).items():
        if found == name and labels.items() <= dict(found_labels).items():
            return v
    return None


def test_a_connection_counts_under_its_software_once_api_versions_told_it() -> None:
    inventory = ClientInventory(max_series=100)
    one = session(1)
    inventory.record(frame(API_VERSIONS, 3), one)  # recorded after it was handled:
    one.client_software_name, one.client_software_version = "librdkafka", "2.12.0"
    inventory.record(frame(PRODUCE, 13), one)
    [entry] = [e for e in inventory.entries() if e["connections"]]
    assert (entry["client_software_name"], entry["client_id"]) == ("librdkafka", "app")
    assert entry["connections"] == 1 and entry["telemetry"] is False
    inventory.closed(1)
    assert all(e["connections"] == 0 for e in inventory.entries())


def test_telemetry_and_removed_versions_as_series() -> None:
    inventory = ClientInventory(max_series=100)
    pusher, legacy = session(1, "librdkafka 2.12.0"), session(2, "kafka-python 2.0.2")
    inventory.record(frame(PUSH, 0, "pusher"), pusher)
    inventory.record(frame(PRODUCE, 2, "legacy"), legacy)
    inventory.record(frame(PRODUCE, 2, "legacy"), legacy)
    inventory.record(frame(FETCH, 4, "legacy"), legacy)
    assert value(inventory, "ktc_client_telemetry_enabled", client_id="pusher") == 1
    assert value(inventory, "ktc_client_telemetry_enabled", client_id="legacy") == 0
    assert value(inventory, "ktc_client_connections", client_id="legacy") == 1
    removed = "ktc_client_removed_api_versions_total"
    assert (
        value(inventory, removed, api="Produce", version="2", client_id="legacy") == 2
    )
    assert (
        value(inventory, removed, api="Fetch", client_id="legacy") is None
    )  # v4 stays
    assert value(inventory, "ktc_client_requests_total", api="Fetch", version="4") == 1


def test_the_budget_drops_the_longest_idle_identity_first() -> None:
    inventory = ClientInventory(max_series=2)
    inventory.record(frame(PRODUCE, 13, "first"), session(1))
    inventory.closed(1)
    inventory.record(frame(PRODUCE, 13, "second"), session(2))
    inventory.closed(2)
    inventory.record(frame(PRODUCE, 13, "third"), session(3))
    ids = [e["client_id"] for e in inventory.entries()]
    assert sorted(ids) == ["second", "third"] and inventory.series == 2


def test_over_the_budget_with_every_identity_connected_goes_to_overflow() -> None:
    inventory = ClientInventory(max_series=2)
    inventory.record(frame(PRODUCE, 13, "a"), session(1))
    inventory.record(frame(FETCH, 17, "a"), session(1))  # the budget is full now
    inventory.record(frame(PRODUCE, 12, "a"), session(1))  # a new series of "a"
    inventory.record(frame(PRODUCE, 13, "b"), session(2))  # a new identity
    assert inventory.series == 2
    assert inventory.overflow_requests == 2
    overflow = value(
        inventory, "ktc_client_requests_total", client_id=OVERFLOW, api="Produce"
    )
    assert overflow is not None
    assert value(inventory, "ktc_client_connections", client_id=OVERFLOW) == 1
    inventory.closed(2)
    assert value(inventory, "ktc_client_connections", client_id=OVERFLOW) == 0


def test_observing_records_after_the_inner_handler_even_when_it_raises() -> None:
    inventory = ClientInventory(max_series=10)
    seen: list[str] = []

    def inner(f: RequestFrame, s: Session, c: Any) -> object:
        seen.append(s.client_software_name)
        s.client_software_name = "told"
        raise RuntimeError("closed")

    handler = inventory.observing(FunctionHandler(inner))
    try:
        handler.handle(frame(API_VERSIONS, 3), session(1), None)  # type: ignore[arg-type]
    except RuntimeError:
        pass
    assert inventory.entries()[0]["client_software_name"] == "told"


def test_the_cli_one_line_error_when_the_collector_is_not_there() -> None:
    result = CliRunner().invoke(
        cli, ["clients", "--inventory", "--server", "http://127.0.0.1:9"]
    )
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_the_cli_refuses_a_filter_with_the_inventory() -> None:
    result = CliRunner().invoke(
        cli, ["clients", "--inventory", "--filter", "client_id=x"]
    )
    assert result.exit_code == 2
    assert "--filter" in result.output
