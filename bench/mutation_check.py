"""Mutation check: do the tests catch a wrong number?

Copies tb_plugin/ and tests/ (samples/ and ../shared are linked, not copied) into a scratch
folder, then, one at a time, perturbs a key number in the scratch copy and runs the unit tests
of that number's module against it (PYTHONPATH points at the scratch copy). Every perturbation
must make those tests FAIL. Before any perturbation the same tests must pass on the unchanged
copy, or the check would prove nothing.

Exit status: 0 when every perturbation is caught; 1 when one survives (named); 2 when the check
itself cannot run: an anchor no longer matches exactly once (the code moved: update its pattern
in MUTATIONS below), a test file is missing, the unchanged copy fails, or a perturbed run ends
in something other than test failures (an import or collection error proves nothing).

    python bench/mutation_check.py            # all perturbations
    python bench/mutation_check.py kernels    # only those whose name contains "kernels"
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "tb_plugin"
#: What the tests need in the scratch copy: copied (edited there) or linked (read only).
COPIED = ("tb_plugin", "tests", "pyproject.toml")
LINKED = ("samples",)
RUN_TIMEOUT_S = 600
PYTEST_FAILED = 1  # pytest's exit status when tests ran and some failed


@dataclass(frozen=True)
class Mutation:
    """One perturbation: `pattern` must match exactly once in the whole package."""

    name: str
    what: str
    pattern: str  # a regular expression (re.MULTILINE) on a distinctive line of the code
    replacement: str  # re.sub replacement, \\1 etc. refer to the pattern's groups
    tests: tuple[str, ...]  # unit tests that must catch it (paths relative to the repo)


MUTATIONS = (
    Mutation(
        name="modules.host_total",
        what="a module's host total time doubled (Module view rows)",
        pattern=r'^(\s*"host_total_us": round\(float\(host\))(, 3\),)',
        replacement=r"\1 * 2\2",
        tests=("tests/analysis/test_modules.py",),
    ),
    Mutation(
        name="breakdown.memcpy",
        what="the Memcpy category of the step-time breakdown scaled by 1.5",
        pattern=r"^(\s*)(costs\[role\] = rg\.length_in_windows\(taken, starts, ends\))$",
        replacement=r"\1\2\n\1costs[role] = costs[role] * (1.5 if role == MEMCPY else 1.0)",
        tests=("tests/analysis/test_breakdown.py",),
    ),
    Mutation(
        name="kernels.total",
        what="every kernel group's total time scaled by 1.5 (Kernel view table)",
        pattern=r'^(\s*)(out\["mean_us"\] = out\["total_us"\] / out\["calls"\])$',
        replacement=r'\1\2\n\1out["total_us"] = out["total_us"] * 1.5',
        tests=("tests/analysis/test_kernels.py",),
    ),
    Mutation(
        name="distributed.transfer",
        what="the per-step data-transfer time scaled by 1.5 (Distributed view, wait chart)",
        pattern=r'^(\s*return \{name: \{"transfer": real\[i\])(, "synchronizing": both\[i\] - '
                r'real\[i\],)$',
        replacement=r"\1 * 1.5\2",
        tests=("tests/analysis/test_distributed.py", "tests/analysis/test_dist_run.py"),
    ),
    # GPU Idle: a boundary (strict host wait), a threshold (kernel wait), a tie rule (queue)
    Mutation(
        name="gpu_idle.host_wait_strict",
        what="a launch exactly at the previous end counted as host wait (> became >=)",
        pattern=r"^(\s*host_wait = np\.isfinite\(launch\) & \(launch )>( prev_end\))$",
        replacement=r"\1>=\2",
        tests=("tests/analysis/test_properties_intervals.py",),
    ),
    Mutation(
        name="gpu_idle.kernel_wait_threshold",
        what="a gap equal to kernel_wait_us counted as kernel wait (< became <=)",
        pattern=r"^(\s*kernel_wait = .*\(gap )<( kernel_wait_us\))$",
        replacement=r"\1<=\2",
        tests=("tests/analysis/test_properties_intervals.py",),
    ),
    Mutation(
        name="gpu_idle.queue_ties",
        what="at equal times the queue's +1s applied before its -1s (a transient peak)",
        pattern=r"^(\s*times = np\.concatenate\(\(launch_start, start\)\)\n.*\n\s*order = "
                r"np\.lexsort\(\()delta(, times\)\))$",
        replacement=r"\1-delta\2",
        tests=("tests/analysis/test_properties_intervals.py",),
    ),
    Mutation(
        name="gpu_idle.backlog_unit",
        what="the backlog threshold read as 1000 ms instead of 1000 us (a unit slip)",
        pattern=r"^(BACKLOG_MIN_US = )1000\.0$",
        replacement=r"\g<1>1000.0 * 1000.0",
        tests=("tests/analysis/test_gpu_idle.py", "tests/analysis/test_graphs.py"),
    ),
    # What-if: the factor's closed range and the edit count's limit
    Mutation(
        name="whatif.factor_bound",
        what="the largest factor (MAX_FACTOR itself) refused (<= became <)",
        pattern=r"^(\s*if not 0\.0 <= factor )<=( MAX_FACTOR:.*)$",
        replacement=r"\1<\2",
        tests=("tests/analysis/test_whatif.py",),
    ),
    Mutation(
        name="whatif.max_edits",
        what="exactly MAX_EDITS edits refused (> became >=)",
        pattern=r"^(\s*if len\(parts\) )>( MAX_EDITS:)$",
        replacement=r"\1>=\2",
        tests=("tests/analysis/test_whatif.py",),
    ),
    # Efficiency: the ridge point's tie, TB/s vs GB/s, the MBU's unit
    Mutation(
        name="efficiency.ridge_tie",
        what="an op exactly at the ridge point called memory-bound (>= became >)",
        pattern=r'^(\s*bound = "compute" if intensity )>=( peak / bandwidth else "memory")$',
        replacement=r"\1>\2",
        tests=("tests/analysis/test_compiled_hardware.py",
               "tests/analysis/test_precision_peaks.py"),
    ),
    Mutation(
        name="efficiency.tbps_unit",
        what="achieved bandwidth in GB/s where TB/s is meant (1e12 became 1e9)",
        pattern=r"^(\s*tbps = _ratio\(r\.bytes, seconds \* )1e12(\))$",
        replacement=r"\g<1>1e9\2",
        tests=("tests/analysis/test_compiled_hardware.py",
               "tests/analysis/test_precision_peaks.py"),
    ),
    Mutation(
        name="efficiency.mbu_unit",
        what="the memory-bandwidth utilisation with the bandwidth in GB/s (1e12 became 1e9)",
        pattern=r"^(\s*mbu = float\(per_bytes\[i\] / \(seconds \* bandwidth \* )1e12(\).*)$",
        replacement=r"\g<1>1e9\2",
        tests=("tests/analysis/test_compiled_hardware.py", "tests/analysis/test_precision_peaks.py",
               "tests/analysis/test_overview.py"),
    ),
    # CUDA graphs: the backlog rule's minimum event count and its threshold's tie
    Mutation(
        name="graphs.backlog_min_events",
        what="a backlog flagged from one event (the minimum of 2 lowered to 1)",
        pattern=r"^(BACKLOG_MIN_EVENTS = )2$",
        replacement=r"\g<1>1",
        tests=("tests/analysis/test_graphs.py",),
    ),
    Mutation(
        name="graphs.backlog_tie",
        what="waits of exactly BACKLOG_MIN_US not counted as backlog (< became <=)",
        pattern=r"^(\s*if len\(mine\) < BACKLOG_MIN_EVENTS or mine\.min\(\) )<( BACKLOG_MIN_US:)$",
        replacement=r"\1<=\2",
        tests=("tests/analysis/test_graphs.py",),
    ),
)


class CheckError(Exception):
    """The check cannot run as written (exit status 2)."""


def make_scratch(root: Path) -> Path:
    """The repository's package and tests under root/repo, ../shared beside it (linked)."""
    repo = root / "repo"
    repo.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_artifacts")
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, repo / name, ignore=ignore)
        else:
            shutil.copy2(source, repo / name)
    for name in LINKED:
        (repo / name).symlink_to(REPO / name, target_is_directory=True)
    shared = REPO.parent / "shared"
    if shared.is_dir():  # tests/support finds it as ../shared of the checkout
        (root / "shared").symlink_to(shared, target_is_directory=True)
    return repo


def locate(repo: Path, mutation: Mutation) -> Path:
    """The one file of the package where the mutation's pattern matches exactly once."""
    pattern = re.compile(mutation.pattern, re.MULTILINE)
    hits = [(path, len(pattern.findall(path.read_text(encoding="utf-8"))))
            for path in sorted((repo / PACKAGE).rglob("*.py"))]
    hits = [(path, count) for path, count in hits if count]
    if len(hits) != 1 or hits[0][1] != 1:
        where = ", ".join(f"{p.relative_to(repo)} ({n}x)" for p, n in hits) or "nowhere"
        raise CheckError(f"anchor {mutation.name!r} ({mutation.what}) must match exactly once "
                         f"in {PACKAGE}/, found {where}: the code moved; update its pattern "
                         f"in bench/mutation_check.py MUTATIONS:\n  {mutation.pattern}")
    return hits[0][0]


def run_tests(repo: Path, tests: Sequence[str]) -> tuple[int, str]:
    """`pytest -m unit -x` on `tests` in the scratch copy; (exit status, output tail)."""
    missing = [t for t in tests if not (repo / t).is_file()]
    if missing:
        raise CheckError(f"test file(s) {missing} do not exist: update bench/mutation_check.py")
    env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONDONTWRITEBYTECODE": "1",
           "COLUMNS": "160"}
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-m", "unit", "-p", "no:cacheprovider",
               *tests]
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    return done.returncode, (done.stdout + done.stderr)[-3000:]


def check_imports_scratch(repo: Path) -> None:
    """The scratch copy, not an installed tb_plugin, is what the tests import."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run([sys.executable, "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"],
                          cwd=repo, env=env, capture_output=True, text=True, check=True)
    imported = Path(done.stdout.strip()).resolve()
    if repo.resolve() not in imported.parents:
        raise CheckError(f"the tests would import {imported}, not the scratch copy in {repo}")


def mutate(repo: Path, mutation: Mutation) -> str | None:
    """Apply one perturbation, run its tests, restore the file; a message if it survived."""
    path = locate(repo, mutation)
    original = path.read_text(encoding="utf-8")
    path.write_text(re.sub(mutation.pattern, mutation.replacement, original, count=1,
                           flags=re.MULTILINE), encoding="utf-8")
    try:
        status, tail = run_tests(repo, mutation.tests)
    finally:
        path.write_text(original, encoding="utf-8")
    if status == 0:
        return f"SURVIVED {mutation.name}: {mutation.what} ({path.relative_to(repo)}); " \
               f"{' '.join(mutation.tests)} still pass"
    failed = [line for line in tail.splitlines() if line.startswith("FAILED ")]
    if status != PYTEST_FAILED or not failed or not _ASSERTION_FAILED.search(tail):
        raise CheckError(f"{mutation.name}: pytest exited {status} without a failed assertion "
                         f"(an exception proves nothing: fix the replacement):\n{tail}")
    print(f"  {failed[0]}")
    return None


#: pytest's location line of a test that failed an assert (`-x`: the only failure shown).
_ASSERTION_FAILED = re.compile(r"^tests/\S+\.py:\d+: AssertionError$", re.MULTILINE)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("only", nargs="*", help="run only mutations whose name contains these")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or any(o in m.name for o in args.only)]
    if not chosen:
        print(f"no mutation matches {args.only}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="torch-prof-mutation-") as tmp:
        repo = make_scratch(Path(tmp))
        try:
            check_imports_scratch(repo)
            for mutation in chosen:
                locate(repo, mutation)  # every anchor first: fail fast when code moved
            baseline = sorted({t for m in chosen for t in m.tests})
            status, tail = run_tests(repo, baseline)
            if status != 0:
                raise CheckError(f"the unchanged copy fails its tests (exit {status}):\n{tail}")
            survivors = []
            for mutation in chosen:
                started = time.monotonic()
                survivor = mutate(repo, mutation)
                verdict = "survived" if survivor else "caught"
                print(f"{mutation.name}: {verdict} ({time.monotonic() - started:.1f} s)",
                      flush=True)
                if survivor:
                    survivors.append(survivor)
        except CheckError as error:
            print(f"mutation check cannot run: {error}", file=sys.stderr)
            return 2
    for survivor in survivors:
        print(survivor, file=sys.stderr)
    if survivors:
        return 1
    print(f"all {len(chosen)} perturbations caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
