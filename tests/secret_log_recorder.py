"""Records everything the test run logs and prints, for the check that no secret leaks
(tests/test_zz_no_secrets_in_logs.py, with the secrets of tests/secrets_under_test.py).

The hooks below are imported by tests/conftest.py, so they run in every session:

| source                                      | recorded                                    |
|---------------------------------------------|---------------------------------------------|
| every log record reaching the root logger   | logger name, level, message, traceback      |
|   (the collector runs in-process in tests)  |   (the project's loggers from INFO up)      |
| each test phase's captured stdout, stderr,  | the report sections and the failure text    |
|   log and failure report                    |                                             |

It all goes to one file per session (``RECORDING``), which the last test greps; the
file is removed at the end unless it holds a secret.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "LAST_TEST",
    "RECORDING",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_runtest_logreport",
    "pytest_unconfigure",
]

# The project's own loggers are made to emit from INFO up, the collector's default
# `log.level` (what an operator's log holds). Not DEBUG: that would put debug records into
# every test's caplog and slow the hot paths the performance tests measure. The root stays
# where it is, so third-party output (py4j's above all) is not produced for nothing.
_PROJECT_LOGGERS = (
    "clock",
    "collector",
    "exporters",
    "proto",
    "quota",
    "subscriptions",
)
# The check itself: always the last test of the session.
LAST_TEST = "test_no_secret_appears_in_anything_the_suite_logged"


class _Recording:
    def __init__(self) -> None:
        self.path: Path | None = None
        self.records = 0
        self._file: Any = None

    def open(self) -> None:
        handle, name = tempfile.mkstemp(prefix="ktc-captured-logs-", suffix=".txt")
        self.path = Path(name)
        self._file = open(handle, "w", encoding="utf-8", errors="backslashreplace")

    def write(self, text: str) -> None:
        if self._file is not None:
            self._file.write(text + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def text(self) -> str:
        return self.path.read_text(encoding="utf-8") if self.path is not None else ""


RECORDING = _Recording()


class _RecordingHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a bad format: record its parts, not nothing
            message = f"{record.msg!r} % {record.args!r}"
        parts = [f"{record.name} {record.levelname} {message}"]
        if record.exc_info and record.exc_info[1] is not None:
            parts.append(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            parts.append(record.stack_info)
        RECORDING.records += 1
        RECORDING.write("\n".join(parts))


def pytest_configure(config: Any) -> None:
    RECORDING.open()
    logging.getLogger().addHandler(_RecordingHandler(logging.DEBUG))
    for name in _PROJECT_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)


def pytest_unconfigure(config: Any) -> None:
    """The file is kept only when it holds a secret (the failing test names it)."""
    from tests.secrets_under_test import all_secrets

    path = RECORDING.path
    if path is None or not path.exists():
        return
    RECORDING.close()
    if not any(secret in RECORDING.text() for secret in all_secrets()):
        path.unlink()


def pytest_runtest_logreport(report: Any) -> None:
    for title, content in report.sections:
        RECORDING.write(f"--- {report.nodeid} {title}\n{content}")
    if report.failed:
        RECORDING.write(
            f"--- {report.nodeid} {report.when} failed\n{report.longreprtext}"
        )


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    last = [item for item in items if item.name == LAST_TEST]
    items[:] = [item for item in items if item.name != LAST_TEST] + last
