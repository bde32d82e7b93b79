"""A PySpark session built from exactly the ``--conf`` lines docs/lakehouse.md gives
``spark-sql`` users, answering one count per line read from stdin.

The test of long-lived readers (test_lakehouse_readers.py) runs it as an analyst's
notebook would be: one session, kept open, asked again and again.  Reading the settings
from the document itself means the documented configuration is what is tested.

    python docs_pyspark_reader.py LAKE_DIR DATABASE
    stdin:  one SQL statement per line    stdout: {"value": <first column of first row>}
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from exporters.lakehouse.session import lake_jars  # noqa: E402

# The placeholder the document writes for the reader's own lake directory.
DOCS_LAKE_PLACEHOLDER = "/…/data/lakehouse"


def documented_spark_sql_settings(lake_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The jar names and the ``--conf`` settings of docs/lakehouse.md's spark-sql example,
    with the placeholder lake directory replaced by ``lake_dir``."""
    text = (REPO / "docs" / "lakehouse.md").read_text(encoding="utf-8")
    block = re.search(r"```\n(spark-sql --jars .*?)```", text, re.DOTALL)
    if block is None:
        raise SystemExit("docs/lakehouse.md has no spark-sql example")
    command = block.group(1).replace("\\\n", " ")
    jars = re.search(r"--jars (\S+)", command)
    assert jars is not None
    settings = {}
    for key, value in re.findall(r"--conf (\S+?)=(\S+)", command):
        settings[key] = value.replace(DOCS_LAKE_PLACEHOLDER, str(lake_dir.resolve()))
    return jars.group(1).split(","), settings


def main() -> None:
    from pyspark.sql import SparkSession

    lake_dir, database = Path(sys.argv[1]), sys.argv[2]
    jar_names, settings = documented_spark_sql_settings(lake_dir)
    available = {jar.name: jar for jar in lake_jars()}
    jars = [str(available[name]) for name in jar_names]
    builder = (
        SparkSession.builder.appName("docs-pyspark-reader")
        .master("local[1]")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
    )
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    print(json.dumps({"ready": True}), flush=True)
    spark.sql(f"USE `{database}`")
    for line in sys.stdin:
        rows = spark.sql(line.strip()).collect()
        print(json.dumps({"value": rows[0][0] if rows else None}), flush=True)


if __name__ == "__main__":
    main()
