"""Fixtures of the lakehouse tests: one local Spark for the whole session, landing logs."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from exporters.context import TelemetryContext
from exporters.lakehouse.session import (
    LakehouseConfig,
    LakeLibsMissing,
    lake_jars,
    open_session,
)
from exporters.landing import LandingLog, LandingOptions

# Extra Spark settings of the tests' own session, ``KEY=VALUE`` separated by spaces.
# ``KTC_TEST_SPARK_CONF=spark.sql.catalog.lake.cache-enabled=true`` turns Iceberg's table
# cache back on: the long-lived-reader tests (test_lakehouse_readers.py,
# test_lakehouse_exactly_once.py) must then fail.
_EXTRA_CONF_ENV = "KTC_TEST_SPARK_CONF"


def _extra_conf() -> dict[str, str]:
    pairs = os.environ.get(_EXTRA_CONF_ENV, "").split()
    return dict(pair.split("=", 1) for pair in pairs)


# Two cores in CI: one task thread, one shuffle partition, no UI.
SPARK_TEST_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    **_extra_conf(),
}
_databases = itertools.count()


def require_lake_jars() -> None:
    """Skip (outside CI) when `make lake-libs` has not fetched Iceberg's jars."""
    try:
        lake_jars()
    except LakeLibsMissing as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))


def require_topic_ingest() -> None:
    """Skip (outside CI; fail in CI) unless the topic ingest's parts are here: Iceberg's
    jars, Spark's Kafka source (`make spark-kafka-libs`) and Kafka 4.4.0."""
    from exporters.lakehouse.topic_source import (
        KafkaSourceJarsMissing,
        kafka_source_jars,
    )
    from tests.lakehouse.topic_cluster import missing_prerequisites

    require_lake_jars()
    try:
        kafka_source_jars()
    except KafkaSourceJarsMissing as exc:
        reason: str | None = str(exc)
    else:
        reason = missing_prerequisites()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def spark_lake(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[object, Path]]:
    """(SparkSession, lake dir): the Iceberg JDBC catalog on SQLite in a temp directory,
    shared by every test (each in its own namespace) and by the processes they start."""
    require_lake_jars()
    lake = tmp_path_factory.mktemp("lake")
    config = LakehouseConfig(lake, master="local[1]", extra_conf=SPARK_TEST_CONF)
    spark = open_session(config, "ktc-lakehouse-tests")
    # The namespace tests go back to after USE-ing their own.
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.default")
    yield spark, lake
    spark.stop()


@pytest.fixture
def spark(spark_lake: tuple[object, Path]) -> object:
    return spark_lake[0]


@pytest.fixture
def lake_config(
    spark_lake: tuple[object, Path], request: pytest.FixtureRequest
) -> LakehouseConfig:
    """A fresh namespace per test, in the session's lake."""
    name = f"t{next(_databases)}_{request.node.name.split('[')[0].removeprefix('test_')[:40]}"
    return LakehouseConfig(
        spark_lake[1],
        database=name.lower(),
        master="local[1]",
        extra_conf=SPARK_TEST_CONF,
    )


def write_landing(
    directory: Path, pushes: Sequence[tuple[TelemetryContext, bytes]]
) -> list[int]:
    """Append (context, payload) pairs with the real landing log; returns the offsets."""
    log = LandingLog(directory, LandingOptions(fsync="never"), housekeeping=False)
    try:
        return [log.append(context, payload) for context, payload in pushes]
    finally:
        log.close()


def ingest_once_argv(lake_dir: Path, database: str, *args: str) -> list[str]:
    """`ktc ingest --once` on one local core of this interpreter, into a test lake: the
    processes the fault and reader tests start (and kill)."""
    return [
        sys.executable,
        "-m",
        "exporters.lakehouse",
        "ingest",
        "--once",
        *args,
        "--lake-dir",
        str(lake_dir),
        "--database",
        database,
        "--master",
        "local[1]",
        "--conf",
        "spark.sql.shuffle.partitions=1",
    ]
