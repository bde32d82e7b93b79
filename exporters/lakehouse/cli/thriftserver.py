"""``ktc thriftserver``: the Spark Thrift server (HiveServer2 protocol, JDBC/ODBC) on
the lakehouse's catalog, beside running ingests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from exporters.lakehouse.cli.options import LakeOptions, lake_options
from exporters.lakehouse.session import LakehouseConfig, LakeLibsMissing, spark_conf

__all__ = [
    "THRIFT_SERVER_CLASS",
    "spark_home",
    "thriftserver_argv",
    "thriftserver_command",
]

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"


def spark_home() -> Path:
    """``$SPARK_HOME``, else the Spark that pyspark ships."""
    import pyspark

    return Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)


def thriftserver_argv(config: LakehouseConfig, port: int, bind_host: str) -> list[str]:
    """spark-submit of the Spark Thrift server (HiveServer2 protocol) on our catalog.

    The Thrift server always enables Hive support for Spark's session catalog, which
    the lakehouse never uses: its metastore is an in-memory Derby database of this
    JVM, so any number of Thrift servers run at once and nothing is written to disk."""
    conf = spark_conf(config)
    conf.pop("spark.sql.catalogImplementation")
    conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
        "jdbc:derby:memory:ktc_session_catalog;create=true"
    )
    conf["spark.driver.extraJavaOptions"] += " -Dderby.stream.error.file=/dev/null"
    argv = [
        str(spark_home() / "bin" / "spark-submit"),
        "--class",
        THRIFT_SERVER_CLASS,
        "--name",
        "ktc-thriftserver",
    ]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    argv += [
        "spark-internal",
        "--hiveconf",
        f"hive.server2.thrift.port={port}",
        "--hiveconf",
        f"hive.server2.thrift.bind.host={bind_host}",
    ]
    return argv


@click.command("thriftserver")
@lake_options
@click.option("--port", type=click.IntRange(0, 65535), default=10000, show_default=True)
@click.option("--bind-host", default="127.0.0.1", show_default=True)
def thriftserver_command(lake: LakeOptions, port: int, bind_host: str) -> None:
    """Serve the lakehouse over JDBC/ODBC (beeline -u jdbc:hive2://HOST:PORT/ktc), beside
    running ingests."""
    from exporters.lakehouse.jvm_stderr import run_relaying_stderr
    from exporters.lakehouse.session import write_log_config

    config = lake.existing()
    write_log_config(config)
    try:
        argv = thriftserver_argv(config, port, bind_host)
    except LakeLibsMissing as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"Spark Thrift server: jdbc:hive2://{bind_host}:{port}/{lake.database}",
        err=True,
    )
    env = dict(os.environ, SPARK_HOME=str(spark_home()))
    sys.exit(run_relaying_stderr(argv, env))
