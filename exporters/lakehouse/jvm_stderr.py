"""The Spark JVM's stderr, passed on whole except for the one notice every Spark 4 JVM
prints at boot.

Spark's launcher always starts the JVM with ``--add-modules=jdk.incubator.vector``
(``org.apache.spark.launcher.JavaModuleOptions``), and the JDK then prints
``WARNING: Using incubator modules: jdk.incubator.vector`` from its module bootstrap,
before any logging is configured; no JVM option turns it off.  Everything else the JVM
writes (log4j at the level ``session.QUIET_LOG4J2`` sets, crashes, ``java`` not found)
reaches our stderr as it was written, so real errors stay visible.

The JVM writes into a pipe that a daemon thread copies to file descriptor 2 line by line;
the thread starts before the JVM does, so a JVM that writes a lot at boot never blocks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

__all__ = [
    "JDK_BOOT_NOTICES",
    "launch_spark_gateway",
    "relayed_stderr",
    "run_relaying_stderr",
]

# Lines the JDK prints for options Spark's launcher always passes; nothing else is dropped.
JDK_BOOT_NOTICES: frozenset[bytes] = frozenset(
    {
        b"WARNING: Using incubator modules: jdk.incubator.vector",
    }
)


def _copy_lines(source: IO[bytes], out_fd: int) -> None:
    with source:
        for line in source:
            if line.rstrip(b"\r\n") not in JDK_BOOT_NOTICES:
                os.write(out_fd, line)


def relayed_stderr(out_fd: int = 2) -> tuple[int, threading.Thread]:
    """A pipe's write end to give a child as its stderr, and the thread copying what it
    writes to ``out_fd`` (less ``JDK_BOOT_NOTICES``); close the write end in this process
    once the child has it, so the thread ends when the child does."""
    read_fd, write_fd = os.pipe()
    thread = threading.Thread(
        target=_copy_lines,
        args=(os.fdopen(read_fd, "rb"), out_fd),
        name="spark-jvm-stderr",
        daemon=True,
    )
    thread.start()
    return write_fd, thread


def launch_spark_gateway(conf: Mapping[str, str]) -> None:
    """Start PySpark's JVM (once per process) with its stderr relayed.

    ``SparkSession.builder.getOrCreate()`` then uses this JVM.  ``conf`` goes on the
    ``spark-submit`` command line, as PySpark does for the builder's settings, because
    driver JVM options (the log4j2 file) only take effect there.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if (
        SparkContext._gateway is not None
    ):  # the JVM of an earlier session in this process
        return
    write_fd, _ = relayed_stderr()
    try:
        gateway = launch_gateway(
            SparkConf(loadDefaults=False).setAll(list(conf.items())),
            popen_kwargs={"stderr": write_fd},
        )
    finally:
        os.close(write_fd)
    SparkContext._ensure_initialized(gateway=gateway)


def run_relaying_stderr(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``argv`` (a long-lived ``spark-submit``) to its end with its stderr relayed,
    passing SIGTERM and SIGINT on to it; returns its exit code."""
    write_fd, thread = relayed_stderr()
    try:
        child = subprocess.Popen(list(argv), env=dict(env), stderr=write_fd)
    finally:
        os.close(write_fd)

    def forward(signum: int, _frame: Any) -> None:
        child.send_signal(signum)

    previous: dict[int, Callable[..., Any] | int | None] = {
        signum: signal.signal(signum, forward)
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        code = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    thread.join(timeout=5)
    return code
