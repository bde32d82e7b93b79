"""Readers that stay open between queries, in processes of their own: a PySpark session
built from the documentation's settings (docs_pyspark_reader.py) and beeline on one kept
connection to `ktc thriftserver`.  Shared by test_lakehouse_readers.py and
tests/perf/bench_freshness.py.

Each is asked through its stdin and answers on its stdout, one statement at a time; the
answer is the first column of the statement's first row, an integer.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from exporters.lakehouse.cli.thriftserver import spark_home
from tests.waiting import eventually_sync

__all__ = [
    "ANSWER_TIMEOUT_S",
    "LineReader",
    "free_port",
    "start_beeline",
    "start_documented_pyspark",
    "start_thriftserver",
    "stop",
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ANSWER_TIMEOUT_S = 300.0  # one answer on a loaded 2-core machine, at most
BEELINE_TAG = "answer"  # beeline statements select it first: `SELECT 'answer', ...`


class LineReader:
    """A reader process asked through its stdin, answering on its stdout."""

    def __init__(
        self,
        proc: subprocess.Popen[str],
        parse: Callable[[str], int | None],
        terminator: str = "",
    ) -> None:
        self.proc = proc
        self._parse = parse
        self._terminator = terminator  # what ends a statement for this reader
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

    def ask(self, statement: str) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(statement + self._terminator + "\n")
        self.proc.stdin.flush()
        return self.answer()


def _pyspark_value(line: str) -> int | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or "value" not in message:
        return None
    return int(message["value"])


def _beeline_value(line: str) -> int | None:
    # csv2 without a header: the row of "SELECT 'answer', <integer> ...".
    tag, _, value = line.strip().partition(",")
    return int(value) if tag == BEELINE_TAG and value.isdigit() else None


def start_documented_pyspark(
    lake: Path, database: str, env: dict[str, str], log: IO[str]
) -> LineReader:
    """A PySpark session with the --conf lines docs/lakehouse.md gives, once ready."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "docs_pyspark_reader.py"), str(lake), database],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        start_new_session=True,
    )
    reader = LineReader(proc, _pyspark_value)
    reader.wait_for('"ready"')
    return reader


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_thriftserver(
    lake_args: list[str], port: int, env: dict[str, str], log: IO[str]
) -> subprocess.Popen[str]:
    """`ktc thriftserver`, once it listens on ``port``."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporters.lakehouse",
            "thriftserver",
            *lake_args,
            "--port",
            str(port),
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )

    def listening() -> bool:
        assert server.poll() is None, "the Thrift server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    eventually_sync(listening, timeout_s=300, what="the Thrift server listening")
    return server


def start_beeline(
    port: int, database: str, env: dict[str, str], log: IO[str]
) -> LineReader:
    """beeline on one connection kept open; ask it ``SELECT 'answer', <integer> ...``
    (beeline runs a statement once it reads its ``;``)."""
    proc = subprocess.Popen(
        [
            str(spark_home() / "bin" / "beeline"),
            "-u",
            f"jdbc:hive2://127.0.0.1:{port}/{database}",
            "-n",
            "analyst",
            "--outputformat=csv2",
            "--showHeader=false",
            "--silent=true",
        ],
        env=dict(env, SPARK_HOME=str(spark_home())),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        start_new_session=True,
    )
    return LineReader(proc, _beeline_value, terminator=";")


def stop(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, SIGKILL it after a minute."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
