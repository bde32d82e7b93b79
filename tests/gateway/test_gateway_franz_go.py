"""franz-go (kgo 1.22.3, tests/clients/kgo) through ``ktc gateway`` in front of the real
3-node Apache Kafka 4.4.0 cluster, under a subscription of every metric (``metrics=*``).

Kafka answers such a subscription ``["*"]``; franz-go reads only the KIP's ``[""]`` as
"all" and takes ``*`` for a metric name, so under Kafka's answer it pushes payloads without
a single metric. ``subscriptions.wildcard.as.empty.prefix.for`` (default ``kgo``) answers
it ``[""]``:

* with the default, kgo's pushes carry its metrics (of the six KIP-714 requires of a
  producer, the two it implements and observes without throttling), while a librdkafka
  producer beside it still gets Kafka's ``["*"]``;
* with the list emptied (Kafka's answer for everyone), kgo's pushes are empty: the quirk
  the switch exists for, shown against the same client build, and counted on
  ``ktc_client_empty_pushes_total`` for its library.

Both show in the conformance view (``ktc clients --conformance``, docs/conformance.md): its
row counts kgo's empty pushes and flags them, or names the required metrics it sent and
those it lacks; librdkafka's row beside it lacks none.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from collector.app.cli import cli
from exporters.landing import LandingRecord
from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway, wait_for
from tests.gateway.harness.kafka_cluster import KafkaCluster

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(600)]

# KIP-714's required producer metrics (its "Client metrics" table, "required" column).
KIP714_REQUIRED_PRODUCER = {
    "org.apache.kafka.producer.node.request.latency.avg",
    "org.apache.kafka.producer.node.request.latency.max",
    "org.apache.kafka.producer.produce.throttle.time.avg",
    "org.apache.kafka.producer.produce.throttle.time.max",
    "org.apache.kafka.producer.record.queue.time.avg",
    "org.apache.kafka.producer.record.queue.time.max",
}
KGO_SENDS_OF_THE_REQUIRED = {
    "org.apache.kafka.producer.node.request.latency.avg",
    "org.apache.kafka.producer.node.request.latency.max",
}


def kgo_client() -> str:
    binary = os.environ.get("KTC_KGO_CLIENT", "")
    if not binary or not Path(binary).is_file():
        reason = "needs the franz-go test client (make kgo-client)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return binary


def metric_names(record: LandingRecord) -> set[str]:
    data = MetricsData.FromString(record.payload)
    return {
        metric.name
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


def run_kgo(binary: str, bootstrap: str, topic: str, client_id: str) -> dict[str, Any]:
    """kgo produces for 10 s (its push interval here is 1 s, its first push jittered to
    0.5-1.5 s: several pushes even on a busy machine); its closing JSON line."""
    done = subprocess.run(
        [binary, "-bootstrap", bootstrap, "-topic", topic, "-client-id", client_id]
        + ["-seconds", "10"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["produced"] > 0 and result["errors"] == 0, done.stderr[-2000:]
    return result


def kgo_pushes(gateway: RunningGateway, client_id: str) -> list[LandingRecord]:
    return [
        record
        for record in gateway.landed()
        if record.context.client_software_name == "kgo"
        and record.context.client_id == client_id
    ]


def conformance_rows(gateway: RunningGateway) -> dict[str, dict[str, Any]]:
    """``ktc clients --conformance --format json``'s rows, by client_software_name."""
    assert gateway.server is not None
    server = f"http://127.0.0.1:{gateway.server.http_port}"
    result = CliRunner().invoke(
        cli, ["clients", "--conformance", "--format", "json", "--server", server]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["libraries"]
    return {row["client_software_name"]: row for row in rows}


def every_metric_gateway(
    kafka_cluster: KafkaCluster, data_dir: Path, **overrides: Any
) -> RunningGateway:
    ConfigStore(data_dir).alter_subscription(
        "everything", {"metrics": "*", "interval.ms": "1000"}, []
    )
    return RunningGateway(data_dir, kafka_cluster.bootstrap_servers(), **overrides)


@pytest.fixture(scope="module")
def topic(kafka_cluster: KafkaCluster) -> Iterator[str]:
    name = f"kgo-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers()})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=60)
    yield name


class KgoRun:
    """``run_kgo`` on a thread, so the live views can be read while kgo runs (its
    instance leaves them when it closes its connections)."""

    def __init__(self, binary: str, bootstrap: str, topic: str, client_id: str) -> None:
        self.result: dict[str, Any] = {}
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(binary, bootstrap, topic, client_id), daemon=True
        )
        self._thread.start()

    def _run(self, binary: str, bootstrap: str, topic: str, client_id: str) -> None:
        try:
            self.result = run_kgo(binary, bootstrap, topic, client_id)
        except BaseException as exc:  # re-raised by join()
            self.error = exc

    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> dict[str, Any]:
        self._thread.join(timeout=150)
        assert not self._thread.is_alive(), "kgo did not end"
        if self.error is not None:
            raise self.error
        return self.result


def kgo_row(gateway: RunningGateway, kgo: KgoRun, ready: Any) -> dict[str, Any]:
    """kgo's conformance row once ``ready(row)``, read while kgo runs."""

    seen: list[dict[str, Any]] = []

    def read() -> dict[str, Any] | None:
        row = conformance_rows(gateway).get("kgo")
        if row is not None:
            if ready(row):
                return row
            seen[:] = [row]
        assert kgo.running(), f"kgo ended before its row was ready: {seen}"
        return None

    found: dict[str, Any] = wait_for(read, timeout_s=60, what="kgo's conformance row")
    return found


def test_kgo_gets_the_empty_prefix_and_pushes_its_metrics(
    kafka_cluster: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    binary = kgo_client()
    with every_metric_gateway(kafka_cluster, tmp_path / "data") as gateway:
        kgo = KgoRun(binary, gateway.bootstrap, topic, "kgo-default")
        # Its conformance row, while it runs: a producer; of the required metrics those
        # its sampled pushes carried (accepted pushes 0, 1, 2, 4, 8, ...), the rest
        # lacking, record.queue.time always among them.
        row = kgo_row(gateway, kgo, lambda r: r["required_sent"])
        # The interval it keeps: gaps sampled on its accepted pushes 1 and 2 (and 4, 8),
        # never under one interval (the gate refuses an early push).
        kept = kgo_row(gateway, kgo, lambda r: r["gaps_sampled"] >= 2)
        assert kept["interval_kept"] >= 1.0 and kept["push_intervals_ms"] == [1000]
        kgo.join()
        assert row["role"] == "producer"
        assert set(row["required_sent"]) <= KGO_SENDS_OF_THE_REQUIRED
        assert set(row["required_lacking"]) == (
            KIP714_REQUIRED_PRODUCER - set(row["required_sent"])
        )
        assert {
            "org.apache.kafka.producer.record.queue.time.avg",
            "org.apache.kafka.producer.record.queue.time.max",
        } <= set(row["required_lacking"])
        assert {"kgo-skips-required-metrics", "required-metrics-lacking"} <= set(
            row["flags"]
        )
        assert ("empty-pushes" in row["flags"]) == (row["empty_pushes"] > 0)
        assert set(row["temporalities_used"]) <= {"delta"}  # its sums, as asked

        pushes = wait_for(
            lambda: [r for r in kgo_pushes(gateway, "kgo-default") if metric_names(r)],
            timeout_s=30,
            what="a kgo push that carries metrics",
        )
        pushes = kgo_pushes(gateway, "kgo-default")
        names = set().union(*(metric_names(record) for record in pushes))
        # What kgo 1.22.3 implements of the six (pkg/kgo/metrics_714.go: record.queue.time
        # is skipped, and a gauge whose value is 0, throttle time when never throttled, is
        # not sent), plus its connection-creation rate and total.
        assert names & KIP714_REQUIRED_PRODUCER == KGO_SENDS_OF_THE_REQUIRED, sorted(
            names
        )
        assert "org.apache.kafka.producer.connection.creation.total" in names

        # A librdkafka producer beside it still gets Kafka's own answer.
        producer = Producer(
            {"bootstrap.servers": gateway.bootstrap, "client.id": "rdkafka-beside"}
        )
        producer.produce(topic, b"v")
        producer.flush(30)

        def rdkafka_subscription() -> tuple[str, ...] | None:
            def find() -> tuple[str, ...] | None:
                manager = gateway.gateway_server.manager
                assert manager is not None
                for instance in manager.instances():
                    if instance.metadata.client_id == "rdkafka-beside":
                        return instance.metrics
                return None

            return gateway.call(find)

        assert wait_for(
            rdkafka_subscription, timeout_s=30, what="librdkafka's subscription"
        ) == ("*",)
        # And, under "*", sends every metric KIP-714 requires of a producer.
        rdkafka: dict[str, Any] = wait_for(
            lambda: {
                k: v
                for k, v in conformance_rows(gateway).items()
                if k == "confluent-kafka-python" and v["shapes_read"]
            }.get("confluent-kafka-python"),
            timeout_s=30,
            what="a librdkafka push read by the conformance view",
        )
        assert rdkafka["role"] == "producer" and rdkafka["empty_pushes"] == 0
        assert set(rdkafka["required_sent"]) == KIP714_REQUIRED_PRODUCER
        assert rdkafka["required_lacking"] == []
        assert "empty-pushes" not in rdkafka["flags"]


def test_under_kafkas_answer_kgo_pushes_nothing(
    kafka_cluster: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    binary = kgo_client()
    with every_metric_gateway(
        kafka_cluster,
        tmp_path / "data",
        **{"subscriptions.wildcard.as.empty.prefix.for": []},
    ) as gateway:
        kgo = KgoRun(binary, gateway.bootstrap, topic, "kgo-kafkas-answer")
        # Its conformance row, while it runs: every push counted empty, and flagged, from
        # the data and from the table of known quirks.
        row = kgo_row(gateway, kgo, lambda r: r["empty_pushes"] >= 2)
        assert row["pushes"] == row["empty_pushes"]
        assert {"empty-pushes", "kgo-wildcard-as-a-name"} <= set(row["flags"])
        assert row["required_sent"] == []
        kgo.join()

        pushes = wait_for(
            lambda: kgo_pushes(gateway, "kgo-kafkas-answer")[:2],
            timeout_s=30,
            what="two kgo pushes",
        )
        assert len(pushes) == 2
        assert all(not metric_names(record) for record in pushes), [
            sorted(metric_names(record)) for record in pushes
        ]
        # Noticed: each empty push is counted for its library on /metrics.
        landed = kgo_pushes(gateway, "kgo-kafkas-answer")
        assert all(not metric_names(record) for record in landed)
        version = landed[0].context.client_software_version
        assert row["client_software_version"] == version
        counted = re.search(
            r'^ktc_client_empty_pushes_total\{client_software_name="kgo",'
            rf'client_software_version="{re.escape(version)}"\}} (\S+)$',
            gateway.metrics_text(),
            re.MULTILINE,
        )
        assert counted is not None and float(counted.group(1)) == len(landed)
