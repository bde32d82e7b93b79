"""``/metrics/clients`` of a node landing on the topic counts what landed, under refused
pushes: a real librdkafka client pushes deltas to ``ktc serve`` (``landing.kafka.topic``,
its fold a child process reading the topic) while the topic refuses its records for a
while, then takes them again; afterwards every series on the page equals what the topic
holds (expected_from_landing), and the pushes folded are the records in the topic, none
counted twice.

The refusal: every client reaches the one Apache Kafka 4.4.0 broker through the fault
proxy (kafka_fault_proxy.py), which, while switched on, refuses the landing producer's
Produce requests (never forwarded, its connection closed: for the producer the broker is
gone, for the fold's consumer it is not).  No record of those pushes reaches the topic;
their delivery times out (``landing.kafka.delivery.timeout.ms``) and they are answered 89.

Counted at the push instead (the tap, as before the fold read what landed), the refused
pushes are folded too and the pushes folded outnumber the topic's records: the test fails.
(A librdkafka producer's only counter, connection.creation.total, pushes deltas of 0 once
connected, so "none counted twice" is the pushes folded equal to the records landed; every
series, gauges and counters, equals what the topic holds.)
"""

from __future__ import annotations

import logging
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from exporters.landing import LandingRecord
from subscriptions.store import ConfigStore
from tests.collector.test_collector_full_disk import ClientTelemetryLog
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.kafka_fault_proxy import FaultProxy
from tests.gateway.test_client_metrics_fleet import TopicTail, instance_series
from tests.gateway.test_landing_topic_guarantees import ktc_serve_process
from tests.prometheus.test_client_metrics_endpoint import expected_from_landing, parse
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(120)]

LANDING_CLIENT_ID = "ktc-landing"  # the landing producer's client.id (settings.py)
PUSH_INTERVAL_MS = 500
QUIET_INTERVAL_MS = 300_000  # the longest Kafka delivers (its merge starts there)
# A push whose record the topic did not take is answered 89 after this.
DELIVERY_TIMEOUT_MS = 1000
Key = tuple[str, frozenset[tuple[str, str]]]
PUSHES_FOLDED: Key = ("ktc_prometheus_clients_pushes_folded_total", frozenset())
PUSHES_REFUSED: Key = ("ktc_landing_pushes_refused_total", frozenset())


def subscribe(work: Path, interval_ms: int) -> None:
    """The node's one subscription: the producer metrics every ``interval_ms``."""
    ConfigStore(work / "data").alter_subscription(
        "producers",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": str(interval_ms)},
    )


def test_refused_pushes_of_a_real_client_are_never_counted_from_the_topic(
    proxied_cluster: tuple[KafkaCluster, FaultProxy], tmp_path: Path
) -> None:
    _, proxy = proxied_cluster
    bootstrap = f"127.0.0.1:{proxy.port}"
    topic = f"telemetry-refused-{uuid.uuid4().hex[:8]}"
    client_id = f"refused-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    subscribe(tmp_path, PUSH_INTERVAL_MS)
    with ktc_serve_process(
        tmp_path,
        bootstrap,
        topic,
        settings={
            "landing.kafka.delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
            "prometheus.clients.enable": True,
        },
    ) as node:
        port = int(next(iter(node["listeners"].values())))

        def http(path: str) -> dict[Any, float]:
            url = f"http://127.0.0.1:{node['http_port']}{path}"
            with urllib.request.urlopen(url, timeout=10) as response:
                return parse(response.read().decode())

        telemetry = ClientTelemetryLog()
        logger = logging.getLogger(f"librdkafka.{client_id}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.addHandler(telemetry)
        client = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "client.id": client_id,
                "enable.metrics.push": True,
                "debug": "telemetry",
                "logger": logger,
            }
        )
        tail = TopicTail(bootstrap, topic)

        def pushed(at_least: int) -> bool:
            client.poll(0)
            return telemetry.succeeded >= at_least

        def refused(at_least: int) -> bool:
            client.poll(0)
            return len(telemetry.failed) >= at_least

        def of_client(records: list[LandingRecord]) -> list[LandingRecord]:
            return [r for r in records if r.context.client_id == client_id]

        shown: dict[Any, float] = {}

        def folded_what_landed() -> bool:
            """The page, once it folded every record of the topic: the topic read
            first, then the pushes folded, counted before and after the page is
            scraped, are the records read; never more."""
            client.poll(0)
            records = of_client(tail.records())
            folded_before = http("/metrics")[PUSHES_FOLDED]
            page = instance_series(http("/metrics/clients"))
            folded_after = http("/metrics")[PUSHES_FOLDED]
            landed = len(of_client(tail.records()))
            assert folded_after <= landed, (folded_after, landed)  # none twice
            if not folded_before == folded_after == len(records):
                return False
            assert page == expected_from_landing(records)
            shown.update(page)
            return True

        try:
            eventually_sync(lambda: pushed(2), timeout_s=20, what="two pushes landed")
            proxy.refuse_produce(LANDING_CLIENT_ID)
            try:
                eventually_sync(
                    lambda: refused(2), timeout_s=20, what="two pushes refused"
                )
            finally:
                proxy.refuse_produce(None)
            accepted = telemetry.succeeded
            eventually_sync(
                lambda: pushed(accepted + 2), timeout_s=20, what="pushes landed after"
            )
            # The topic made still: with a push every interval, one look at the topic,
            # the counter and the page takes longer than the next push needs to land.
            # The subscription altered to push every 5 minutes, the client's next push is
            # answered UNKNOWN_SUBSCRIPTION_ID (nothing lands), it gets the new
            # subscription and pushes no more while the test runs.  (Closing the client
            # instead sends its terminating push, and the node forgets the instance.)
            subscribe(tmp_path, QUIET_INTERVAL_MS)
            eventually_sync(
                folded_what_landed,
                timeout_s=30,
                what="the page to fold every record of the topic",
            )
            assert http("/metrics")[PUSHES_REFUSED] >= 2  # answered 89 by the node
            assert telemetry.stopped == []
            records = of_client(tail.records())
        finally:
            client.poll(0)
            client.close()
            tail.close()
    assert proxy.produce_refused > 0
    assert any(key[1].endswith("_total") for key in shown)  # a delta counter
    print(
        f"\n{len(telemetry.failed)} pushes answered 89 while the proxy refused "
        f"{proxy.produce_refused} Produce requests; {len(records)} records landed, "
        f"as many folded; {len(shown)} series on /metrics/clients equal the topic's; "
        f"{time.monotonic() - started:.1f} s"
    )
