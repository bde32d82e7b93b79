"""Suite-wide settings: every test is deterministic and local-only."""

from __future__ import annotations

import os
import sys

# Real Kafka clients and Spark must never reach beyond loopback.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

# Every log record and captured output of the run, for the last test: no secret in them.
from tests.secret_log_recorder import (  # noqa: F401 - pytest hooks, found by name here
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_logreport,
    pytest_unconfigure,
)

# The project's packages (pyproject.toml), where compiled modules sit beside their sources.
_PACKAGES = ("clock", "collector", "exporters", "proto", "quota", "subscriptions")


def pytest_sessionstart(session: object) -> None:
    """Refuse to test stale compiled code: the hot-path modules are compiled by mypyc at
    install time (pyproject.toml), and Python imports an extension module in preference to
    the .py beside it, so an edit made after the install would silently not be tested."""
    import importlib.machinery
    from pathlib import Path

    import pytest

    root = Path(__file__).resolve().parents[1]
    stale = []
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for extension in (
            path
            for package in _PACKAGES
            for path in (root / package).rglob(f"*{suffix}")
        ):
            source = extension.with_name(extension.name[: -len(suffix)] + ".py")
            if source.exists() and source.stat().st_mtime > extension.stat().st_mtime:
                stale.append(str(source.relative_to(root)))
    if stale:
        pytest.exit(
            "compiled modules are older than their sources: "
            + ", ".join(sorted(stale))
            + " (run `make setup`, or `pip install -e .`; HATCH_BUILD_NO_HOOKS=true installs"
            " without compiling)",
            returncode=2,
        )
