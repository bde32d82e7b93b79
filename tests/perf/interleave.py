"""One benchmark on two revisions, interleaved: before, after, before, after, ...

The "after" tree is this checkout; the "before" tree is a detached git worktree of the
given revision in a temporary directory.  Each run is one subprocess of the benchmark
script with its cwd and ``PYTHONPATH`` set to the tree under test, so both trees meet the
same minutes of a shared machine; the key figures of each run are parsed from its output
and the harness prints, per figure, the median of each tree, after/before, and the spread
of each tree over its rounds (max/min), which is the noise a ratio has to beat.

    .venv/bin/python tests/perf/interleave.py --before 5056248 --rounds 3 bench_push --quick

Both trees run the pure-Python sources (a fresh worktree has no compiled modules; the
harness refuses a checkout that has any).  Every Python process the benchmark starts (the
collector, load generators, Spark's Python workers) imports through a ``sitecustomize``
the harness puts after the tree on ``PYTHONPATH``: it records where each first-party
module came from, and the harness fails the run when one came from outside the tree under
test.  When the benchmark script is missing at the before revision, or its first run there
fails, the after tree's script is copied into the before worktree (so the root it puts on
``sys.path`` is still the before tree) and the output says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

AFTER_ROOT = Path(__file__).resolve().parents[2]
NOTE_COPIED = (
    "the after tree's script copied in, its tests.* helpers from the after tree"
)
FIRST_PARTY = ("collector", "exporters", "subscriptions", "quota", "proto", "clock")

# Written into a temporary directory that follows the tree on PYTHONPATH: a meta path
# finder in front of the others that appends the origin of each module named in
# KTC_IMPORT_AUDIT_NAMES (first-party packages and helpers) to a file per process in
# KTC_IMPORT_AUDIT_DIR.
SITECUSTOMIZE = """
import os, sys

_dir = os.environ.get("KTC_IMPORT_AUDIT_DIR")
if _dir:
    _path = os.path.join(_dir, f"{os.getpid()}.txt")
    _names = tuple(os.environ.get("KTC_IMPORT_AUDIT_NAMES", "").split(","))

    def _write(line):
        try:
            fd = os.open(_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, (line + "\\n").encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    class _Audit:
        busy = False

        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if cls.busy or name.split(".", 1)[0] not in _names:
                return None
            cls.busy = True
            try:
                for finder in sys.meta_path:
                    if finder is cls or not hasattr(finder, "find_spec"):
                        continue
                    spec = finder.find_spec(name, path, target)
                    if spec is not None:
                        _write(f"{name}\\t{spec.origin}")
                        return spec
                return None
            finally:
                cls.busy = False

    _write(f"#argv\\t{sys.argv!r}")
    sys.meta_path.insert(0, _Audit)
"""


@dataclass
class Run:
    tree: str  # "before" or "after"
    index: int
    seconds: float
    load_before: float
    load_after: float
    returncode: int
    figures: dict[str, float]
    imports_from_tree: int
    helpers_from_after: int
    imports_elsewhere: list[str]
    processes: int
    output: str = field(repr=False)


def _num(cell: str) -> float | None:
    cell = cell.strip().rstrip("%x").replace(",", "")
    try:
        return float(cell)
    except ValueError:
        return None


def _fixed_table(
    text: str,
    after_line: str,
    label_width: int,
    columns: list[tuple[str, int]],
    header_offset: int = 1,
) -> dict[str, float]:
    """Rows of a right-aligned table whose header is ``header_offset`` lines after the
    line starting ``after_line``."""
    figures: dict[str, float] = {}
    lines = text.splitlines()
    start = next(
        (i for i, line in enumerate(lines) if line.startswith(after_line)), None
    )
    if start is None:
        return figures
    for line in lines[start + header_offset + 1 :]:
        if not line.strip():
            break
        label = line[:label_width].strip()
        position = label_width
        for name, width in columns:
            value = _num(line[position : position + width])
            position += width
            if value is not None and not math.isnan(value):
                figures[f"{label} [{name}]"] = value
    return figures


def _push(text: str) -> dict[str, float]:
    figures = _fixed_table(
        text,
        "medians of ",
        42,
        [("full", 16), ("baseline", 12), ("full/baseline", 8)],
    )
    # --compare "KEY: VALUE": the full collector as shipped beside it with that line.
    figures.update(
        _fixed_table(
            text,
            "compared: ",
            42,
            [("as shipped", 16), ("compared", 12), ("compared/shipped", 8)],
            header_offset=2,
        )
    )
    memory = re.search(r"memory per cached instance: (\d+) B", text)
    if memory is not None:
        figures["bytes per cached instance"] = float(memory.group(1))
    return figures


def _gateway(text: str) -> dict[str, float]:
    return _fixed_table(
        text,
        "medians of ",
        28,
        [
            ("direct", 12),
            ("relay", 12),
            ("gateway", 12),
            ("gw/relay", 10),
            ("gw/direct", 10),
        ],
    )


def _regexes(patterns: dict[str, str]) -> Callable[[str], dict[str, float]]:
    def parse(text: str) -> dict[str, float]:
        figures: dict[str, float] = {}
        for name, pattern in patterns.items():
            match = re.search(pattern, text, re.MULTILINE)
            if match is not None:
                value = _num(match.group(1))
                if value is not None:
                    figures[name] = value
        return figures

    return parse


PARSERS: dict[str, Callable[[str], dict[str, float]]] = {
    "bench_push": _push,
    "bench_gateway": _gateway,
    "bench_ingest": _regexes(
        {
            "ingest s (best round)": r"^ingest \(landing -> tables\):\s+([\d.]+) s",
            "ingest points/s": r"^ingest \(landing -> tables\):.* ([\d,]+) points/s",
            "baseline s (best round)": r"^baseline \(Spark writes.*?:\s+([\d.]+) s",
            "baseline points/s": r"^baseline \(Spark writes.* ([\d,]+) points/s",
            "ratio ingest/baseline": r"^ratio ingest/baseline: ([\d.]+)",
        }
    ),
    "bench_topic_ingest": _regexes(
        {
            "landing log, local[2] records/s": r"^landing log, local\[2\]\s+([\d,]+) records/s",
            "topic, local[2] records/s": r"^topic, local\[2\]\s+([\d,]+) records/s",
            "topic, standalone, 1 executor records/s": (
                r"^topic, standalone, 1 executor\(s\)\s+([\d,]+) records/s"
            ),
            "topic, standalone, 2 executors records/s": (
                r"^topic, standalone, 2 executor\(s\)\s+([\d,]+) records/s"
            ),
            "ratio topic/landing log": r"^ratio topic/landing log on local\[2\]: ([\d.]+)",
            "ratio two/one executors": r"^ratio two/one executors.*: ([\d.]+)",
        }
    ),
}

LOWER_IS_BETTER = (" ms", "CPU", " s ", " s (", "lag", "waited", "busy", "bytes")


def lower_is_better(figure: str) -> bool:
    return any(word in figure for word in LOWER_IS_BETTER)


def _git(*args: str, cwd: Path = AFTER_ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def _compiled(tree: Path) -> list[Path]:
    return [p for name in FIRST_PARTY for p in (tree / name).rglob("*.so")]


def _first_party_names(tree: Path) -> list[str]:
    names = [n for n in FIRST_PARTY if (tree / n).is_dir()]
    # The helpers a benchmark imports as top-level modules through its own sys.path
    # entries (tests/perf, tests/gateway, tests/lakehouse) at older revisions.
    for folder in ("tests/perf", "tests/gateway", "tests/lakehouse"):
        for entry in (tree / folder).iterdir() if (tree / folder).is_dir() else ():
            if entry.suffix == ".py" or (entry / "__init__.py").exists():
                names.append(entry.stem if entry.suffix == ".py" else entry.name)
    return sorted({*names, "tests"})


def run_once(
    tree_name: str,
    tree: Path,
    script: Path,
    bench_args: list[str],
    parse: Callable[[str], dict[str, float]],
    index: int,
    audit_names: list[str],
    site_dir: Path,
    timeout_s: float,
    helpers: Path | None = None,
) -> Run:
    """One run of ``script`` on ``tree``.  With ``helpers`` (the after tree, when the
    before tree runs the after tree's script) that tree follows on ``PYTHONPATH``, so
    the script's ``tests.*`` helpers come from it, and everything else from ``tree``."""
    audit = Path(tempfile.mkdtemp(prefix="ktc-interleave-audit-"))
    env = dict(os.environ)
    path = [tree, *([helpers] if helpers is not None else []), site_dir]
    env["PYTHONPATH"] = os.pathsep.join(map(str, path))
    env["KTC_IMPORT_AUDIT_DIR"] = str(audit)
    env["KTC_IMPORT_AUDIT_NAMES"] = ",".join(audit_names)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, str(script), *bench_args],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        output, returncode = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as timed_out:
        out = timed_out.stdout or b""
        output = out.decode() if isinstance(out, bytes) else out
        returncode = -1
    seconds = time.monotonic() - started
    from_tree, from_helpers, elsewhere, processes = 0, 0, [], 0
    for record in audit.glob("*.txt"):
        processes += 1
        for line in record.read_text().splitlines():
            name, _, origin = line.partition("\t")
            if name.startswith("#") or origin in ("None", "built-in", "frozen", ""):
                continue
            if Path(origin).resolve().is_relative_to(tree.resolve()):
                from_tree += 1
            elif (
                helpers is not None
                and name.split(".", 1)[0] == "tests"
                and Path(origin).resolve().is_relative_to(helpers.resolve())
            ):
                from_helpers += 1
            elif "site-packages" not in origin:
                elsewhere.append(f"{name} from {origin}")
    shutil.rmtree(audit, ignore_errors=True)
    return Run(
        tree_name,
        index,
        seconds,
        load_before,
        os.getloadavg()[0],
        returncode,
        parse(output) if returncode == 0 else {},
        from_tree,
        from_helpers,
        sorted(set(elsewhere)),
        processes,
        output,
    )


def _spread(values: list[float]) -> float:
    low, high = min(values), max(values)
    return high / low if low > 0 else math.nan


@dataclass
class Row:
    figure: str
    before: float
    after: float
    ratio: float
    spread_before: float
    spread_after: float
    lower_is_better: bool
    worse_beyond_spread: bool
    values: dict[str, list[float]]


def summarize(runs: list[Run]) -> list[Row]:
    names: list[str] = []
    for run in runs:
        names += [n for n in run.figures if n not in names]
    rows: list[Row] = []
    for name in names:
        values = {
            tree: [
                r.figures[name] for r in runs if r.tree == tree and name in r.figures
            ]
            for tree in ("before", "after")
        }
        if not values["before"] or not values["after"]:
            continue
        before = statistics.median(values["before"])
        after = statistics.median(values["after"])
        ratio = after / before if before else math.nan
        spread = max(_spread(values["before"]), _spread(values["after"]))
        worse = ratio > 1 if lower_is_better(name) else ratio < 1
        off = ratio if ratio >= 1 else (1 / ratio if ratio > 0 else math.inf)
        rows.append(
            Row(
                name,
                before,
                after,
                ratio,
                _spread(values["before"]),
                _spread(values["after"]),
                lower_is_better(name),
                bool(worse and off > spread),
                values,
            )
        )
    return rows


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def print_table(rows: list[Row]) -> None:
    width = max([len(r.figure) for r in rows] + [6])
    print(
        f"{'figure':{width}}  {'before':>10}  {'after':>10}  {'after/before':>12}"
        f"  {'spread before':>13}  {'spread after':>12}"
    )
    for row in rows:
        mark = "  (lower is better)" if row.lower_is_better else ""
        if row.worse_beyond_spread:
            mark += "  WORSE BEYOND THE SPREAD"
        print(
            f"{row.figure:{width}}  {_fmt(row.before):>10}  {_fmt(row.after):>10}"
            f"  {row.ratio:>12.2f}  {row.spread_before:>13.2f}"
            f"  {row.spread_after:>12.2f}{mark}"
        )


def from_logs(bench: str, log_dir: Path) -> int:
    """Summarize the outputs an earlier run kept with --log-dir."""
    parse = PARSERS[bench]
    runs = []
    for log in sorted(log_dir.glob(f"{bench}-*-*.log")):
        index, tree = log.stem.rsplit("-", 2)[1:]
        output = log.read_text()
        runs.append(
            Run(tree, int(index), 0.0, 0.0, 0.0, 0, parse(output), 0, 0, [], 0, output)
        )
    print(f"{bench}: {len(runs)} run(s) from {log_dir}")
    print_table(summarize(runs))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        usage="%(prog)s --before REV [--rounds N] BENCH [BENCH_ARGS ...]",
    )
    parser.add_argument("--before", required=True, help="the before revision")
    parser.add_argument("--rounds", type=int, default=2, help="runs per tree")
    parser.add_argument(
        "--timeout-s", type=float, default=900.0, help="per run (default 900)"
    )
    parser.add_argument(
        "--script-from",
        choices=("own", "after"),
        default="own",
        help="before tree: its own script (default; falls back to the after tree's "
        "when missing or failing) or the after tree's",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--log-dir", type=Path, help="keep each run's output here")
    parser.add_argument(
        "--from-logs",
        action="store_true",
        help="run nothing: summarize the outputs kept in --log-dir",
    )
    parser.add_argument("bench", help="tests/perf/<bench>.py, e.g. bench_push")
    parser.add_argument("bench_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()

    bench = Path(args.bench).stem
    relative = Path("tests/perf") / f"{bench}.py"
    if not (AFTER_ROOT / relative).exists():
        parser.error(f"no {relative} in {AFTER_ROOT}")
    parse = PARSERS.get(bench)
    if parse is None:
        parser.error(f"no figures known for {bench} (known: {', '.join(PARSERS)})")
    if args.from_logs:
        if args.log_dir is None:
            parser.error("--from-logs needs --log-dir")
        return from_logs(bench, args.log_dir)
    compiled = _compiled(AFTER_ROOT)
    if compiled:
        parser.error(
            f"{AFTER_ROOT} has compiled modules ({compiled[0]}, ...): "
            "run from a checkout without them so both trees run interpreted"
        )
    before_rev = _git("rev-parse", args.before)
    after_rev = _git("rev-parse", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))

    work = Path(tempfile.mkdtemp(prefix="ktc-interleave-"))
    before_root = work / "before"
    site_dir = work / "site"
    site_dir.mkdir()
    (site_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    _git("worktree", "add", "--detach", str(before_root), before_rev)
    try:
        script_note = "its own script"
        if args.script_from == "after" or not (before_root / relative).exists():
            shutil.copy2(AFTER_ROOT / relative, before_root / relative)
            script_note = NOTE_COPIED
        copied = script_note == NOTE_COPIED
        trees = {"before": before_root, "after": AFTER_ROOT}
        names = {t: _first_party_names(root) for t, root in trees.items()}
        print(
            f"{bench} {' '.join(args.bench_args)}\n"
            f"before {before_rev[:10]} ({before_root}, {script_note})\n"
            f"after  {after_rev[:10]}{' + uncommitted changes' if dirty else ''} "
            f"({AFTER_ROOT})\n"
            f"{args.rounds} round(s) per tree, alternating; {os.cpu_count()} cores; "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
            flush=True,
        )
        runs: list[Run] = []
        for index in range(args.rounds):
            for tree_name, root in trees.items():
                run = run_once(
                    tree_name,
                    root,
                    root / relative,
                    args.bench_args,
                    parse,
                    index,
                    names[tree_name],
                    site_dir,
                    args.timeout_s,
                    AFTER_ROOT if copied and tree_name == "before" else None,
                )
                if (
                    tree_name == "before"
                    and index == 0
                    and run.returncode != 0
                    and script_note == "its own script"
                ):
                    print(
                        f"  before's own script failed ({run.returncode}): "
                        f"{run.output.strip().splitlines()[-1:]}; "
                        "using the after tree's script",
                        flush=True,
                    )
                    shutil.copy2(AFTER_ROOT / relative, before_root / relative)
                    script_note, copied = NOTE_COPIED, True
                    run = run_once(
                        tree_name,
                        root,
                        root / relative,
                        args.bench_args,
                        parse,
                        index,
                        names[tree_name],
                        site_dir,
                        args.timeout_s,
                        AFTER_ROOT,
                    )
                runs.append(run)
                if args.log_dir is not None:
                    args.log_dir.mkdir(parents=True, exist_ok=True)
                    (args.log_dir / f"{bench}-{index}-{tree_name}.log").write_text(
                        run.output
                    )
                status = "ok" if run.returncode == 0 else f"FAILED ({run.returncode})"
                print(
                    f"  round {index + 1} {tree_name:6} {status} in {run.seconds:.0f} s, "
                    f"load {run.load_before:.1f} -> {run.load_after:.1f}, "
                    f"{run.processes} Python process(es), "
                    f"{run.imports_from_tree} first-party imports from the tree, "
                    + (
                        f"{run.helpers_from_after} tests.* helpers from the after tree, "
                        if run.helpers_from_after
                        else ""
                    )
                    + f"{len(run.imports_elsewhere)} from elsewhere, "
                    f"{len(run.figures)} figures",
                    flush=True,
                )
                for line in run.imports_elsewhere[:5]:
                    print(f"    NOT FROM THE TREE: {line}")
                if run.returncode != 0:
                    print("    " + "\n    ".join(run.output.strip().splitlines()[-5:]))
        rows = summarize([r for r in runs if not r.imports_elsewhere])
        print(
            f"\nscript at the before revision: {script_note}; "
            f"load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        print_table(rows)
        if args.json is not None:
            args.json.write_text(
                json.dumps(
                    {
                        "bench": bench,
                        "bench_args": args.bench_args,
                        "before": before_rev,
                        "after": after_rev,
                        "before_script": script_note,
                        "runs": [
                            {
                                "tree": r.tree,
                                "round": r.index,
                                "seconds": round(r.seconds, 1),
                                "load": [r.load_before, r.load_after],
                                "returncode": r.returncode,
                                "imports_elsewhere": r.imports_elsewhere,
                                "figures": r.figures,
                            }
                            for r in runs
                        ],
                        "figures": [dataclasses.asdict(row) for row in rows],
                    },
                    indent=2,
                )
            )
        failed = [r for r in runs if r.returncode != 0 or r.imports_elsewhere]
        return 1 if failed else 0
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(before_root)],
            cwd=AFTER_ROOT,
            check=False,
            capture_output=True,
        )
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
