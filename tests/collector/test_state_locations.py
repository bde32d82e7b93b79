"""Where a node keeps each kind of state, as it records it in its data directory
(``<data.dir>/state-locations.json``, collector/app/parts/data_dir.py): the file, rewritten
only when what it says changes, and the node's reading of the cluster telling it when the
local store takes over. The refusals of ``ktc ... --data-dir`` it leads to, with real Kafka
4.4.0 brokers: tests/gateway/test_data_dir_kept_in_cluster.py; their exit code and line:
tests/integration/test_cli_errors.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clock.testing import FakeClock
from collector.app.parts.cluster_subscriptions import keep_reading
from collector.app.parts.data_dir import (
    STATE_LOCATIONS_FILE,
    StateLocations,
    StateLocationsError,
    read_state_locations,
    record_state_locations,
)
from collector.app.parts.tasks import BackgroundTasks
from collector.gateway.cluster_subscriptions import NotServed, SubscriptionRefresh
from subscriptions.cluster_store import ClusterSubscriptionStore
from subscriptions.store import ConfigStore
from tests.waiting import eventually


def test_the_file_says_where_each_kind_lives_and_reads_back(tmp_path: Path) -> None:
    locations = StateLocations(
        "gateway", {"subscriptions": "k1:9092,k2:9092", "acls": "k1:9092,k2:9092"}
    )
    assert record_state_locations(tmp_path, locations)
    assert json.loads((tmp_path / STATE_LOCATIONS_FILE).read_text()) == {
        "version": 1,
        "mode": "gateway",
        "subscriptions": {"kept": "cluster", "bootstrap.servers": "k1:9092,k2:9092"},
        "quotas": {"kept": "local"},
        "users": {"kept": "local"},
        "acls": {"kept": "cluster", "bootstrap.servers": "k1:9092,k2:9092"},
    }
    assert read_state_locations(tmp_path) == locations
    assert [p.name for p in tmp_path.iterdir()] == [STATE_LOCATIONS_FILE]


def test_it_is_rewritten_only_when_it_changes(tmp_path: Path) -> None:
    in_kafka = StateLocations("collector", {"subscriptions": "kafka:9092"})
    assert record_state_locations(tmp_path, in_kafka)
    assert not record_state_locations(tmp_path, in_kafka)
    # The node configured back to its local store.
    assert record_state_locations(tmp_path, StateLocations("collector"))
    back = read_state_locations(tmp_path)
    assert back is not None and back.cluster_of("subscriptions") is None


def test_a_directory_no_node_recorded_anything_in_keeps_everything(
    tmp_path: Path,
) -> None:
    assert read_state_locations(tmp_path) is None
    assert read_state_locations(tmp_path / "missing") is None


@pytest.mark.parametrize(
    "text",
    [
        "{",
        "[]",
        '{"version": 2}',
        '{"version": 1, "mode": "gateway"}',
        json.dumps(
            {"version": 1, "mode": "m"}
            | {k: {"kept": "elsewhere"} for k in ("subscriptions", "quotas")}
        ),
    ],
)
def test_a_broken_file_is_an_error_naming_it(tmp_path: Path, text: str) -> None:
    (tmp_path / STATE_LOCATIONS_FILE).write_text(text)
    with pytest.raises(StateLocationsError, match=STATE_LOCATIONS_FILE):
        read_state_locations(tmp_path)


class _Admin:
    closed = False

    def close(self) -> None:
        self.closed = True


async def test_the_local_store_taking_over_and_back_is_said(tmp_path: Path) -> None:
    """A cluster that does not serve CLIENT_METRICS at the first read: the node says
    so (its file rewritten), asks again every refresh, and says so again when a read
    works (the cluster's set is in force again)."""
    clock = FakeClock()
    store = ClusterSubscriptionStore(ConfigStore(tmp_path), "kafka:9092")
    reads = 0

    async def read() -> dict[str, dict[str, str]]:
        nonlocal reads
        reads += 1
        if reads == 1:
            raise NotServed("no CLIENT_METRICS configs")
        return {"all": {"metrics": "*"}}

    said: list[bool] = []
    refresh = SubscriptionRefresh(
        store,
        read,
        clock=clock,
        refresh_ms=1000,
        on_change=lambda: said.append(store.in_cluster),
    )
    admin = _Admin()
    tasks = BackgroundTasks(clock)
    await keep_reading(refresh, admin, tasks)  # type: ignore[arg-type]
    assert said == [False]
    await eventually(lambda: clock.pending == 1, timeout_s=10, what="asleep")
    clock.advance(1000)
    await eventually(lambda: said == [False, True], timeout_s=10, what="back")
    tasks.cancel(lambda name: True)
    await tasks.finished()
    assert admin.closed
