"""The fuzzer's CI budget (docs/fuzzing.md): every seed of the corpus through both copies of
the code, then a fixed number of atheris runs per target with a fixed seed; any crash fails.

``make fuzz`` runs the same targets for as long as asked; this is the short, deterministic
part that ``make test`` runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz import fuzz_targets

HERE = Path(__file__).resolve().parent
# Runs per target (seed corpus included), sized so that all six take about 30 s on a
# 2-core machine: serve_stream decodes a whole stream per input and runs ~1,500/s, the
# request decoders ~10,000/s, the payload targets ~50,000/s.
CI_RUNS = {
    "serve_request": 30_000,
    "serve_stream": 5_000,
    "gateway_request": 30_000,
    "gateway_response": 30_000,
    "decompress": 50_000,
    "otlp_metrics": 50_000,
}
CI_SEED = 1


@pytest.fixture(scope="module")
def code() -> tuple[fuzz_targets.Code, fuzz_targets.Code]:
    return fuzz_targets.load_code()


def test_every_target_has_a_budget_and_seeds() -> None:
    assert set(CI_RUNS) == set(fuzz_targets.TARGETS)
    for name in fuzz_targets.TARGETS:
        assert list(fuzz_targets.corpus_files(name)), f"no seeds for {name}"


def test_the_copies_are_interpreted_and_compiled(
    code: tuple[fuzz_targets.Code, ...],
) -> None:
    interpreted, compiled = code
    assert str(interpreted.connection.__file__).endswith(".py")
    assert str(interpreted.compression.__file__).endswith(".py")
    assert str(interpreted.payload.__file__).endswith(".py")
    if str(compiled.connection.__file__).endswith(".py"):
        pytest.skip("installed without mypyc (HATCH_BUILD_NO_HOOKS): one copy only")
    assert (
        interpreted.connection.ServerConnection
        is not compiled.connection.ServerConnection
    )


def test_seeds_cover_every_served_version(code: tuple[fuzz_targets.Code, ...]) -> None:
    """serve_request's seeds start from a frame of every (api key, version) ``ktc serve``
    decodes, each of which decodes."""
    interpreted, compiled = code
    seen = set()
    for path in fuzz_targets.corpus_files("serve_request"):
        kind, result = fuzz_targets.check(
            fuzz_targets.TARGETS["serve_request"],
            interpreted,
            compiled,
            path.read_bytes(),
        )
        if kind == "ok":
            seen.add(result[0][:2])
    assert set(fuzz_targets.served_versions(compiled)) <= seen


@pytest.mark.parametrize("target", sorted(fuzz_targets.TARGETS))
def test_corpus_replays_without_crash(
    code: tuple[fuzz_targets.Code, ...], target: str
) -> None:
    interpreted, compiled = code
    for path in fuzz_targets.corpus_files(target):
        try:
            fuzz_targets.check(
                fuzz_targets.TARGETS[target], interpreted, compiled, path.read_bytes()
            )
        except Exception as exc:
            raise AssertionError(
                f"{target}: seed {path.name} crashed: {exc!r}"
            ) from exc


@pytest.mark.parametrize(
    "path",
    sorted((HERE / "regressions").glob("*/*")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_regression_inputs(code: tuple[fuzz_targets.Code, ...], path: Path) -> None:
    """Inputs that once crashed the fuzz run (docs/fuzzing.md, "What it found"), kept as they
    were found: ``regressions/<target>/<name>``."""
    interpreted, compiled = code
    target = fuzz_targets.TARGETS[path.parent.name]
    fuzz_targets.check(target, interpreted, compiled, path.read_bytes())


def test_a_nan_decodes_the_same_in_both_copies(
    code: tuple[fuzz_targets.Code, ...],
) -> None:
    """The first fuzz crash: an AlterClientQuotas v0 op whose float64 value is a NaN decoded
    alike in both copies, but NaN != NaN made the outcomes differ; values compare by bits."""
    interpreted, compiled = code
    data = (
        HERE / "regressions/serve_request/alter-client-quotas-nan-value.bin"
    ).read_bytes()
    kind, _ = fuzz_targets.check(
        fuzz_targets.TARGETS["serve_request"], interpreted, compiled, data
    )
    assert kind == "ok"
    assert fuzz_targets.plain(float("nan")) == fuzz_targets.plain(float("nan"))
    assert fuzz_targets.plain(0.0) != fuzz_targets.plain(-0.0)


def test_a_gzip_bomb_stops_at_the_bound(code: tuple[fuzz_targets.Code, ...]) -> None:
    """A small gzip member, then one of 16 MiB: TELEMETRY_TOO_LARGE at any bound below it,
    in both copies (under atheris this input exposed the instrumentation crash that keeps
    proto.compression uninstrumented)."""
    interpreted, compiled = code
    data = (HERE / "regressions/decompress/gzip-two-members-bomb.bin").read_bytes()
    for bound in range(len(fuzz_targets.MAX_BYTES)):
        selector = bytes([(data[0] & 7) | bound << 3])
        assert fuzz_targets.check(
            fuzz_targets.TARGETS["decompress"],
            interpreted,
            compiled,
            selector + data[1:],
        ) == ("error", "TelemetryTooLargeError")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("target", sorted(fuzz_targets.TARGETS))
def test_fuzz_budget_finds_no_crash(tmp_path: Path, target: str) -> None:
    """A fixed number of coverage-guided runs with a fixed seed; new inputs go to a scratch
    corpus, the committed one is only read."""
    scratch = tmp_path / "corpus"
    scratch.mkdir()
    run = subprocess.run(
        [
            sys.executable,
            str(HERE / "fuzz.py"),
            target,
            str(scratch),
            str(fuzz_targets.CORPUS / target),
            f"-runs={CI_RUNS[target]}",
            f"-seed={CI_SEED}",
            "-timeout=10",
            "-rss_limit_mb=1024",
            "-max_len=65536",
            f"-artifact_prefix={tmp_path}/",
            "-print_final_stats=1",
        ],
        capture_output=True,
        text=True,
        timeout=110,
    )
    crashes = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    tail = "\n".join(run.stderr.splitlines()[-40:])
    assert run.returncode == 0 and not crashes, f"{target}: {crashes}\n{tail}"
    assert f"Done {CI_RUNS[target]} runs" in run.stderr, tail
