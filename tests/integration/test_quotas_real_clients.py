"""A real librdkafka client (confluent-kafka) under a ``producer_byte_rate`` quota.

Two producers push the same subscription every 100 ms; ``capped-1`` may send 1000 bytes a
second (about two pushes: each is ~500 bytes), ``free-1`` has no limit and is the control.
The capped client must keep working — pushes keep landing, no errors, telemetry not
disabled — and back off: its responses carry ``throttle_time_ms`` (librdkafka reports it
through ``throttle_cb``), its connection is muted, and it lands far fewer pushes than the
control.  Real time (the clients' timers), bounded by the run length.
"""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer, ThrottleEvent
from prometheus_client.parser import text_string_to_metric_families

from subscriptions.store import ConfigStore
from tests.integration.collector_harness import RunningCollector, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

INTERVAL_MS = 100
LIMIT_BYTES_PER_S = 1000
RUN_S = 8.0
# Two samples of one second: the rate is judged over about a second, so a burst above the
# limit is throttled within a push or two (Kafka's default 11 x 1 s would let a client send
# ten seconds' worth before the first throttle).
SHORT_WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}


def scrape(
    collector: RunningCollector,
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    assert collector.server is not None
    url = f"http://127.0.0.1:{collector.server.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_byte_rate_capped_librdkafka_client_keeps_pushing_and_backs_off(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    store = ConfigStore(data_dir)
    store.alter_subscription(
        "producers",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": str(INTERVAL_MS)},
        [],
    )
    store.alter_quotas(
        {"client-id": "capped-1"}, {"producer_byte_rate": LIMIT_BYTES_PER_S}
    )
    throttles: list[ThrottleEvent] = []
    errors: list[KafkaError] = []

    with RunningCollector(data_dir, **SHORT_WINDOWS) as collector:
        producers = {
            client_id: Producer(
                {
                    "bootstrap.servers": collector.bootstrap,
                    "client.id": client_id,
                    "enable.metrics.push": True,
                    "log_level": 3,
                    "throttle_cb": throttles.append,
                    "error_cb": errors.append,
                }
            )
            for client_id in ("free-1", "capped-1")
        }
        try:

            def pushes(client_id: str) -> list[float]:
                """Landing times (s, monotonic-free: relative to the first push)."""
                stamps = [
                    r.appended_time_unix_nano / 1e9
                    for r in collector.landed()
                    if r.context.client_id == client_id
                ]
                return [t - stamps[0] for t in stamps] if stamps else []

            wait_for(
                lambda: pushes("capped-1"), timeout_s=15, what="a first capped push"
            )
            deadline = time.monotonic() + RUN_S
            while time.monotonic() < deadline:
                for producer in producers.values():
                    producer.poll(0.05)  # serves throttle_cb / error_cb
            capped, free = pushes("capped-1"), pushes("free-1")
            samples = scrape(collector)
        finally:
            for producer in producers.values():
                producer.close()

    # Keeps working: pushes land all along, the last one recent (telemetry not disabled).
    assert len(capped) >= 4, capped
    assert capped[-1] >= RUN_S - 3.0, capped
    assert errors == []
    push_errors = {
        dict(labels)["error_code"]: value
        for (name, labels), value in samples.items()
        if name == "ktc_requests_total" and dict(labels)["api"] == "PUSH_TELEMETRY"
    }
    assert set(push_errors) == {"0"}, push_errors
    # Backs off: told to (throttle_time_ms > 0 reached the client), muted, and landing far
    # fewer pushes than the unthrottled control (~10/s): ~500-byte pushes at 1000 B/s.
    assert any(event.throttle_time > 0 for event in throttles)
    assert len(capped) <= len(free) / 3, (len(capped), len(free))
    labels = frozenset(
        {"quota": "produce", "user": "ANONYMOUS", "client_id": "capped-1"}.items()
    )
    assert samples[("ktc_quota_throttled_responses_total", labels)] > 0
    # The collector's measured rate (Kafka's byte-rate metric) is held near the limit.
    entity = frozenset({"user": "", "client_id": "capped-1"}.items())
    assert (
        samples[("kafka_server_produce_byte_rate", entity)] <= 1.6 * LIMIT_BYTES_PER_S
    )
