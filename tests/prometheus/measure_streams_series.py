"""Series per instance of a real Kafka Streams application on ``/metrics/clients``: the
measurement behind the default of ``prometheus.clients.max.series.per.instance``
(docs/prometheus.md, "Bounds per instance").

A one-node Kafka 4.4.0 cluster, ``ktc gateway`` in front of it with ``/metrics/clients`` on
and no bound in the way (budget and per-instance cap 1,000,000), a subscription of every
metric every second, and ``java/TelemetryStreams.java`` (a word count at
``metrics.recording.level=DEBUG``) over an input topic of ``--partitions`` partitions.
Once every instance has pushed for ``--settle-s`` seconds, prints each instance's series
(client id, software, series) and the busiest.

Needs kafka-streams 4.4.0 and its dependencies in one directory (not in the provisioned
caches: ``mvn dependency:copy-dependencies`` over a pom naming
``org.apache.kafka:kafka-streams:4.4.0``):

    KTC_STREAMS_LIBS=/path/to/libs .venv/bin/python tests/prometheus/measure_streams_series.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
sys.path.insert(0, str(TESTS.parent))  # run as a script: the repository root

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from subscriptions.store import ConfigStore  # noqa: E402
from tests.gateway.gateway_harness import RunningGateway  # noqa: E402
from tests.gateway.harness.kafka_cluster import KafkaCluster  # noqa: E402
from tests.waiting import eventually_sync  # noqa: E402


def series_per_instance(url: str) -> dict[tuple[str, str, str], int]:
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    counts: dict[tuple[str, str, str], int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            key = (
                labels.get("client_id", ""),
                labels.get("client_software_name", ""),
                labels.get("client_instance_id", ""),
            )
            counts[key] = counts.get(key, 0) + 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--settle-s", type=float, default=45.0)
    args = parser.parse_args()
    libs = os.environ.get("KTC_STREAMS_LIBS")
    if not libs or not (Path(libs) / "kafka-streams-4.4.0.jar").is_file():
        print("KTC_STREAMS_LIBS: a directory with kafka-streams-4.4.0.jar and its deps")
        return 2
    with tempfile.TemporaryDirectory() as work:
        data_dir = Path(work) / "data"
        ConfigStore(data_dir).alter_subscription(
            "everything", {"metrics": "*", "interval.ms": "1000"}, []
        )
        cluster = KafkaCluster(nodes=1, work_dir=Path(work) / "kafka")
        cluster.start()
        try:
            with RunningGateway(
                data_dir,
                cluster.bootstrap_servers(),
                **{
                    "prometheus.clients.enable": True,
                    "prometheus.clients.max.series": 1_000_000,
                    "prometheus.clients.max.series.per.instance": 1_000_000,
                },
            ) as gateway:
                assert gateway.server is not None
                url = f"http://127.0.0.1:{gateway.server.http_port}/metrics/clients"
                admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
                for topic in ("words", "counts"):
                    admin.create_topics([NewTopic(topic, args.partitions, 1)])[
                        topic
                    ].result(30)
                process = subprocess.Popen(
                    [
                        "java", "-Xmx256m", "-XX:+UseSerialGC",
                        f"-Djava.io.tmpdir={work}", "-cp", f"{libs}/*",
                        str(HERE / "java" / "TelemetryStreams.java"),
                        "--bootstrap", gateway.bootstrap, "--application-id", "wordcount",
                        "--input", "words", "--output", "counts",
                        "--threads", str(args.threads),
                    ],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                )  # fmt: skip
                try:
                    assert process.stdout is not None
                    line = process.stdout.readline()
                    print(line.strip())
                    if not line.startswith("KTC running"):
                        return 1
                    started = time.monotonic()
                    eventually_sync(
                        lambda: time.monotonic() - started > args.settle_s,
                        timeout_s=args.settle_s + 10,
                        what="the application to settle",
                    )
                    counts = series_per_instance(url)
                finally:
                    assert process.stdin is not None
                    process.stdin.close()
                    process.wait(60)
        finally:
            cluster.stop()
    for (client_id, software, instance), count in sorted(
        counts.items(), key=lambda item: -item[1]
    ):
        print(f"{count:6d}  {software:20s} {client_id}  {instance}")
    print(f"busiest instance: {max(counts.values())} series")
    return 0


if __name__ == "__main__":
    sys.exit(main())
