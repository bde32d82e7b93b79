"""Where the lakehouse lives, which Iceberg catalog holds its tables, and the Spark
configuration every lakehouse process shares.

One :class:`LakehouseConfig` gives the ingest job, ``ktc sql``, maintenance and the
Thrift server the same Iceberg catalog, named ``lake`` and made Spark's default catalog,
so ``ktc.metrics`` means ``lake.ktc.metrics`` everywhere.  The catalog is chosen by one
URI (``--catalog``, env ``KTC_LAKE_CATALOG``):

==================================  ============================================
``--catalog``                       catalog
==================================  ============================================
(default)                           Iceberg JDBC catalog on the SQLite file
                                    ``<lake>/catalog.db`` in WAL mode: no server
``jdbc:sqlite:/path/catalog.db``    the same on another file
``jdbc:postgresql://host:5432/db``  Iceberg JDBC catalog on PostgreSQL (user and
                                    password as ``?user=..&password=..``)
``http(s)://host:8181``             an Iceberg REST catalog
==================================  ============================================

Table data and metadata files go under the warehouse ``<lake>/warehouse`` (any Hadoop
file system URI Spark reads works there too).  Any ``spark.*`` key passed through
``extra_conf`` wins over the defaults.  Spark needs Iceberg's runtime jar and the JDBC
drivers: ``make lake-libs`` puts them in ``KTC_LAKE_LIBS`` (default
``~/.cache/ktc/iceberg-1.12.0``), and :func:`spark_conf` puts them on the classpath.
"""

from __future__ import annotations

import dataclasses
import os
import urllib.parse
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from exporters.lakehouse.jvm_stderr import launch_spark_gateway
from exporters.lakehouse.schema import DEFAULT_DATABASE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "CACHE_ENABLED",
    "CATALOG_NAME",
    "QUIET_LOG4J2",
    "LakeLibsMissing",
    "LakehouseConfig",
    "OldLayout",
    "check_layout",
    "lake_jars",
    "open_session",
    "spark_conf",
]

# The Spark catalog name, and the catalog_name column of the JDBC catalog's tables:
# every reader of the same catalog (pyiceberg, Trino's iceberg.jdbc-catalog.catalog-name)
# must use it too.
CATALOG_NAME = "lake"
# SparkCatalog's table cache switch (see spark_conf).
CACHE_ENABLED = "cache-enabled"
ICEBERG_VERSION = "1.12.0"
_LAKE_LIBS_ENV = "KTC_LAKE_LIBS"
# What `make lake-libs` fetches (exporters/lakehouse/pom.xml).
_REQUIRED_JARS = ("iceberg-spark-runtime-4.1_2.13-", "sqlite-jdbc-", "postgresql-")

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


class LakeLibsMissing(RuntimeError):
    """Iceberg's Spark runtime or the JDBC drivers are not where Spark is told to look."""


class OldLayout(RuntimeError):
    """The lake directory holds the Hive/Derby layout of earlier versions."""


@dataclasses.dataclass(frozen=True, slots=True)
class LakehouseConfig:
    """Paths, catalog and Spark settings of one lakehouse."""

    lake_dir: Path  # <data-dir>/lakehouse: catalog.db, warehouse/
    database: str = DEFAULT_DATABASE  # the Iceberg namespace
    master: str = "local[*]"
    extra_conf: Mapping[str, str] = dataclasses.field(default_factory=dict)
    log_level: str = "ERROR"
    catalog_uri: str | None = None  # None: the SQLite file under lake_dir

    @classmethod
    def for_data_dir(cls, data_dir: Path, **kwargs: object) -> LakehouseConfig:
        return cls(lake_dir=Path(data_dir) / "lakehouse", **kwargs)  # type: ignore[arg-type]

    @property
    def warehouse_dir(self) -> Path:
        return self.lake_dir / "warehouse"

    @property
    def sqlite_file(self) -> Path:
        return self.lake_dir / "catalog.db"

    @property
    def catalog(self) -> str:
        """The catalog URI in effect (JDBC URL or REST endpoint)."""
        if self.catalog_uri:
            return self.catalog_uri
        # WAL: readers never block the writer nor each other, and a commit is one
        # short write transaction; busy_timeout lets concurrent committers queue.
        return f"jdbc:sqlite:{self.sqlite_file.resolve()}?journal_mode=WAL&busy_timeout=30000"

    @property
    def catalog_kind(self) -> str:
        """``sqlite``, ``postgresql``, another JDBC subprotocol, or ``rest``."""
        uri = self.catalog
        if uri.startswith(("http://", "https://")):
            return "rest"
        if uri.startswith("jdbc:"):
            return uri.split(":", 2)[1]
        raise ValueError(
            f"catalog {uri!r}: expected jdbc:sqlite:..., jdbc:postgresql://... or http(s)://..."
        )

    def exists(self) -> bool:
        """Whether the catalog could hold tables already (false for a fresh SQLite lake)."""
        return self.catalog_kind != "sqlite" or self.sqlite_path().exists()

    def sqlite_path(self) -> Path:
        """The SQLite catalog's file (``jdbc:sqlite:PATH``)."""
        return Path(self.catalog.removeprefix("jdbc:sqlite:").split("?", 1)[0])

    def table(self, name: str) -> str:
        """A table's or view's Spark name, e.g. ``lake.`ktc`.`metrics_gauge```."""
        return f"{CATALOG_NAME}.`{self.database}`.`{name}`"

    def pyiceberg_properties(self) -> dict[str, str]:
        """The same catalog for pyiceberg (``pyiceberg.catalog.load_catalog``)."""
        warehouse = self.warehouse_uri
        if self.catalog_kind == "rest":
            return {"type": "rest", "uri": self.catalog, "warehouse": warehouse}
        jdbc = urllib.parse.urlsplit(self.catalog.removeprefix("jdbc:"))
        query = dict(urllib.parse.parse_qsl(jdbc.query))
        if self.catalog_kind == "sqlite":
            url = f"sqlite:///{self.sqlite_path()}"
        elif self.catalog_kind == "postgresql":
            user = query.pop("user", None) or self.extra_conf.get(
                f"spark.sql.catalog.{CATALOG_NAME}.jdbc.user", ""
            )
            password = query.pop("password", None) or self.extra_conf.get(
                f"spark.sql.catalog.{CATALOG_NAME}.jdbc.password", ""
            )
            auth = urllib.parse.quote(user, safe="")
            if password:
                auth += ":" + urllib.parse.quote(password, safe="")
            url = f"postgresql+psycopg2://{auth}@{jdbc.netloc}{jdbc.path}"
        else:
            raise ValueError(
                f"pyiceberg cannot open a {self.catalog_kind} JDBC catalog"
            )
        # Never create the catalog's tables from here: Spark (Iceberg's JdbcCatalog)
        # creates them with the view column pyiceberg's own schema lacks.
        return {
            "type": "sql",
            "uri": url,
            "warehouse": warehouse,
            "init_catalog_tables": "false",
        }

    @property
    def warehouse_uri(self) -> str:
        configured = self.extra_conf.get(f"spark.sql.catalog.{CATALOG_NAME}.warehouse")
        return configured or self.warehouse_dir.resolve().as_uri()


def lake_libs_dir() -> Path:
    return Path(
        os.environ.get(_LAKE_LIBS_ENV)
        or Path.home() / ".cache" / "ktc" / f"iceberg-{ICEBERG_VERSION}"
    )


def lake_jars() -> list[Path]:
    """Iceberg's Spark runtime and the JDBC drivers, from ``make lake-libs``'s cache."""
    directory = lake_libs_dir()
    jars = sorted(directory.glob("*.jar")) if directory.is_dir() else []
    missing = [p for p in _REQUIRED_JARS if not any(j.name.startswith(p) for j in jars)]
    if missing:
        raise LakeLibsMissing(
            f"Iceberg's Spark runtime and JDBC drivers are not in {directory} (set "
            f"{_LAKE_LIBS_ENV}, or run `make lake-libs` in the source tree)"
        )
    return jars


def check_layout(config: LakehouseConfig) -> None:
    """Refuse a lake directory in the Hive/Derby layout of earlier versions."""
    old = [config.lake_dir / "metastore_db", config.lake_dir / "_ingest"]
    if any(p.exists() for p in old):
        raise OldLayout(
            f"{config.lake_dir} holds the old Hive/Derby lakehouse layout; move it aside "
            f"(mv {config.lake_dir} {config.lake_dir}.old) and run `ktc ingest` to rebuild "
            "the Iceberg tables from the landing log"
        )


def spark_conf(
    config: LakehouseConfig, extra_jars: Sequence[Path] = ()
) -> dict[str, str]:
    """Every Spark setting of a lakehouse session; ``extra_conf`` wins, except that
    ``spark.driver.extraJavaOptions`` is appended to ours.  ``extra_jars`` go on the
    driver's and the executors' class path beside Iceberg's (the topic ingest's Kafka
    source)."""
    lake = config.lake_dir.resolve()
    log4j = lake / "conf" / "log4j2.properties"
    jars = [*lake_jars(), *extra_jars]
    prefix = f"spark.sql.catalog.{CATALOG_NAME}"
    conf = {
        "spark.master": config.master,
        # The session catalog is never used for lakehouse tables; in memory, so no
        # process ever boots a Derby metastore.
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.warehouse": config.warehouse_uri,
        # Every query loads its tables from the catalog, so a long-lived session (a
        # notebook, a Thrift server connection, the ingest's own) sees each commit of
        # any process at its next query.  Iceberg's table cache (on by default) expires
        # an entry 30 s after its last *access*: a session queried more often than that
        # keeps serving the state it first loaded, however many commits follow.  The
        # cost is one catalog lookup and one metadata-file read per table per query.
        f"{prefix}.{CACHE_ENABLED}": "false",
        "spark.sql.defaultCatalog": CATALOG_NAME,
        # Spark puts spark.jars on executors; the driver's class path must have the
        # JDBC drivers itself (java.sql.DriverManager only sees the system class loader's).
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.driver.extraClassPath": os.pathsep.join(str(j) for j in jars),
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
    }
    if config.catalog_kind == "rest":
        conf[f"{prefix}.type"] = "rest"
        conf[f"{prefix}.uri"] = config.catalog
    else:
        conf[f"{prefix}.type"] = "jdbc"
        conf[f"{prefix}.uri"] = config.catalog
        # V1 adds the column that lets the catalog store Iceberg views beside tables.
        conf[f"{prefix}.jdbc.schema-version"] = "V1"
    for key, value in config.extra_conf.items():
        if key == "spark.driver.extraJavaOptions":
            conf[key] = f"{conf[key]} {value}"
        else:
            conf[key] = value
    return conf


def write_log_config(config: LakehouseConfig) -> None:
    conf_dir = config.lake_dir / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    path = conf_dir / "log4j2.properties"
    if not path.exists() or path.read_text() != QUIET_LOG4J2:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(QUIET_LOG4J2)
        os.replace(tmp, path)


def open_session(
    config: LakehouseConfig,
    app_name: str,
    *,
    extra_jars: Sequence[Path] = (),
    defaults: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession whose default catalog is this lakehouse's Iceberg catalog;
    ``defaults`` are settings the config's own ``extra_conf`` may override."""
    from pyspark.sql import SparkSession

    check_layout(config)
    conf = spark_conf(config, extra_jars)
    for key, value in (defaults or {}).items():
        if key not in config.extra_conf:
            conf[key] = value
    config.lake_dir.mkdir(parents=True, exist_ok=True)
    write_log_config(config)
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
