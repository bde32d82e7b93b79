"""Where the lakehouse lives and the Spark configuration every lakehouse process shares.

One :class:`LakehouseConfig` gives the ingest job, ``ktc sql``, maintenance and the
Thrift server the same catalog: a Hive metastore (embedded Derby under
``<lake>/metastore_db`` unless ``--conf`` points it elsewhere) and the warehouse
``<lake>/warehouse``.  Any ``spark.*`` key passed through ``spark_conf`` wins over the
defaults, e.g. an external metastore::

    spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:postgresql://db/metastore
    spark.hadoop.javax.jdo.option.ConnectionDriverName=org.postgresql.Driver
    spark.hadoop.javax.jdo.option.ConnectionUserName=hive
    spark.driver.extraClassPath=/usr/share/java/postgresql.jar

Embedded Derby allows one JVM at a time: while ``ktc ingest`` runs, other processes
cannot open that metastore.  ``ktc sql`` then reads the warehouse files directly
(:func:`open_reader_session`); the Thrift server needs an external metastore to run
beside a running ingest (docs/lakehouse.md).
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from exporters.lakehouse.jvm_stderr import launch_spark_gateway
from exporters.lakehouse.schema import DEFAULT_DATABASE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "QUIET_LOG4J2",
    "LakehouseConfig",
    "derby_in_use",
    "open_session",
    "spark_conf",
]

# Spark's default log4j2 setup prints INFO/WARN lines to stderr; analysts running
# `ktc sql` want results only.  Written to <lake>/conf at startup (not shipped as
# package data so it also works from a source checkout on shared storage).
QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
# PySpark counts as a shell: Spark lowers the root level to this logger's level and
# announces it ("Setting default log level...") unless the two agree.
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.pygateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.pygateway.level = error
"""


@dataclasses.dataclass(frozen=True, slots=True)
class LakehouseConfig:
    """Paths and Spark settings of one lakehouse."""

    lake_dir: Path  # <data-dir>/lakehouse: warehouse, metastore_db, _ingest state
    database: str = DEFAULT_DATABASE
    master: str = "local[*]"
    extra_conf: Mapping[str, str] = dataclasses.field(default_factory=dict)
    log_level: str = "ERROR"

    @classmethod
    def for_data_dir(cls, data_dir: Path, **kwargs: object) -> LakehouseConfig:
        return cls(lake_dir=Path(data_dir) / "lakehouse", **kwargs)  # type: ignore[arg-type]

    @property
    def warehouse_dir(self) -> Path:
        return self.lake_dir / "warehouse"

    @property
    def metastore_dir(self) -> Path:
        return self.lake_dir / "metastore_db"

    @property
    def state_dir(self) -> Path:
        """The ingest's exactly-once journal and writer lock of this database (ingest.py)."""
        return self.lake_dir / "_ingest" / self.database

    @property
    def uses_embedded_derby(self) -> bool:
        url = self.extra_conf.get("spark.hadoop.javax.jdo.option.ConnectionURL")
        return url is None or url.startswith(("jdbc:derby:;", "jdbc:derby:/"))

    def table_location(self, table_name: str) -> Path:
        """Where Spark puts a managed table of this database (Hive's default layout)."""
        return self.warehouse_dir / f"{self.database}.db" / table_name


def spark_conf(config: LakehouseConfig) -> dict[str, str]:
    """Every Spark setting of a lakehouse session; ``extra_conf`` wins, except that
    ``spark.driver.extraJavaOptions`` is appended to ours."""
    lake = config.lake_dir.resolve()
    log4j = lake / "conf" / "log4j2.properties"
    conf = {
        "spark.master": config.master,
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(lake / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={lake / 'metastore_db'};create=true"
        ),
        # derby.log next to the metastore, quiet logging from the first line on.
        "spark.driver.extraJavaOptions": (
            f"-Dderby.system.home={lake} -Dlog4j2.configurationFile=file:{log4j}"
        ),
        "spark.sql.session.timeZone": "UTC",
        # Replaying a batch replaces exactly the partitions it writes (ingest.py).
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.parquet.compression.codec": "zstd",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        # A long-lived reader (the Thrift server) re-lists files at least this often.
        "spark.sql.metadataCacheTTLSeconds": "30",
    }
    for key, value in config.extra_conf.items():
        if key == "spark.driver.extraJavaOptions":
            # Added to ours: losing derby.system.home would scatter derby.log files.
            conf[key] = f"{conf[key]} {value}"
        else:
            conf[key] = value
    return conf


def _write_log_config(config: LakehouseConfig) -> None:
    conf_dir = config.lake_dir / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    path = conf_dir / "log4j2.properties"
    if not path.exists() or path.read_text() != QUIET_LOG4J2:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(QUIET_LOG4J2)
        os.replace(tmp, path)


def open_session(
    config: LakehouseConfig, app_name: str, *, hive: bool = True
) -> SparkSession:
    """A SparkSession on this lakehouse's catalog.

    ``hive=False`` gives a session with Spark's in-memory catalog (no metastore), used
    to read the warehouse files while another JVM holds the embedded Derby metastore.
    """
    from pyspark.sql import SparkSession

    config.lake_dir.mkdir(parents=True, exist_ok=True)
    _write_log_config(config)
    conf = spark_conf(config)
    if not hive:
        conf["spark.sql.catalogImplementation"] = "in-memory"
        # Partitions are discovered from the directory layout, not a metastore.
        conf["spark.sql.hive.manageFilesourcePartitions"] = "false"
    launch_spark_gateway({**conf, "spark.app.name": app_name})
    builder = SparkSession.builder.appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():
        # pyspark warns about pandas 3 on import of its testing utils; we don't use pandas.
        warnings.simplefilter("ignore", FutureWarning)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(config.log_level)
    return spark


def derby_in_use(config: LakehouseConfig) -> bool:
    """True if another JVM has booted this lakehouse's embedded Derby metastore.

    Derby holds an exclusive Java FileLock (an fcntl lock on Linux) on ``dbex.lck``
    while a JVM has the database booted; a stale ``db.lck`` left by a killed process
    has no such lock, so probing the lock is exact where checking the file is not.
    """
    if not config.uses_embedded_derby:
        return False
    lock_file = config.metastore_dir / "dbex.lck"
    try:
        fd = os.open(lock_file, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
