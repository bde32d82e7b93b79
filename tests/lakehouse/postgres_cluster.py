"""A private PostgreSQL cluster of Debian's postgresql for a test: initdb into a fresh
directory, pg_ctl start on a free loopback port, one database, pg_ctl stop at the end.

Root cannot run postgres, so as root the cluster belongs to (and runs as) the ``postgres``
user Debian's package creates; otherwise it runs as the current user.  Trust
authentication on 127.0.0.1 only: the cluster lives for one test."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["PG_BIN", "postgres_database"]

PG_BIN = Path("/usr/lib/postgresql/15/bin")  # Debian's postgresql-15 (make postgresql)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextlib.contextmanager
def postgres_database(name: str = "lake") -> Iterator[str]:
    """A running cluster with database ``name``; yields its JDBC URL (user in the query)."""
    if not (PG_BIN / "pg_ctl").exists():
        if os.environ.get("CI") == "true":
            raise AssertionError(f"{PG_BIN} missing: `make postgresql` installs it")
        pytest.skip(f"no PostgreSQL at {PG_BIN} (`make postgresql`)")
    root = Path(tempfile.mkdtemp(prefix="ktc-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    user = "postgres" if os.geteuid() == 0 else os.environ.get("USER", "postgres")
    port = _free_port()
    run = functools.partial(
        subprocess.run, check=True, capture_output=True, text=True, timeout=120
    )
    run(
        _as_owner(
            [
                str(PG_BIN / "initdb"),
                "-D",
                str(data),
                "-U",
                user,
                "--auth=trust",
                "-E",
                "UTF8",
            ]
        ),
    )
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(
        _as_owner(
            [
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(root / "log"),
                "-w",
                "start",
            ]
        ),
    )
    try:
        run(
            _as_owner(
                [
                    str(PG_BIN / "createdb"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-U",
                    user,
                    name,
                ]
            ),
        )
        yield f"jdbc:postgresql://127.0.0.1:{port}/{name}?user={user}"
    finally:
        subprocess.run(
            _as_owner(
                [str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]
            ),
            check=False,
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(root, ignore_errors=True)
