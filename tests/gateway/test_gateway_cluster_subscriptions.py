"""Subscriptions kept in the cluster: three gateway replicas in front of the real 3-node
Apache Kafka 4.4.0 cluster (harness/kafka_cluster.py), ``gateway.subscriptions.store:
cluster`` (the default) and the default ``gateway.subscriptions.refresh.ms`` (2000).

* kafka-tools 4.4.0's ClientMetricsCommand alters a subscription through replica 1, then
  another at the cluster directly; a librdkafka client (confluent-kafka) and a Java client
  (kafka-clients 4.4.0) connected through replica 3 push the first one's metrics at its
  interval, then the second one's;
* the time from an alter (through replica 1, or at the cluster directly) to each replica
  serving it, measured over 20 alters and 3 replicas (60 samples), printed, p99 <= 5 s;
* a replica started with an empty data directory serves the cluster's subscriptions as
  soon as it is up;
* in front of Tansu (no CLIENT_METRICS configs) the gateway says so in one log line and
  serves its local store, answering the client-metrics admin APIs itself.
"""

from __future__ import annotations

import itertools
import logging
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.describe_configs.v4 import request as dc
from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
from kio.schema.errors import ErrorCode
from kio.schema.get_telemetry_subscriptions.v0.request import (
    GetTelemetrySubscriptionsRequest,
)
from kio.schema.get_telemetry_subscriptions.v0.response import (
    GetTelemetrySubscriptionsResponse,
)
from kio.schema.incremental_alter_configs.v1 import request as iac
from kio.schema.incremental_alter_configs.v1.response import (
    IncrementalAlterConfigsResponse,
)
from kio.static.primitive import i8
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.landing import LandingRecord
from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway
from tests.gateway.harness.kafka_cluster import KafkaCluster, classpath, java_bin
from tests.gateway.harness.tansu import TansuBroker
from tests.gateway.harness.wire import exchange
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(600)]

CLIENT_METRICS = 16
SET = 0
CLIENT_METRICS_COMMAND = "org.apache.kafka.tools.ClientMetricsCommand"
NOT_SERVED = "does not serve CLIENT_METRICS configs"
TELEMETRY_PRODUCER = (
    Path(__file__).resolve().parents[1]
    / "prometheus"
    / "java"
    / "TelemetryProducer.java"
)


def java_or_skip() -> str:
    java = java_bin()
    if java is None:
        pytest.skip("needs java")
    return java


def client_metrics_command(bootstrap: str, *args: str, work: Path) -> str:
    """kafka-client-metrics.sh (kafka-tools 4.4.0) against ``bootstrap``; its output."""
    done = subprocess.run(
        [
            java_or_skip(),
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work}",
            "-cp",
            classpath(),
            CLIENT_METRICS_COMMAND,
            "--bootstrap-server",
            bootstrap,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def delete_every_subscription(bootstrap: str, work: Path) -> list[str]:
    """Delete every client-metrics config resource the cluster holds; their names."""
    described = client_metrics_command(bootstrap, "--describe", work=work)
    names = re.findall(r"Client metrics configs for (\S+) are:", described)
    for name in names:
        client_metrics_command(bootstrap, "--delete", "--name", name, work=work)
    return names


def interval_served(port: int, client_id: str) -> int:
    """The push interval (ms) a new client instance with ``client_id`` gets at ``port``."""
    answer, _ = exchange(
        port,
        GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)),
        GetTelemetrySubscriptionsResponse,
        client_id=client_id,
    )
    assert answer.error_code == ErrorCode.none
    return round(answer.push_interval.total_seconds() * 1000)


def alter_interval(port: int, name: str, client_id: str, interval_ms: int) -> None:
    """IncrementalAlterConfigs v1 (Kafka's own encoding, kio): ``name`` matches
    ``client_id`` and asks for ``interval_ms``."""
    request = iac.IncrementalAlterConfigsRequest(
        resources=(
            iac.AlterConfigsResource(
                resource_type=i8(CLIENT_METRICS),
                resource_name=name,
                configs=tuple(
                    iac.AlterableConfig(name=key, config_operation=i8(SET), value=value)
                    for key, value in (
                        ("metrics", "org.apache.kafka.producer."),
                        ("interval.ms", str(interval_ms)),
                        ("match", f"client_id={client_id}"),
                    )
                ),
            ),
        ),
        validate_only=False,
    )
    answer, _ = exchange(port, request, IncrementalAlterConfigsResponse)
    assert [r.error_code for r in answer.responses] == [ErrorCode.none], answer


def metric_names(record: LandingRecord) -> set[str]:
    data = MetricsData.FromString(record.payload)
    return {
        metric.name
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


@pytest.fixture(scope="module")
def replicas(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[RunningGateway]]:
    """Three replicas of one gateway, each with its own (empty) data directory, in front
    of a cluster holding no subscription (earlier tests' on the shared cluster would
    match this module's clients too)."""
    delete_every_subscription(
        kafka_cluster.bootstrap_servers(), tmp_path_factory.mktemp("cleanup")
    )
    started: list[RunningGateway] = []
    try:
        for number in (1, 2, 3):
            data_dir = tmp_path_factory.mktemp(f"replica-{number}") / "data"
            replica = RunningGateway(
                data_dir,
                kafka_cluster.bootstrap_servers(),
                **{"gateway.subscriptions.store": "cluster"},
            )
            started.append(replica.__enter__())
        yield started
    finally:
        for replica in started:
            replica.stop()


@contextmanager
def java_client(bootstrap: str, client_id: str, work: Path) -> Iterator[str]:
    """A kafka-clients 4.4.0 producer (tests/prometheus/java/TelemetryProducer.java)
    pushing telemetry through ``bootstrap``; yields its client instance id. Closing its
    stdin closes the producer (the terminating push)."""
    log = work / "java-client.log"
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            [
                java_or_skip(), "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Djava.io.tmpdir={work}", "-cp", classpath(), str(TELEMETRY_PRODUCER),
                "--bootstrap", bootstrap, "--client-id", client_id,
            ],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
        )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # after clientInstanceId(30 s) or an error
        assert line.startswith("KTC instance "), line + log.read_text()[-3000:]
        yield line.split()[-1]
    finally:
        try:
            out, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        assert "KTC error" not in out, f"{out}\n{log.read_text()[-3000:]}"


def test_alters_through_a_replica_and_at_the_cluster_reach_clients_on_another(
    replicas: list[RunningGateway], kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """A librdkafka client and a Java client, both connected through replica 3 with one
    client id: each pushes the metrics and at the interval of the alter made through
    replica 1, then of the alter made at a broker directly."""
    first, _, third = replicas
    client_id = f"clients-{uuid.uuid4().hex[:6]}"
    name = f"sub-{client_id}"
    queue_time = "org.apache.kafka.producer.record.queue.time."
    connections = "org.apache.kafka.producer.connection.creation."

    client_metrics_command(
        first.bootstrap,
        "--alter",
        "--name",
        name,
        "--metrics",
        queue_time,
        "--interval",
        "1000",
        "--match",
        f"client_id={client_id}",
        work=tmp_path,
    )
    # Read back at the cluster: the alter went there, not to replica 1's data directory.
    described = client_metrics_command(
        kafka_cluster.bootstrap_servers(), "--describe", "--name", name, work=tmp_path
    )
    assert f"metrics={queue_time}" in described, described
    assert not (Path(first.config.data_dir) / "config" / "client-metrics.yaml").exists()

    producer = Producer({"bootstrap.servers": third.bootstrap, "client.id": client_id})
    with java_client(third.bootstrap, client_id, tmp_path) as java_instance:

        def pushes_since(moment_ns: int) -> dict[str, list[LandingRecord]]:
            producer.poll(0.05)  # librdkafka's own threads push; this serves callbacks
            by_client: dict[str, list[LandingRecord]] = {"librdkafka": [], "java": []}
            for record in third.landed():
                if (
                    record.context.client_id == client_id
                    and record.appended_time_unix_nano >= moment_ns
                    and record.payload
                    and metric_names(record)
                ):
                    java = record.context.client_instance_id == java_instance
                    by_client["java" if java else "librdkafka"].append(record)
            return by_client

        def gaps_ms(records: list[LandingRecord]) -> list[float]:
            times = [r.appended_time_unix_nano / 1e6 for r in records]
            return [later - earlier for earlier, later in itertools.pairwise(times)]

        try:
            eventually_sync(
                lambda: all(len(r) >= 4 for r in pushes_since(0).values()),
                timeout_s=60,
                what="four pushes of the first subscription from each client",
            )
            first_gap: dict[str, float] = {}
            for kind, records in pushes_since(0).items():
                for record in records:
                    assert all(n.startswith(queue_time) for n in metric_names(record))
                first_gap[kind] = statistics.median(gaps_ms(records))
                assert 700 <= first_gap[kind] <= 1600, (kind, gaps_ms(records))

            altered_ns = time.time_ns()
            altered_at = time.monotonic()
            client_metrics_command(
                kafka_cluster.bootstrap_servers(nodes=[2]),
                "--alter",
                "--name",
                name,
                "--metrics",
                connections,
                "--interval",
                "2000",
                work=tmp_path,
            )
            command_s = time.monotonic() - altered_at

            def with_new_metrics() -> dict[str, list[LandingRecord]]:
                return {
                    kind: [
                        r
                        for r in records
                        if all(n.startswith(connections) for n in metric_names(r))
                    ]
                    for kind, records in pushes_since(altered_ns).items()
                }

            reached_s: dict[str, float] = {}

            def reached() -> bool:
                for kind, records in with_new_metrics().items():
                    if records and kind not in reached_s:
                        reached_s[kind] = time.monotonic() - altered_at
                return len(reached_s) == 2

            eventually_sync(
                reached,
                timeout_s=30,
                what="a push with the cluster-side alter's metrics from each client",
            )
            eventually_sync(
                lambda: all(len(r) >= 4 for r in with_new_metrics().values()),
                timeout_s=60,
                what="four pushes of the second subscription from each client",
            )
            second_gap: dict[str, float] = {}
            for kind, records in with_new_metrics().items():
                second_gap[kind] = statistics.median(gaps_ms(records))
                assert 1600 <= second_gap[kind] <= 2600, (kind, gaps_ms(records))
        finally:
            producer.flush(5)
    for kind in ("librdkafka", "java"):
        print(
            f"\n{kind} through replica 3: alter through replica 1 -> pushes of "
            f"{queue_time}* every {first_gap[kind]:.0f} ms (median); alter at node 2 "
            f"directly (tool ran {command_s:.1f} s) -> first push of {connections}* "
            f"{reached_s[kind]:.1f} s after the tool started, then every "
            f"{second_gap[kind]:.0f} ms"
        )


def test_the_time_from_an_alter_to_every_replica_serving_it(
    replicas: list[RunningGateway], kafka_cluster: KafkaCluster
) -> None:
    """Each round alters the interval of one subscription, through replica 1 or at a broker
    directly, and waits until every replica's store holds it; a sample is the time from
    sending the alter to the moment the replica's store took it (its refresher's monotonic
    clock, the process's: the replicas run in this process). Then every replica serves it
    to a new client instance."""
    client_id = f"latency-{uuid.uuid4().hex[:6]}"
    name = f"sub-{client_id}"
    brokers = [ports["PLAINTEXT"] for ports in kafka_cluster.node_ports.values()]
    # (where the alter was sent, which replica took it) -> seconds.
    samples: dict[tuple[str, str], list[float]] = {
        ("replica 1", "itself"): [],
        ("replica 1", "the others"): [],
        ("cluster", "all"): [],
    }

    def held(replica: RunningGateway) -> tuple[str | None, int | None]:
        server = replica.gateway_server

        def read() -> tuple[str | None, int | None]:
            refresh = server.subscription_refresh
            assert refresh is not None
            configs = refresh.store.snapshot().subscription_configs.get(name, {})
            return configs.get("interval.ms"), refresh.changed_ms

        return replica.call(read)

    for round_number in range(20):
        interval_ms = 10_000 + 100 * round_number
        through_replica = round_number % 2 == 0
        sent_ms = time.monotonic_ns() // 1_000_000
        port = replicas[0].port if through_replica else brokers[round_number % 3]
        alter_interval(port, name, client_id, interval_ms)
        waiting = set(range(len(replicas)))

        def taken(
            round_number: int = round_number,
            wanted: int = interval_ms,
            waiting: set[int] = waiting,
            sent_ms: int = sent_ms,
        ) -> bool:
            for index in sorted(waiting):
                value, changed_ms = held(replicas[index])
                if value == str(wanted):
                    assert changed_ms is not None
                    if round_number % 2:
                        key = ("cluster", "all")
                    else:
                        key = ("replica 1", "itself" if index == 0 else "the others")
                    samples[key].append((changed_ms - sent_ms) / 1000)
                    waiting.discard(index)
            return not waiting

        eventually_sync(taken, timeout_s=15, what=f"round {round_number}")
        for replica in replicas:
            assert interval_served(replica.port, client_id) == interval_ms

    every = sorted(value for values in samples.values() for value in values)
    p99 = every[min(len(every) - 1, round(0.99 * len(every)))]

    def summary(values: list[float]) -> str:
        ordered = sorted(values)
        return (
            f"min {ordered[0]:.3f} s, p50 {statistics.median(ordered):.3f} s, "
            f"max {ordered[-1]:.3f} s ({len(ordered)} samples)"
        )

    print(
        "\nalter -> held by a replica (refresh.ms 2000): through replica 1, by replica "
        f"1: {summary(samples['replica 1', 'itself'])}; by replicas 2 and 3: "
        f"{summary(samples['replica 1', 'the others'])}; at a broker directly, by "
        f"every replica: {summary(samples['cluster', 'all'])}; all "
        f"{len(every)}: p99 {p99:.3f} s"
    )
    assert p99 <= 5.0


def test_a_replica_with_nothing_local_serves_the_clusters_subscriptions(
    replicas: list[RunningGateway],
    kafka_cluster: KafkaCluster,
    tmp_path: Path,
) -> None:
    client_id = f"restart-{uuid.uuid4().hex[:6]}"
    alter_interval(replicas[0].port, f"sub-{client_id}", client_id, 7_000)
    eventually_sync(
        lambda: interval_served(replicas[1].port, client_id) == 7_000,
        timeout_s=10,
        what="replica 2 serving the subscription",
    )
    replicas[1].stop()
    # Replica 2 again, on a new, empty data directory: nothing local at all.
    data_dir = tmp_path / "replica-2-again"
    with RunningGateway(
        data_dir,
        kafka_cluster.bootstrap_servers(),
        **{"gateway.subscriptions.store": "cluster"},
    ) as again:
        # Read during start, before the gateway was up: served at once, no wait.
        assert interval_served(again.port, client_id) == 7_000
        assert not (data_dir / "config" / "client-metrics.yaml").exists()
        metrics = again.metrics_text()
        assert "ktc_subscriptions_in_cluster 1.0" in metrics
        # The read that served it succeeded (the sample is there from the start, at 0).
        reads_ok = again.metric_value(
            "ktc_subscriptions_cluster_reads_total", result="ok"
        )
        assert reads_ok is not None and reads_ok > 0, metrics


@pytest.fixture
def tansu_gateway(
    tansu_broker: TansuBroker,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> Iterator[RunningGateway]:
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "local-sub", {"metrics": "org.apache.kafka.producer.", "interval.ms": "4000"}
    )
    caplog.set_level(logging.INFO)
    with RunningGateway(
        data_dir,
        tansu_broker.bootstrap_servers(),
        **{"gateway.subscriptions.store": "cluster"},
    ) as running:
        yield running


def test_in_front_of_tansu_one_line_and_the_local_store(
    tansu_gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    logged = caplog.get_records("setup") + caplog.get_records("call")
    said = [r for r in logged if NOT_SERVED in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
    print(f"\nin front of Tansu: {said[0].levelname} {said[0].getMessage()}")
    assert interval_served(tansu_gateway.port, "anyone") == 4000
    assert "ktc_subscriptions_in_cluster 0.0" in tansu_gateway.metrics_text()
    # The client-metrics admin APIs are the gateway's own again (its local store).
    request = dc.DescribeConfigsRequest(
        resources=(
            dc.DescribeConfigsResource(
                resource_type=i8(CLIENT_METRICS),
                resource_name="local-sub",
                configuration_keys=None,
            ),
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    answer: Any
    answer, _ = exchange(tansu_gateway.port, request, DescribeConfigsResponse)
    (result,) = answer.results
    assert result.error_code == ErrorCode.none
    assert {c.name: c.value for c in result.configs}["interval.ms"] == "4000"


KTC = [str(Path(sys.executable).with_name("ktc"))]


def ktc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*KTC, "subscriptions", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_ktc_subscriptions_with_a_bootstrap_server(
    replicas: list[RunningGateway], kafka_cluster: KafkaCluster
) -> None:
    """``ktc subscriptions --bootstrap-server``, as kafka-client-metrics.sh: through a
    replica or at the cluster, the same subscriptions; the cluster's errors in one line."""
    client_id = f"cli-{uuid.uuid4().hex[:6]}"
    name = f"sub-{client_id}"
    cluster = kafka_cluster.bootstrap_servers()
    altered = ktc(
        "alter",
        "--bootstrap-server",
        replicas[0].bootstrap,
        "--name",
        name,
        "--metrics",
        "org.apache.kafka.producer.",
        "--interval",
        "3000",
        "--match",
        f"client_id={client_id}",
    )
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout.strip() == f"Altered client metrics config for {name}."
    described = ktc("describe", "--bootstrap-server", cluster, "--name", name)
    assert described.returncode == 0, described.stderr
    assert described.stdout.splitlines() == [
        f"Client metrics configs for {name} are:",
        "  metrics=org.apache.kafka.producer.",
        "  interval.ms=3000",
        f"  match=client_id={client_id}",
    ]
    assert name in ktc("list", "--bootstrap-server", cluster).stdout.split()
    eventually_sync(
        lambda: interval_served(replicas[2].port, client_id) == 3000,
        timeout_s=10,
        what="replica 3 serving the CLI's subscription",
    )
    # The cluster validates: Kafka's code and message, one line, no traceback.
    refused = ktc(
        "alter", "--bootstrap-server", cluster, "--name", name, "--interval", "50"
    )
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "ktc: INVALID_REQUEST: Invalid value 50 for interval.ms, interval must be "
        "between 100 and 3600000 (1 hour)"
    ), refused.stderr
    deleted = ktc("delete", "--bootstrap-server", replicas[2].bootstrap, "--name", name)
    assert deleted.returncode == 0, deleted.stderr
    assert name not in ktc("list", "--bootstrap-server", cluster).stdout.split()
    gone = ktc("describe", "--bootstrap-server", cluster, "--name", name)
    assert gone.returncode != 0
    assert (
        gone.stderr.strip()
        == f"ktc: Client metrics subscription {name} does not exist."
    )
    unreachable = ktc("list", "--bootstrap-server", "127.0.0.1:1")
    assert unreachable.returncode == 1 and len(unreachable.stderr.splitlines()) == 1, (
        unreachable.stderr
    )


def test_a_serve_fleet_keeps_its_subscriptions_in_kafka(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """``ktc serve`` with ``subscriptions.store: kafka``: two nodes serve what was altered
    at the cluster (``ktc subscriptions --bootstrap-server``); an alter sent to a node
    itself is refused, naming where to make it."""
    from tests.integration.collector_harness import RunningCollector

    client_id = f"serve-{uuid.uuid4().hex[:6]}"
    cluster = kafka_cluster.bootstrap_servers()
    settings = {
        "subscriptions.store": "kafka",
        "subscriptions.kafka.bootstrap.servers": cluster,
    }
    with (
        RunningCollector(tmp_path / "serve-1", **settings) as first,
        RunningCollector(tmp_path / "serve-2", **settings) as second,
    ):
        altered = ktc(
            "alter",
            "--bootstrap-server",
            cluster,
            "--name",
            f"sub-{client_id}",
            "--metrics",
            "org.apache.kafka.producer.",
            "--interval",
            "4000",
            "--match",
            f"client_id={client_id}",
        )
        assert altered.returncode == 0, altered.stderr
        for node in (first, second):

            def serves_4000(port: int = node.port) -> bool:
                return interval_served(port, client_id) == 4000

            eventually_sync(
                serves_4000,
                timeout_s=10,
                what="a serve node serving the cluster's subscription",
            )
        request = iac.IncrementalAlterConfigsRequest(
            resources=(
                iac.AlterConfigsResource(
                    resource_type=i8(CLIENT_METRICS),
                    resource_name=f"sub-{client_id}",
                    configs=(
                        iac.AlterableConfig(
                            name="interval.ms", config_operation=i8(SET), value="5000"
                        ),
                    ),
                ),
            ),
            validate_only=False,
        )
        answer, _ = exchange(first.port, request, IncrementalAlterConfigsResponse)
        (result,) = answer.responses
        assert result.error_code == ErrorCode.invalid_request
        assert cluster in (result.error_message or "")


def sasl_properties(path: Path, user: str, password: str) -> Path:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="{user}" password="{password}";\n'
    )
    return path


def test_in_front_of_a_sasl_cluster_an_alter_carries_the_clients_own_login(
    sasl_only_cluster: KafkaCluster,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The cluster requires SASL and clients' SASL passes through the gateway: bob's
    ClientMetricsCommand through the gateway logs in to the cluster as bob and alters
    there; the gateway reads the set with its own reading login
    (gateway.subscriptions.sasl.*, alice). Without that login the gateway says in one line
    that it cannot read them, and serves its local store."""
    users = sasl_only_cluster.sasl_users
    cluster = sasl_only_cluster.bootstrap_servers()
    client_id = f"sasl-{uuid.uuid4().hex[:6]}"
    name = f"sub-{client_id}"
    bob = sasl_properties(tmp_path / "bob.properties", "bob", users["bob"])
    alice = sasl_properties(tmp_path / "alice.properties", "alice", users["alice"])
    upstream = {
        "gateway.subscriptions.store": "cluster",
        "gateway.upstream.security.protocol": "SASL_PLAINTEXT",
    }
    with RunningGateway(
        tmp_path / "reads",
        cluster,
        **upstream,
        **{
            "gateway.subscriptions.sasl.mechanism": "SCRAM-SHA-512",
            "gateway.subscriptions.sasl.username": "alice",
            "gateway.subscriptions.sasl.password": users["alice"],
        },
    ) as gateway:
        client_metrics_command(
            gateway.bootstrap,
            "--command-config",
            str(bob),
            "--alter",
            "--name",
            name,
            "--metrics",
            "*",
            "--interval",
            "6000",
            "--match",
            f"client_id={client_id}",
            work=tmp_path,
        )

        def held() -> str | None:
            def read() -> str | None:
                store = gateway.gateway_server.subscription_refresh.store  # type: ignore[union-attr]
                configs = store.snapshot().subscription_configs.get(name, {})
                return configs.get("interval.ms")

            return gateway.call(read)

        eventually_sync(
            lambda: held() == "6000",
            timeout_s=10,
            what="the gateway reading bob's alter",
        )
        described = ktc(
            "describe",
            "--bootstrap-server",
            cluster,
            "--command-config",
            str(alice),
            "--name",
            name,
        )
        assert described.returncode == 0, described.stderr
        assert "  interval.ms=6000" in described.stdout.splitlines()

    caplog.set_level(logging.INFO)
    with RunningGateway(tmp_path / "no-login", cluster, **upstream) as gateway:
        said = [r for r in caplog.records if "has no login to read" in r.getMessage()]
        assert len(said) == 1, [r.getMessage() for r in caplog.records]
        assert "ktc_subscriptions_in_cluster" not in gateway.metrics_text()
