"""Process plumbing shared by the upstream harness: free ports, readiness polling, log tails,
and one registry of child processes killed at interpreter exit whatever happened."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_children: set[subprocess.Popen[bytes]] = set()
_children_lock = threading.Lock()


def register(process: subprocess.Popen[bytes]) -> None:
    with _children_lock:
        _children.add(process)


def kill(process: subprocess.Popen[bytes], *, graceful_s: float = 0.0) -> int | None:
    """Stops a child (SIGTERM first when `graceful_s` > 0, SIGKILL after it) and reaps it."""
    if process.poll() is None:
        if graceful_s > 0:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(graceful_s)
            except subprocess.TimeoutExpired:
                pass
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)
    with _children_lock:
        _children.discard(process)
    return process.returncode


@atexit.register
def _kill_all_children() -> None:
    with _children_lock:
        children = list(_children)
    for process in children:
        with contextlib.suppress(Exception):
            kill(process)


def die_with_parent() -> list[str]:
    """A command prefix (util-linux `setpriv --pdeathsig KILL`, which execs in place: same pid)
    that makes the kernel SIGKILL the child when its parent dies, so that servers do not
    outlive a pytest killed by a signal (atexit does not run then). Linux ties this to the
    *thread* that forked: start long-lived servers from the test's own thread, not from a
    short-lived worker thread. Empty where setpriv is missing."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL"] if setpriv else []


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports the OS had free a moment ago (held together so none repeats)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def poll_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    alive: Callable[[], str | None] | None = None,
) -> T:
    """Calls `probe` until it returns something other than None/False, or raises
    TimeoutError naming `what` (and the probe's last exception) after `timeout` seconds.
    `alive` returns a reason when the process being waited on has died: fail at once."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        if alive is not None and (dead := alive()) is not None:
            raise RuntimeError(f"{what}: {dead}")
        try:
            result = probe()
            if result is not None and result is not False:
                return result
        except Exception as error:  # the probe's failure is the reason to retry
            last_error = error
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error is not None else ""
            raise TimeoutError(f"{what}: not within {timeout:.0f} s{detail}")
        time.sleep(interval)


def exited(
    process: subprocess.Popen[bytes], log_path: Path
) -> Callable[[], str | None]:
    """``poll_until``'s ``alive`` for a process writing ``log_path``: its exit code and
    the log's tail once it has exited, None while it runs."""

    def reason() -> str | None:
        if process.poll() is None:
            return None
        return f"exit {process.returncode}: {tail(log_path)}"

    return reason


def tail(path: Path, lines: int = 60) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 256 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError as error:
        return f"<{path}: {error}>"
    return "\n".join(text.splitlines()[-lines:])


def clean_env(
    drop_prefixes: tuple[str, ...] = (), drop: tuple[str, ...] = ()
) -> dict[str, str]:
    """The environment for a server child: ours less what would reconfigure it."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in drop and not key.startswith(drop_prefixes)
    }
