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
import os
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from exporters.lakehouse.catalog import ensure_catalog
from exporters.lakehouse.session import CACHE_ENABLED, CATALOG_NAME
from tests.lakehouse.conftest import ingest_once_argv, require_lake_jars, write_landing
from tests.lakehouse.kept_readers import (
    ANSWER_TIMEOUT_S,
    free_port,
    start_beeline,
    start_documented_pyspark,
    start_thriftserver,
)
from tests.lakehouse.kept_readers import (
    stop as stop_reader,
)
from tests.lakehouse.lakehouse_otlp import make_context, sample_metrics_data
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
DATABASE = "readers"
POLL_S = 5.0
FIRST, SECOND = 4, 5  # pushes landed before the readers open, and while they poll
# Polls of the control reader after the commit, all still at the first count: 15 s and
# more of the cache being read and kept (a fresh reader needs one poll).
STALE_POLLS = 3


@dataclasses.dataclass(frozen=True, slots=True)
class Poll:
    started: float  # time.monotonic(), comparable across this machine's processes
    count: int
    seconds: float  # the query's own time


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
        ingest_once_argv(lake, DATABASE, "--landing-dir", str(node)),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]


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
    cached = spark.newSession()
    cached.conf.set(f"spark.sql.catalog.{CATALOG_NAME}.{CACHE_ENABLED}", "true")

    started: list[subprocess.Popen[str]] = []
    try:
        pyspark_reader = start_documented_pyspark(
            lake, DATABASE, env, (tmp_path / "pyspark.log").open("w")
        )
        started.append(pyspark_reader.proc)
        port = free_port()
        lake_args = ["--lake-dir", str(lake), "--database", DATABASE]
        lake_args += ["--master", "local[1]"]
        server = start_thriftserver(
            lake_args, port, env, (tmp_path / "thriftserver.log").open("w")
        )
        started.append(server)
        beeline_reader = start_beeline(
            port, DATABASE, env, (tmp_path / "beeline.log").open("w")
        )
        started.append(beeline_reader.proc)

        table = f"{CATALOG_NAME}.`{DATABASE}`.`pushes`"
        readers: dict[str, Callable[[], int]] = {
            "open_session": lambda: spark.sql(
                f"SELECT count(*) FROM {table}"
            ).collect()[0][0],
            "documented PySpark": lambda: pyspark_reader.ask(
                "SELECT count(*) FROM pushes"
            ),
            "beeline": lambda: beeline_reader.ask(
                "SELECT 'answer', count(*) FROM pushes"
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
                    count = ask()
                    polls[name].append(Poll(begun, count, time.monotonic() - begun))
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
            stop_reader(proc)

    seen = {name: [p.count for p in polls[name]] for name in readers}
    # What reading uncached costs: the same count in the same JVM, cache off and on.
    for name in ("open_session", "cache left on"):
        print(
            f"{name}: a count over pushes took "
            f"{statistics.median(p.seconds for p in polls[name]) * 1000:.0f} ms median "
            f"over {len(polls[name])} polls"
        )
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
    assert spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0] == FIRST + SECOND
