"""Real clients' pushes for the insight view tests, captured once and kept as test data.

``python tests/lakehouse/insight_capture.py`` starts a one-node Apache Kafka cluster, a
``ktc gateway`` in front of it subscribing every client to all metrics (``*``) every
second, and runs against it:

* a confluent-kafka producer (``insight-rdkafka-producer``) and consumer in a group
  (``insight-rdkafka-consumer``, committing), closed cleanly (terminating push);
* the Java clients of tests/gateway/harness (``insight-java``: producer, transactional
  producer, consumer in a group, admin), closed cleanly;

with byte-rate quotas at the gateway low enough that both producers are throttled;
* a confluent-kafka producer in a subprocess (``insight-killed``) killed with SIGKILL
  after two pushes, so it never sends its terminating push.

Every landed push is written to ``data/insight_pushes.jsonl.gz`` (one JSON line per push:
the landing context and the OTLP payload in base64), which the view tests append to a real
landing log with :func:`load_captured` instead of running the clients every time.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    # Run as a script: the repository root, for the sources and `tests.` imports.
    sys.path.insert(0, str(HERE.parents[1]))

from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData  # noqa: E402

from exporters.context import TelemetryContext  # noqa: E402
from exporters.lakehouse.insights import (  # noqa: E402
    CONSUMER_HEALTH_COLUMNS,
    PRODUCER_HEALTH_COLUMNS,
)
from exporters.landing import LandingRecord  # noqa: E402

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer

CAPTURED = HERE / "data" / "insight_pushes.jsonl.gz"
RDKAFKA_PRODUCER = "insight-rdkafka-producer"
RDKAFKA_CONSUMER = "insight-rdkafka-consumer"
JAVA_CLIENT = "insight-java"
KILLED_CLIENT = "insight-killed"
INTERVAL_MS = 1000
PRODUCER_HEALTH_METRICS = {m for c in PRODUCER_HEALTH_COLUMNS for m in c.metrics}
CONSUMER_HEALTH_METRICS = {m for c in CONSUMER_HEALTH_COLUMNS for m in c.metrics}

# The killed client: produces forever until the parent sends SIGKILL.
_KILLED_SCRIPT = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "client.id": sys.argv[2],
                  "enable.metrics.push": True, "log_level": 3})
    print("started", flush=True)
    while True:
        p.produce(sys.argv[3], b"x" * 100)
        p.poll(0.05)
    """
)


def subscribe_everything(data_dir: Path, interval_ms: int = INTERVAL_MS) -> None:
    from subscriptions.store import ConfigStore

    ConfigStore(data_dir).alter_subscription(
        "everything", {"metrics": "*", "interval.ms": str(interval_ms)}, []
    )


def throttle(data_dir: Path) -> None:
    """Byte-rate quotas at the gateway, low enough that the rdkafka producer and the Java
    clients get throttled (their throttle time metrics above 0)."""
    from subscriptions.store import ConfigStore

    store = ConfigStore(data_dir)
    store.alter_quotas({"client-id": RDKAFKA_PRODUCER}, {"producer_byte_rate": 20_000})
    store.alter_quotas(
        {"client-id": JAVA_CLIENT},
        {"producer_byte_rate": 300_000, "consumer_byte_rate": 1_000_000},
    )


def pushes_of(records: Iterable[LandingRecord], client_id: str) -> list[LandingRecord]:
    return [r for r in records if r.context.client_id == client_id]


def start_killed_client(
    bootstrap: str, topic: str, client_id: str = KILLED_CLIENT
) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED_SCRIPT, bootstrap, client_id, topic],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "started"
    return process


def sigkill(process: subprocess.Popen[str]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


def run_rdkafka_clients(bootstrap: str, topic: str) -> tuple[Producer, Consumer]:
    """A producer and a committing group consumer, ten rounds of produce/consume/commit."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": RDKAFKA_PRODUCER,
            "enable.metrics.push": True,
            "log_level": 3,
            "linger.ms": 5,
        }
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": RDKAFKA_CONSUMER,
            "group.id": f"insight-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.metrics.push": True,
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    consumed = 0
    for round_ in range(400):
        for i in range(200):
            producer.produce(topic, key=str(i).encode(), value=b"v" * 200)
        producer.poll(0)
        producer.flush(10)
        for message in consumer.consume(500, timeout=0.2):
            if message.error() is None:
                consumed += 1
        if consumed:
            consumer.commit(asynchronous=False)
        if consumed and round_ >= 10:
            break
    assert consumed > 0, "the rdkafka consumer consumed nothing"
    return producer, consumer


def capture(work_dir: Path) -> list[LandingRecord]:
    """Runs every client against a gateway in front of a one-node Kafka; the landed pushes."""
    from tests.gateway.gateway_harness import RunningGateway, wait_for
    from tests.gateway.harness.java_clients import run_java_clients
    from tests.gateway.harness.kafka_cluster import KafkaCluster

    cluster = KafkaCluster(nodes=1, work_dir=work_dir / "kafka", heap="384m")
    cluster.start()
    try:
        data_dir = work_dir / "data"
        subscribe_everything(data_dir)
        throttle(data_dir)
        with RunningGateway(data_dir, cluster.bootstrap_servers()) as gateway:
            topic = f"insight-{uuid.uuid4().hex[:6]}"
            producer, consumer = run_rdkafka_clients(gateway.bootstrap, topic)
            wait_for(
                lambda: all(
                    len(pushes_of(gateway.landed(), c)) >= 3
                    for c in (RDKAFKA_PRODUCER, RDKAFKA_CONSUMER)
                ),
                timeout_s=60,
                what="three pushes of each rdkafka client",
            )
            killed = start_killed_client(gateway.bootstrap, topic)
            wait_for(
                lambda: len(pushes_of(gateway.landed(), KILLED_CLIENT)) >= 2,
                timeout_s=60,
                what="two pushes of the client to kill",
            )
            sigkill(killed)
            producer.flush(10)
            consumer.close()
            producer.close()
            wait_for(
                lambda: all(
                    any(r.context.terminating for r in pushes_of(gateway.landed(), c))
                    for c in (RDKAFKA_PRODUCER, RDKAFKA_CONSUMER)
                ),
                timeout_s=30,
                what="the rdkafka clients' terminating pushes",
            )
            result = run_java_clients(
                gateway.bootstrap,
                f"{topic}-java",
                records=150_000,
                txn_records=20,
                partitions=3,
                replication_factor=1,
                client_props={"client.id": JAVA_CLIENT},
                timeout=180,
            )
            assert result["ok"], (result["errors"], result["stderr_tail"])
            wait_for(
                lambda: all(
                    any(
                        metric_names(r) & names
                        for r in pushes_of(gateway.landed(), JAVA_CLIENT)
                    )
                    for names in (PRODUCER_HEALTH_METRICS, CONSUMER_HEALTH_METRICS)
                ),
                timeout_s=30,
                what="producer and consumer health metrics of the Java clients",
            )
            return gateway.landed()
    finally:
        cluster.stop()


def metric_names(record: LandingRecord) -> set[str]:
    data = MetricsData.FromString(record.payload)
    return {
        m.name
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }


def dump(records: Iterable[LandingRecord], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for record in records:
            out.write(
                json.dumps(
                    {
                        "context": record.context.to_json_dict(),
                        "payload": base64.b64encode(record.payload).decode(),
                    }
                )
                + "\n"
            )


def load_captured(path: Path = CAPTURED) -> list[tuple[TelemetryContext, bytes]]:
    """The captured pushes as (context, payload), in landing order."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [
            (
                TelemetryContext.from_json_dict(row["context"]),
                base64.b64decode(row["payload"]),
            )
            for row in map(json.loads, lines)
        ]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        landed = capture(Path(tmp))
    dump(landed, CAPTURED)
    print(f"{len(landed)} pushes -> {CAPTURED} ({CAPTURED.stat().st_size} bytes)")
