"""The seam with the config store: ``quotas.yaml`` -> ``ConfigStore.snapshot().quotas`` ->
``QuotaEngine.apply_entity_quotas``, with the store's own entity objects, unchanged."""

from __future__ import annotations

from pathlib import Path

from clock.testing import FakeClock
from quota import QuotaEngine
from subscriptions.store import ConfigStore

QUOTAS_YAML = """\
quotas:
  users/CN%3Dalice%2CO%3Dacme: {producer_byte_rate: 1048576, request_percentage: 50}
  users/<default>/clients/<default>: {consumer_byte_rate: 2097152}
  clients/app-1: {controller_mutation_rate: 5}
  ips/10.1.2.3: {connection_creation_rate: 5}
  ips/<default>: {connection_creation_rate: 100}
"""


def test_store_snapshot_feeds_the_engine(tmp_path: Path, clock: FakeClock) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "quotas.yaml").write_text(QUOTAS_YAML)
    store = ConfigStore(tmp_path)
    engine = QuotaEngine.from_config({}, clock.now_ms())
    changes = engine.apply_entity_quotas(store.snapshot().quotas)
    assert len(changes) == 6
    # the principal as the client presents it; the file holds it URL-encoded
    assert engine.produce.quota("CN=alice,O=acme", "any").bound == 1048576
    assert engine.request.quota("CN=alice,O=acme", "any").bound == 50
    assert engine.fetch.quota("bob", "x").bound == 2097152
    assert engine.controller_mutation.quota("bob", "app-1").bound == 5
    assert engine.connections.connection_rate_for_ip("10.1.2.3") == 5
    assert engine.connections.connection_rate_for_ip("10.9.9.9") == 100
    assert engine.apply_entity_quotas(store.snapshot().quotas) == []  # nothing changed
