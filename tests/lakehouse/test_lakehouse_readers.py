"""Long-lived readers see each commit of another process at their next query.

Four readers stay open while a separate `ktc ingest` process commits, each asked for the
`pushes` count every 5 s, as a dashboard or an analyst's loop would:

=====================  ==========================================================  =======
reader                 how it is opened                                            sees it
=====================  ==========================================================  =======
open_session           the package's own session (this test session's fixture)     next query
documented PySpark     a PySpark session built from docs/lakehouse.md's --conf     next query
beeline                one kept connection to `ktc thriftserver`                   next query
cache left on          open_session's settings with Iceberg's table cache on       never, while polled
=====================  ==========================================================  =======

The last row is the control: it shows that the test can tell a stale reader from a fresh
one (Iceberg's cache expires an entry 30 s after its last access, so a reader polled every
5 s keeps its first state).  docs/lakehouse.md, "What a reader sees, and when".
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import require_lake_jars, write_landing
from lakehouse_otlp import make_context, sample_metrics_data
from waiting import eventually_sync

from exporters.lakehouse.catalog import ensure_catalog
from exporters.lakehouse.cli import spark_home
from exporters.lakehouse.session import CACHE_ENABLED, CATALOG_NAME

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DATABASE = "readers"
POLL_S = 5.0
FIRST, SECOND = 4, 5  # pushes landed before the readers open, and while they poll
# Polls of the control reader after the commit, all still at the first count: 15 s and
# more of the cache being read and kept (a fresh reader needs one poll).
STALE_POLLS = 3
ANSWER_TIMEOUT_S = 180.0  # one poll's answer on a loaded 2-core machine, at most


@dataclasses.dataclass(frozen=True, slots=True)
class Poll:
    started: float  # time.monotonic(), comparable across this machine's processes
    count: int


class LineReader:
    """A reader in another process, asked through its stdin, answering on its stdout."""

    def __init__(self, proc: subprocess.Popen[str], parse: Callable[[str], int | None]):
        self.proc = proc
        self._parse = parse
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _line(self) -> str:
        try:
            line = self._lines.get(timeout=ANSWER_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError("a reader did not answer in time") from None
        if line is None:
            raise AssertionError(f"a reader exited ({self.proc.wait()})")
        return line

    def wait_for(self, text: str) -> None:
        while text not in self._line():
            pass

    def answer(self) -> int:
        while (value := self._parse(self._line())) is None:
            pass
        return value

    def ask(self, text: str) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self.answer()


def _pyspark_count(line: str) -> int | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message.get("count") if isinstance(message, dict) else None


def _beeline_count(line: str) -> int | None:
    # csv2 without a header: the one row of "SELECT 'poll', count(*) ...".
    tag, _, value = line.strip().partition(",")
    return int(value) if tag == "poll" and value.isdigit() else None


def _landing(node: Path, first: int, count: int) -> None:
    write_landing(
        node,
        [
            (
                make_context(client_id=f"reader-{i}"),
                sample_metrics_data(i).SerializeToString(),
            )
            for i in range(first, first + count)
        ],
    )


def _ingest_once(node: Path, lake: Path, env: dict[str, str]) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporters.lakehouse",
            "ingest",
            "--once",
            "--landing-dir",
            str(node),
            "--lake-dir",
            str(lake),
            "--database",
            DATABASE,
            "--master",
            "local[1]",
            "--conf",
            "spark.sql.shuffle.partitions=1",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_long_lived_readers_see_another_process_commit_at_their_next_query(
    spark, spark_lake, tmp_path: Path
) -> None:
    require_lake_jars()
    lake = spark_lake[1]
    ensure_catalog(spark, DATABASE)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    node = tmp_path / "data" / "landing" / "node-1"
    _landing(node, 0, FIRST)
    _ingest_once(node, lake, env)

    # The control: today's Spark default, Iceberg's table cache on, in a session of its
    # own (catalogs are per session, so it gets its own catalog instance and cache).
    cached = spark.newSession()  # type: ignore[attr-defined]
    cached.conf.set(f"spark.sql.catalog.{CATALOG_NAME}.{CACHE_ENABLED}", "true")

    started: list[subprocess.Popen[str]] = []
    try:
        documented = subprocess.Popen(
            [sys.executable, str(HERE / "docs_pyspark_reader.py"), str(lake), DATABASE],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(tmp_path / "pyspark.log").open("w"),
            text=True,
            start_new_session=True,
        )
        started.append(documented)
        port = _free_port()
        server_log = tmp_path / "thriftserver.log"
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporters.lakehouse",
                "thriftserver",
                "--lake-dir",
                str(lake),
                "--database",
                DATABASE,
                "--master",
                "local[1]",
                "--port",
                str(port),
            ],
            cwd=REPO,
            env=env,
            stdout=server_log.open("w"),
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        started.append(server)
        pyspark_reader = LineReader(documented, _pyspark_count)
        pyspark_reader.wait_for('"ready"')
        _wait_listening(server, port, server_log)
        beeline = subprocess.Popen(
            [
                str(spark_home() / "bin" / "beeline"),
                "-u",
                f"jdbc:hive2://127.0.0.1:{port}/{DATABASE}",
                "-n",
                "analyst",
                "--outputformat=csv2",
                "--showHeader=false",
                "--silent=true",
            ],
            env=dict(env, SPARK_HOME=str(spark_home())),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=(tmp_path / "beeline.log").open("w"),
            text=True,
            start_new_session=True,
        )
        started.append(beeline)
        beeline_reader = LineReader(beeline, _beeline_count)

        table = f"{CATALOG_NAME}.`{DATABASE}`.`pushes`"
        readers: dict[str, Callable[[], int]] = {
            "open_session": lambda: spark.sql(
                f"SELECT count(*) FROM {table}"
            ).collect()[0][0],
            "documented PySpark": lambda: pyspark_reader.ask("pushes"),
            "beeline": lambda: beeline_reader.ask(
                "SELECT 'poll', count(*) FROM pushes;"
            ),
            "cache left on": lambda: cached.sql(
                f"SELECT count(*) FROM {table}"
            ).collect()[0][0],
        }
        polls: dict[str, list[Poll]] = {name: [] for name in readers}
        stop = threading.Event()
        failures: list[BaseException] = []

        def poll(name: str, ask: Callable[[], int]) -> None:
            try:
                while not stop.is_set():
                    begun = time.monotonic()
                    polls[name].append(Poll(begun, ask()))
                    stop.wait(max(0.0, POLL_S - (time.monotonic() - begun)))
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)

        threads = [
            threading.Thread(target=poll, args=item, daemon=True)
            for item in readers.items()
        ]
        for thread in threads:
            thread.start()
        try:
            # Each reader has answered with the first count (and loaded the table) ...
            eventually_sync(
                lambda: all(polls[n] for n in readers) or failures,
                timeout_s=900,
                what="every reader's first answer",
            )
            _landing(node, FIRST, SECOND)
            _ingest_once(node, lake, env)  # ... then another process commits.
            committed = time.monotonic()

            def after(name: str) -> list[Poll]:
                return [p for p in polls[name] if p.started >= committed]

            eventually_sync(
                lambda: failures or all(len(after(n)) >= STALE_POLLS for n in readers),
                timeout_s=900,
                what=f"{STALE_POLLS} polls of every reader after the commit",
            )
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=ANSWER_TIMEOUT_S)
        assert not failures, failures
    finally:
        for proc in started:
            _stop(proc)

    seen = {name: [p.count for p in polls[name]] for name in readers}
    for name in readers:
        assert polls[name][0].count == FIRST, seen
    for name in ("open_session", "documented PySpark", "beeline"):
        # Every query that started after the commit returned (its first one included).
        assert [p.count for p in after(name)] == [FIRST + SECOND] * len(after(name)), (
            name,
            seen,
        )
    # The control keeps the state it loaded first while it keeps being read.
    assert [p.count for p in after("cache left on")] == [FIRST] * len(
        after("cache left on")
    ), seen
    # A query of the control's catalog in a new session sees the commit.
    assert spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0] == FIRST + SECOND


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(server: subprocess.Popen[str], port: int, log: Path) -> None:
    import socket

    def listening() -> bool:
        assert server.poll() is None, log.read_text()[-2000:]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    eventually_sync(listening, timeout_s=300, what="the Thrift server listening")
