#!/usr/bin/env python3
"""Fetch, once per machine, what `ktc` and its tests use from outside the repository.

    .ci/provision.py NAME...   provision these entries (the Makefile's targets of the same names)
    .ci/provision.py --list    the table: what, from where, into where, and whether it is there
    .ci/provision.py --env     the paths the tests and `ktc` read, as NAME=VALUE lines

Every entry is one row of ENTRIES below and follows one rule:

- it is *there* when its marker exists: for a cache directory, the stamp
  ``<dir>/.complete-<checksum of its recipe>`` written after a complete fetch (an edited pom
  or manifest fetches again; a fresh clone with the same recipe does not); for a Debian
  package, its files.  What is there is skipped, without running any tool.
- otherwise it is fetched with its tool (mvn, go, apt-get as root).  Without that tool the
  entry is skipped with one line saying which tests will skip, except in CI (``CI=true``),
  where a missing tool is an error: CI runs every test.

A cache directory is filled in ``<dir>.tmp`` and renamed, so an interrupted fetch leaves
nothing that looks complete.  The caches live under ``KTC_CACHE`` (default
``~/.cache/ktc``); an entry's own variable (``KTC_KAFKA_LIBS``, ...) overrides its path.

To add a Maven fetch, add one ``Maven`` row: either a pom in the tree (``pom=``, its
``<dependencies>`` are copied with their closure) or the coordinates alone (``artifacts=``,
turned into such a pom here), the directory name under the cache, and the variable the
consumers read.  Jars that go on Spark's classpath beside PySpark's own: list only the ones
PySpark lacks, with ``transitive=False`` (as lake-libs does), or the closure brings second,
older copies of Scala, Hadoop and slf4j.  Then name the entry in the Makefile where it is
needed (``PROVISIONED`` for `make test`, and `run`'s line if `ktc` reads it at run time).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CI = os.environ.get("CI") == "true"


def cache_root() -> Path:
    return Path(os.environ.get("KTC_CACHE") or Path.home() / ".cache/ktc").expanduser()


def cksum(data: bytes) -> str:
    """POSIX ``cksum``'s CRC of ``data``: the stamps name it, as ``cksum < file`` prints it."""
    out = subprocess.run(["cksum"], input=data, capture_output=True, check=True).stdout
    return out.split()[0].decode()


class Failed(Exception):
    """A fetch that ran and failed, or a tool missing in CI: exit 1 with this line."""


@dataclass(frozen=True)
class Maven:
    """Jars copied from Maven Central, with their dependency closure unless told not to."""

    name: str
    why: str  # what uses them: "the gateway tests' upstream", ...
    skips: str  # what skips without them
    directory: str  # under the cache root
    env: str  # the variable the consumers read (and that overrides the directory)
    pom: str = ""  # a pom in the tree, relative to the repository
    artifacts: tuple[str, ...] = ()  # or group:artifact:version coordinates
    transitive: bool = True  # False: the listed dependencies only, not their closure

    tool = "mvn"

    def dir(self) -> Path:
        return Path(os.environ.get(self.env) or cache_root() / self.directory)

    def recipe(self) -> bytes:
        if self.pom:
            return (ROOT / self.pom).read_bytes()
        deps = "".join(
            "<dependency><groupId>{}</groupId><artifactId>{}</artifactId>"
            "<version>{}</version></dependency>".format(*coordinate.split(":"))
            for coordinate in self.artifacts
        )
        return (
            '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0'
            "</modelVersion><groupId>ktc.provision</groupId>"
            f"<artifactId>{self.name}</artifactId><version>0</version>"
            f"<packaging>pom</packaging><dependencies>{deps}</dependencies></project>\n"
        ).encode()

    def there(self) -> bool:
        return (self.dir() / f".complete-{cksum(self.recipe())}").exists()

    def source(self) -> str:
        return self.pom or ", ".join(self.artifacts)

    def fetch(self) -> None:
        target = self.dir()
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        pom = ROOT / self.pom if self.pom else tmp / "pom.xml"
        if not self.pom:
            pom.write_bytes(self.recipe())
        run(
            "mvn",
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-DexcludeTransitive={str(not self.transitive).lower()}",
            f"-DoutputDirectory={tmp}",
        )
        if not self.pom:
            pom.unlink()
        install(tmp, target, self.recipe())


@dataclass(frozen=True)
class GoBuilder:
    """A binary built with the OpenTelemetry Collector Builder from a manifest of Go modules."""

    name: str
    why: str
    skips: str
    directory: str
    env: str  # the binary's path the consumers read
    manifest: str
    builder: str  # the builder's version
    binary: str  # the manifest's dist.name

    tool = "go"

    def dir(self) -> Path:
        return cache_root() / self.directory

    def recipe(self) -> bytes:
        return (ROOT / self.manifest).read_bytes()

    def there(self) -> bool:
        return (self.dir() / f".complete-{cksum(self.recipe())}").exists()

    def source(self) -> str:
        return f"{self.manifest} (builder v{self.builder})"

    def fetch(self) -> None:
        target = self.dir()
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        builder = f"go.opentelemetry.io/collector/cmd/builder@v{self.builder}"
        run("go", "install", builder, env={"GOBIN": str(tmp / "bin")})
        log = tmp / "builder.log"
        with log.open("wb") as out:
            built = subprocess.run(
                [tmp / "bin/builder", f"--config={ROOT / self.manifest}"],
                cwd=tmp,
                check=False,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if built.returncode:
            sys.stderr.write("".join(log.read_text().splitlines(True)[-40:]))
            raise Failed(f"{self.name}: the builder failed ({log})")
        (tmp / "build" / self.binary).rename(tmp / self.binary)
        shutil.rmtree(tmp / "build")
        shutil.rmtree(tmp / "bin")
        install(tmp, target, self.recipe())


@dataclass(frozen=True)
class GoProgram:
    """A Go program in the tree, built against the module versions its go.sum pins."""

    name: str
    why: str
    skips: str
    source_dir: str  # relative to the repository: main.go, go.mod, go.sum
    directory: str
    env: str  # the binary's path the consumers read
    binary: str

    tool = "go"

    def dir(self) -> Path:
        return cache_root() / self.directory

    def recipe(self) -> bytes:
        source = ROOT / self.source_dir
        return b"".join(
            (source / name).read_bytes() for name in ("go.mod", "go.sum", "main.go")
        )

    def there(self) -> bool:
        return (self.dir() / f".complete-{cksum(self.recipe())}").exists()

    def source(self) -> str:
        return f"{self.source_dir} (go build)"

    def fetch(self) -> None:
        target = self.dir()
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        built = subprocess.run(
            ["go", "build", "-trimpath", "-o", str(tmp / self.binary), "."],
            cwd=ROOT / self.source_dir,
            check=False,
            env={**os.environ, "GOFLAGS": "-mod=readonly"},
        )
        if built.returncode:
            raise Failed(f"{self.name}: go build failed (exit {built.returncode})")
        install(tmp, target, self.recipe())


@dataclass(frozen=True)
class Debian:
    """A Debian package, installed with apt-get when one of its files is missing."""

    name: str
    why: str
    skips: str
    package: str
    files: tuple[str, ...]

    tool = "apt-get as root"
    env = ""

    def dir(self) -> Path:
        return Path(self.files[0])

    def there(self) -> bool:
        return all(os.access(f, os.X_OK) for f in self.files)

    def source(self) -> str:
        return f"apt: {self.package}"

    def fetch(self) -> None:
        run("apt-get", "update", "-qq")
        run(
            "apt-get",
            "install",
            "-y",
            "-qq",
            "--no-install-recommends",
            self.package,
            env={"DEBIAN_FRONTEND": "noninteractive"},
            quiet=True,
        )


Entry = Maven | GoBuilder | GoProgram | Debian

# The table.  Kafka's and Iceberg's versions are in their poms, otelcol's in its manifest.
ENTRIES: tuple[Entry, ...] = (
    Maven(
        name="kafka-libs",
        why="the gateway tests' upstream: Apache Kafka 4.4.0's KRaft broker, Java client and tools",
        skips="the gateway tests",
        pom="tests/gateway/harness/pom.xml",
        directory="kafka-4.4.0",
        env="KTC_KAFKA_LIBS",
    ),
    # A Kafka Streams application's clients (admin, each thread's consumer and producer,
    # restore consumers): the application tests' and the per-instance series measurement's.
    Maven(
        name="streams-libs",
        why="Kafka Streams 4.4.0 and its closure (RocksDB), for the application tests",
        skips="the Kafka Streams tests",
        artifacts=("org.apache.kafka:kafka-streams:4.4.0",),
        directory="kafka-streams-4.4.0",
        env="KTC_STREAMS_LIBS",
    ),
    # `ktc ingest`, `ktc sql` (on Spark), `ktc thriftserver` and `ktc lake` read these at run
    # time, so `make run` fetches them too.  Beside PySpark's own jars: the listed ones only.
    Maven(
        name="lake-libs",
        why="the lakehouse: Iceberg 1.12.0's Spark 4.1 runtime, the JDBC catalog's drivers",
        skips="the Spark lakehouse tests",
        pom="exporters/lakehouse/pom.xml",
        directory="iceberg-1.12.0",
        env="KTC_LAKE_LIBS",
        transitive=False,
    ),
    # `ktc ingest --kafka-topic` reads the landing topic with Spark's Kafka source: the
    # source (4.1.1, the newest Spark 4.1 release of it on Maven Central; runs on PySpark
    # 4.1.x), the Kafka client it runs on and the pool it keeps consumers in; PySpark has the
    # rest of their closure.
    Maven(
        name="spark-kafka-libs",
        why="the topic ingest: Spark 4.1's Kafka source and Kafka's Java client",
        skips="the topic ingest tests",
        artifacts=(
            "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1",
            "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.1.1",
            "org.apache.kafka:kafka-clients:3.9.1",
            "org.apache.commons:commons-pool2:2.12.1",
        ),
        directory="spark-kafka-4.1.1",
        env="KTC_SPARK_KAFKA_LIBS",
        transitive=False,
    ),
    # About 6 minutes on 2 cores.  The forwarder's end-to-end tests send to it.
    GoBuilder(
        name="otelcol",
        why="an OpenTelemetry Collector for the forwarder's end-to-end tests",
        skips="the OpenTelemetry Collector tests",
        manifest="tests/exporters/otelcol/builder-config.yaml",
        builder="0.165.0",
        directory="otelcol-0.165.0",
        binary="otelcol-ktc",
        env="KTC_OTELCOL",
    ),
    # franz-go, a pure-Go client with KIP-714 since 1.19: the gateway's client-library tests.
    GoProgram(
        name="kgo-client",
        why="a franz-go 1.22.3 (kgo) producer for the client-library tests",
        skips="the franz-go tests",
        source_dir="tests/clients/kgo",
        directory="kgo-client-1.22.3",
        env="KTC_KGO_CLIENT",
        binary="kgo-client",
    ),
    Debian(
        name="postgresql",
        why="a private PostgreSQL cluster for the lakehouse's PostgreSQL catalog test",
        skips="the PostgreSQL catalog test",
        package="postgresql-15",
        files=("/usr/lib/postgresql/15/bin/pg_ctl",),
    ),
    # Driven by Playwright, which never downloads a browser of its own here.
    Debian(
        name="chromium",
        why="the browser the report's test renders `ktc report` in",
        skips="the report's browser test",
        package="chromium",
        files=("/usr/bin/chromium",),
    ),
    Debian(
        name="prometheus",
        why="a Prometheus server scraping /metrics/clients, promtool for the alert rules",
        skips="the /metrics/clients tests",
        package="prometheus",
        files=("/usr/bin/prometheus", "/usr/bin/promtool"),
    ),
)


def run(*argv: str, env: dict[str, str] | None = None, quiet: bool = False) -> None:
    done = subprocess.run(
        argv,
        check=False,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL if quiet else None,
    )
    if done.returncode:
        raise Failed(f"{argv[0]} {argv[1]} failed (exit {done.returncode})")


def install(tmp: Path, target: Path, recipe: bytes) -> None:
    """Put a complete fetch in place of the old one and stamp it with its recipe's checksum."""
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    (target / f".complete-{cksum(recipe)}").touch()


def has_tool(entry: Entry) -> bool:
    if isinstance(entry, Debian):
        return shutil.which("apt-get") is not None and os.geteuid() == 0
    return shutil.which(entry.tool) is not None


def provision(entry: Entry) -> None:
    if entry.there():
        return
    if not has_tool(entry):
        if CI:
            raise Failed(f"{entry.name}: no {entry.tool} here to fetch {entry.why}")
        print(f"{entry.name}: no {entry.tool} here, {entry.skips} will skip")
        return
    print(f"{entry.name}: fetching {entry.source()} into {entry.dir()}", flush=True)
    entry.fetch()


def env_lines() -> list[str]:
    lines = []
    for entry in ENTRIES:
        if isinstance(entry, Maven):
            lines.append(f"{entry.env}={entry.dir()}")
        elif isinstance(entry, GoBuilder | GoProgram):
            value = os.environ.get(entry.env) or entry.dir() / entry.binary
            lines.append(f"{entry.env}={value}")
    return lines


def main(argv: list[str]) -> int:
    by_name = {entry.name: entry for entry in ENTRIES}
    if argv == ["--list"]:
        for entry in ENTRIES:
            state = "there" if entry.there() else "missing"
            print(f"{entry.name:<11} {state:<8} {entry.source()} -> {entry.dir()}")
            print(f"{'':<20} {entry.why}")
        return 0
    if argv == ["--env"]:
        print("\n".join(env_lines()))
        return 0
    unknown = [name for name in argv if name not in by_name]
    if not argv or unknown or any(name.startswith("-") for name in argv):
        known = " ".join(by_name)
        print(f"provision: usage: provision.py --list | --env | NAME... ({known})")
        return 2
    try:
        for name in argv:
            provision(by_name[name])
    except Failed as failure:
        print(f"provision: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
