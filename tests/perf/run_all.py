"""Run every benchmark in tests/perf, one process each, and summarise.

`make bench` runs this.  Each benchmark measures its own baseline in the same run and
prints ratios against it, so numbers from a noisy shared machine stay comparable.
Pass names to run a subset: `python tests/perf/run_all.py push quota`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The benchmarks whose targets fail the run (exit 1) when missed, with the flag that checks
# them; the others print their ratios for a person to read.
CHECKED: dict[str, list[str]] = {
    "bench_client_metrics.py": ["--check"],
}


def main(argv: list[str]) -> int:
    wanted = set(argv)
    scripts = sorted(HERE.glob("bench_*.py"))
    if wanted:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in wanted]
    failures = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        started = time.monotonic()
        rc = subprocess.call(
            [sys.executable, str(script), *CHECKED.get(script.name, [])],
            cwd=HERE.parent.parent,
        )
        print(
            f"--- {script.name}: exit {rc} in {time.monotonic() - started:.1f} s",
            flush=True,
        )
        if rc != 0:
            failures.append(script.name)
    if failures:
        print(f"\nbenchmarks that failed: {', '.join(failures)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
