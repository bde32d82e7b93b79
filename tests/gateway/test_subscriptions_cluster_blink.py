"""Subscriptions kept in a Kafka cluster while the cluster blinks: a real ``ktc serve``
process (``subscriptions.store: kafka``) reading a real Apache Kafka 4.4.0 broker through a
proxy the test switches between refusing and passing bytes (harness/blink_proxy.py), a
librdkafka client (confluent-kafka) connected to it; and a gateway whose periodic read is
an hour away, so only the read an alter it forwarded triggers can bring the change.

* started while the cluster is unreachable: not ready (the reason on /readyz), no
  subscription served (GetTelemetrySubscriptions answers THROTTLING_QUOTA_EXCEEDED),
  ``ktc_subscriptions_in_cluster 0``, ``ktc_subscriptions_cluster_stale 1``; the
  librdkafka client is refused, retries, and pushes the subscription's metrics once the
  cluster is back;
* the cluster unreachable after a read worked: the last set stays served, its age
  exported; past ``subscriptions.kafka.stale.after.ms`` the node says so (one WARNING,
  the gauge), and the first read that works clears it;
* every ListConfigResources answered UNKNOWN_SERVER_ERROR (the proxy rewrites the
  broker's answer): a failed read, not a cluster without CLIENT_METRICS configs;
* a ``ktc gateway`` process started while its cluster is unreachable: not ready until a
  read works;
* a gateway whose periodic read is an hour away serves an alter it forwarded at once.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode
from kio.schema.get_telemetry_subscriptions.v0.request import (
    GetTelemetrySubscriptionsRequest,
)
from kio.schema.get_telemetry_subscriptions.v0.response import (
    GetTelemetrySubscriptionsResponse,
)

from exporters.landing import LandingReader, node_directories
from tests.gateway.gateway_harness import RunningGateway
from tests.gateway.harness import _proc
from tests.gateway.harness.blink_proxy import BlinkProxy
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.harness.wire import exchange
from tests.gateway.replica_processes import ReplicaProcess
from tests.gateway.test_gateway_cluster_subscriptions import (
    alter_interval,
    interval_served,
)
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(300)]

KTC = Path(sys.executable).with_name("ktc")
METRICS_PREFIX = "org.apache.kafka.producer."
STALE_AFTER_MS = 2000
LIST_CONFIG_RESOURCES = 74
UNKNOWN_SERVER_ERROR = -1


class ServeProcess:
    """One ``ktc serve`` process with ``settings``; started by :meth:`start`, which
    returns once its ready file names its ports (not once it is ready)."""

    def __init__(self, work: Path, settings: dict[str, Any]) -> None:
        self.work = work
        self.settings = settings
        self.process: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}

    @property
    def log_path(self) -> Path:
        return self.work / "serve.log"

    def start(self) -> ServeProcess:
        self.work.mkdir(parents=True, exist_ok=True)
        config = self.work / "config.yaml"
        config.write_text(yaml.safe_dump(self.settings))
        ready = self.work / "ready.json"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    *_proc.die_with_parent(), str(KTC), "serve", "--config", str(config),
                    "--listeners", "PLAINTEXT://127.0.0.1:0",
                    "--data-dir", str(self.work / "data"),
                    "--http-listener", "127.0.0.1:0", "--ready-file", str(ready),
                ],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=_proc.clean_env(drop_prefixes=("KTC_",)),
            )  # fmt: skip
        _proc.register(self.process)
        _proc.poll_until(
            ready.exists,
            timeout=60,
            what="ktc serve started",
            alive=_proc.exited(self.process, self.log_path),
        )
        self.info = json.loads(ready.read_text())
        return self

    def stop(self) -> None:
        if self.process is not None:
            _proc.kill(self.process, graceful_s=15)

    @property
    def port(self) -> int:
        return int(next(iter(self.info["listeners"].values())))

    def http(self, path: str) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.info['http_port']}{path}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def metric(self, name: str) -> float | None:
        _, text = self.http("/metrics")
        found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
        return None if found is None else float(found.group(1))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def pushed(self, client_id: str) -> int:
        """Pushes with metrics landed from ``client_id``."""
        return sum(
            1
            for directory in node_directories(self.work / "data")
            for record in LandingReader(directory).read(0)
            if record.context.client_id == client_id and record.payload
        )


@contextmanager
def serve(work: Path, settings: dict[str, Any]) -> Iterator[ServeProcess]:
    node = ServeProcess(work, settings)
    try:
        yield node.start()
    finally:
        node.stop()


def get_subscriptions(port: int, client_id: str) -> GetTelemetrySubscriptionsResponse:
    answer, _ = exchange(
        port,
        GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)),
        GetTelemetrySubscriptionsResponse,
        client_id=client_id,
    )
    return answer


def test_a_serve_node_started_while_its_cluster_is_unreachable(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    client_id = f"blink-{uuid.uuid4().hex[:6]}"
    broker = kafka_cluster.bootstrap_servers(nodes=[1])
    host, port = broker.split(":")
    alter_interval(int(port), f"sub-{client_id}", client_id, 1000)
    with (
        BlinkProxy((host, int(port)), refusing=True) as proxy,
        serve(
            tmp_path / "serve",
            {
                "subscriptions.store": "kafka",
                "subscriptions.kafka.bootstrap.servers": proxy.address,
                "subscriptions.kafka.refresh.ms": 200,
                "subscriptions.kafka.stale.after.ms": STALE_AFTER_MS,
                "landing": {"fsync": "never"},
            },
        ) as node,
    ):
        # Never read: not ready, and no subscription served as if it were the truth.
        status, body = node.http("/readyz")
        assert status == 503, body
        reason = json.loads(body)["checks"]["subscriptions"]
        assert "have not been read yet" in reason and proxy.address in reason, reason
        refused = get_subscriptions(node.port, client_id)
        assert refused.error_code == ErrorCode.throttling_quota_exceeded, refused
        assert refused.requested_metrics == ()
        assert node.metric("ktc_subscriptions_in_cluster") == 0
        assert node.metric("ktc_subscriptions_cluster_stale") == 1
        assert node.metric("ktc_subscriptions_cluster_read_age_seconds") is None

        # A librdkafka client meanwhile: its Get is refused, and it retries.
        said: list[str] = []

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                said.append(record.getMessage())

        logger = logging.getLogger(f"librdkafka-{client_id}")
        logger.addHandler(Collect())
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{node.port}",
                "client.id": client_id,
                "debug": "telemetry",
            },
            logger=logger,
        )
        try:

            def told(text: str) -> bool:
                producer.poll(0.05)
                return any(text in line for line in said)

            eventually_sync(
                lambda: told("GetTelemetrySubscriptionsRequest failed"),
                timeout_s=30,
                what="the librdkafka client refused a subscription",
            )
            refused_at = time.monotonic()

            proxy.open()
            eventually_sync(
                lambda: node.http("/readyz")[0] == 200,
                timeout_s=10,
                what="ready once the cluster was read",
            )
            ready_s = time.monotonic() - refused_at
            assert node.metric("ktc_subscriptions_in_cluster") == 1
            assert node.metric("ktc_subscriptions_cluster_stale") == 0
            served = get_subscriptions(node.port, client_id)
            assert served.error_code == ErrorCode.none
            assert served.requested_metrics == (METRICS_PREFIX,)

            def pushed() -> bool:
                producer.poll(0.05)
                return node.pushed(client_id) > 0

            eventually_sync(
                pushed, timeout_s=60, what="the librdkafka client pushing at last"
            )
            pushed_s = time.monotonic() - refused_at
        finally:
            producer.flush(5)

        # Read, then unreachable again: the last set stays, its age grows, and past the
        # bound the node says so.
        failed_before = failed_reads(node)
        proxy.refuse()
        eventually_sync(
            lambda: failed_reads(node) > failed_before,
            timeout_s=10,
            what="a read failing",
        )
        assert interval_served(node.port, client_id) == 1000
        assert node.http("/readyz")[0] == 200
        assert node.metric("ktc_subscriptions_cluster_read_age_seconds") is not None
        eventually_sync(
            lambda: node.metric("ktc_subscriptions_cluster_stale") == 1,
            timeout_s=30,
            what="the last set read older than stale.after.ms",
        )
        eventually_sync(
            lambda: f"longer than the {STALE_AFTER_MS} ms allowed" in node.log(),
            timeout_s=10,
            what="the node saying the set is stale",
        )
        assert interval_served(node.port, client_id) == 1000
        assert node.metric("ktc_subscriptions_in_cluster") == 1
        proxy.open()
        eventually_sync(
            lambda: node.metric("ktc_subscriptions_cluster_stale") == 0,
            timeout_s=10,
            what="fresh again once the cluster is back",
        )
    print(
        f"\nktc serve started with its cluster unreachable: librdkafka refused (error "
        f"{refused.error_code}); cluster back -> node ready {ready_s:.1f} s and the "
        f"client's first push {pushed_s:.1f} s after the refusal"
    )


def test_an_unknown_server_error_is_a_failed_read_not_a_cluster_without_them(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """The broker reachable, its every ListConfigResources answered UNKNOWN_SERVER_ERROR
    by the proxy: the node stays unready and serves no subscription (not its local
    store's, as a cluster without CLIENT_METRICS configs would make it), and serves the
    cluster's once the answers are the broker's again."""
    client_id = f"use-{uuid.uuid4().hex[:6]}"
    broker = kafka_cluster.bootstrap_servers(nodes=[3])
    host, port = broker.split(":")
    alter_interval(int(port), f"sub-{client_id}", client_id, 2500)
    with BlinkProxy((host, int(port))) as proxy:
        proxy.fail(LIST_CONFIG_RESOURCES, UNKNOWN_SERVER_ERROR)
        with serve(
            tmp_path / "serve",
            {
                "subscriptions.store": "kafka",
                "subscriptions.kafka.bootstrap.servers": proxy.address,
                "subscriptions.kafka.refresh.ms": 200,
            },
        ) as node:
            eventually_sync(
                lambda: proxy.rewritten >= 2,
                timeout_s=10,
                what="a second read answered UNKNOWN_SERVER_ERROR",
            )
            status, body = node.http("/readyz")
            assert status == 503, body
            reason = json.loads(body)["checks"]["subscriptions"]
            assert "UNKNOWN_SERVER_ERROR" in reason, reason
            refused = get_subscriptions(node.port, client_id)
            assert refused.error_code == ErrorCode.throttling_quota_exceeded, refused
            assert node.metric("ktc_subscriptions_in_cluster") == 0
            assert "does not serve CLIENT_METRICS configs" not in node.log()
            proxy.fail(None)
            eventually_sync(
                lambda: node.http("/readyz")[0] == 200,
                timeout_s=10,
                what="ready once a read worked",
            )
            assert interval_served(node.port, client_id) == 2500


def failed_reads(node: ServeProcess) -> float:
    return node.metric('ktc_subscriptions_cluster_reads_total{result="failed"}') or 0.0


def test_a_gateway_replica_started_while_its_cluster_is_unreachable(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """The same on a ``ktc gateway`` process: not ready until its first read of the
    cluster works, then the cluster's subscriptions. Meanwhile a client gets no
    subscription either: the gateway cannot tell yet whether the cluster requires
    authentication, and closes the connection (docs/gateway.md)."""
    client_id = f"blink-gw-{uuid.uuid4().hex[:6]}"
    broker = kafka_cluster.bootstrap_servers(nodes=[2])
    host, port = broker.split(":")
    alter_interval(int(port), f"sub-{client_id}", client_id, 1500)
    with BlinkProxy((host, int(port)), refusing=True) as proxy:
        replica = ReplicaProcess(
            "replica",
            tmp_path / "replica",
            proxy.address,
            {"gateway.subscriptions.refresh.ms": 200},
        )
        try:
            replica.start()
            with pytest.raises(urllib.error.HTTPError) as not_ready:
                replica.http("/readyz")
            assert not_ready.value.code == 503
            body = json.loads(not_ready.value.read().decode())
            assert "have not been read yet" in body["checks"]["subscriptions"], body
            with pytest.raises(ConnectionError):
                get_subscriptions(replica.port, client_id)
            proxy.open()
            eventually_sync(
                lambda: "ktc_subscriptions_in_cluster 1.0" in replica.http("/metrics"),
                timeout_s=10,
                what="the replica reading the cluster once it is back",
            )
            assert json.loads(replica.http("/readyz"))["status"] == "ready"
            # A client's request answered through it tells the gateway the cluster lets
            # in clients that did not authenticate (collector/gateway/upstream_cluster.py).
            Producer({"bootstrap.servers": replica.bootstrap}).list_topics(timeout=20)
            assert interval_served(replica.port, client_id) == 1500
        finally:
            replica.stop()


def test_an_alter_forwarded_is_read_at_once_not_at_the_next_refresh(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """The periodic read an hour away: only the read the forwarded alter asks for can
    bring the change to the replica that forwarded it."""
    client_id = f"soon-{uuid.uuid4().hex[:6]}"
    with RunningGateway(
        tmp_path / "data",
        kafka_cluster.bootstrap_servers(),
        **{
            "gateway.subscriptions.store": "cluster",
            "gateway.subscriptions.refresh.ms": 3_600_000,
        },
    ) as gateway:
        assert 'ktc_subscriptions_cluster_reads_total{result="ok"} 1.0' in (
            gateway.metrics_text()
        )
        alter_interval(gateway.port, f"sub-{client_id}", client_id, 3000)
        eventually_sync(
            lambda: interval_served(gateway.port, client_id) == 3000,
            timeout_s=15,
            what="the replica serving the alter it forwarded",
        )
