"""One ``/metrics/clients`` for a fleet: ``ktc client-metrics`` folds the landing topic that
three ``ktc gateway`` replicas land on (replica_processes.py, the three-node Apache Kafka
4.4.0 cluster), so a librdkafka client whose replica is SIGKILLed and which moves to
another keeps one series set, its counters continuing, each equal to what the topic holds.
Each replica's own ``/metrics/clients`` folds the topic as well (its fold process), only
for the instances it caches.

And the topic's reader itself (``LandedTopic``): it starts at the partitions' end offsets
and skips a record of a format it does not know, as every reader of the topic does.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from clock.testing import FakeClock
from collector.telemetry.prometheus.client_series import ClientSeriesSettings
from collector.telemetry.prometheus.fold_process import FoldProcess
from collector.telemetry.prometheus.landed_topic import (
    PARTITION_REFRESH_S,
    LandedTopic,
)
from collector.telemetry.prometheus.points import IDENTITY_LABELS
from exporters.kafka_topic import TopicSettings, decode_record, encode_headers
from exporters.kafka_topic.topic import ensure_topic
from exporters.landing import LandingRecord
from tests.exporters.otlp_receiver import sample_context
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.replica_processes import (
    ClientMetricsProcess,
    ReplicaFleet,
    ReplicaProcess,
)
from tests.gateway.test_replica_faults import serves_interval, subscribe, value_of
from tests.prometheus.otlp_build import gauge, payload, total
from tests.prometheus.test_client_metrics_endpoint import expected_from_landing, parse
from tests.prometheus.test_client_series import context
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(300)]

PUSH_INTERVAL_MS = 1000
# Still for 20 s: longer than a look at the topic, the counter and the page (about a
# second), short enough that the client takes its next subscription within the test.
QUIET_INTERVAL_MS = 20_000
PUSHES_FOLDED: tuple[str, frozenset[tuple[str, str]]] = (
    "ktc_prometheus_clients_pushes_folded_total",
    frozenset(),
)


# ------------------------------------------------------------------ the reader


def new_topic(bootstrap: str, prefix: str, *, partitions: int) -> TopicSettings:
    """A topic of its own on the three-broker cluster, created (replicated thrice)."""
    settings = TopicSettings(
        topic=f"{prefix}-{uuid.uuid4().hex[:8]}",
        client={"bootstrap.servers": bootstrap},
        partitions=partitions,
        replication_factor=3,
    )
    ensure_topic(settings)
    return settings


def test_the_topic_reader_starts_at_the_end_and_skips_unknown_formats(
    kafka_cluster: KafkaCluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers()
    settings = new_topic(bootstrap, "landed", partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})

    def produce(index: int, format_version: bytes = b"1") -> None:
        context = sample_context(correlation_id=index)
        headers = encode_headers(context)
        headers[0] = (headers[0][0], format_version)
        producer.produce(
            settings.topic,
            key=context.client_instance_id,
            value=b"push-%d" % index,
            headers=headers,
        )
        assert producer.flush(30) == 0

    produce(0)  # before the reader started: not read
    reader = LandedTopic(settings)
    try:
        assert sum(reader.start_offsets.values()) == 1
        produce(1)
        produce(2, format_version=b"2")  # a later format: skipped
        produce(3)
        taken: list[bytes] = []

        def read_all() -> bool:
            taken.extend(payload for _, payload in reader.take(1 << 20))
            return len(taken) >= 2 and reader.records_skipped == 1

        eventually_sync(read_all, timeout_s=30, what="the reader to take two records")
        assert taken == [b"push-1", b"push-3"]
        assert reader.records_read == 2
        assert reader.take(1 << 20) == []
    finally:
        reader.close()


def test_the_topic_reader_reads_a_partition_added_after_it_started(
    kafka_cluster: KafkaCluster,
) -> None:
    """A partition added to the topic while a reader runs is found at the next look and
    read from its beginning; a reader started again from the first one's start offsets
    reads it from its beginning too.  Without either, its records are never folded."""
    bootstrap = kafka_cluster.bootstrap_servers()
    settings = new_topic(bootstrap, "grown", partitions=1)
    clock = FakeClock()
    reader = LandedTopic(settings, clock=clock)
    again: LandedTopic | None = None
    try:
        assert reader.start_offsets == {0: 0}
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_partitions(
            [NewPartitions(settings.topic, 2)]
        ).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": bootstrap})

        def partition_known() -> bool:
            topic = producer.list_topics(settings.topic, timeout=10).topics
            return len(topic[settings.topic].partitions) == 2

        eventually_sync(partition_known, timeout_s=30, what="the second partition")
        for index, partition in enumerate((1, 0, 1)):
            context = sample_context(correlation_id=index)
            producer.produce(
                settings.topic,
                partition=partition,
                key=context.client_instance_id,
                value=b"push-%d" % index,
                headers=encode_headers(context),
            )
        assert producer.flush(30) == 0
        taken: list[bytes] = []

        def read(count: int) -> Callable[[], bool]:
            def enough() -> bool:
                taken.extend(payload for _, payload in reader.take(1 << 20))
                return len(taken) >= count

            return enough

        eventually_sync(read(1), timeout_s=30, what="the first partition's record")
        assert taken == [b"push-1"]  # not yet looked for: partition 1 unread
        assert reader.partitions_added == 0
        clock.advance(PARTITION_REFRESH_S * 1000)
        eventually_sync(read(3), timeout_s=30, what="the added partition's records")
        assert sorted(taken) == [b"push-0", b"push-1", b"push-2"]
        assert reader.partitions_added == 1

        # Started again where the first reader started: partition 1, which that one
        # did not name, from its beginning.
        again = LandedTopic(settings, start_offsets=reader.start_offsets)
        assert again.start_offsets == {0: 0, 1: OFFSET_BEGINNING}
        again_taken: list[bytes] = []

        def read_again() -> bool:
            again_taken.extend(payload for _, payload in again.take(1 << 20))
            return len(again_taken) >= 3

        eventually_sync(read_again, timeout_s=30, what="the restarted reader")
        assert sorted(again_taken) == sorted(taken)
    finally:
        reader.close()
        if again is not None:
            again.close()


# ------------------------------------------------------------------ a node's own fold


def test_a_nodes_fold_process_reads_the_topic_for_its_own_instances_only(
    kafka_cluster: KafkaCluster,
) -> None:
    """The fold process of a replica landing on the topic: the records of the instances
    the node caches, from where the process first started (again after it was killed)."""
    bootstrap = kafka_cluster.bootstrap_servers()
    settings = new_topic(bootstrap, "fold", partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    ours, theirs = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"

    def land(instance: str, value: int, at: int) -> None:
        metrics = [
            total("requests", value, at - 1, at),
            gauge("queue.depth", value, at),
        ]
        producer.produce(
            settings.topic,
            key=instance,
            value=payload(metrics),
            headers=encode_headers(context(instance, at_ns=at)),
        )
        assert producer.flush(30) == 0

    land(ours, 100, 1)  # before the node started: not its to fold
    series = FoldProcess(
        ClientSeriesSettings(100_000),
        lambda instance: instance == ours,
        topic=settings,
        clock=FakeClock(1_000_000),
    )
    try:
        land(ours, 5, 2)
        land(theirs, 9, 2)  # another replica's client
        land(ours, 7, 3)

        def shown() -> dict[Any, float]:
            return parse(asyncio.run(series.scrape(False)).decode())

        def folded(expected: float) -> bool:
            values = {key[0]: v for key, v in shown().items()}
            return values.get("requests_total") == expected

        eventually_sync(
            lambda: folded(12), timeout_s=30, what="the fold of the node's pushes"
        )
        page = shown()
        assert {dict(labels)["client_instance_id"] for _, labels in page} == {ours}
        assert series.pushes_folded == 2
        os.kill(series.pid, signal.SIGKILL)
        eventually_sync(
            lambda: series.returncode is not None,
            timeout_s=10,
            what="the fold process to die",
        )
        eventually_sync(
            lambda: folded(12), timeout_s=30, what="the restarted fold to catch up"
        )
        assert shown() == page and series.restarts == 1
    finally:
        series.close()


# ------------------------------------------------------------------ the fleet


class TopicTail:
    """Every record of a topic, read by one plain consumer kept open (each call reads
    what landed since the last, up to the partitions' end offsets at the call)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"tail-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
            }
        )
        metadata = self._consumer.list_topics(topic, timeout=30)
        self._partitions = sorted(metadata.topics[topic].partitions)
        self._consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in self._partitions]
        )
        self._next = dict.fromkeys(self._partitions, 0)
        self._records: list[LandingRecord] = []

    def records(self) -> list[LandingRecord]:
        ends = {
            p: self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, p), timeout=10, cached=False
            )[1]
            for p in self._partitions
        }
        while any(self._next[p] < ends[p] for p in self._partitions):
            message = self._consumer.poll(10)
            assert message is not None, "the topic did not reach its end in 10 s"
            assert message.error() is None, message.error()
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            context, payload = decode_record(message.headers(), message.value())
            self._records.append(LandingRecord(offset, context, payload, 0))
            self._next[partition] = offset + 1
        return list(self._records)

    def close(self) -> None:
        self._consumer.close()


@pytest.fixture(scope="session")
def topic_fleet(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ReplicaFleet, ClientMetricsProcess]]:
    """Three replicas landing on one topic, and ``ktc client-metrics`` reading it."""
    work = tmp_path_factory.mktemp("client-metrics-fleet")
    topic = f"telemetry-fleet-{uuid.uuid4().hex[:8]}"
    with ReplicaFleet(
        work,
        kafka_cluster.bootstrap_servers(),
        topic,
        settings={"prometheus.clients.enable": True},
    ) as fleet:
        view = ClientMetricsProcess(
            work / "client-metrics",
            kafka_cluster.bootstrap_servers(),
            {"landing.kafka.topic": topic},
        )
        try:
            yield fleet, view.start()
        finally:
            view.stop()


def instance_series(page: dict[Any, float]) -> dict[Any, float]:
    """(client_instance_id, name, attribute labels) -> value, as expected_from_landing."""
    return {
        (
            dict(labels)["client_instance_id"],
            name,
            frozenset((k, v) for k, v in labels if k not in IDENTITY_LABELS),
        ): value
        for (name, labels), value in page.items()
    }


def test_a_client_moved_to_another_replica_keeps_one_series_set(
    kafka_cluster: KafkaCluster,
    topic_fleet: tuple[ReplicaFleet, ClientMetricsProcess],
) -> None:
    fleet, view = topic_fleet
    bootstrap = kafka_cluster.bootstrap_servers()
    topic = fleet[0].config["landing.kafka.topic"]
    client_id = f"fleet-{uuid.uuid4().hex[:6]}"

    def push_every(interval_ms: int) -> None:
        """The client's subscription, at the cluster, served so by every replica."""
        subscribe(bootstrap, f"sub-{client_id}", f"client_id={client_id}", interval_ms)
        for replica in fleet:
            if replica.running:
                eventually_sync(
                    functools.partial(serves_interval, replica, client_id, interval_ms),
                    timeout_s=15,
                    what=f"{replica.name} serving the cluster's subscription",
                )

    push_every(PUSH_INTERVAL_MS)
    logger = logging.getLogger(f"librdkafka.{client_id}")
    logger.propagate = False
    producer = Producer(
        {
            "bootstrap.servers": fleet.bootstrap,
            "client.id": client_id,
            # Back to the bootstrap list after 1 s without metadata (default: 5 min).
            "metadata.recovery.rebootstrap.trigger.ms": 1000,
            "logger": logger,
        }
    )

    def pushes_on(replica: ReplicaProcess) -> int:
        producer.poll(0.05)
        if not replica.running:
            return 0
        entries = replica.clients(client_id=client_id)
        return int(entries[0]["pushes_accepted"]) if entries else 0

    def page() -> dict[Any, float]:
        return instance_series(parse(view.http("/metrics/clients")))

    tail = TopicTail(bootstrap, topic)

    def of_client(records: list[LandingRecord]) -> list[LandingRecord]:
        return [r for r in records if r.context.client_id == client_id]

    def folded() -> float:
        return parse(view.http("/metrics"))[PUSHES_FOLDED]

    def folded_what_landed() -> dict[Any, float] | None:
        """The page, once it folded every record of the topic (None: not yet): the
        topic read first, then the pushes folded, counted before and after the page is
        scraped, are the records read."""
        producer.poll(0)
        records = tail.records()
        folded_before = folded()
        shown = page()
        folded_after = folded()
        assert folded_after <= len(tail.records())  # never more than landed
        if not folded_before == folded_after == len(records):
            return None
        assert shown == expected_from_landing(of_client(records))
        return shown

    def still_then_folded() -> dict[Any, float]:
        """The page once it folded every record of a topic made still: with a push
        every interval, one look at the topic, the counter and the page takes longer
        than the next push needs to land.  The subscription altered to push every 20
        s, the client's next push is answered UNKNOWN_SUBSCRIPTION_ID (nothing lands),
        and it gets the new subscription and pushes no more for that long."""
        push_every(QUIET_INTERVAL_MS)
        return value_of(
            folded_what_landed, timeout_s=30, what="the page to fold what landed"
        )

    try:
        first = value_of(
            lambda: next((r for r in fleet if pushes_on(r) >= 3), None),
            timeout_s=60,
            what="three pushes accepted by the client's replica",
        )
        before = still_then_folded()
        # Every second again: the client's next push, at the end of the still 20 s, is
        # answered UNKNOWN_SUBSCRIPTION_ID and it takes this subscription.  It is
        # pushing again before its replica is killed, so that its first push after the
        # move, the one with the new connection in its counter's delta, lands.
        accepted = pushes_on(first)
        push_every(PUSH_INTERVAL_MS)
        eventually_sync(
            lambda: pushes_on(first) > accepted,
            timeout_s=60,
            what="the client pushing every second again",
        )
        first.kill()
        others = [replica for replica in fleet if replica is not first]
        second = value_of(
            lambda: next((r for r in others if pushes_on(r) >= 3), None),
            timeout_s=90,
            what="three pushes of the moved client accepted by another replica",
        )
        after = still_then_folded()
        names = {key[1] for key in after}
        records = len(of_client(tail.records()))

        # A replica's own page folds the topic too, but only its own clients: the
        # client's series on the replica it moved to, none on the third.
        def replica_page(replica: ReplicaProcess) -> dict[Any, float]:
            return instance_series(parse(replica.http("/metrics/clients")))

        third = next(r for r in others if r is not second)
        own = value_of(
            lambda: (
                {k: v for k, v in replica_page(second).items() if k[1] in names} or None
            ),
            timeout_s=30,
            what=f"{second.name}'s page to show the client",
        )
        assert {key[0] for key in own} == {key[0] for key in after}
        assert all(own[key] <= after[key] for key in own if key[1].endswith("_total"))
        assert replica_page(third) == {}
    finally:
        producer.poll(0)
        producer.close()
        tail.close()
    # One series set: one instance, every series of it before the move still there,
    # its counters continued (not restarted).
    instances = {key[0] for key in after}
    assert len(instances) == 1 and instances == {key[0] for key in before}
    assert set(before) <= set(after)
    counters = [key for key in before if key[1].endswith("_total")]
    assert counters
    assert all(after[key] >= before[key] for key in counters)
    assert any(after[key] > before[key] for key in counters)
    print(
        f"\n{len(after)} series of instance {instances.pop()} on ktc client-metrics, "
        f"{first.name} SIGKILLed, the client moved; every counter equals the sum of "
        f"the deltas on the topic ({records} records)"
    )


def test_client_metrics_answers_healthz(
    topic_fleet: tuple[ReplicaFleet, ClientMetricsProcess],
) -> None:
    _, view = topic_fleet
    assert '"status": "ok"' in view.http("/healthz")
    assert view.http(
        "/metrics/clients", accept="application/openmetrics-text"
    ).endswith("# EOF\n")
