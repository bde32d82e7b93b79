"""``ktc`` as a process of this checkout's sources (``python -m collector.app.cli`` from the
repository, with it on PYTHONPATH): what the tests of whole commands (``ktc ingest``,
``ktc sql``) run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def ktc(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "collector.app.cli", *args],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
