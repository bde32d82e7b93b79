"""`ktc thriftserver` serves the lakehouse over JDBC: beeline (the bundled Hive JDBC
client) reads rows that `ktc ingest` wrote, through the same metastore."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_landing
from lakehouse_otlp import make_context, sample_metrics_data

from exporters.lakehouse.cli import spark_home, thriftserver_argv
from exporters.lakehouse.session import LakehouseConfig

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_thriftserver_argv_uses_the_lakehouse_catalog(tmp_path: Path) -> None:
    config = LakehouseConfig(tmp_path / "lake")
    argv = thriftserver_argv(config, 10001, "127.0.0.1")
    assert argv[0].endswith("bin/spark-submit")
    assert (
        argv[argv.index("--class") + 1]
        == "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
    )
    assert "spark-internal" in argv
    assert (
        f"spark.sql.warehouse.dir={(tmp_path / 'lake' / 'warehouse').resolve()}" in argv
    )
    assert "hive.server2.thrift.port=10001" in argv


def test_beeline_queries_what_ingest_wrote(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_landing(
        data / "landing" / "node-1",
        [
            (
                make_context(client_id="jdbc-client"),
                sample_metrics_data(1).SerializeToString(),
            )
        ],
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    base = [sys.executable, "-m", "exporters.lakehouse"]
    ingest = subprocess.run(
        [*base, "ingest", "--once", "--data-dir", str(data), "--master", "local[1]"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ingest.returncode == 0, ingest.stderr[-2000:]

    port = _free_port()
    log = (tmp_path / "thriftserver.log").open(
        "w"
    )  # a file: an unread pipe could fill up
    server = subprocess.Popen(
        [
            *base,
            "thriftserver",
            "--data-dir",
            str(data),
            "--master",
            "local[1]",
            "--port",
            str(port),
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, (tmp_path / "thriftserver.log").read_text()[
                -2000:
            ]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, (
                    "the Thrift server did not listen in time"
                )
                time.sleep(1)
        beeline = subprocess.run(
            [
                str(spark_home() / "bin" / "beeline"),
                "-u",
                f"jdbc:hive2://127.0.0.1:{port}/ktc",
                "-n",
                "analyst",
                "--outputformat=csv2",
                "--silent=true",
                "-e",
                "SELECT client_id, push_count FROM clients",
            ],
            env=dict(env, SPARK_HOME=str(spark_home())),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert beeline.returncode == 0, beeline.stderr[-2000:]
        # beeline echoes its prompt before the header: "0: jdbc:hive2://...> client_id,..."
        lines = [line for line in beeline.stdout.splitlines() if line.strip()]
        assert (
            lines[-2].endswith("client_id,push_count") and lines[-1] == "jdbc-client,1"
        ), lines
        # Serving a query leaves no Java stack trace or warning in the server's output.
        served = (tmp_path / "thriftserver.log").read_text()
        for noise in ("Exception", "\tat ", "WARN"):
            assert noise not in served, served[-3000:]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
