"""Golden bytes for the gateway's wire tests, serialized by Apache Kafka 4.4.0's own classes.

``responses.txt``, ``requests.txt`` and ``throttle.txt`` are the output of
``java/GoldenResponses.java``, ``java/GoldenRequests.java`` and ``java/GoldenThrottle.java``
(each program says what its lines hold). ``live/*.bin`` are answers captured from a real
Kafka 4.4.0 cluster (``capture_live.py`` says how to capture them again) and ``live.txt``
is ``java/GoldenLive.java``'s golden lines for them. The tests read them
without Java; ``test_wire_golden.py`` also re-runs the programs when java and the jars are
there (``make kafka-libs``, or Maven's cache) and checks that the committed files are theirs.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
KAFKA_RELEASE = "4.4.0"
GATEWAY_HOST = "gateway.test"


def gateway_address(node_id: int) -> tuple[str, int]:
    """The address the golden files expect for node n (GoldenResponses.host/port)."""
    return GATEWAY_HOST, 19000 + node_id


def upstream_address(node_id: int) -> tuple[str, int]:
    return f"kafka-{node_id}.upstream.internal", 9092 + node_id


@dataclass(frozen=True)
class GoldenResponse:
    api_key: int
    version: int
    case: str
    upstream: bytes
    expected: bytes

    @property
    def id(self) -> str:
        return f"{self.api_key}-v{self.version}-{self.case}"


@dataclass(frozen=True)
class GoldenRequest:
    case: str
    api_key: int
    version: int
    fields: tuple[str, ...]

    @property
    def body(self) -> bytes:
        return bytes.fromhex(self.fields[0])

    @property
    def id(self) -> str:
        return f"{self.case}-v{self.version}-{len(self.fields[0])}"


def responses() -> list[GoldenResponse]:
    """responses.txt (built by Kafka's classes), then live.txt (captured from a running
    Kafka 4.4.0 cluster by capture_live.py; cases named ``live-...``)."""
    rows = []
    lines = [
        line
        for name in ("responses.txt", "live.txt")
        for line in (HERE / name).read_text().splitlines()
    ]
    for line in lines:
        key, version, case, upstream, expected = line.split()
        rows.append(
            GoldenResponse(
                int(key),
                int(version),
                case,
                bytes.fromhex(upstream),
                bytes.fromhex(expected),
            )
        )
    return rows


def requests(case: str | None = None) -> list[GoldenRequest]:
    rows = []
    for line in (HERE / "requests.txt").read_text().splitlines():
        name, key, version, *fields = line.split()
        if case is None or name == case:
            rows.append(GoldenRequest(name, int(key), int(version), tuple(fields)))
    return rows


@dataclass(frozen=True)
class GoldenThrottle:
    api_key: int
    version: int
    has_throttle: bool
    body: bytes

    @property
    def id(self) -> str:
        return f"{self.api_key}-v{self.version}"


def throttles() -> list[GoldenThrottle]:
    """throttle.txt: every 4.4.0 response at every version, ThrottleTimeMs 4321 where it has one."""
    rows = []
    for line in (HERE / "throttle.txt").read_text().splitlines():
        key, version, has, body = [*line.split(), ""][:4]
        rows.append(
            GoldenThrottle(int(key), int(version), has == "1", bytes.fromhex(body))
        )
    return rows


def kafka_classpath() -> str | None:
    """kafka-clients 4.4.0 and slf4j-api: `make kafka-libs`' cache, else Maven's, else None."""
    libs = Path(
        os.environ.get("KTC_KAFKA_LIBS")
        or Path.home() / ".cache/ktc" / f"kafka-{KAFKA_RELEASE}"
    )
    if (libs / f"kafka-clients-{KAFKA_RELEASE}.jar").is_file():
        return str(libs / "*")
    m2 = Path.home() / ".m2/repository"
    clients = (
        m2
        / f"org/apache/kafka/kafka-clients/{KAFKA_RELEASE}/kafka-clients-{KAFKA_RELEASE}.jar"
    )
    slf4j = sorted((m2 / "org/slf4j/slf4j-api").glob("*/slf4j-api-*.jar"))
    if clients.is_file() and slf4j:
        return f"{clients}:{slf4j[-1]}"
    return None


def run_java(program: str, java: str, classpath: str, work: Path) -> str:
    """Runs java/<program>.java (single-file source mode) and returns what it printed."""
    done = subprocess.run(
        [
            java,
            f"-Djava.io.tmpdir={work}",
            "-cp",
            classpath,
            str(HERE / "java" / f"{program}.java"),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{program}.java failed: {done.stderr[-2000:]}")
    return done.stdout
