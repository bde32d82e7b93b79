"""What a user can cause by hand, as one line on stderr and a documented exit code.

Every ``ktc`` command runs through :func:`run` (the console script's entry point), which
looks a failure up in the table below.  A failure in the table is the user's to fix (a
port another process holds, a data directory that cannot be written, a file edited into
invalid YAML, Ctrl-C, a query naming a table that does not exist): it is printed as one
line, ``ktc: <what>``, and exits with its code.  A failure not in the table is a bug, and
keeps its traceback.

| exit code | meaning |
|---|---|
| 0 | done |
| 1 | refused: a valid request the answer to which is no (a Kafka error code, a query that Spark rejects, an admin endpoint that refused or cannot be reached) |
| 2 | cannot run as configured: a usage error, a bad config key or value, a config or store file that cannot be read or parsed, a port in use, a data directory that cannot be created or written |
| 3 | kept in a cluster: a ``--data-dir`` command on a data directory whose node keeps that state in a Kafka cluster (:class:`KeptInCluster`); nothing is read or written |
| 130 | interrupted (Ctrl-C), at any point, Spark's start included |

docs/operations.md ("Exit codes") is this table for operators.
"""

from __future__ import annotations

import dataclasses
import errno
import sys
from collections.abc import Callable

import click

__all__ = [
    "EXIT_CANNOT_RUN",
    "EXIT_INTERRUPTED",
    "EXIT_KEPT_IN_CLUSTER",
    "EXIT_REFUSED",
    "Failure",
    "KeptInCluster",
    "describe",
    "run",
]

EXIT_REFUSED = 1
EXIT_CANNOT_RUN = 2
EXIT_KEPT_IN_CLUSTER = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C ended


@dataclasses.dataclass(frozen=True, slots=True)
class Failure:
    exit_code: int
    message: str  # one line, without the leading "ktc: "


class KeptInCluster(Exception):
    """A ``--data-dir`` command (``ktc subscriptions``, ``quotas``, ``users``, ``acls``) on a
    data directory whose node keeps that state in a Kafka cluster (it recorded so at start,
    ``parts/data_dir.py``): what it wrote would never be read, what it read is not what
    the node serves.  The message names the cluster and ``--bootstrap-server``."""


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _os_error(exc: BaseException) -> Failure | None:
    assert isinstance(exc, OSError)
    if exc.errno == errno.EADDRINUSE:
        # asyncio and uvloop name the address in their message; the rest is noise.
        return Failure(
            EXIT_CANNOT_RUN,
            f"cannot start: {_first_line(exc.strerror or str(exc))}"
            if "address" in str(exc)
            else f"cannot start: address already in use: {exc}",
        )
    if exc.filename is not None:
        # A data directory (or a file in it) that cannot be created, read or written.
        return Failure(EXIT_CANNOT_RUN, f"{exc.filename}: {exc.strerror or exc}")
    return None


def _named(*names: str) -> Callable[[BaseException], bool]:
    """Matches an exception class by name anywhere in its MRO: the lakehouse's (pyspark,
    py4j) are matched without importing them into every ``ktc`` start."""
    return lambda exc: any(cls.__name__ in names for cls in type(exc).__mro__)


def _is(*types: type[BaseException]) -> Callable[[BaseException], bool]:
    return lambda exc: isinstance(exc, types)


def _config_types() -> tuple[type[BaseException], ...]:
    from collector.app.config import ConfigError
    from subscriptions.config_file import ConfigFileError

    return (ConfigError, ConfigFileError)


# (does it match, what it means), first match wins.
_RULES: tuple[
    tuple[Callable[[BaseException], bool], Callable[[BaseException], Failure | None]],
    ...,
] = (
    (
        lambda exc: isinstance(exc, (Interrupted, KeyboardInterrupt, click.Abort)),
        lambda exc: Failure(EXIT_INTERRUPTED, "interrupted"),
    ),
    # Ctrl-C reaches the JVM too (one process group): py4j then finds its gateway gone.
    (
        _named("Py4JNetworkError", "PySparkRuntimeError"),
        lambda exc: _interrupted_spark(exc),
    ),
    (
        lambda exc: isinstance(exc, _config_types()),
        lambda exc: Failure(EXIT_CANNOT_RUN, _first_line(str(exc))),
    ),
    (
        _is(KeptInCluster),
        lambda exc: Failure(EXIT_KEPT_IN_CLUSTER, _first_line(str(exc))),
    ),
    # An unreadable or broken <data.dir>/state-locations.json.
    (
        _named("StateLocationsError"),
        lambda exc: Failure(EXIT_CANNOT_RUN, _first_line(str(exc))),
    ),
    (
        _named("AnalysisException", "ParseException"),
        lambda exc: Failure(EXIT_REFUSED, _first_line(str(exc))),
    ),
    (_is(OSError), _os_error),
)


_interrupt_seen = False


def _interrupted_spark(exc: BaseException) -> Failure | None:
    """The Java gateway went away: after a Ctrl-C, that is the interrupt; otherwise a bug
    (or a JVM that could not start), shown with its traceback."""
    return Failure(EXIT_INTERRUPTED, "interrupted") if _interrupt_seen else None


def describe(exc: BaseException) -> Failure | None:
    """The one-line failure ``exc`` is, or None when it is not one a user can cause."""
    for matches, failure in _RULES:
        if matches(exc):
            return failure(exc)
    return None


class Interrupted(BaseException):
    """SIGINT, raised instead of KeyboardInterrupt: click turns that into an empty line and
    "Aborted!" (exit 1), and pyspark and py4j catch it in places; this passes through both."""


def _on_sigint(signum: int, frame: object) -> None:
    global _interrupt_seen
    _interrupt_seen = True
    raise Interrupted


def run(command: click.Command, prog_name: str) -> None:
    """Run ``command`` as the ``ktc`` process: its exit code, and every failure in the table
    as one line.  (``ktc serve`` and ``ktc gateway`` install their own SIGINT handler once
    serving: from then on Ctrl-C is a graceful stop, exit 0.)"""
    import signal

    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        command.main(prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        exc.show()  # click's usage, its hint and the error
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"ktc: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except SystemExit:
        raise
    except BaseException as exc:
        failure = describe(exc)
        if failure is None:
            raise
        _quiet_py4j()
        if failure.exit_code == EXIT_INTERRUPTED:
            _stop_children()
        click.echo(f"ktc: {failure.message}", err=True)
        sys.exit(failure.exit_code)
    finally:
        signal.signal(signal.SIGINT, previous)
    sys.exit(0)


def _stop_children() -> None:
    """SIGTERM to every process this one started, and theirs.  pyspark starts its JVM (via
    the spark-submit scripts) ignoring SIGINT, so that Ctrl-C reaches Python only, and hands
    it to the Java gateway once connected: a Ctrl-C before that would leave the JVM running,
    orphaned."""
    import os
    import signal
    from pathlib import Path

    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
            parents[int(stat.parent.name)] = int(
                stat.read_text().rpartition(")")[2].split()[1]
            )
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    ours: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - ours
        ours |= frontier
    for pid in ours:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            continue  # exited meanwhile, or not ours to signal


def _quiet_py4j() -> None:
    """py4j logs its broken connections (with tracebacks) while the process exits."""
    import logging

    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
