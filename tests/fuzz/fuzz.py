"""Run one fuzz target under atheris (libFuzzer), coverage-guided (docs/fuzzing.md).

    .venv/bin/python tests/fuzz/fuzz.py TARGET [libFuzzer flags] [CORPUS_DIR ...]

TARGET is one of ``fuzz_targets.TARGETS``. Each input runs through the interpreted copy of
the code (instrumented: its coverage guides the mutations) and then through the compiled copy
the collector runs; a disallowed exception in either, a disagreement between them, an input
that runs longer than ``-timeout`` or a process over ``-rss_limit_mb`` is a crash, written to
``-artifact_prefix`` as ``crash-<sha1>`` (``timeout-``, ``oom-``), and the run exits non-zero.
So is an input that allocates more than ``--memory-mb`` (default 512) at once.
``make fuzz`` runs every target; tests/fuzz/test_fuzz.py runs a short budget of each.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import atheris

# Run as a script: the repository root, for the sources and `tests.` imports.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fuzz import fuzz_targets

# Bytes one input may allocate beyond what the process holds before fuzzing (--memory-mb=N):
# a push decompresses to at most telemetry.max.bytes (1 MiB by default, 64 MiB at most).
DEFAULT_MEMORY_MB = 512


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in fuzz_targets.TARGETS:
        sys.exit(
            f"usage: fuzz.py {{{','.join(fuzz_targets.TARGETS)}}} [libFuzzer args]"
        )
    target = fuzz_targets.TARGETS[sys.argv[1]]
    interpreted, compiled = fuzz_targets.load_code(
        atheris.instrument_imports(
            include=list(fuzz_targets.PACKAGES),
            exclude=list(fuzz_targets.NOT_INSTRUMENTED),
        )
    )
    print(
        f"fuzz {target.name}: interpreted copy instrumented; compiled modules: "
        f"{', '.join(compiled.compiled) or 'none (installed without mypyc)'}",
        file=sys.stderr,
    )

    def one_input(data: bytes) -> None:
        fuzz_targets.check(target, interpreted, compiled, data)

    args = [arg for arg in sys.argv[2:] if not arg.startswith("--memory-mb=")]
    memory_mb = [int(arg.split("=", 1)[1]) for arg in sys.argv[2:] if arg not in args]
    limit_address_space(memory_mb[-1] if memory_mb else DEFAULT_MEMORY_MB)
    atheris.Setup([sys.argv[0], *args], one_input)
    atheris.Fuzz()


def limit_address_space(extra_mb: int) -> None:
    """Any allocation that takes the process more than ``extra_mb`` past its size once
    everything is imported fails: a MemoryError in Python (not an allowed error: a crash),
    an abort in a C codec (a crash too).  libFuzzer's own ``-malloc_limit_mb`` needs a
    sanitizer's malloc hooks, which a Python process does not have; ``-rss_limit_mb`` still
    applies, but only to memory actually touched, and checked once a second."""
    with open("/proc/self/statm") as statm:
        size = int(statm.read().split()[0]) * resource.getpagesize()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (size + (extra_mb << 20), hard))


if __name__ == "__main__":
    main()
