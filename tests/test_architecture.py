"""The import architecture (docs/architecture.md) holds: the import-linter contracts in
pyproject.toml (``[tool.importlinter]``) are all kept.

They fail on an import cycle between sibling modules or packages anywhere in the project,
on an upward import between the top-level packages, on an upward import between
collector's subpackages (or one between broker and gateway), on an upward import between
the gateway's parts (metrics, the shared gateway, the chain runner and the upstream cluster,
the filters, the policies they apply, the wire layer), on an import of anything but
``proto`` from the gateway's wire layer, on an upward import between the lakehouse
commands' modules, and on an import of the lakehouse's command line from the rest of the
lakehouse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
