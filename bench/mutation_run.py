"""Mutation score per module with mutmut (3.x), one module at a time, narrowest tests first.

For each module named in MODULES (or on the command line), copies tb_plugin/, tests/ and
pyproject.toml into a scratch folder (samples/ and ../shared are linked), writes a setup.cfg
[mutmut] section that mutates only that module and selects only its unit tests, runs
`mutmut run` there under `nice -n 19`, and prints one line a module:

    module  killed  survived  timeout  no_tests  total  score

The score is killed (timeouts count as killed: the mutant hung the tests) over all mutants
that some test exercised plus those no test reached (`no_tests` counts against the score).
`--survivors` lists each survivor's name; `mutmut show NAME` in the module's scratch folder
prints its diff. The results of the last full run are in bench/mutation_results.md.

    python bench/mutation_run.py                      # every module in MODULES
    python bench/mutation_run.py nesting ranges       # modules whose key contains a word
    python bench/mutation_run.py --survivors nesting  # also list the surviving mutants
    python bench/mutation_run.py gpu_idle/idle.py --functions stream_gaps queue_series
                                                      # only the mutants of these functions
    python bench/mutation_run.py --rerun nesting      # again, the earlier run's non-killed
                                                      # mutants only, with the current tests
    python bench/mutation_run.py analysis/findings.py --tests tests/test_findings.py
                                                      # any module, with the tests named

mutmut is not a dependency of the package: install it where you like
(`pip install --target /tmp/mutmut mutmut==3.8.1`) and pass `--mutmut-path` (a PYTHONPATH entry)
when it is not importable from the running interpreter.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRATCH = Path(os.environ.get("TMPDIR", "/tmp")) / "torch-prof-mutation"

A = "tests/analysis/"
PROPS = A + "test_properties_intervals.py"
#: module under tb_plugin/ -> the unit tests that exercise it (the narrowest selection).
MODULES: dict[str, tuple[str, ...]] = {
    "analysis/nesting.py": (A + "test_nesting.py", PROPS),
    "analysis/ranges.py": (A + "test_ranges.py", PROPS),
    "analysis/gpu_idle/idle.py": (A + "test_gpu_idle.py", PROPS),
    "analysis/gpu_idle/critical_path.py": (A + "test_gpu_idle.py", A + "test_timeline_critical.py",
                                           PROPS),
    "analysis/gpu_idle/launch_stats.py": (A + "test_gpu_idle.py",),
    "analysis/efficiency/flops.py": (A + "test_flops.py", A + "test_flops_variants.py",
                                     A + "test_flop_links.py"),
    "analysis/efficiency/flop_formulas.py": (A + "test_flops.py", A + "test_flops_variants.py"),
    "analysis/efficiency/roofline.py": (A + "test_compiled_hardware.py",
                                        A + "test_precision_peaks.py", A + "test_tensor_cores.py"),
    "analysis/kernels.py": (A + "test_kernels.py",),
    "analysis/steps.py": (A + "test_steps.py",),
    "analysis/breakdown.py": (A + "test_breakdown.py",),
    "analysis/operators.py": (A + "test_operators.py",),
    "analysis/overview.py": (A + "test_overview.py",),
    "analysis/optree.py": (A + "test_optree.py",),
    "analysis/modules.py": (A + "test_modules.py",),
}

COPIED = ("tb_plugin", "tests", "bench", "pyproject.toml", "README.md")  # tests read the last two
LINKED = ("samples",)


def scratch_for(module: str) -> Path:
    return SCRATCH / module.replace("/", "_").removesuffix(".py")


def prepare(module: str, tests: tuple[str, ...]) -> Path:
    """A fresh scratch folder for `module` with its setup.cfg."""
    work = scratch_for(module) / "work"
    if work.parent.exists():
        shutil.rmtree(work.parent)
    work.mkdir(parents=True)
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, work / name,
                            ignore=shutil.ignore_patterns("__pycache__", "static", "_work"))
        else:
            shutil.copy2(source, work / name)
    for name in LINKED:
        (work / name).symlink_to(REPO / name)
    # mutmut runs the tests in work/mutants/: tests/support finds ../shared from there.
    shared = REPO.parent / "shared"
    if shared.exists():
        (work / "shared").symlink_to(shared.resolve())
    selection = "\n    ".join(tests)
    (work / "setup.cfg").write_text(
        "[mutmut]\n"
        "source_paths = tb_plugin\n"
        f"only_mutate = tb_plugin/{module}\n"
        "also_copy = samples\n    bench\n    README.md\n"
        f"pytest_add_cli_args_test_selection =\n    {selection}\n"
        # one argument a line: mutmut passes a one-line value to pytest as a single argument
        "pytest_add_cli_args =\n    -p\n    no:cacheprovider\n    -q\n    -m\n    unit\n"
        # compares op_schemas.py's source text with its generator: mutmut rewrites the source
        "    --deselect\n    tests/analysis/test_flops_torch.py::test_op_schemas_table_is_torchs\n"
        "timeout_multiplier = 10.0\n",
        encoding="utf-8")
    return work


def run_module(module: str, tests: tuple[str, ...], mutmut_path: str | None, children: int,
               functions: list[str], rerun: bool) -> dict[str, int]:
    missing = [t for t in tests if not (REPO / t).is_file()]
    if missing:
        raise SystemExit(f"{module}: test files missing: {missing} (update MODULES)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if mutmut_path:
        env["PYTHONPATH"] = mutmut_path
    names = [f"*.x_{name}__mutmut_*" for name in functions]
    if rerun:  # the same scratch, the current tests, only what the last run did not kill
        work = scratch_for(module) / "work"
        for test in tests:
            shutil.copy2(REPO / test, work / test)
        (work / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)  # tests changed
        names = [n for n in not_killed(work, env)
                 if not functions or any(fnmatch.fnmatch(n, p) for p in names)]
    else:
        work = prepare(module, tests)
    base = ["nice", "-n", "19", sys.executable, "-m", "mutmut"]
    log = (work.parent / "mutmut.log").open("a" if rerun else "w", encoding="utf-8")
    subprocess.run([*base, "run", "--max-children", str(children), *names], cwd=work, env=env,
                   stdout=log, stderr=subprocess.STDOUT, check=False)
    subprocess.run([*base, "export-cicd-stats"], cwd=work, env=env, stdout=log,
                   stderr=subprocess.STDOUT, check=False)
    stats_file = work / "mutants" / "mutmut-cicd-stats.json"
    if not stats_file.is_file():
        raise SystemExit(f"{module}: mutmut produced no stats; see {work.parent / 'mutmut.log'}")
    return json.loads(stats_file.read_text(encoding="utf-8"))


def not_killed(work: Path, env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work,
                         env=env, capture_output=True, text=True, check=False).stdout
    return [line.split(":")[0].strip() for line in out.splitlines()
            if ":" in line and not line.strip().endswith("killed")]


def survivors(module: str, mutmut_path: str | None) -> list[str]:
    work = scratch_for(module) / "work"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if mutmut_path:
        env["PYTHONPATH"] = mutmut_path
    out = subprocess.run([sys.executable, "-m", "mutmut", "results"], cwd=work, env=env,
                         capture_output=True, text=True, check=False).stdout
    return [line.split(":")[0].strip() for line in out.splitlines()
            if line.strip().endswith("survived")]


def score(stats: dict[str, int]) -> tuple[int, int, float]:
    killed = stats.get("killed", 0) + stats.get("timeout", 0)
    total = killed + sum(stats.get(k, 0) for k in ("survived", "no_tests", "suspicious"))
    return killed, total, (100.0 * killed / total if total else 100.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="run only modules whose key contains one of these")
    parser.add_argument("--mutmut-path", default=os.environ.get("MUTMUT_PATH"),
                        help="a PYTHONPATH entry where mutmut is installed")
    parser.add_argument("--children", type=int, default=1, help="mutmut --max-children")
    parser.add_argument("--survivors", action="store_true", help="list the surviving mutants")
    parser.add_argument("--functions", nargs="+", default=[],
                        help="mutate only these functions of the module(s)")
    parser.add_argument("--tests", nargs="+", default=[],
                        help="the unit tests for a module not in MODULES (or instead of its own)")
    parser.add_argument("--rerun", action="store_true",
                        help="re-test the last run's non-killed mutants with the current tests")
    args = parser.parse_args()
    chosen = {m: t for m, t in MODULES.items() if not args.only or any(w in m for w in args.only)}
    if args.tests:  # `only` names modules (paths under tb_plugin/) run with these tests
        chosen = {m: tuple(args.tests) for m in args.only}
    print("module\tkilled\tsurvived\ttimeout\tno_tests\ttotal\tscore")
    for module, tests in chosen.items():
        stats = run_module(module, tests, args.mutmut_path, args.children, args.functions,
                           args.rerun)
        killed, total, pct = score(stats)
        print(f"{module}\t{stats.get('killed', 0)}\t{stats.get('survived', 0)}\t"
              f"{stats.get('timeout', 0)}\t{stats.get('no_tests', 0)}\t{total}\t{pct:.1f}%",
              flush=True)
        if args.survivors:
            for name in survivors(module, args.mutmut_path):
                print(f"  survived: {name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
