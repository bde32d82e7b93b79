"""The rendered pods, run for real.

Each collector process is started the way the StatefulSet starts pod `ktc-<n>`: the
container's command and args, every ConfigMap item written where its volume is mounted,
per-pod volumes (the data claim template, emptyDirs) private to the pod, the shared
landing claim shared by all pods, and the environment resolved as the kubelet resolves it.
Then the probes' own paths are fetched, real Kafka clients (librdkafka) subscribed only
through the chart's `subscriptions` value push telemetry, and SIGTERM must end the process
cleanly within the drain time the chart configured.

Three things cannot be as in the cluster, and are overridden through the environment
(which the collector reads over the file, exactly as KTC_NODE_ID is):
  * the filesystem root: mount paths are placed under a temporary directory
    (KTC_DATA_DIR, and the --config path); a shared claim is one directory that each
    pod's mount path links to;
  * the ports: 127.0.0.1 port 0 instead of 0.0.0.0:9092/8714 (KTC_LISTENERS,
    KTC_HTTP_LISTENER), so tests never collide;
  * the advertised name: `ktc-1.ktc-headless.telemetry.svc` resolves only inside the
    cluster, so the client is told 127.0.0.1 with the bound port
    (KTC_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:0).

Gateway mode (`gateway.enabled`) runs the same way in front of a real one-node Apache Kafka
(tests/gateway/harness); its per-broker ports are not overridden: the values name a block
of ports free on this machine, and the gateway binds them where the chart declares them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Producer

from exporters.lakehouse.session import LakehouseConfig, lake_libs_dir
from exporters.landing import LandingReader, LandingRecord, node_directories
from subscriptions.store import ConfigStore
from tests.helm.ktc_chart import container, find, pod_environment

pytestmark = pytest.mark.integration

T = TypeVar("T")
Docs = list[dict[str, Any]]

DATA_DIR = "/var/lib/ktc"  # values.yaml dataDir
CLIENT_PREFIX = "helm-pod-test"
VALUES: dict[str, Any] = {
    "replicaCount": 2,
    "subscriptions": {
        "helm-producers": {
            "metrics": "org.apache.kafka.producer.",
            "interval.ms": 500,
            "match": f"client_id={CLIENT_PREFIX}-.*",
        },
    },
    "quotas": {"clients/<default>": {"request_percentage": 200}},
}


def wait_for(predicate: Callable[[], T | None], *, timeout_s: float, what: str) -> T:
    """Poll until ``predicate`` returns something truthy (a deadline, not a fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


@dataclasses.dataclass
class RunningPod:
    ordinal: int
    process: subprocess.Popen[bytes]
    ready: dict[
        str, Any
    ]  # what `ktc serve --ready-file` wrote: bound ports, cluster id
    mounts: dict[str, Path]  # mount path in the container -> local directory
    log: Path

    @property
    def data_dir(self) -> Path:
        return self.mounts[DATA_DIR]

    @property
    def kafka_port(self) -> int:
        return int(self.ready["listeners"]["PLAINTEXT"])

    def check_alive(self) -> None:
        log = self.log.read_text(errors="replace")
        if "Traceback" in log or self.process.poll() is not None:
            raise AssertionError(f"collector ktc-{self.ordinal} failed:\n{log[-3000:]}")


def materialize_volumes(
    docs: Docs,
    pod_root: Path,
    claims_root: Path,
    workload: dict[str, Any] | None = None,
    container_name: str = "collector",
) -> dict[str, Path]:
    """Create every mount of a container (the collector's by default).  Per-pod volumes
    live under ``pod_root``; a persistentVolumeClaim volume is one directory under
    ``claims_root`` shared by every pod (linked at the mount path); ConfigMap items
    become files."""
    workload = workload or find(docs, "StatefulSet")
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
    claim_templates = {
        t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])
    }
    mounts: dict[str, Path] = {}
    for mount in container(workload, container_name)["volumeMounts"]:
        local = pod_root / mount["mountPath"].lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        mounts[mount["mountPath"]] = local
        volume = volumes.get(mount["name"])
        if volume is None:
            assert mount["name"] in claim_templates, (
                f"volume {mount['name']} is not defined"
            )
            local.mkdir(exist_ok=True)
        elif "persistentVolumeClaim" in volume:
            shared = claims_root / volume["persistentVolumeClaim"]["claimName"]
            shared.mkdir(parents=True, exist_ok=True)
            local.symlink_to(shared, target_is_directory=True)
        else:
            local.mkdir(exist_ok=True)
            if "configMap" in volume:
                write_configmap_volume(local, configmap_files(docs, volume))
    return mounts


def configmap_files(docs: Docs, volume: dict[str, Any]) -> dict[str, str]:
    """The files a configMap volume shows: item path -> the ConfigMap's data."""
    configmap = find(docs, "ConfigMap", volume["configMap"]["name"])
    return {
        item["path"]: configmap["data"][item["key"]]
        for item in volume["configMap"]["items"]
    }


def write_configmap_volume(directory: Path, files: dict[str, str]) -> None:
    """Lay out (or update) a configMap volume as the kubelet's atomic writer does: the
    files live in a timestamped directory, `..data` links to it, and each visible file
    links through `..data`.  An update writes a new directory and renames a new `..data`
    link over the old one, so readers see the old set or the new set, never a mix."""
    generation = f"..{time.time_ns()}"
    (directory / generation).mkdir()
    for name, text in files.items():
        (directory / generation / name).write_text(text, "utf-8")
    old = (
        (directory / "..data").resolve()
        if (directory / "..data").is_symlink()
        else None
    )
    (directory / "..data_tmp").symlink_to(generation, target_is_directory=True)
    (directory / "..data_tmp").rename(directory / "..data")
    for name in files:
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(Path("..data") / name)
    if old is not None:
        for stale in old.iterdir():
            stale.unlink()
        old.rmdir()


def rerooted(arg: str, mounts: dict[str, Path], pod_root: Path | None = None) -> str:
    """A path argument as the test sees it: inside a mount, or (with ``pod_root``) an
    ancestor directory of mounts such as --data-dir in the ingest pod."""
    for mount_path, local in mounts.items():
        if arg.startswith(mount_path + "/"):
            return str(local / arg[len(mount_path) + 1 :])
    if pod_root is not None and any(m.startswith(arg + "/") for m in mounts):
        return str(pod_root / arg.lstrip("/"))
    return arg


def start_pod(docs: Docs, ordinal: int, root: Path) -> RunningPod:
    statefulset = find(docs, "StatefulSet")
    spec = container(statefulset, "collector")
    pod_root = root / f"ktc-{ordinal}"
    mounts = materialize_volumes(docs, pod_root, root / "claims")
    ready_file = pod_root / "ready.json"
    executable = Path(sys.executable).parent / spec["command"][0]
    argv = [str(executable), *(rerooted(a, mounts) for a in spec["args"])]
    argv += ["--ready-file", str(ready_file)]
    environment = {
        "PATH": os.environ.get("PATH", ""),
        **pod_environment(statefulset, ordinal),
        "KTC_DATA_DIR": str(mounts[DATA_DIR]),
        "KTC_LISTENERS": "PLAINTEXT://127.0.0.1:0",
        "KTC_HTTP_LISTENER": "127.0.0.1:0",
        "KTC_ADVERTISED_LISTENERS": "PLAINTEXT://127.0.0.1:0",
    }
    log_path = pod_root / "collector.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv, env=environment, stdout=log, stderr=subprocess.STDOUT
        )

    def started() -> dict[str, Any] | None:
        if process.poll() is not None:
            raise AssertionError(
                f"collector exited {process.returncode}:\n"
                + log_path.read_text(errors="replace")
            )
        return json.loads(ready_file.read_text()) if ready_file.exists() else None

    try:
        ready = wait_for(started, timeout_s=30, what=f"ktc-{ordinal} to start")
    except BaseException:
        process.kill()
        process.wait(10)
        raise
    return RunningPod(ordinal, process, ready, mounts, log_path)


@pytest.fixture
def start(
    rendered: Callable[..., Docs], tmp_path: Path
) -> Iterator[Callable[[int], RunningPod]]:
    """start(ordinal) -> a running pod of the VALUES release; all are killed at the end."""
    docs = rendered(VALUES)
    pods: list[RunningPod] = []

    def _start(ordinal: int) -> RunningPod:
        pod = start_pod(docs, ordinal, tmp_path)
        pods.append(pod)
        return pod

    yield _start
    for pod in pods:
        if pod.process.poll() is None:
            pod.process.kill()
            pod.process.wait(10)


def http_status(port: int, path: str) -> int:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{port}{path}", timeout=5
    ) as response:
        return int(response.status)


def test_rendered_pod_starts_answers_its_probes_and_drains_on_sigterm(
    rendered: Callable[..., Docs], start: Callable[[int], RunningPod]
) -> None:
    docs = rendered(VALUES)
    spec = container(find(docs, "StatefulSet"), "collector")
    pod = start(1)
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        path = spec[probe]["httpGet"]["path"]
        assert http_status(pod.ready["http_port"], path) == 200, probe

    # The node reports the cluster id the chart derived, and keeps node.id = ordinal.
    config_map = find(docs, "ConfigMap")["data"]["config.yaml"]
    assert f"cluster.id: {pod.ready['cluster_id']}" in config_map
    meta = (pod.data_dir / "meta.properties").read_text()
    assert "node.id=1" in meta.splitlines()

    # Its landing log is node-<ordinal>/ on the landing claim.
    assert (pod.data_dir / "landing" / "node-1").is_dir()
    assert (pod.data_dir / "landing").resolve().parent.name == "claims"

    # The store reads the ConfigMap files where the volume put them.
    assert (
        ConfigStore(pod.data_dir).snapshot().subscription("helm-producers") is not None
    )

    # SIGTERM: a clean exit within the drain time the chart derived (grace - 5 s).
    pod.process.send_signal(signal.SIGTERM)
    assert pod.process.wait(timeout=25) == 0, pod.log.read_text(errors="replace")


def test_a_helm_upgrade_of_subscriptions_reaches_a_running_node(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    """`helm upgrade` with a new subscription: the kubelet swaps the mounted ConfigMap
    files and the running node serves the new subscription without a restart."""
    docs_v1 = rendered(VALUES)
    pod = start_pod(docs_v1, 0, tmp_path)
    try:
        client_id = "helm-upgrade-test"
        subscriptions = {
            **VALUES["subscriptions"],
            "after-upgrade": {
                "metrics": "org.apache.kafka.",
                "interval.ms": 500,
                "match": f"client_id={client_id}",
            },
        }
        docs_v2 = rendered({**VALUES, "subscriptions": subscriptions})
        statefulset = find(docs_v2, "StatefulSet")
        # Hot reload, not a roll: the pod template (and its checksum) is unchanged.
        assert (
            statefulset["spec"]["template"]
            == find(docs_v1, "StatefulSet")["spec"]["template"]
        )
        volumes = {
            v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]
        }
        mount_path = DATA_DIR + "/config"
        write_configmap_volume(
            pod.mounts[mount_path], configmap_files(docs_v2, volumes["client-config"])
        )

        def reloaded() -> bool:
            pod.check_alive()
            return "config reloaded:" in pod.log.read_text(errors="replace")

        wait_for(reloaded, timeout_s=15, what="the node to reload the swapped files")
        client = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{pod.kafka_port}",
                "client.id": client_id,
                "enable.metrics.push": True,
                "log_level": 3,
            }
        )
        landing = pod.data_dir / "landing" / "node-0"

        def pushes() -> list[LandingRecord]:
            pod.check_alive()
            client.poll(0.05)
            return [
                r
                for r in LandingReader(landing).read(0)
                if r.context.client_id == client_id
            ]

        try:
            records = wait_for(
                pushes, timeout_s=20, what="a push under the new subscription"
            )
        finally:
            client.close()
        assert records[0].context.push_interval_ms == 500
    finally:
        pod.process.kill()
        pod.process.wait(10)


def push_through_each_node(pods: list[RunningPod]) -> dict[int, list[LandingRecord]]:
    """One real client per node; returns node id -> that node's landed records, once
    every node has landed at least one push."""
    clients = {
        pod.ordinal: Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{pod.kafka_port}",
                "client.id": f"{CLIENT_PREFIX}-{pod.ordinal}",
                "enable.metrics.push": True,
                "log_level": 3,
            }
        )
        for pod in pods
    }

    def landed() -> dict[int, list[LandingRecord]] | None:
        for pod in pods:
            pod.check_alive()
        for client in clients.values():
            client.poll(0.05)
        by_node: dict[int, list[LandingRecord]] = {}
        for directory in node_directories(pods[0].data_dir):
            by_node[int(directory.name.removeprefix("node-"))] = list(
                LandingReader(directory).read(0)
            )
        return by_node if all(by_node.get(p.ordinal) for p in pods) else None

    try:
        return wait_for(landed, timeout_s=30, what="a push landed by each node")
    finally:
        for client in clients.values():
            client.close()


def test_two_nodes_share_the_landing_claim_each_in_its_own_directory(
    start: Callable[[int], RunningPod],
) -> None:
    """Scale-out as deployed: one client per node, each subscribed only through the
    chart's values; each node lands its client's pushes in node-<ordinal>/ of the one
    shared claim, where the ingest (`--data-dir`) finds both."""
    pods = [start(0), start(1)]
    by_node = push_through_each_node(pods)
    shared_landing = pods[0].data_dir / "landing"
    assert sorted(p.name for p in shared_landing.iterdir()) == ["node-0", "node-1"]
    for ordinal, records in by_node.items():
        contexts = {(r.context.client_id, r.context.node_id) for r in records}
        # Node n landed only its own client's pushes, stamped with its own node id.
        assert contexts == {(f"{CLIENT_PREFIX}-{ordinal}", ordinal)}, contexts
        assert all(r.context.push_interval_ms == 500 for r in records)
    cluster_ids = {pod.ready["cluster_id"] for pod in pods}
    assert len(cluster_ids) == 1


@pytest.mark.spark
def test_the_ingest_pod_reads_every_nodes_landing_directory(
    rendered: Callable[..., Docs], tmp_path: Path
) -> None:
    """The rendered ingest container, run once over the shared landing claim the two
    nodes wrote: every push of both nodes reaches the lakehouse on the lake claim."""
    # One core's worth of Spark, as on CI: few shuffle partitions, no UI.
    spark_conf = {"spark.sql.shuffle.partitions": 1, "spark.ui.enabled": "false"}
    docs = rendered({**VALUES, "ingest": {"enabled": True, "sparkConf": spark_conf}})
    pods = [start_pod(docs, 0, tmp_path), start_pod(docs, 1, tmp_path)]
    try:
        by_node = push_through_each_node(pods)
    finally:
        for pod in pods:
            pod.process.send_signal(signal.SIGTERM)
        for pod in pods:
            pod.process.wait(30)
    landed = {
        node: len(list(LandingReader(directory).read(0)))
        for node, directory in (
            (int(d.name.removeprefix("node-")), d)
            for d in node_directories(pods[0].data_dir)
        )
    }
    assert set(landed) == set(by_node) == {0, 1}

    ingest = find(docs, "Deployment")
    spec = container(ingest, "ingest")
    pod_root = tmp_path / "ingest"
    mounts = materialize_volumes(docs, pod_root, tmp_path / "claims", ingest, "ingest")
    env = {e["name"]: rerooted(e["value"], mounts) for e in spec["env"] if "value" in e}
    # `--once`: the rendered job runs forever; this run stops after the batches there are.
    argv = [str(Path(sys.executable).parent / spec["command"][0])]
    argv += [rerooted(a, mounts, pod_root) for a in spec["args"]] + ["--once"]
    working_dir = spec["workingDir"]
    result = subprocess.run(
        argv,
        check=False,
        cwd=mounts.get(working_dir) or rerooted(working_dir, mounts),
        env={
            **env,
            "PATH": os.environ.get("PATH", ""),
            **{
                k: v
                for k, v in os.environ.items()
                if k in ("JAVA_HOME", "SPARK_LOCAL_IP")
            },
            # The image's Iceberg jars (helm/image/Dockerfile): this machine's cache.
            "KTC_LAKE_LIBS": str(lake_libs_dir()),
        },
        capture_output=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]

    data_dir = Path(spec["args"][spec["args"].index("--data-dir") + 1])
    lake = LakehouseConfig.for_data_dir(Path(rerooted(str(data_dir), mounts, pod_root)))
    assert lake.lake_dir.resolve() == (tmp_path / "claims" / "ktc-lake").resolve()
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("lake", **lake.pyiceberg_properties())
    pushes = (
        catalog.load_table(("ktc", "pushes"))
        .scan(selected_fields=("node_id",))
        .to_arrow()
    )
    per_node = {node: pushes["node_id"].to_pylist().count(node) for node in (0, 1)}
    assert per_node == landed


# --- gateway mode -------------------------------------------------------------------------
# The rendered `ktc gateway` pod in front of a real Apache Kafka (one KRaft node, node id 1,
# from tests/gateway/harness).  Its per-broker port range is a block of ports free on this
# machine, put in the values as an operator would, so the port the gateway binds for node 1
# is checked against the container port the chart declares for it.

from tests.gateway.harness import kafka_cluster as kafka_cluster_module  # noqa: E402
from tests.gateway.harness.kafka_cluster import KafkaCluster  # noqa: E402


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    reason = kafka_cluster_module.missing_prerequisites()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(
                f"gateway upstream prerequisite missing in CI: {reason}", pytrace=False
            )
        pytest.skip(reason)
    cluster = KafkaCluster(nodes=1, work_dir=tmp_path_factory.mktemp("kafka"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def free_port_block(count: int) -> int:
    """The first of ``count`` consecutive ports free on 127.0.0.1 (below the ephemeral range,
    where the OS does not hand out ports on its own)."""
    for start in range(21000, 31000, 97):
        sockets: list[socket.socket] = []
        try:
            for port in range(start, start + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return start
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise AssertionError(f"no {count} consecutive free ports")


def test_rendered_gateway_pod_forwards_to_kafka_and_lands_telemetry(
    rendered: Callable[..., Docs], kafka: KafkaCluster, tmp_path: Path
) -> None:
    """`ktc gateway` as the StatefulSet starts it: probes answer, a librdkafka producer
    bootstrapped through the pod is sent to the pod's node-1 port (the number the Services
    expose), its records reach Kafka, its telemetry lands on the pod, and SIGTERM exits
    cleanly."""
    port_start = free_port_block(2)
    client_id = f"{CLIENT_PREFIX}-gateway"
    values = {
        "gateway": {
            "enabled": True,
            "upstream": {"bootstrapServers": kafka.bootstrap_servers("PLAINTEXT")},
            "brokerPortStart": port_start,
            "minNodeId": 1,
            "maxNodes": 2,
            # The chart's own subscriptions (its ConfigMap), not the cluster's.
            "subscriptions": {"store": "local"},
        },
        "subscriptions": {
            "gateway-producers": {
                "metrics": "org.apache.kafka.producer.",
                "interval.ms": 500,
                "match": f"client_id={client_id}",
            },
        },
    }
    docs = rendered(values)
    spec = container(find(docs, "StatefulSet"), "collector")
    assert spec["args"][0] == "gateway"
    node_1_port = {p["name"]: p["containerPort"] for p in spec["ports"]}["node-1"]
    pod = start_pod(docs, 0, tmp_path)
    try:
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            path = spec[probe]["httpGet"]["path"]
            assert http_status(pod.ready["http_port"], path) == 200, probe

        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{pod.kafka_port}",
                "client.id": client_id,
                "enable.metrics.push": True,
                "log_level": 3,
            }
        )
        try:
            # The cluster as the client sees it: node 1 at the port the chart declared.
            brokers = producer.list_topics(timeout=20).brokers
            assert {b.id: (b.host, b.port) for b in brokers.values()} == {
                1: ("127.0.0.1", node_1_port)
            }
            delivered: list[Any] = []
            producer.produce(
                "helm-gateway",
                b"through the gateway",
                on_delivery=lambda error, message: delivered.append((error, message)),
            )
            assert producer.flush(30) == 0
            ((error, message),) = delivered
            assert error is None and message.offset() >= 0

            landing = pod.data_dir / "landing" / "node-0"

            def pushes() -> list[LandingRecord]:
                pod.check_alive()
                producer.poll(0.05)
                return [
                    r
                    for r in LandingReader(landing).read(0)
                    if r.context.client_id == client_id
                ]

            records = wait_for(pushes, timeout_s=30, what="a push through the gateway")
        finally:
            producer.close()
        assert records[0].context.push_interval_ms == 500
        # What the gateway learned stays on the data volume for its next start.
        learned = json.loads((pod.data_dir / "gateway-topology.json").read_text())
        assert list(learned["upstream"]) == ["1"]

        pod.process.send_signal(signal.SIGTERM)
        assert pod.process.wait(timeout=25) == 0, pod.log.read_text(errors="replace")
    finally:
        if pod.process.poll() is None:
            pod.process.kill()
            pod.process.wait(10)
