"""Run one fuzz target under atheris (libFuzzer), coverage-guided (docs/fuzzing.md).

    .venv/bin/python tests/fuzz/fuzz.py TARGET [libFuzzer flags] [CORPUS_DIR ...]

TARGET is one of ``fuzz_targets.TARGETS``. Each input runs through the interpreted copy of
the code (instrumented: its coverage guides the mutations) and then through the compiled copy
the collector runs; a disallowed exception in either, a disagreement between them, an input
that runs longer than ``-timeout`` or a process over ``-rss_limit_mb`` is a crash, written to
``-artifact_prefix`` as ``crash-<sha1>`` (``timeout-``, ``oom-``), and the run exits non-zero.
``make fuzz`` runs every target; tests/fuzz/test_fuzz.py runs a short budget of each.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_targets  # noqa: E402


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in fuzz_targets.TARGETS:
        sys.exit(f"usage: fuzz.py {{{','.join(fuzz_targets.TARGETS)}}} [libFuzzer args]")
    target = fuzz_targets.TARGETS[sys.argv[1]]
    interpreted, compiled = fuzz_targets.load_code(
        atheris.instrument_imports(
            include=list(fuzz_targets.PACKAGES), exclude=list(fuzz_targets.NOT_INSTRUMENTED)
        )
    )
    print(
        f"fuzz {target.name}: interpreted copy instrumented; compiled modules: "
        f"{', '.join(compiled.compiled) or 'none (installed without mypyc)'}",
        file=sys.stderr,
    )

    def one_input(data: bytes) -> None:
        fuzz_targets.check(target, interpreted, compiled, data)

    atheris.Setup([sys.argv[0], *sys.argv[2:]], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
