"""Readers beside writers: two `ktc ingest` processes (two collector nodes' landing logs)
append to the same Iceberg tables at once while `ktc thriftserver` serves beeline (the
bundled Hive JDBC client) and `ktc sql` reads; every reader sees whole batches only, and
in the end every record is in every table exactly once."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from exporters.lakehouse.catalog import ensure_catalog
from exporters.lakehouse.cli.thriftserver import spark_home, thriftserver_argv
from exporters.lakehouse.session import LakehouseConfig
from tests.lakehouse.conftest import require_lake_jars, write_landing
from tests.lakehouse.lakehouse_otlp import make_context, sample_metrics_data

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_thriftserver_argv_uses_the_lakehouse_catalog(tmp_path: Path) -> None:
    require_lake_jars()
    config = LakehouseConfig(tmp_path / "lake")
    argv = thriftserver_argv(config, 10001, "127.0.0.1")
    assert argv[0].endswith("bin/spark-submit")
    assert (
        argv[argv.index("--class") + 1]
        == "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
    )
    assert "spark-internal" in argv
    warehouse = (tmp_path / "lake" / "warehouse").resolve().as_uri()
    assert f"spark.sql.catalog.lake.warehouse={warehouse}" in argv
    assert "spark.sql.defaultCatalog=lake" in argv
    # Hive's session catalog (unused) in memory: no Derby files, any number of servers.
    assert any(
        a.startswith("spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:memory:")
        for a in argv
    )
    assert "hive.server2.thrift.port=10001" in argv


PUSHES_PER_NODE = 6
BATCH = 2  # records per batch: a reader must only ever see a multiple of it per node
GAUGE_POINTS_PER_PUSH = 2  # sample_metrics_data
DATABASE = "concurrent"
# Per table and landing directory: rows, distinct offsets, the largest offset.
OBSERVE = " UNION ALL ".join(
    f"SELECT '{table}' AS t, landing_node, count(*) AS n, count(DISTINCT landing_offset) AS d, "
    f"max(landing_offset) AS m FROM {table} GROUP BY landing_node"
    for table in ("pushes", "metrics_gauge")
)


def _check(observation: list[tuple[str, str, int, int, int]]) -> None:
    """Whole batches only, none lost or doubled: the offsets are 0..m, once each (rows per
    push times distinct offsets), and a multiple of the batch size."""
    for table, _node, n, d, m in observation:
        per_push = 1 if table == "pushes" else GAUGE_POINTS_PER_PUSH
        assert d == m + 1 and n == per_push * d, observation
        assert d % BATCH == 0 and d <= PUSHES_PER_NODE, observation


def _wait_listening(server: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + 300
    while True:
        assert server.poll() is None, log.read_text()[-2000:]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, (
                "the Thrift server did not listen in time"
            )
            time.sleep(1)


@pytest.mark.timeout(
    1500
)  # four JVMs at once (two ingests, the server, beeline) on 2 cores
def test_two_ingests_write_the_same_tables_while_beeline_and_sql_read(
    spark, spark_lake, tmp_path: Path
) -> None:
    lake = spark_lake[1]
    ensure_catalog(spark, DATABASE)
    data = tmp_path / "data"
    nodes = [data / "landing" / "node-1", data / "landing" / "node-2"]
    for n, node in enumerate(nodes):
        write_landing(
            node,
            [
                (
                    make_context(client_id=f"client-{n}-{i}"),
                    sample_metrics_data(i).SerializeToString(),
                )
                for i in range(PUSHES_PER_NODE)
            ],
        )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    base = [sys.executable, "-m", "exporters.lakehouse"]
    lake_args = [
        "--lake-dir",
        str(lake),
        "--database",
        DATABASE,
        "--master",
        "local[1]",
    ]
    lake_args += ["--conf", "spark.sql.shuffle.partitions=1"]

    port = _free_port()
    server_log = tmp_path / "thriftserver.log"
    with server_log.open("w") as log:  # a file: an unread pipe could fill up
        server = subprocess.Popen(
            [*base, "thriftserver", *lake_args, "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    observations: dict[str, list] = {"beeline": [], "sql": []}
    errors: list[str] = []
    try:
        _wait_listening(server, port, server_log)
        ingests = [
            subprocess.Popen(
                [
                    *base,
                    "ingest",
                    "--once",
                    "--landing-dir",
                    str(node),
                    "--max-records-per-batch",
                    str(BATCH),
                    *lake_args,
                ],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for node in nodes
        ]
        done = threading.Event()

        def beeline_reader() -> None:
            while not done.is_set():
                run = subprocess.run(
                    [
                        str(spark_home() / "bin" / "beeline"),
                        "-u",
                        f"jdbc:hive2://127.0.0.1:{port}/{DATABASE}",
                        "-n",
                        "analyst",
                        "--outputformat=csv2",
                        "--showHeader=false",
                        "--silent=true",
                        "-e",
                        OBSERVE,
                    ],
                    env=dict(env, SPARK_HOME=str(spark_home())),
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=False,
                )
                if run.returncode != 0:
                    errors.append(run.stderr[-2000:])
                    return
                rows = []
                for line in run.stdout.splitlines():
                    parts = line.split(",")
                    if len(parts) == 5 and parts[0] in ("pushes", "metrics_gauge"):
                        rows.append((parts[0], parts[1], *map(int, parts[2:])))
                observations["beeline"].append(rows)
                done.wait(2)  # leave the writers some of the machine's two cores

        def sql_reader() -> None:
            while not done.is_set():
                run = subprocess.run(
                    [
                        *base,
                        "sql",
                        OBSERVE,
                        "--format",
                        "json",
                        "--engine",
                        "duckdb",
                        *lake_args,
                    ],
                    cwd=REPO,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=False,
                )
                if run.returncode != 0:
                    errors.append(run.stderr[-2000:])
                    return
                observations["sql"].append(
                    [
                        tuple(json.loads(line).values())
                        for line in run.stdout.splitlines()
                    ]
                )

        readers = [
            threading.Thread(target=beeline_reader),
            threading.Thread(target=sql_reader),
        ]
        for reader in readers:
            reader.start()
        try:
            outcomes = [ingest.communicate(timeout=1200) for ingest in ingests]
        finally:
            done.set()
            for reader in readers:
                reader.join(timeout=300)
        for ingest, (_, stderr) in zip(ingests, outcomes, strict=True):
            assert ingest.returncode == 0, stderr[-3000:]
        assert not errors, errors
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()

    for reader_name, seen in observations.items():
        assert seen, f"{reader_name} never read"
        for observation in seen:
            _check(observation)
    final = spark.sql(OBSERVE.replace("FROM ", f"FROM lake.{DATABASE}.")).collect()
    assert sorted(tuple(r) for r in final) == sorted(
        (
            table,
            node.name,
            per_push * PUSHES_PER_NODE,
            PUSHES_PER_NODE,
            PUSHES_PER_NODE - 1,
        )
        for table, per_push in (("pushes", 1), ("metrics_gauge", GAUGE_POINTS_PER_PUSH))
        for node in nodes
    )
    # Serving queries beside the writers left no Java stack trace in the server's output.
    served = server_log.read_text()
    for noise in ("Exception", "\tat "):
        assert noise not in served, served[-3000:]
