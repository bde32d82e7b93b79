"""The landing topic on a cluster that lets nobody in without a login, end to end: ``ktc
serve`` lands on it with ``landing.kafka.*``'s SASL settings, and ``ktc ingest
--kafka-topic`` reads it with the same login given as ``--kafka-property``.

A one-node Apache Kafka 4.4.0 broker whose only listener is SASL_PLAINTEXT (SCRAM-SHA-512;
the gateway tests' harness, ``sasl_only``).  ``ktc serve`` runs as a process from a config
file whose password is ``${env:VAR}`` (the environment, as the Helm chart hands a Secret
over); a real librdkafka client pushes its telemetry to it.  Then:

* ``ktc ingest --once`` with ``security.protocol``, ``sasl.mechanism`` and
  ``sasl.jaas.config`` (its password again ``${env:VAR}``, so it is on no command line)
  lands every record of the topic exactly once: per partition and offset, the ``pushes``
  row and each point table's rows the record flattens to, read back with pyiceberg;
* the same ingest without the login fails with one line, exit 1, no traceback, and
  commits nothing;
* a ``--kafka-property`` in Spark's spelling (``kafka.``), or naming an unset variable, is
  a usage error (exit 2) before anything starts; no password is printed anywhere.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from tests.lakehouse.conftest import SPARK_TEST_CONF, require_topic_ingest
from tests.lakehouse.topic_cluster import REPO, KafkaCluster, ingest_topic_argv

# isort: split
# On the path once topic_cluster is imported (tests/, tests/gateway).
from exporters.kafka_topic.record import decode_record
from exporters.lakehouse.flatten import PointRowsBuilder
from exporters.lakehouse.schema import TABLES
from exporters.lakehouse.session import CATALOG_NAME, LakehouseConfig
from exporters.lakehouse.topic_source import (
    source_name,
)
from subscriptions.store import ConfigStore
from tests.gateway.harness import _proc
from tests.gateway.topic_reader import read_topic
from tests.secrets_under_test import SASL_USERS
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

KTC = Path(sys.executable).with_name("ktc")
USER = "alice"
PASSWORD = SASL_USERS[USER]
MECHANISM = "SCRAM-SHA-512"
# The variable both processes read the password from; its name is all a command line
# or a config file holds.
PASSWORD_VAR = "LANDING_SASL_PASSWORD"
PUSHES = 12  # at least this many pushes landed before the collector stops


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    require_topic_ingest()
    cluster = KafkaCluster(
        nodes=1,
        sasl_only=True,
        sasl_users={USER: PASSWORD},
        work_dir=tmp_path_factory.mktemp("topic-sasl-kafka"),
        heap="384m",
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _env(**extra: str) -> dict[str, str]:
    env = _proc.clean_env(drop_prefixes=("KTC_",))
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def _serve_and_push(kafka: KafkaCluster, work: Path, topic: str) -> str:
    """``ktc serve`` landing on ``topic`` as alice (its password from the environment),
    pushed to by a librdkafka producer until ``PUSHES`` records are in the topic; returns
    the producer's client id."""
    data_dir = work / "data"
    ConfigStore(data_dir).alter_subscription(
        "producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )
    config = work / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "config.providers": "env",
                "landing.kafka.topic": topic,
                "landing.kafka.topic.partitions": 3,
                "landing.kafka.bootstrap.servers": kafka.bootstrap_servers(),
                "landing.kafka.security.protocol": "SASL_PLAINTEXT",
                "landing.kafka.sasl.mechanism": MECHANISM,
                "landing.kafka.sasl.username": USER,
                "landing.kafka.sasl.password": f"${{env:{PASSWORD_VAR}}}",
            }
        )
    )
    ready = work / "ready.json"
    log_path = work / "serve.log"
    with log_path.open("ab") as log:
        serve = subprocess.Popen(
            [
                *_proc.die_with_parent(),
                str(KTC),
                "serve",
                *("--config", str(config), "--data-dir", str(data_dir)),
                *("--listeners", "PLAINTEXT://127.0.0.1:0"),
                *("--http-listener", "127.0.0.1:0", "--ready-file", str(ready)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_env(**{PASSWORD_VAR: PASSWORD}),
        )
    _proc.register(serve)
    client_id = f"orders-{topic}"
    try:
        _proc.poll_until(
            ready.exists,
            timeout=90,
            what="ktc serve ready",
            alive=_proc.exited(serve, log_path),
        )
        port = next(iter(json.loads(ready.read_text())["listeners"].values()))
        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "client.id": client_id,
                "enable.metrics.push": True,
                "log_level": 3,
            }
        )
        try:
            eventually_sync(
                lambda: len(_read_topic(kafka, topic)) >= PUSHES,
                timeout_s=90,
                what=f"{PUSHES} pushes landed on the topic by ktc serve",
            )
        finally:
            producer.close()  # its terminating push lands too
    finally:
        _proc.kill(serve, graceful_s=15)
    assert serve.returncode == 0, _proc.tail(log_path)
    return client_id


def _read_topic(kafka: KafkaCluster, topic: str) -> list[Any]:
    """Every record of ``topic``, read as alice by a plain consumer."""
    return read_topic(
        kafka.client_config("SASL_PLAINTEXT", user=USER, mechanism=MECHANISM), topic
    )


def _expected_rows(records: list[Any]) -> dict[str, collections.Counter[Any]]:
    """Per table, per (landing_node, landing_offset), the rows the record flattens to."""
    expected: dict[str, collections.Counter[Any]] = collections.defaultdict(
        collections.Counter
    )
    for message in records:
        context, payload = decode_record(message.headers(), message.value())
        node = source_name(message.topic(), message.partition())
        builder = PointRowsBuilder()
        builder.add_payload(payload, context, node, message.offset())
        for kind, table in builder.finish().items():
            name = "pushes" if kind == "pushes" else f"metrics_{kind}"
            if table.num_rows:
                expected[name][(node, message.offset())] += table.num_rows
    return dict(expected)


def _held_rows(config: LakehouseConfig) -> dict[str, collections.Counter[Any]]:
    """Per table with rows, per (landing_node, landing_offset), the rows it holds; read
    with pyiceberg (no JVM)."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    catalog = load_catalog(CATALOG_NAME, **config.pyiceberg_properties())
    held = {}
    for spec in TABLES:
        try:
            table = catalog.load_table((config.database, spec.name))
        except (NoSuchTableError, NoSuchNamespaceError):
            continue
        if table.current_snapshot() is None:
            continue
        rows = (
            table.scan(selected_fields=("landing_node", "landing_offset"))
            .to_arrow()
            .to_pylist()
        )
        counted = collections.Counter(
            (r["landing_node"], r["landing_offset"]) for r in rows
        )
        if counted:
            held[spec.name] = counted
    return held


def _ingest(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert not any(PASSWORD in arg for arg in argv)  # never on the command line
    done = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert PASSWORD not in done.stdout + done.stderr, "the ingest printed the password"
    return done


def _login_properties() -> list[str]:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{USER}" password="${{env:{PASSWORD_VAR}}}";'
    )
    return [
        *("--kafka-property", "security.protocol=SASL_PLAINTEXT"),
        *("--kafka-property", f"sasl.mechanism={MECHANISM}"),
        *("--kafka-property", f"sasl.jaas.config={jaas}"),
    ]


def test_ktc_serve_lands_and_ktc_ingest_reads_a_sasl_only_cluster_exactly_once(
    kafka: KafkaCluster, tmp_path: Path
) -> None:
    topic = f"sasl-landing-{uuid.uuid4().hex[:8]}"
    client_id = _serve_and_push(kafka, tmp_path / "serve", topic)
    records = _read_topic(kafka, topic)
    contexts = [decode_record(m.headers(), m.value())[0] for m in records]
    assert len(records) >= PUSHES
    assert {c.client_id for c in contexts} == {client_id}

    lake = tmp_path / "lake"
    config = LakehouseConfig(lake, database="sasl", extra_conf=SPARK_TEST_CONF)
    done = _ingest(
        ingest_topic_argv(
            lake,
            config.database,
            kafka.bootstrap_servers(),
            topic,
            master="local[1]",
            extra=_login_properties(),
        ),
        _env(**{PASSWORD_VAR: PASSWORD}),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    batches = [json.loads(line) for line in done.stdout.splitlines()]
    assert sum(b["records"] for b in batches) == len(records), batches

    expected = _expected_rows(records)
    held = _held_rows(config)
    assert set(held) == set(expected)
    for table, rows in expected.items():
        doubled = {k: n for k, n in held[table].items() if n > rows.get(k, 0)}
        missing = set(rows) - set(held[table])
        assert not doubled and not missing, (
            f"{table}: {len(doubled)} records with extra rows {sorted(doubled)[:3]}, "
            f"{len(missing)} missing {sorted(missing)[:3]}"
        )
        assert held[table] == rows, table
    print(
        f"\n{len(records)} pushes landed by ktc serve on a SASL-only cluster, ingested "
        f"as {USER} into {len(held)} tables, each row once"
    )


def test_ktc_ingest_without_the_login_fails_in_one_line_and_writes_nothing(
    kafka: KafkaCluster, tmp_path: Path
) -> None:
    """PLAINTEXT against the SASL listener: the broker drops the connection at the first
    request, the offsets lookup gives up after its 60 s, and nothing is committed."""
    topic = f"sasl-refused-{uuid.uuid4().hex[:8]}"
    lake = tmp_path / "lake"
    config = LakehouseConfig(lake, database="refused", extra_conf=SPARK_TEST_CONF)
    done = _ingest(
        ingest_topic_argv(
            lake, config.database, kafka.bootstrap_servers(), topic, master="local[1]"
        ),
        _env(),
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: topic {topic} at {kafka.bootstrap_servers()}: "), (
        done.stderr[-3000:]
    )
    assert "security.protocol" in last, last  # says what to look at
    assert done.stdout == ""
    assert _held_rows(config) == {}


@pytest.mark.parametrize(
    ("prop", "message"),
    [
        (
            "kafka.security.protocol=SASL_PLAINTEXT",
            "--kafka-property kafka.security.protocol: give the Kafka client's name "
            "(security.protocol), without Spark's kafka. prefix",
        ),
        (
            'sasl.jaas.config=x required password="${env:KTC_TEST_UNSET_PASSWORD}";',
            "--kafka-property sasl.jaas.config: the environment variable "
            "KTC_TEST_UNSET_PASSWORD is not set",
        ),
        (
            "sasl.jaas.config=${file:/etc/secret:password}",
            "--kafka-property sasl.jaas.config: ${file:/etc/secret:password} is not an "
            "environment reference (${env:VAR})",
        ),
        (
            f"={PASSWORD}",
            "--kafka-property expects KEY=VALUE, got '=...'",
        ),
    ],
    ids=["spark-prefix", "unset-variable", "other-provider", "no-key"],
)
def test_kafka_property_mistakes_are_usage_errors(
    tmp_path: Path, prop: str, message: str
) -> None:
    """Refused before Spark starts: one line, exit 2, the value never echoed."""
    argv = ingest_topic_argv(tmp_path, "x", "127.0.0.1:1", "t", master="local[1]")
    done = subprocess.run(
        [*argv, "--kafka-property", prop],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"Error: {message}"
    assert PASSWORD not in done.stderr
    assert not (tmp_path / "catalog.db").exists()
