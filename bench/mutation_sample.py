"""Mutation score of a whole package from a uniform random sample of its mutants (mutmut 3.x).

    python bench/mutation_sample.py --sample 1000 --seed 7 [--package analysis]
        [--tests tests/analysis] [--children 2] [--mutmut-path /tmp/mutmut] [--reuse]

Why a sample: `tb_plugin/analysis` has about 16,000 mutants; each one runs the unit tests that
reach its function, so the full run takes 10-25 hours on the 2-core machine. The score of a
uniform random sample of n mutants estimates the package's score with a binomial error (Wilson
95% interval printed beside it; n = 1,000 gives about +-2.2 points at 85%). Every mutant of the
package is generated, then `--sample` of them are drawn with `--seed` (Python's `random.sample`
over the sorted names) and only those are run. To judge tests written after a run, draw a fresh
sample with another seed: re-running the sample whose survivors the tests were written for
would overstate the score.

It prepares a scratch copy like bench/mutation_run.py (tb_plugin/, tests/, bench/, pyproject.toml,
README.md;
samples/ and ../shared linked), with `only_mutate = tb_plugin/<package>/*` and the unit-lane
tests under `--tests`. The first `mutmut run` (with a pattern that matches nothing) generates
the mutants and records which test reaches which function; `--reuse` keeps that scratch (same
sources and tests) for a second sample.

Score = detected / sampled, detected = killed + timeout + segfault (the mutant failed or hung
the tests); survived, no tests and suspicious count against. Prints the score per module of
the sample and each survivor's name (`mutmut show NAME` in the scratch prints its diff), and
writes SCRATCH/sample_<seed>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRATCH = Path(os.environ.get("TMPDIR", "/tmp")) / "torch-prof-mutation"
TEXT_TEST = "tests/analysis/test_flops_torch.py::test_op_schemas_table_is_torchs"
DETECTED = {"killed", "timeout", "segfault"}
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 36: "timeout",
          -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", -11: "segfault",
          -9: "segfault", None: "not checked"}


def prepare(work: Path, package: str, tests: str) -> None:
    if work.parent.exists():
        shutil.rmtree(work.parent)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "static", "_work")
    for name in ("tb_plugin", "tests", "bench"):  # a flops test runs bench/gen_op_schemas.py
        shutil.copytree(REPO / name, work / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):  # a test reads the README's rule table
        shutil.copy2(REPO / name, work / name)
    (work / "samples").symlink_to(REPO / "samples")
    shared = REPO.parent / "shared"
    if shared.exists():  # tests/support finds ../shared from mutants/
        (work / "shared").symlink_to(shared.resolve())
    (work / "setup.cfg").write_text(
        "[mutmut]\nsource_paths = tb_plugin\n"
        f"only_mutate = tb_plugin/{package}/*\nalso_copy = samples\n    bench\n    README.md\n"
        f"pytest_add_cli_args_test_selection =\n    {tests}\n"
        # one argument a line (mutmut passes a one-line value to pytest as a single argument);
        # TEXT_TEST compares op_schemas.py's source text with its generator: mutmut rewrites it
        "pytest_add_cli_args =\n    -p\n    no:cacheprovider\n    -q\n    -m\n    unit\n"
        f"    --deselect\n    {TEXT_TEST}\n"
        "timeout_multiplier = 10.0\n", encoding="utf-8")


def mutmut(work: Path, env: dict[str, str], log: Path, *args: str) -> None:
    with log.open("a", encoding="utf-8") as out:
        subprocess.run(["nice", "-n", "10", sys.executable, "-m", "mutmut", *args], cwd=work,
                       env=env, stdout=out, stderr=subprocess.STDOUT, check=False)


def results(work: Path) -> dict[str, int | None]:
    """Every mutant's exit code (None: not run), from mutmut's per-file .meta records."""
    codes: dict[str, int | None] = {}
    for meta in sorted((work / "mutants").rglob("*.meta")):
        codes.update(json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"])
    return codes


def module_of(name: str) -> str:
    return name.split(".x_")[0].split(".xǁ")[0]


def wilson(detected: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = detected / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def report(chosen: list[str], codes: dict[str, int | None], total: int) -> dict:
    status = {name: STATUS.get(codes.get(name), "suspicious") for name in chosen}
    detected = sum(s in DETECTED for s in status.values())
    low, high = wilson(detected, len(chosen))
    by_module: dict[str, Counter] = defaultdict(Counter)
    for name, s in status.items():
        by_module[module_of(name)][s] += 1
    print(f"sampled {len(chosen)} of {total} mutants: {detected} detected = "
          f"{100 * detected / len(chosen):.1f}% (95% {100 * low:.1f}-{100 * high:.1f}%)")
    print("module\tsampled\tdetected\tsurvived\tno_tests\tscore")
    for module, counts in sorted(by_module.items()):
        n = sum(counts.values())
        hit = sum(counts[s] for s in DETECTED)
        print(f"{module}\t{n}\t{hit}\t{counts['survived']}\t{counts['no tests']}\t"
              f"{100 * hit / n:.0f}%")
    for name, s in sorted(status.items()):
        if s not in DETECTED:
            print(f"  {s}: {name}")
    return {"total": total, "sampled": len(chosen), "detected": detected,
            "score": detected / len(chosen), "wilson95": [low, high], "status": status}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="analysis", help="folder under tb_plugin/")
    parser.add_argument("--tests", default="tests/analysis", help="unit tests that may kill")
    parser.add_argument("--sample", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--children", type=int, default=2)
    parser.add_argument("--mutmut-path", default=os.environ.get("MUTMUT_PATH"))
    parser.add_argument("--reuse", action="store_true",
                        help="keep the scratch's generated mutants and test map")
    args = parser.parse_args()
    work = SCRATCH / f"sample_{args.package.replace('/', '_')}" / "work"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if args.mutmut_path:
        env["PYTHONPATH"] = args.mutmut_path
    log = work.parent / "mutmut.log"
    if not (args.reuse and (work / "mutants").is_dir()):
        prepare(work, args.package, args.tests)
        mutmut(work, env, log, "run", "--max-children", str(args.children), "zz_no_such_mutant")
    names = sorted(results(work))
    if not names:
        raise SystemExit(f"no mutants generated; see {log}")
    chosen = random.Random(args.seed).sample(names, min(args.sample, len(names)))
    mutmut(work, env, log, "run", "--max-children", str(args.children), *chosen)
    summary = report(chosen, results(work), len(names))
    summary.update(seed=args.seed, package=args.package, tests=args.tests)
    out = work.parent / f"sample_{args.seed}.json"
    out.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
