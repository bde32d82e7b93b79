"""``ktc subscriptions|quotas|users|acls --data-dir D`` on the data directory of a node that
keeps that state in a Kafka cluster refuses (exit 3, one line naming the cluster and
``--bootstrap-server``) and leaves the directory as it was, instead of writing a file the
node never reads (docs/operations.md, "Exit codes"; docs/scale-out.md, "Where each state
lives").

Real ``ktc gateway`` and ``ktc serve`` processes in front of the real 3-node Apache Kafka
4.4.0 cluster (harness/kafka_cluster.py), each started on its own data directory, and
``ktc`` commands run as processes on those directories:

* a gateway with its subscriptions in the cluster (the default), no SASL listener and no
  authorizer: subscriptions, SCRAM users and ACLs are the cluster's, each verb refuses;
  the same alter with ``--bootstrap-server`` works and the gateway serves it; the client
  quotas are the gateway's own and ``ktc quotas --data-dir`` works;
* a gateway in front of the cluster's SASL listener without a login to read the
  subscriptions with: it serves its local store, and ``ktc subscriptions --data-dir`` works;
* a ``ktc serve`` node with ``subscriptions.store: kafka`` refuses, its users and ACLs work;
  restarted on the same directory with the local store, the same command works and the node
  serves it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from kio.schema.errors import ErrorCode
from kio.schema.get_telemetry_subscriptions.v0.request import (
    GetTelemetrySubscriptionsRequest,
)
from kio.schema.get_telemetry_subscriptions.v0.response import (
    GetTelemetrySubscriptionsResponse,
)

from tests.gateway.harness import _proc
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.harness.wire import exchange
from tests.gateway.replica_processes import ReplicaProcess
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(300)]

KTC = str(Path(sys.executable).with_name("ktc"))
KEPT_IN_CLUSTER = 3  # docs/operations.md, Exit codes


def ktc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KTC, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_proc.clean_env(drop_prefixes=("KTC_",)),
    )


def files(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` and its content."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


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


class ServeProcess:
    """One ``ktc serve`` process on ``work/data``, ready once its ready file is written."""

    def __init__(self, work: Path, settings: Mapping[str, Any]) -> None:
        self.work = work
        self.data_dir = work / "data"
        self.settings = dict(settings)
        self.process: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}

    def __enter__(self) -> ServeProcess:
        self.work.mkdir(parents=True, exist_ok=True)
        config = self.work / "config.yaml"
        config.write_text(yaml.safe_dump(self.settings))
        ready = self.work / "ready.json"
        ready.unlink(missing_ok=True)
        log_path = self.work / "serve.log"
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    *_proc.die_with_parent(), KTC, "serve", "--config", str(config),
                    "--listeners", "PLAINTEXT://127.0.0.1:0",
                    "--data-dir", str(self.data_dir),
                    "--http-listener", "127.0.0.1:0", "--ready-file", str(ready),
                ],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=_proc.clean_env(drop_prefixes=("KTC_",)),
            )  # fmt: skip
        _proc.register(self.process)
        _proc.poll_until(
            ready.exists,
            timeout=60,
            what="ktc serve ready",
            alive=_proc.exited(self.process, log_path),
        )
        self.info = json.loads(ready.read_text())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        assert _proc.kill(self.process, graceful_s=15) == 0

    @property
    def port(self) -> int:
        return int(next(iter(self.info["listeners"].values())))


@pytest.fixture(scope="module")
def gateway(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReplicaProcess]:
    """A ``ktc gateway`` with the product's defaults: subscriptions in the cluster, no
    SASL listener, no authorizer."""
    replica = ReplicaProcess(
        "gateway",
        tmp_path_factory.mktemp("gateway"),
        kafka_cluster.bootstrap_servers(),
        {},
    )
    try:
        yield replica.start()
    finally:
        replica.stop()


def test_a_gateways_subscriptions_are_refused_on_its_data_dir(
    gateway: ReplicaProcess, kafka_cluster: KafkaCluster
) -> None:
    cluster = kafka_cluster.bootstrap_servers()
    data_dir = gateway.work / "data"
    client_id = f"kept-{uuid.uuid4().hex[:6]}"
    name = f"sub-{client_id}"
    alter: tuple[str, ...] = ("--name", name, "--metrics", "*", "--interval", "4000")
    alter += ("--match", f"client_id={client_id}")
    before = files(data_dir)
    line = (
        f"ktc: the node of data directory {data_dir} keeps its subscriptions in the "
        f"cluster ({cluster}); use --bootstrap-server {cluster}\n"
    )
    for verb in (
        ("alter", *alter),
        ("describe", "--name", name),
        ("describe",),
        ("list",),
        ("delete", "--name", name),
    ):
        refused = ktc("subscriptions", *verb, "--data-dir", str(data_dir))
        assert (refused.returncode, refused.stderr, refused.stdout) == (
            KEPT_IN_CLUSTER,
            line,
            "",
        ), verb
    assert files(data_dir) == before
    assert not (data_dir / "config" / "client-metrics.yaml").exists()
    # The same alter, at the cluster: the gateway serves it.
    altered = ktc("subscriptions", "alter", *alter, "--bootstrap-server", cluster)
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout == f"Altered client metrics config for {name}.\n"
    eventually_sync(
        lambda: interval_served(gateway.port, client_id) == 4000,
        timeout_s=15,
        what="the gateway serving the subscription altered at the cluster",
    )
    deleted = ktc(
        "subscriptions", "delete", "--name", name, "--bootstrap-server", cluster
    )
    assert deleted.returncode == 0, deleted.stderr


def test_its_users_and_acls_are_the_clusters_and_its_quotas_its_own(
    gateway: ReplicaProcess, kafka_cluster: KafkaCluster
) -> None:
    """Without a SASL listener the gateway forwards the SCRAM APIs, without an authorizer
    the ACL APIs: their files in its data directory are never read. Its client quotas are
    the ones its engine enforces, kept in its data directory."""
    cluster = kafka_cluster.bootstrap_servers()
    data_dir = gateway.work / "data"
    before = files(data_dir)
    users = ktc(
        "users", "alter", "--data-dir", str(data_dir), "--entity-name", "carol",
        "--add-config", "SCRAM-SHA-512=[password=carol-secret]",
    )  # fmt: skip
    assert (users.returncode, users.stderr) == (
        KEPT_IN_CLUSTER,
        f"ktc: the node of data directory {data_dir} keeps its SCRAM users in the "
        f"cluster ({cluster}); use kafka-configs.sh --bootstrap-server {cluster} "
        "--entity-type users\n",
    )
    acls = ktc(
        "acls", "add", "--data-dir", str(data_dir), "--allow-principal", "User:carol",
        "--operation", "AlterConfigs", "--cluster",
    )  # fmt: skip
    assert (acls.returncode, acls.stderr, acls.stdout) == (
        KEPT_IN_CLUSTER,
        f"ktc: the node of data directory {data_dir} keeps its ACLs in the cluster "
        f"({cluster}); use kafka-acls.sh --bootstrap-server {cluster}\n",
        "",
    )
    assert files(data_dir) == before
    quotas = ktc(
        "quotas", "alter", "--data-dir", str(data_dir), "--client", "kept-quota",
        "--add-config", "producer_byte_rate=1048576",
    )  # fmt: skip
    assert quotas.returncode == 0, quotas.stderr
    described = ktc("quotas", "describe", "--data-dir", str(data_dir))
    assert described.returncode == 0, described.stderr
    assert "client-id 'kept-quota'" in described.stdout


def test_a_gateway_that_cannot_read_the_clusters_subscriptions_takes_them_locally(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """In front of the cluster's SASL listener, with clients' SASL passing through and no
    login to read the subscriptions with, the gateway serves its local store: the data
    directory's subscriptions are the ones it serves, and the command works."""
    cluster = kafka_cluster.bootstrap_servers("SASL_PLAINTEXT")
    replica = ReplicaProcess(
        "gateway",
        tmp_path / "gateway",
        cluster,
        {"gateway.upstream.security.protocol": "SASL_PLAINTEXT"},
    )
    data_dir = replica.work / "data"
    try:
        replica.start()
        altered = ktc(
            "subscriptions", "alter", "--data-dir", str(data_dir), "--name", "local",
            "--metrics", "*",
        )  # fmt: skip
        assert altered.returncode == 0, altered.stderr
        assert "local" in (data_dir / "config" / "client-metrics.yaml").read_text()
        # Its users are still the cluster's (no SASL listener of its own).
        users = ktc("users", "describe", "--data-dir", str(data_dir))
        assert users.returncode == KEPT_IN_CLUSTER, users.stderr
        assert f"cluster ({cluster})" in users.stderr
    finally:
        replica.stop()


def test_a_serve_node_refuses_then_switched_to_its_local_store_takes_the_change(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    cluster = kafka_cluster.bootstrap_servers()
    client_id = f"serve-{uuid.uuid4().hex[:6]}"
    alter: tuple[str, ...] = (
        "subscriptions",
        "alter",
        "--name",
        f"sub-{client_id}",
        "--metrics",
        "*",
    )
    alter += ("--interval", "7000", "--match", f"client_id={client_id}")
    in_kafka = {
        "subscriptions.store": "kafka",
        "subscriptions.kafka.bootstrap.servers": cluster,
    }
    node = ServeProcess(tmp_path / "serve", in_kafka)
    data_dir = node.data_dir
    with node:
        before = files(data_dir)
        refused = ktc(*alter, "--data-dir", str(data_dir))
        assert (refused.returncode, refused.stderr) == (
            KEPT_IN_CLUSTER,
            f"ktc: the node of data directory {data_dir} keeps its subscriptions in "
            f"the cluster ({cluster}); use --bootstrap-server {cluster}\n",
        )
        assert files(data_dir) == before
        # Its users and ACLs are its own.
        for command in (("users", "describe"), ("acls", "list")):
            done = ktc(*command, "--data-dir", str(data_dir))
            assert done.returncode == 0, (command, done.stderr)
    with ServeProcess(tmp_path / "serve", {"subscriptions.store": "local"}) as node:
        altered = ktc(*alter, "--data-dir", str(data_dir))
        assert altered.returncode == 0, altered.stderr
        eventually_sync(
            lambda: interval_served(node.port, client_id) == 7000,
            timeout_s=15,
            what="the serve node serving its data directory's subscription",
        )


def test_a_gateway_with_its_own_sasl_listener_and_authorizer_keeps_users_and_acls(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """With a SASL listener the gateway's users are its own, with an authorizer its ACLs:
    it records both as its data directory's, and the commands work; its subscriptions are
    still the cluster's."""
    from tests.gateway.gateway_harness import RunningGateway

    cluster = kafka_cluster.bootstrap_servers()
    data_dir = tmp_path / "data"
    settings = {
        "gateway.subscriptions.store": "cluster",
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }
    with RunningGateway(data_dir, cluster, **settings):
        users = ktc(
            "users", "alter", "--data-dir", str(data_dir), "--entity-name", "carol",
            "--add-config", "SCRAM-SHA-512=[password=carol-secret]",
        )  # fmt: skip
        assert users.returncode == 0, users.stderr
        acls = ktc(
            "acls", "add", "--data-dir", str(data_dir), "--allow-principal",
            "User:carol", "--operation", "AlterConfigs", "--cluster",
        )  # fmt: skip
        assert acls.returncode == 0, acls.stderr
        listed = ktc("subscriptions", "list", "--data-dir", str(data_dir))
        assert listed.returncode == KEPT_IN_CLUSTER, listed.stderr
        assert json.loads((data_dir / "state-locations.json").read_text()) == {
            "version": 1,
            "mode": "gateway",
            "subscriptions": {"kept": "cluster", "bootstrap.servers": cluster},
            "quotas": {"kept": "local"},
            "users": {"kept": "local"},
            "acls": {"kept": "local"},
        }
