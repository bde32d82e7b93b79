"""The rendered pod, run for real.

The collector process is started the way the StatefulSet starts it: the container's
command and args, every ConfigMap item written where its volume is mounted, and the
environment resolved as the kubelet resolves it for pod `ktc-1`.  Then the probes'
own paths are fetched, a real Kafka client (librdkafka) subscribed only through the
chart's `subscriptions` value pushes telemetry, and SIGTERM must end the process cleanly
within the drain time the chart configured.

Three things cannot be as in the cluster, and are overridden through the environment
(which the collector reads over the file, exactly as KTC_NODE_ID is):
  * the filesystem root: mount paths are placed under a temporary directory
    (KTC_DATA_DIR, and the --config path);
  * the ports: 127.0.0.1 port 0 instead of 0.0.0.0:9092/8888 (KTC_LISTENERS,
    KTC_HTTP_LISTENER), so tests never collide;
  * the advertised name: `ktc-1.ktc-headless.telemetry.svc` resolves only inside the
    cluster, so the client is told 127.0.0.1 with the bound port
    (KTC_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:0).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Producer
from ktc_chart import container, find, pod_environment

from exporters.landing import LandingReader, LandingRecord
from subscriptions.store import ConfigStore

pytestmark = pytest.mark.integration

T = TypeVar("T")
Docs = list[dict[str, Any]]

ORDINAL = 1
CLIENT_ID = "helm-pod-test"
VALUES: dict[str, Any] = {
    "replicaCount": 2,
    "subscriptions": {
        "helm-producers": {
            "metrics": "org.apache.kafka.producer.",
            "interval.ms": 500,
            "match": f"client_id={CLIENT_ID}",
        },
    },
    "quotas": {"clients/<default>": {"request_percentage": 200}},
}


def wait_for(predicate: Callable[[], T], *, timeout_s: float, what: str) -> T:
    """Poll until ``predicate`` returns something truthy (a deadline, not a fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def materialize_volumes(docs: Docs, root: Path) -> dict[str, Path]:
    """Create every mount of the collector container under ``root``; ConfigMap volumes
    get their items as files.  Returns mount path -> local directory."""
    statefulset = find(docs, "StatefulSet")
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    claim_templates = {
        t["metadata"]["name"] for t in statefulset["spec"].get("volumeClaimTemplates", [])
    }
    mounts: dict[str, Path] = {}
    for mount in container(statefulset, "collector")["volumeMounts"]:
        local = root / mount["mountPath"].lstrip("/")
        local.mkdir(parents=True, exist_ok=True)
        mounts[mount["mountPath"]] = local
        volume = volumes.get(mount["name"])
        if volume is None:
            assert mount["name"] in claim_templates, f"volume {mount['name']} is not defined"
            continue
        if "configMap" in volume:
            configmap = find(docs, "ConfigMap", volume["configMap"]["name"])
            for item in volume["configMap"]["items"]:
                (local / item["path"]).write_text(configmap["data"][item["key"]], "utf-8")
    return mounts


def rerooted(arg: str, mounts: dict[str, Path]) -> str:
    for mount_path, local in mounts.items():
        if arg.startswith(mount_path + "/"):
            return str(local / arg[len(mount_path) + 1 :])
    return arg


@pytest.fixture
def pod(rendered: Callable[..., Docs], tmp_path: Path) -> Iterator[dict[str, Any]]:
    docs = rendered(VALUES)
    statefulset = find(docs, "StatefulSet")
    spec = container(statefulset, "collector")
    mounts = materialize_volumes(docs, tmp_path / "root")
    data_dir = mounts["/var/lib/ktc"]

    executable = Path(sys.executable).parent / spec["command"][0]
    ready_file = tmp_path / "ready.json"
    argv = [str(executable), *(rerooted(a, mounts) for a in spec["args"])]
    argv += ["--ready-file", str(ready_file)]
    environment = {
        "PATH": os.environ.get("PATH", ""),
        **pod_environment(statefulset, ORDINAL),
        "KTC_DATA_DIR": str(data_dir),
        "KTC_LISTENERS": "PLAINTEXT://127.0.0.1:0",
        "KTC_HTTP_LISTENER": "127.0.0.1:0",
        "KTC_ADVERTISED_LISTENERS": "PLAINTEXT://127.0.0.1:0",
    }
    log_path = tmp_path / "collector.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(argv, env=environment, stdout=log, stderr=subprocess.STDOUT)
    try:

        def started() -> dict[str, Any] | None:
            if process.poll() is not None:
                raise AssertionError(
                    f"collector exited {process.returncode}:\n"
                    + log_path.read_text(errors="replace")
                )
            return json.loads(ready_file.read_text()) if ready_file.exists() else None

        ready = wait_for(started, timeout_s=30, what="the collector to start")
        yield {
            "docs": docs,
            "process": process,
            "ready": ready,
            "data_dir": data_dir,
            "spec": spec,
            "log": log_path,
        }
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def http_status(port: int, path: str) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return int(response.status)


def test_rendered_pod_starts_answers_its_probes_and_drains_on_sigterm(
    pod: dict[str, Any],
) -> None:
    process: subprocess.Popen[bytes] = pod["process"]
    http_port = pod["ready"]["http_port"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert http_status(http_port, pod["spec"][probe]["httpGet"]["path"]) == 200, probe

    # The node reports the cluster id the chart derived, and keeps node.id = ordinal.
    config_map = find(pod["docs"], "ConfigMap")["data"]["config.yaml"]
    assert f"cluster.id: {pod['ready']['cluster_id']}" in config_map
    meta = (pod["data_dir"] / "meta.properties").read_text()
    assert f"node.id={ORDINAL}" in meta.splitlines()

    # Its landing log is node-<ordinal>/ under the landing mount.
    assert (pod["data_dir"] / "landing" / f"node-{ORDINAL}").is_dir()

    # SIGTERM: a clean exit within the drain time the chart derived (grace - 5 s).
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=25) == 0, pod["log"].read_text(errors="replace")


def test_a_client_subscribed_through_values_pushes_to_its_node(pod: dict[str, Any]) -> None:
    process: subprocess.Popen[bytes] = pod["process"]
    # The store reads the ConfigMap files where the volume put them.
    snapshot = ConfigStore(pod["data_dir"]).load()
    assert snapshot.subscription("helm-producers") is not None

    # A real client, matched only by the chart's subscription, pushes to node 1 and the
    # pushes land in node-1/ on the landing mount.
    kafka_port = pod["ready"]["listeners"]["PLAINTEXT"]
    landing = pod["data_dir"] / "landing" / f"node-{ORDINAL}"
    client = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{kafka_port}",
            "client.id": CLIENT_ID,
            "enable.metrics.push": True,
            "log_level": 3,
        }
    )

    def pushes() -> list[LandingRecord]:
        client.poll(0.05)
        log = pod["log"].read_text(errors="replace")
        if "Traceback" in log or process.poll() is not None:
            raise AssertionError(f"the collector failed while serving the client:\n{log[-3000:]}")
        if not landing.is_dir():
            return []
        return [r for r in LandingReader(landing).read(0) if r.context.client_id == CLIENT_ID]

    try:
        records = wait_for(pushes, timeout_s=20, what="a push from the subscribed client")
    finally:
        client.close()
    context = records[0].context
    assert context.node_id == ORDINAL
    assert context.push_interval_ms == 500
    assert context.cluster_id == pod["ready"]["cluster_id"]
