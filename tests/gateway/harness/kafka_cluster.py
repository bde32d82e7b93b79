"""A real Apache Kafka 4.4.0 KRaft cluster on 127.0.0.1, run from the Maven Central jars that
`make kafka-libs` caches (tests/gateway/harness/pom.xml; `KTC_KAFKA_LIBS`, default
~/.cache/ktc/kafka-4.4.0) with the JDK 17 `java`.

Topology: N combined broker+controller nodes (`process.roles=broker,controller`, node ids
1..N, default 3) with a static quorum (`controller.quorum.voters`). Killing one of three
leaves a controller majority and two in-sync replicas, so acks=all with min.insync.replicas=2,
transactions (state log RF 3, min ISR 2) and consumer groups keep working. Each node has
    PLAINTEXT       client + inter-broker listener
    SASL_PLAINTEXT  SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN (users from `sasl_users`, SCRAM
                    credentials written into the metadata log by the storage format)
    CONTROLLER      the KRaft quorum (not advertised to clients)
all on ports picked at start and kept across kill_node/start_node.

`sasl_only=True` makes SASL_PLAINTEXT the only listener clients and brokers reach (brokers
log in to each other with PLAIN as BROKER_USER; the harness's own readiness client too), as
a cluster that lets nobody in without credentials: `KafkaCluster(nodes=1, sasl_only=True)`.

    cluster = KafkaCluster(nodes=3)
    cluster.start()                        # formats storage, starts the JVMs, wait_ready()
    cluster.bootstrap_servers()            # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
    cluster.client_config("SASL_PLAINTEXT", user="alice")   # confluent-kafka settings
    cluster.kill_node(2); cluster.wait_brokers({1, 3}); cluster.start_node(2)
    cluster.wait_in_sync(["topic"]); cluster.stop()
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _proc

KAFKA_VERSION = "4.4.0"
DEFAULT_KAFKA_LIBS = Path.home() / ".cache" / "ktc" / f"kafka-{KAFKA_VERSION}"
LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT", "CONTROLLER")
DEFAULT_SASL_USERS: Mapping[str, str] = {"alice": "alice-secret", "bob": "bob-secret"}
# A sasl_only cluster's inter-broker (and readiness) login, PLAIN only.
BROKER_USER = ("ktc-broker", "ktc-broker-secret")

STORAGE_TOOL = (
    "kafka.tools.StorageTool"  # kafka_2.13 (core); `kafka-storage.sh` runs it
)
KAFKA_MAIN = "kafka.Kafka"  # `kafka-server-start.sh`'s main class

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p [%t] %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
"""


def kafka_libs_dir() -> Path:
    """Where `make kafka-libs` put the jars (the Makefile exports KTC_KAFKA_LIBS)."""
    return Path(os.environ.get("KTC_KAFKA_LIBS") or DEFAULT_KAFKA_LIBS).expanduser()


def java_bin() -> str | None:
    explicit = os.environ.get("KTC_JAVA")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = shutil.which("java")
    if found:
        return found
    return "/usr/bin/java" if os.access("/usr/bin/java", os.X_OK) else None


def missing_prerequisites() -> str | None:
    """Why a Kafka cluster (or the Java client runner) cannot run here, or None."""
    if java_bin() is None:
        return "no `java` (JDK 17) on PATH or at /usr/bin/java"
    libs = kafka_libs_dir()
    needed = [f"kafka_2.13-{KAFKA_VERSION}.jar", f"kafka-clients-{KAFKA_VERSION}.jar"]
    absent = [name for name in needed if not (libs / name).is_file()]
    if absent:
        return (
            f"Kafka {KAFKA_VERSION} jars not in {libs} ({', '.join(absent)} missing): "
            "run `make kafka-libs` (needs mvn) or set KTC_KAFKA_LIBS"
        )
    return None


def classpath(libs: Path | None = None) -> str:
    return str((libs or kafka_libs_dir()) / "*")


def random_cluster_id() -> str:
    """A Kafka Uuid string (url-safe base64, no padding) that does not start with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass
class KafkaNode:
    node_id: int
    ports: dict[str, int]
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class KafkaCluster:
    """See the module docstring. `broker_config` entries override/extend every node's
    server.properties; `heap` is each JVM's -Xmx."""

    nodes: int = 3
    sasl_users: Mapping[str, str] = field(
        default_factory=lambda: dict(DEFAULT_SASL_USERS)
    )
    broker_config: Mapping[str, Any] = field(default_factory=dict)
    heap: str = "512m"
    libs: Path | None = None
    work_dir: Path | None = None
    keep_work_dir: bool = False
    log_level: str = "INFO"
    class_data_sharing: bool = True
    sasl_only: bool = False
    extra_classpath: tuple[Path, ...] = ()
    """Directories or jars appended to the brokers' classpath (plugins named in broker_config)."""

    def __post_init__(self) -> None:
        self.listeners: tuple[str, ...] = (
            ("SASL_PLAINTEXT", "CONTROLLER") if self.sasl_only else LISTENERS
        )
        self.client_listeners = tuple(n for n in self.listeners if n != "CONTROLLER")
        self.cluster_id = random_cluster_id()
        self._nodes: dict[int, KafkaNode] = {}
        self._owns_work_dir = self.work_dir is None
        self.startup_seconds: float | None = None
        self._archive_dumper: int | None = None

    # ---------------------------------------------------------------- lifecycle

    def start(self, timeout: float = 120.0) -> KafkaCluster:
        """Picks ports, formats every node's storage with Kafka's StorageTool, starts the
        JVMs and waits until every broker is registered and serving (wait_ready). A port
        taken in the meantime by someone else is retried once with fresh ports."""
        reason = missing_prerequisites()
        if reason is not None:
            raise RuntimeError(reason)
        self.libs = self.libs or kafka_libs_dir()
        started = time.monotonic()
        for attempt in (1, 2):
            self._prepare()
            try:
                self._format_all()
                for node_id in self._nodes:
                    self._launch(node_id)
                self.wait_ready(
                    timeout=max(10.0, timeout - (time.monotonic() - started))
                )
                break
            except BaseException as error:
                bind_failure = any(
                    "Address already in use" in _proc.tail(node.log_path, 400)
                    for node in self._nodes.values()
                )
                report = self.describe_failure()
                self.stop()
                if attempt == 1 and bind_failure and isinstance(error, Exception):
                    continue
                raise RuntimeError(
                    f"Kafka cluster did not start: {error}\n{report}"
                ) from error
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """Kills every node (SIGKILL: the data is thrown away) and removes the work dir. The
        first cluster on a machine stops one node gracefully instead, so that its JVM writes
        the class-data-sharing archive later clusters start from (see _jvm)."""
        self._finish_archive()
        for node in self._nodes.values():
            if node.process is not None:
                _proc.kill(node.process)
        if self._owns_work_dir and not self.keep_work_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node (broker and controller die together, as in a crash)."""
        node = self._nodes[node_id]
        if node.process is None:
            raise RuntimeError(f"node {node_id} was never started")
        _proc.kill(node.process)

    def stop_node(self, node_id: int, timeout: float = 60.0) -> int | None:
        """SIGTERM one node: a controlled shutdown (leadership moves off it first)."""
        node = self._nodes[node_id]
        if node.process is None:
            return None
        return _proc.kill(node.process, graceful_s=timeout)

    def start_node(
        self, node_id: int, *, wait: bool = True, timeout: float = 90.0
    ) -> None:
        """Starts a stopped node again on its old ports and data; by default waits until
        every running node is registered and serving (wait_ready)."""
        node = self._nodes[node_id]
        if node.running:
            raise RuntimeError(f"node {node_id} is still running")
        self._launch(node_id)
        if wait:
            self.wait_ready(timeout=timeout)

    def ensure_running(self, timeout: float = 90.0) -> None:
        """Starts every node that is not running (after a test killed one) and waits_ready."""
        for node_id in self.node_ids:
            if not self._nodes[node_id].running:
                self._launch(node_id)
        self.wait_ready(timeout=timeout)

    # ---------------------------------------------------------------- addresses

    @property
    def node_ids(self) -> list[int]:
        return sorted(self._nodes)

    @property
    def running_node_ids(self) -> list[int]:
        return [node_id for node_id in self.node_ids if self._nodes[node_id].running]

    @property
    def node_ports(self) -> dict[int, dict[str, int]]:
        """{node_id: {"PLAINTEXT": port, "SASL_PLAINTEXT": port, "CONTROLLER": port}}"""
        return {
            node_id: dict(node.ports) for node_id, node in sorted(self._nodes.items())
        }

    def node(self, node_id: int) -> KafkaNode:
        return self._nodes[node_id]

    def bootstrap_servers(
        self, listener: str | None = None, nodes: Iterable[int] | None = None
    ) -> str:
        """`127.0.0.1:port` of `listener` (default: the first client listener) on the given
        nodes (default all), comma-separated."""
        listener = listener or self.client_listeners[0]
        if listener not in self.listeners:
            raise ValueError(f"unknown listener {listener!r}; one of {self.listeners}")
        chosen = self.node_ids if nodes is None else list(nodes)
        return ",".join(f"127.0.0.1:{self._nodes[n].ports[listener]}" for n in chosen)

    def client_config(
        self,
        listener: str = "PLAINTEXT",
        *,
        user: str | None = None,
        password: str | None = None,
        mechanism: str = "SCRAM-SHA-512",
        nodes: Iterable[int] | None = None,
    ) -> dict[str, Any]:
        """confluent-kafka settings for a client of `listener`; SASL_PLAINTEXT needs `user`
        (password from sasl_users unless given)."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers(listener, nodes)
        }
        if listener == "SASL_PLAINTEXT":
            if user is None:
                raise ValueError("SASL_PLAINTEXT needs a user")
            config.update(
                {
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": mechanism,
                    "sasl.username": user,
                    "sasl.password": password
                    if password is not None
                    else self.sasl_users[user],
                }
            )
        return config

    # ---------------------------------------------------------------- readiness

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Waits until every running node accepts on all its listeners and, asked by a real
        client bootstrapped to that node alone, serves a DescribeCluster listing exactly
        the running nodes (so each is registered, unfenced and has caught up)."""
        deadline = time.monotonic() + timeout
        expected = set(self.running_node_ids)
        if not expected:
            raise RuntimeError("no node is running")
        for node_id in sorted(expected):
            node = self._nodes[node_id]
            for listener in self.listeners:
                _proc.poll_until(
                    functools.partial(_proc.port_open, node.ports[listener]),
                    timeout=max(0.1, deadline - time.monotonic()),
                    what=f"node {node_id} {listener} listener",
                    alive=functools.partial(self._death, node),
                )
        for node_id in sorted(expected):
            self.wait_brokers(
                expected, timeout=max(0.1, deadline - time.monotonic()), via=node_id
            )

    def wait_brokers(
        self, expected: Iterable[int], timeout: float = 60.0, via: int | None = None
    ) -> dict[str, Any]:
        """Polls DescribeCluster (through node `via`, default any running node) until the
        registered, unfenced brokers are exactly `expected`; returns the last answer
        (`{"cluster_id", "controller", "nodes": {id: "host:port"}}`)."""
        wanted = set(expected)
        nodes = [via] if via is not None else self.running_node_ids
        admin = self._admin(nodes)

        def probe() -> dict[str, Any] | None:
            answer = self.describe_cluster(admin)
            return answer if set(answer["nodes"]) == wanted else None

        return _proc.poll_until(
            probe,
            timeout=timeout,
            interval=0.2,
            what=f"brokers {sorted(wanted)} registered"
            + (f" (asking node {via})" if via else ""),
            alive=(lambda: self._death(self._nodes[via])) if via is not None else None,
        )

    def wait_in_sync(
        self, topics: Iterable[str] | None = None, timeout: float = 90.0
    ) -> None:
        """Polls Metadata until every partition of `topics` (default all, internal ones
        included) has a leader and all its replicas in the ISR."""
        admin = self._admin(self.running_node_ids)
        names = None if topics is None else list(topics)

        def probe() -> bool:
            metadata = admin.list_topics(timeout=5)
            chosen = names if names is not None else list(metadata.topics)
            for name in chosen:
                topic = metadata.topics.get(name)
                if topic is None or topic.error is not None or not topic.partitions:
                    return False
                for partition in topic.partitions.values():
                    if partition.leader < 0 or set(partition.isrs) != set(
                        partition.replicas
                    ):
                        return False
            return True

        _proc.poll_until(
            probe, timeout=timeout, interval=0.2, what=f"ISR full for {names}"
        )

    def describe_cluster(self, admin: Any | None = None) -> dict[str, Any]:
        """DescribeCluster through librdkafka. Its `controller` is what Kafka's KRaft brokers
        put there: a random live broker, not the active controller (see active_controller)."""
        admin = admin or self._admin(self.running_node_ids)
        # librdkafka sends DescribeCluster to the "controller" of its cached Metadata and
        # waits for that node, dead or not, until the next refresh: refresh first.
        admin.list_topics(timeout=5)
        result = admin.describe_cluster(request_timeout=5).result(timeout=10)
        return {
            "cluster_id": result.cluster_id,
            "controller": result.controller.id if result.controller else None,
            "nodes": {n.id: f"{n.host}:{n.port}" for n in result.nodes},
        }

    def active_controller(self, timeout: float = 30.0) -> int:
        """The KRaft quorum leader (DescribeQuorum through a running broker), once it is a
        running node."""
        from .wire import describe_quorum

        def probe() -> int | None:
            for node_id in self.running_node_ids:
                leader = describe_quorum(self._nodes[node_id].ports["PLAINTEXT"])[
                    "leader_id"
                ]
                return leader if leader in self.running_node_ids else None
            return None

        return _proc.poll_until(
            probe, timeout=timeout, interval=0.2, what="active controller"
        )

    def log_tail(self, node_id: int, lines: int = 60) -> str:
        return _proc.tail(self._nodes[node_id].log_path, lines)

    def describe_failure(self, lines: int = 40) -> str:
        parts = []
        for node_id, node in sorted(self._nodes.items()):
            state = (
                "running"
                if node.running
                else f"exit {node.process and node.process.poll()}"
            )
            parts.append(
                f"--- node {node_id} ({state}) {node.log_path}, last {lines} lines:"
            )
            parts.append(_proc.tail(node.log_path, lines))
        return "\n".join(parts)

    # ---------------------------------------------------------------- internals

    def _admin(self, nodes: Iterable[int]) -> Any:
        from confluent_kafka.admin import AdminClient

        login: dict[str, Any] = {}
        if self.sasl_only:
            login = {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": BROKER_USER[0],
                "sasl.password": BROKER_USER[1],
            }
        return AdminClient(
            {
                **login,
                "bootstrap.servers": self.bootstrap_servers(None, nodes),
                "reconnect.backoff.max.ms": 500,
                "log_level": 2,  # a broker still coming up is not worth librdkafka's noise
            }
        )

    def _death(self, node: KafkaNode) -> str | None:
        if node.process is not None and node.process.poll() is not None:
            return (
                f"node {node.node_id} exited with {node.process.returncode}; "
                f"{node.log_path}:\n{_proc.tail(node.log_path, 40)}"
            )
        return None

    def _prepare(self) -> None:
        if self.work_dir is None or self._owns_work_dir:
            if self.work_dir is not None:
                shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = Path(tempfile.mkdtemp(prefix="ktc-kafka-"))
            self._owns_work_dir = True
        width = len(self.listeners)
        ports = _proc.free_ports(self.nodes * width)
        self._nodes = {}
        for index in range(self.nodes):
            node_id = index + 1
            directory = self.work_dir / f"node-{node_id}"
            shutil.rmtree(directory, ignore_errors=True)  # a retry formats afresh
            directory.mkdir(parents=True)
            node_ports = dict(
                zip(
                    self.listeners,
                    ports[index * width : (index + 1) * width],
                    strict=True,
                )
            )
            self._nodes[node_id] = KafkaNode(node_id, node_ports, directory)
        log4j = self.work_dir / "log4j2.properties"
        log4j.write_text(_LOG4J2.format(level=self.log_level))
        for node in self._nodes.values():
            node.config_path.write_text(self._server_properties(node))

    def _server_properties(self, node: KafkaNode) -> str:
        replication = min(3, self.nodes)
        min_isr = min(2, replication)
        voters = ",".join(
            f"{n.node_id}@127.0.0.1:{n.ports['CONTROLLER']}"
            for n in self._nodes.values()
        )
        plain_users = dict(self.sasl_users)
        broker_login = ""
        if self.sasl_only:
            plain_users[BROKER_USER[0]] = BROKER_USER[1]
            broker_login = f'username="{BROKER_USER[0]}" password="{BROKER_USER[1]}" '
        jaas_plain_users = broker_login + " ".join(
            f'user_{name}="{password}"' for name, password in plain_users.items()
        )
        config: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": node.node_id,
            "controller.quorum.voters": voters,
            "listeners": ",".join(
                f"{name}://127.0.0.1:{node.ports[name]}" for name in self.listeners
            ),
            "advertised.listeners": ",".join(
                f"{name}://127.0.0.1:{node.ports[name]}"
                for name in self.client_listeners
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": self.client_listeners[0],
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "log.dirs": str(node.directory / "data"),
            # 2 shared cores: few threads everywhere.
            "num.network.threads": 2,
            "num.io.threads": 2,
            "background.threads": 2,
            "num.replica.fetchers": 1,
            "num.recovery.threads.per.data.dir": 1,
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
            # Durable enough for "no acknowledged record lost" with one node down.
            "default.replication.factor": replication,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replication,
            "offsets.topic.num.partitions": 12,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": 6,
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": min_isr,
            "share.coordinator.state.topic.num.partitions": 3,
            "group.initial.rebalance.delay.ms": 0,
            # A SIGKILLed broker is fenced (its leaderships moved) within 6 s.
            "broker.heartbeat.interval.ms": 1000,
            "broker.session.timeout.ms": 6000,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required "
                f"{jaas_plain_users};"
            ),
        }
        config.update(self.broker_config)
        return "".join(f"{key}={value}\n" for key, value in config.items())

    # A JDK 17 dynamic CDS archive of the broker's classes, dumped once per machine (per
    # JDK and jar set) by one node's JVM at its graceful exit, cuts each JVM's start by a
    # third to a half here. Written to a temporary name, checked, then renamed: a truncated
    # archive crashes the JVM that maps it.
    def _archive_path(self) -> Path:
        java = os.path.realpath(java_bin() or "java")
        jars = sorted(p.name for p in (self.libs or kafka_libs_dir()).glob("*.jar"))
        key = f"{java}:{os.stat(java).st_mtime_ns}:{','.join(jars)}"
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        return (self.libs or kafka_libs_dir()) / ".cds" / f"kafka-broker-{digest}.jsa"

    def _cds_options(self, node_id: int | None) -> list[str]:
        if not self.class_data_sharing:
            return []
        archive = self._archive_path()
        if archive.is_file():
            return [f"-XX:SharedArchiveFile={archive}"]
        if node_id is None or self._archive_dumper not in (None, node_id):
            return []
        if (
            self._nodes[node_id].starts > 1
        ):  # its first JVM was killed: no archive from it
            return []
        try:
            archive.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return []
        self._archive_dumper = node_id
        return [f"-XX:ArchiveClassesAtExit={self._archive_staging()}"]

    def _archive_staging(self) -> Path:
        archive = self._archive_path()
        return archive.with_name(f"{archive.name}.{os.getpid()}.tmp")

    def _finish_archive(self) -> None:
        dumper, self._archive_dumper = self._archive_dumper, None
        if dumper is None or dumper not in self._nodes:
            return
        node = self._nodes[dumper]
        staging = self._archive_staging()
        if node.running and node.starts == 1 and node.process is not None:
            _proc.kill(node.process, graceful_s=60)
        try:
            if staging.is_file() and staging.stat().st_size > 0:
                java = java_bin()
                check = subprocess.run(
                    [
                        java or "java",
                        f"-XX:SharedArchiveFile={staging}",
                        "-cp",
                        classpath(self.libs),
                        "-version",
                    ],
                    capture_output=True,
                    timeout=60,
                )
                if check.returncode == 0:
                    os.replace(staging, self._archive_path())
        except (OSError, subprocess.SubprocessError):
            pass
        finally:
            staging.unlink(missing_ok=True)

    def _jvm(self, heap: str, node_id: int | None = None) -> list[str]:
        java = java_bin()
        assert java is not None and self.work_dir is not None
        return [
            java,
            *self._cds_options(node_id),
            f"-Xmx{heap}",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:+ExitOnOutOfMemoryError",
            "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            "-cp",
            os.pathsep.join([classpath(self.libs), *map(str, self.extra_classpath)]),
        ]

    def _format_all(self) -> None:
        scram = [
            argument
            for name, password in self.sasl_users.items()
            for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256")
            for argument in (
                "--add-scram",
                f"{mechanism}=[name={name},password={password}]",
            )
        ]

        def format_node(node: KafkaNode) -> None:
            command = [
                *self._jvm("256m"),
                "-XX:TieredStopAtLevel=1",
                STORAGE_TOOL,
                "format",
                "--cluster-id",
                self.cluster_id,
                "--config",
                str(node.config_path),
                *scram,
            ]
            result = subprocess.run(
                command,
                capture_output=True,
                timeout=120,
                env=_proc.clean_env(("KAFKA_",)),
            )
            output = (result.stdout + result.stderr).decode("utf-8", "replace")
            (node.directory / "format.log").write_text(output)
            if result.returncode != 0:
                raise RuntimeError(
                    f"formatting node {node.node_id} failed ({result.returncode}):\n{output}"
                )

        with ThreadPoolExecutor(max_workers=len(self._nodes)) as pool:
            list(pool.map(format_node, self._nodes.values()))

    def _launch(self, node_id: int) -> None:
        node = self._nodes[node_id]
        node.starts += 1
        with open(node.log_path, "ab") as log:
            log.write(
                f"\n===== ktc harness: start #{node.starts} of node {node_id}\n".encode()
            )
            log.flush()
            node.process = subprocess.Popen(
                [
                    *_proc.die_with_parent(),
                    *self._jvm(self.heap, node_id),
                    KAFKA_MAIN,
                    str(node.config_path),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=node.directory,
                env=_proc.clean_env(("KAFKA_",)),
                start_new_session=True,
            )
        _proc.register(node.process)
