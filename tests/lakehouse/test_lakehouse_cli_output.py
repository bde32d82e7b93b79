"""What `ktc ingest` and `ktc sql` print on stderr, as real processes on a real local Spark
with its real Iceberg catalog: nothing from Java (no exception, no stack frame, no warning),
also on the second run, when the namespace already exists; `ingest --once` with nothing new
says so.  And without the lakehouse extra
they say how to install it, with exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.lakehouse.conftest import write_landing
from tests.lakehouse.lakehouse_otlp import make_context, sample_metrics_data

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[2]
# What a Java stack trace or a JVM/log4j warning leaves on stderr.
JAVA_NOISE = ("Exception", "\tat ", "WARN")


def ktc(*args: str, pythonpath: str = str(REPO)) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "collector.app.cli", *args],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=pythonpath),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.spark
def test_ingest_and_sql_print_nothing_from_java_on_a_first_and_a_second_run(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    lake = ("--data-dir", str(data), "--master", "local[1]")
    for run in (
        1,
        2,
    ):  # the second run finds the database, its tables and views in place
        write_landing(
            data / "landing" / "node-1",
            [
                (
                    make_context(client_id="quiet"),
                    sample_metrics_data(run).SerializeToString(),
                )
            ],
        )
        ingest = ktc("ingest", "--once", *lake)
        assert ingest.returncode == 0, ingest.stderr[-3000:]
        sql = ktc(
            "sql",
            "SELECT count(*) AS pushes FROM pushes",
            "--format",
            "csv",
            "--engine",
            "spark",
            *lake,
        )
        assert sql.returncode == 0, sql.stderr[-3000:]
        assert sql.stdout.splitlines() == ["pushes", str(run)]
        assert sql.stderr == ""
        for command, result in (("ingest", ingest), ("sql", sql)):
            for noise in JAVA_NOISE:
                assert noise not in result.stderr, (
                    f"run {run}, ktc {command}:\n{result.stderr}"
                )
    # What the ingest prints is its own log and progress: a line per batch.
    lines = ingest.stderr.splitlines()
    assert [
        line.split(" INFO ")[1].split(":")[0] for line in lines if " INFO " in line
    ] == ["exporters.lakehouse.ingest_loop"]
    assert any(
        line.startswith("ktc ingest: batch 1: 1 records (node-1 [1, 2))")
        for line in lines
    )
    again = ktc("ingest", "--once", *lake)
    assert again.returncode == 0 and again.stdout == ""
    assert (
        again.stderr.splitlines()[-1]
        == "ktc ingest: nothing new in the landing logs (committed: node-1 at 2)"
    )


def test_lakehouse_commands_without_the_extra_say_how_to_install_it(
    tmp_path: Path,
) -> None:
    # sitecustomize runs at interpreter start: from then on pyspark cannot be found or
    # imported, as in an installation without the lakehouse extra.
    (tmp_path / "sitecustomize.py").write_text(
        textwrap.dedent("""\
        import sys

        class NoPyspark:
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] == "pyspark":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NoPyspark())
    """)
    )
    pythonpath = os.pathsep.join([str(tmp_path), str(REPO)])
    for args in (
        ("ingest", "--once", "--data-dir", str(tmp_path)),
        ("sql", "SELECT 1"),
        ("report", "--since", "24h"),
        ("thriftserver", "--port", "0"),
        ("lake", "compact"),
    ):
        result = ktc(*args, pythonpath=pythonpath)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr == (
            f"ktc {args[0]}: needs the lakehouse extra (pyspark not installed): "
            "pip install 'kafka-telemetry-collector[lakehouse]'\n"
        )
        assert result.stdout == ""
    # The rest of ktc works without it.
    assert (
        ktc(
            "landing", "dump", "--data-dir", str(tmp_path), pythonpath=pythonpath
        ).returncode
        == 0
    )


@pytest.mark.spark
def test_nothing_new_and_an_unknown_table_are_one_line_each(tmp_path: Path) -> None:
    """docs/operations.md, Exit codes: `ingest --once` with nothing to do says so (exit 0);
    `ktc sql` on a table that does not exist is Spark's one line, without its hints and
    plan (exit 1)."""
    lake = ("--data-dir", str(tmp_path / "data"), "--master", "local[1]")
    ingest = ktc("ingest", "--once", *lake)
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    assert ingest.stdout == ""
    assert ingest.stderr == "ktc ingest: nothing new in the landing logs\n"
    sql = ktc("sql", "SELECT * FROM no_such_table", *lake)
    assert sql.returncode == 1, sql.stderr[-3000:]
    assert sql.stdout == ""
    assert sql.stderr.startswith("ktc: [TABLE_OR_VIEW_NOT_FOUND] The table or view ")
    assert sql.stderr.count("\n") == 1, sql.stderr


@pytest.mark.spark
def test_ctrl_c_while_spark_starts_is_one_line_and_leaves_no_jvm(
    tmp_path: Path,
) -> None:
    """Ctrl-C reaches the whole foreground process group; pyspark's JVM ignores it (its
    launcher sets SIGINT to SIG_IGN) and would outlive an interrupted start."""
    import signal

    import psutil

    from tests.waiting import eventually_sync

    process = subprocess.Popen(
        [sys.executable, "-m", "collector.app.cli", "ingest", "--once"]
        + ["--data-dir", str(tmp_path / "data"), "--master", "local[1]"],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell's foreground job
    )
    try:
        me = psutil.Process(process.pid)

        def is_java(child: psutil.Process) -> bool:
            # spark-submit's launcher scripts run short-lived helpers (uname, dirname...);
            # one may exit between listing the children and reading its name.
            try:
                return child.name() == "java"
            except psutil.NoSuchProcess:
                return False

        def jvm() -> list[psutil.Process]:
            return [p for p in me.children(recursive=True) if is_java(p)]

        eventually_sync(jvm, timeout_s=120, what="Spark's JVM to start")
        started = jvm()
        os.killpg(process.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, err
    assert err == "ktc: interrupted\n"
    assert out == ""
    gone, alive = psutil.wait_procs(started, timeout=30)
    assert alive == [], alive
