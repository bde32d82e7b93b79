"""Telemetry on a topic (``landing.kafka.topic``) against a real Apache Kafka 4.4.0 broker:
real librdkafka clients push through ``ktc serve`` and ``ktc gateway``; what the topic
holds is read back with a plain confluent-kafka Consumer and the format documented in
docs/landing-log.md ("Telemetry on a Kafka topic"), never with ktc's own decoder.

- every push the collector answered 0 is in the topic exactly once, as the client pushed it;
- with the broker stopped, pushes are answered 89 (retriable) and nothing answered 0 before
  is lost; once the broker is back the same clients push again and land;
- the OTLP forwarder reads the topic into a real OpenTelemetry Collector with a consumer
  group of its own, and its lag gauge goes back to 0.
"""

from __future__ import annotations

import collections
import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData
from prometheus_client.parser import text_string_to_metric_families

from collector.app import landing_topic
from collector.net.flush import NotLanded
from exporters.context import TelemetryContext
from exporters.kafka_topic.landing import TopicLanding
from exporters.otlp import count_data_points
from subscriptions.store import ConfigStore
from tests.exporters.otelcol_process import OtelCollector
from tests.gateway.gateway_harness import RunningGateway
from tests.gateway.harness import kafka_cluster as kafka_cluster_module
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.topic_reader import read_topic
from tests.integration.collector_harness import RunningCollector
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(240)]

# A push is identified by its client instance and the request's correlation id.
PushId = tuple[str, int]


@pytest.fixture(scope="session")
def landing_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KafkaCluster]:
    """One KRaft node of its own: the produce-failure test stops it (the shared three-node
    cluster would keep accepting)."""
    missing = kafka_cluster_module.missing_prerequisites()
    if missing is not None:
        pytest.skip(missing)
    cluster = KafkaCluster(
        nodes=1, heap="384m", work_dir=tmp_path_factory.mktemp("kafka-landing")
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


class Answers:
    """What the collector did with each push: produced (export succeeded) and, of those,
    refused after a failed delivery (answered 89). Everything else was answered 0."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.produced: dict[PushId, bytes] = {}
        self.refused: set[PushId] = set()
        export = TopicLanding.export
        answers = self

        def recording_export(
            landing: TopicLanding, context: TelemetryContext, payload: bytes
        ) -> Any:
            result = export(landing, context, payload)
            if result.ok:
                answers.produced[_push_id(context)] = payload
            return result

        def recording_not_landed(
            cause: BaseException, records: list[tuple[Any, bytes]]
        ) -> NotLanded:
            answers.refused.update(_push_id(c) for c, _ in records)
            return NotLanded(cause, records)

        monkeypatch.setattr(TopicLanding, "export", recording_export)
        monkeypatch.setattr(landing_topic, "NotLanded", recording_not_landed)

    def accepted(self) -> dict[PushId, bytes]:
        return {k: v for k, v in self.produced.items() if k not in self.refused}


def _push_id(context: TelemetryContext) -> PushId:
    return (context.client_instance_id, context.correlation_id)


def decode(message: Any) -> tuple[dict[str, Any], MetricsData]:
    """The documented format, decoded with nothing but the message and json/protobuf."""
    headers = dict(message.headers())
    assert headers["ktc.format"] == b"1"
    return json.loads(headers["ktc.context"]), MetricsData.FromString(message.value())


def client(bootstrap: str, client_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "enable.metrics.push": True,
            "log_level": 3,
        }
    )


def subscribe_producers(data_dir: Path) -> None:
    ConfigStore(data_dir).alter_subscription(
        "producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )


def scrape(server: Any, name: str) -> float:
    url = f"http://127.0.0.1:{server.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == name:
            return sum(sample.value for sample in family.samples)
    raise AssertionError(f"{name} is not exposed")


def assert_in_topic_exactly_once(
    records: list[Any], accepted: dict[PushId, bytes]
) -> None:
    seen: collections.Counter[PushId] = collections.Counter()
    for message in records:
        context, metrics = decode(message)
        push = (context["client_instance_id"], context["correlation_id"])
        seen[push] += 1
        assert message.key().decode() == context["client_instance_id"]
        if push in accepted:  # as the client pushed it, decompressed
            assert message.value() == accepted[push]
            assert metrics.resource_metrics
    missing = set(accepted) - set(seen)
    assert not missing, f"{len(missing)} accepted pushes are not in the topic"
    twice = {push: n for push, n in seen.items() if n > 1}
    assert not twice, f"pushes in the topic more than once: {twice}"


def test_every_answered_push_is_in_the_topic_exactly_once(
    landing_cluster: KafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = Answers(monkeypatch)
    bootstrap = landing_cluster.bootstrap_servers()
    topic = f"telemetry-{uuid.uuid4().hex[:8]}"
    data_dir = tmp_path / "data"
    subscribe_producers(data_dir)
    settings = {
        "landing.kafka.topic": topic,
        "landing.kafka.bootstrap.servers": bootstrap,
        "landing.kafka.topic.partitions": 3,
    }
    with RunningCollector(data_dir, **settings) as collector:
        server = collector.server
        assert server is not None
        clients = [client(collector.bootstrap, f"orders-{i}") for i in range(3)]
        try:
            eventually_sync(
                lambda: len(answers.produced) >= 30,
                timeout_s=60,
                what="30 pushes from three clients",
            )
        finally:
            for producer in clients:
                producer.close()  # each sends its terminating push
        assert scrape(server, "ktc_landing_pushes_refused") == 0
        assert scrape(server, "ktc_landing_writable") == 1
        cluster_id = server.cluster_id
    assert not answers.refused
    records = read_topic(bootstrap, topic)
    assert_in_topic_exactly_once(records, answers.accepted())
    assert len(records) == len(answers.produced)
    assert {m.partition() for m in records} <= {0, 1, 2}
    contexts = [decode(m)[0] for m in records]
    assert {c["client_id"] for c in contexts} == {"orders-0", "orders-1", "orders-2"}
    assert {c["cluster_id"] for c in contexts} == {cluster_id}
    # One client's pushes stay in one partition, in the order it pushed them.
    by_instance: dict[str, list[Any]] = collections.defaultdict(list)
    for message in records:
        by_instance[message.key().decode()].append(message)
    for messages in by_instance.values():
        assert len({m.partition() for m in messages}) == 1
        ids = [decode(m)[0]["correlation_id"] for m in messages]
        assert ids == sorted(ids)
    terminating = sum(c["terminating"] for c in contexts)
    assert terminating >= 1  # a closing client's last push lands too
    print(
        f"\n{len(records)} pushes from {len(by_instance)} clients, each in the topic "
        f"once ({terminating} terminating)"
    )


def test_the_gateway_lands_on_the_fronted_cluster_by_default(
    landing_cluster: KafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = Answers(monkeypatch)
    bootstrap = landing_cluster.bootstrap_servers()
    topic = f"gateway-telemetry-{uuid.uuid4().hex[:8]}"
    data_dir = tmp_path / "data"
    subscribe_producers(data_dir)
    with RunningGateway(
        data_dir,
        bootstrap,
        **{"landing.kafka.topic": topic, "landing.kafka.topic.replication.factor": 1},
    ) as gateway:
        producer = client(gateway.bootstrap, "gateway-orders")
        try:
            eventually_sync(
                lambda: len(answers.produced) >= 5, timeout_s=60, what="5 pushes"
            )
        finally:
            producer.close()
        eventually_sync(
            lambda: len(read_topic(bootstrap, topic)) >= len(answers.produced),
            timeout_s=20,
            what="every push in the topic",
        )
    records = read_topic(bootstrap, topic)
    assert_in_topic_exactly_once(records, answers.accepted())
    assert len(records) == len(answers.produced)
    assert all(decode(m)[0]["upstream_cluster_id"] for m in records)


def test_a_failed_produce_answers_retriable_and_loses_nothing_accepted(
    landing_cluster: KafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = Answers(monkeypatch)
    bootstrap = landing_cluster.bootstrap_servers()
    topic = f"telemetry-outage-{uuid.uuid4().hex[:8]}"
    data_dir = tmp_path / "data"
    subscribe_producers(data_dir)
    settings = {
        "landing.kafka.topic": topic,
        "landing.kafka.bootstrap.servers": bootstrap,
        "landing.kafka.delivery.timeout.ms": 2000,
    }
    with RunningCollector(data_dir, **settings) as collector:
        server = collector.server
        assert server is not None
        producer = client(collector.bootstrap, "orders-outage")
        try:
            eventually_sync(
                lambda: len(answers.produced) >= 5, timeout_s=30, what="5 pushes"
            )
            before = dict(answers.accepted())
            landing_cluster.stop_node(1)
            try:
                eventually_sync(
                    lambda: len(answers.refused) >= 3,
                    timeout_s=60,
                    what="3 pushes refused while the broker is down",
                )
                assert scrape(server, "ktc_landing_pushes_refused") >= 3
                assert scrape(server, "ktc_landing_writable") == 0
            finally:
                landing_cluster.ensure_running()
            refused_at_restart = len(answers.refused)
            produced_at_restart = len(answers.produced)
            # The same client, never restarted, pushes again and its pushes land.
            eventually_sync(
                lambda: (
                    len(answers.accepted()) >= len(before) + 5
                    and len(answers.produced) >= produced_at_restart + 5
                ),
                timeout_s=90,
                what="5 more pushes accepted after the broker came back",
            )
            eventually_sync(
                lambda: scrape(server, "ktc_landing_writable") == 1,
                timeout_s=10,
                what="the topic writable again",
            )
        finally:
            producer.close()
        pushes_refused = scrape(server, "ktc_landing_pushes_refused")
    records = read_topic(bootstrap, topic)
    accepted = answers.accepted()
    assert set(before) <= set(accepted)
    assert_in_topic_exactly_once(records, accepted)
    assert pushes_refused == len(answers.refused)
    print(
        f"\n{len(accepted)} pushes answered 0, all in the topic once; "
        f"{refused_at_restart} answered 89 while the broker was down"
    )


def test_the_forwarder_reads_the_topic_into_a_real_otelcol(
    landing_cluster: KafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = Answers(monkeypatch)
    bootstrap = landing_cluster.bootstrap_servers()
    topic = f"telemetry-otlp-{uuid.uuid4().hex[:8]}"
    group = f"forwarder-{uuid.uuid4().hex[:8]}"
    data_dir = tmp_path / "data"
    subscribe_producers(data_dir)
    with OtelCollector(tmp_path / "otelcol") as otelcol:
        settings = {
            "landing.kafka.topic": topic,
            "landing.kafka.bootstrap.servers": bootstrap,
            "landing.kafka.forwarder.group.id": group,
            "exporters.otlp": {"endpoint": otelcol.endpoint, "tls": {"insecure": True}},
        }
        with RunningCollector(data_dir, **settings) as collector:
            server = collector.server
            assert server is not None
            producer = client(collector.bootstrap, "orders-otlp")
            try:
                eventually_sync(
                    lambda: len(answers.produced) >= 8, timeout_s=60, what="8 pushes"
                )
            finally:
                producer.close()
            eventually_sync(  # what was answered 0 is there; the clients are closed
                lambda: len(read_topic(bootstrap, topic)) >= len(answers.produced),
                timeout_s=20,
                what="every push in the topic",
            )
            records = read_topic(bootstrap, topic)
            points = sum(
                count_data_points(decode(m)[1].resource_metrics) for m in records
            )
            eventually_sync(
                lambda: scrape(server, "ktc_forwarder_lag_records") == 0,
                timeout_s=30,
                what="the forwarder's lag to be 0",
            )
            eventually_sync(
                lambda: otelcol.data_points_logged() >= points,
                timeout_s=10,
                what=f"otelcol to log {points} data points",
            )
            assert otelcol.data_points_logged() == points  # none twice
            instance_id = records[0].key().decode()
            labels = [
                sample.labels
                for samples in otelcol.scrape().values()
                for sample in samples
                if sample.labels.get("client_instance_id") == instance_id
            ]
            assert labels and labels[0]["client_id"] == "orders-otlp"
    # The group's committed offsets cover every record.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        committed = consumer.committed(
            [TopicPartition(topic, p) for p in partitions], timeout=10
        )
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p))[1]
            for p in partitions
        }
    finally:
        consumer.close()
    assert {c.partition: c.offset for c in committed if ends[c.partition]} == {
        p: end for p, end in ends.items() if end
    }
    print(f"\n{len(records)} pushes, {points} data points forwarded; lag 0")


def test_a_broker_killed_under_load_loses_no_answered_push(
    kafka_cluster: KafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three brokers, the topic replicated three times (min.insync.replicas 2): SIGKILL
    one while clients push; every push answered 0 is in the topic exactly once."""
    answers = Answers(monkeypatch)
    bootstrap = kafka_cluster.bootstrap_servers()
    topic = f"telemetry-kill-{uuid.uuid4().hex[:8]}"
    data_dir = tmp_path / "data"
    subscribe_producers(data_dir)
    settings = {
        "landing.kafka.topic": topic,
        "landing.kafka.bootstrap.servers": bootstrap,
        "landing.kafka.topic.partitions": 3,
        "landing.kafka.topic.replication.factor": 3,
    }
    with RunningCollector(data_dir, **settings) as collector:
        clients = [client(collector.bootstrap, f"orders-{i}") for i in range(3)]
        try:
            eventually_sync(
                lambda: len(answers.produced) >= 15, timeout_s=60, what="15 pushes"
            )
            produced_at_kill = len(answers.produced)
            kafka_cluster.kill_node(2)
            try:
                eventually_sync(
                    lambda: len(answers.produced) >= produced_at_kill + 30,
                    timeout_s=90,
                    what="30 more pushes with a broker killed",
                )
            finally:
                kafka_cluster.ensure_running()
        finally:
            for producer in clients:
                producer.close()
    records = read_topic(bootstrap, topic)
    accepted = answers.accepted()
    assert_in_topic_exactly_once(records, accepted)
    print(
        f"\n{len(accepted)} pushes answered 0 ({len(answers.produced) - produced_at_kill}"
        f" after the kill), all in the topic once; {len(answers.refused)} answered 89"
    )


def test_the_forwarder_commits_only_what_the_receiver_accepted(
    landing_cluster: KafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver away while a client pushes: the group's offsets stand still and the
    lag grows by the pushes landed meanwhile; back, the backlog goes out once and the lag
    returns to 0."""
    from tests.exporters.otlp_receiver import OtlpReceiver

    answers = Answers(monkeypatch)
    bootstrap = landing_cluster.bootstrap_servers()
    topic = f"telemetry-outage-otlp-{uuid.uuid4().hex[:8]}"
    group = f"forwarder-{uuid.uuid4().hex[:8]}"
    data_dir = tmp_path / "data"
    subscribe_producers(data_dir)
    with OtlpReceiver() as receiver:
        settings = {
            "landing.kafka.topic": topic,
            "landing.kafka.bootstrap.servers": bootstrap,
            "landing.kafka.forwarder.group.id": group,
            "exporters.otlp": {
                "endpoint": receiver.target,
                "tls": {"insecure": True},
                "retry_on_failure": {
                    "initial_interval": "50ms",
                    "max_interval": "200ms",
                },
            },
        }
        with RunningCollector(data_dir, **settings) as collector:
            server = collector.server
            assert server is not None
            producer = client(collector.bootstrap, "orders-outage-otlp")
            try:
                eventually_sync(
                    lambda: len(receiver.received) >= 2,
                    timeout_s=30,
                    what="two forwarded pushes",
                )
                eventually_sync(
                    lambda: scrape(server, "ktc_forwarder_lag_records") == 0,
                    timeout_s=10,
                    what="the lag at 0 before the outage",
                )
                receiver.stop()
                produced_at_stop = len(answers.produced)
                eventually_sync(
                    lambda: len(answers.produced) >= produced_at_stop + 6,
                    timeout_s=30,
                    what="6 pushes during the outage",
                )
                during = len(answers.produced) - produced_at_stop
                lag = scrape(server, "ktc_forwarder_lag_records")
                assert lag >= during - 1  # at most the one in flight
                receiver.start()
            finally:
                producer.close()
            eventually_sync(
                lambda: len(read_topic(bootstrap, topic)) >= len(answers.produced),
                timeout_s=20,
                what="every push in the topic",
            )
            eventually_sync(
                lambda: scrape(server, "ktc_forwarder_lag_records") == 0,
                timeout_s=30,
                what="the lag back to 0",
            )
            records = read_topic(bootstrap, topic)
            with_points = [
                m for m in records if count_data_points(decode(m)[1].resource_metrics)
            ]
            eventually_sync(
                lambda: len(receiver.received) >= len(with_points),
                timeout_s=10,
                what="every push with data points forwarded",
            )
    assert len(receiver.received) == len(with_points)  # each once
    print(
        f"\nlag {lag:.0f} after {during} pushes landed during the outage; "
        f"{len(with_points)} pushes forwarded once each, lag back to 0"
    )


def test_the_topic_on_a_sasl_only_cluster_with_the_collectors_login(
    sasl_only_cluster: KafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """landing.kafka.security.protocol and .sasl.* as gateway.upstream.* spells them: the
    collector produces (and creates the topic) as alice on a cluster that lets nobody in
    without a login."""
    answers = Answers(monkeypatch)
    topic = f"telemetry-sasl-{uuid.uuid4().hex[:8]}"
    data_dir = tmp_path / "data"
    subscribe_producers(data_dir)
    settings = {
        "landing.kafka.topic": topic,
        "landing.kafka.bootstrap.servers": sasl_only_cluster.bootstrap_servers(),
        "landing.kafka.security.protocol": "SASL_PLAINTEXT",
        "landing.kafka.sasl.mechanism": "SCRAM-SHA-512",
        "landing.kafka.sasl.username": "alice",
        "landing.kafka.sasl.password": sasl_only_cluster.sasl_users["alice"],
    }
    with RunningCollector(data_dir, **settings) as collector:
        producer = client(collector.bootstrap, "orders-sasl")
        try:
            eventually_sync(
                lambda: len(answers.produced) >= 4, timeout_s=60, what="4 pushes"
            )
        finally:
            producer.close()
    reader = sasl_only_cluster.client_config("SASL_PLAINTEXT", user="alice")
    consumer = Consumer(
        {**reader, "group.id": f"r-{uuid.uuid4().hex}", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        records: list[Any] = []

        def consumed_all() -> bool:
            records.extend(
                m for m in consumer.consume(100, timeout=0.5) if m.error() is None
            )
            return len(records) >= len(answers.produced)

        eventually_sync(
            consumed_all,
            timeout_s=30,
            what="every push read back as alice",
        )
    finally:
        consumer.close()
    assert_in_topic_exactly_once(records, answers.accepted())
    print(f"\n{len(records)} pushes in the topic of a SASL-only cluster")
