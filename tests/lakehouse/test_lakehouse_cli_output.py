"""What `ktc ingest` and `ktc sql` print on stderr, as real processes on a real local Spark
with its real Hive metastore: nothing from Java (no exception, no stack frame, no warning),
also on the second run, when the database already exists.  And without the lakehouse extra
they say how to install it, with exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import write_landing
from lakehouse_otlp import make_context, sample_metrics_data

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
            "sql", "SELECT count(*) AS pushes FROM pushes", "--format", "csv", *lake
        )
        assert sql.returncode == 0, sql.stderr[-3000:]
        assert sql.stdout.splitlines() == ["pushes", str(run)]
        for command, result in (("ingest", ingest), ("sql", sql)):
            for noise in JAVA_NOISE:
                assert noise not in result.stderr, (
                    f"run {run}, ktc {command}:\n{result.stderr}"
                )
    # What the ingest prints is its own log: one line per batch.
    assert [
        line.split(" INFO ")[1].split(":")[0] for line in ingest.stderr.splitlines()
    ] == ["exporters.lakehouse.ingest"]


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
