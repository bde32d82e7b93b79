"""Address-bearing responses captured from a real Apache Kafka 4.4.0 cluster: the requests,
and the script that captures their answers into ``golden/live/``.

The requests (:func:`live_requests`) are the ones test_gateway_live_wire.py sends to the
session cluster both directly and through a gateway; this script sends them directly to a
3-node cluster of its own whose client listener advertises the golden files' upstream
addresses (node n: ``kafka-n.upstream.internal:9092+n``, on an ``EXTERNAL`` listener bound on
127.0.0.1), so the captured bytes fit the golden tests' conventions (golden/__init__.py).
Each answer is written whole, as the broker sent it (response header and body, no size
prefix), to ``live/<api key>-v<version>-<case>.bin``; then ``java/GoldenLive.java`` parses
each with Kafka's own classes, puts the gateway's addresses in, serializes it, and writes
``live.txt`` (the golden line format of responses.txt), which test_wire_golden.py feeds
with every other golden: whole, byte by byte, with trailing bytes, truncated.

Regenerate (needs java and the jars, ``make kafka-libs``; about 30 s):

    .venv/bin/python tests/gateway/golden/capture_live.py

Topic ids, the cluster id, coordinator placement and DescribeQuorum's offsets differ from
one capture to the next; the files are committed as captured.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

from kio.serial import entity_writer

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    # Run as a script: the repository root, for the sources and `tests.` imports.
    sys.path.insert(0, str(HERE.parents[2]))
LIVE = HERE / "live"

# kio's schema package per API key
_KIO_API = {
    3: "metadata",
    10: "find_coordinator",
    18: "api_versions",
    55: "describe_quorum",
    60: "describe_cluster",
}

# The names the captured answers carry (the live test uses its own, random ones).
GOLDEN_TOPIC = "golden-topic"
GOLDEN_GROUP = "golden-group"
GOLDEN_TRANSACTION = "golden-transaction"


@dataclasses.dataclass(frozen=True)
class LiveRequest:
    api_key: int
    version: int
    case: str
    request: Any  # a kio request entity
    response_type: type[Any]  # its kio response entity

    @property
    def name(self) -> str:
        return f"{self.api_key}-v{self.version}-{self.case}"


def kio_class(api_key: int, version: int, kind: str, name: str) -> Any:
    module = importlib.import_module(
        f"kio.schema.{_KIO_API[api_key]}.v{version}.{kind}"
    )
    return getattr(module, name)


def build(cls: Any, **values: Any) -> Any:
    """``cls(**values)`` with only the fields ``cls`` has at its version."""
    fields = {f.name for f in dataclasses.fields(cls)}
    return cls(**{key: value for key, value in values.items() if key in fields})


def _request(
    api_key: int, version: int, case: str, class_name: str, **values: Any
) -> LiveRequest:
    request = build(kio_class(api_key, version, "request", class_name), **values)
    response = kio_class(
        api_key, version, "response", class_name.replace("Request", "Response")
    )
    return LiveRequest(api_key, version, case, request, response)


def metadata(version: int, topic: str) -> LiveRequest:
    topic_class = kio_class(3, version, "request", "MetadataRequestTopic")
    topics = (build(topic_class, name=topic, topic_id=uuid.UUID(int=0)),)
    return _request(
        3,
        version,
        "topic",
        "MetadataRequest",
        topics=topics,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def find_coordinator(version: int, key_type: int, keys: tuple[str, ...]) -> LiveRequest:
    case = "group" if key_type == 0 else "transaction"
    return _request(
        10,
        version,
        case,
        "FindCoordinatorRequest",
        key=keys[0],
        key_type=key_type,
        coordinator_keys=keys,
    )


def describe_cluster(version: int) -> LiveRequest:
    return _request(
        60,
        version,
        "brokers",
        "DescribeClusterRequest",
        include_cluster_authorized_operations=False,
        endpoint_type=1,
        include_fenced_brokers=False,
    )


def describe_quorum(version: int) -> LiveRequest:
    partition = kio_class(55, version, "request", "PartitionData")(partition_index=0)
    topic = kio_class(55, version, "request", "TopicData")(
        topic_name="__cluster_metadata", partitions=(partition,)
    )
    return _request(55, version, "quorum", "DescribeQuorumRequest", topics=(topic,))


def api_versions(version: int) -> LiveRequest:
    return _request(
        18,
        version,
        "client",
        "ApiVersionsRequest",
        client_software_name="ktc-live-wire",
        client_software_version="1.0",
    )


def live_requests(topic: str, group: str, transactional_id: str) -> list[LiveRequest]:
    """Every address-bearing request the live tests send, at every version Kafka 4.4.0
    serves: Metadata (one topic), FindCoordinator (groups; transactions from v1; two keys
    at once from v4), DescribeCluster (brokers), DescribeQuorum (the metadata log)."""
    out = [metadata(version, topic) for version in range(14)]
    for version in range(7):
        keys = (group,) if version < 4 else (group, f"{group}-b")
        out.append(find_coordinator(version, 0, keys))
        if version >= 1:
            ids = (transactional_id, f"{transactional_id}-b")
            out.append(find_coordinator(version, 1, ids if version >= 4 else ids[:1]))
    out += [describe_cluster(version) for version in range(3)]
    out += [describe_quorum(version) for version in range(3)]
    return out


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


# ---- the capture ---------------------------------------------------------------------------


def _capture_cluster_class() -> type:
    from tests.gateway.harness import _proc
    from tests.gateway.harness.kafka_cluster import KafkaCluster

    class CaptureCluster(KafkaCluster):
        """The harness's cluster plus an EXTERNAL client listener per node, advertised as
        the golden upstream address of the node (never resolved: only this script's
        requests arrive there, by port)."""

        def _server_properties(self, node: Any) -> str:
            if "EXTERNAL" not in node.ports:
                node.ports["EXTERNAL"] = _proc.free_ports(1)[0]
            n = node.node_id
            extra = {
                "listeners": f",EXTERNAL://127.0.0.1:{node.ports['EXTERNAL']}",
                "advertised.listeners": f",EXTERNAL://kafka-{n}.upstream.internal:{9092 + n}",
                "listener.security.protocol.map": ",EXTERNAL:PLAINTEXT",
            }
            lines = []
            for line in super()._server_properties(node).splitlines():
                key = line.split("=", 1)[0]
                lines.append(line + extra.get(key, ""))
            return "\n".join(lines) + "\n"

    return CaptureCluster


def capture(cluster: Any) -> list[Path]:
    """Sends every live request to node 1's EXTERNAL listener; writes the answers."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.gateway.harness.wire import exchange
    from tests.waiting import eventually_sync

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})
    admin.create_topics([NewTopic(GOLDEN_TOPIC, 3, 3)])[GOLDEN_TOPIC].result(timeout=60)
    cluster.wait_in_sync([GOLDEN_TOPIC])
    port = cluster.node_ports[1]["EXTERNAL"]
    requests = live_requests(GOLDEN_TOPIC, GOLDEN_GROUP, GOLDEN_TRANSACTION)
    # Coordinators exist once their internal topics do: ask until every answer is clean.
    answers: dict[str, tuple[Any, bytes]] = {}

    def clean() -> bool:
        answers.update(
            {r.name: exchange(port, r.request, r.response_type) for r in requests}
        )
        return all(_clean(message) for message, _ in answers.values())

    eventually_sync(clean, timeout_s=90, what="every coordinator")
    shutil.rmtree(LIVE, ignore_errors=True)
    LIVE.mkdir()
    written = []
    for name, (_, raw) in answers.items():
        path = LIVE / f"{name}.bin"
        path.write_bytes(raw)
        written.append(path)
    return written


def _clean(message: Any) -> bool:
    """No error anywhere a coordinator lookup or the quorum could report one."""
    if getattr(message, "error_code", 0):
        return False
    for coordinator in getattr(message, "coordinators", ()):
        if coordinator.error_code:
            return False
    return True


def main() -> None:
    from tests.gateway.golden import kafka_classpath, run_java

    cluster = _capture_cluster_class()(nodes=3)
    cluster.start()
    try:
        written = capture(cluster)
    finally:
        cluster.stop()
    print(f"captured {len(written)} responses into {LIVE}")
    java, classpath = shutil.which("java"), kafka_classpath()
    if java is None or classpath is None:
        raise SystemExit("java and the kafka-clients jar are needed to write live.txt")
    work = Path(__import__("tempfile").mkdtemp())
    (HERE / "live.txt").write_text(run_java("GoldenLive", java, classpath, work))
    shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {HERE / 'live.txt'}")


if __name__ == "__main__":
    main()
