"""How fast the CLI answers: `--help`, a cached `report` and a cached `summary` on a logdir of
20 runs, each command a fresh process, median of 5 (after one warm-up run that fills the cache).

    python bench/cli_speed.py [--repo PATH] [--runs 20] [--repeat 5] [--out FILE]

The logdir (bench/_work/cli_speed/<runs>/) holds `runs` run folders, copies of the samples/
runs in turn (4 runs: 2-3 CPU traces each, 0.3-0.6 MB gzip). `--repo` runs the CLI of another
checkout (PYTHONPATH and cwd; e.g. an export of an older commit) on the same logdir, with a
cache of its own. Measured: wall seconds (min, median, max) and the median CPU seconds (user +
system, which the load of a shared machine changes less than the wall time) of `--help`,
`report LOGDIR --run <the 7th run> --view overview --format json`, `report ... --view
findings` and `summary LOGDIR --json`. One JSON line per command on stdout,
and the table as Markdown with `--out`. Nothing asserts timings.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"


def make_logdir(runs: int) -> Path:
    root = REPO / "bench" / "_work" / "cli_speed" / str(runs)
    if root.is_dir() and len(list(root.iterdir())) == runs:
        return root
    shutil.rmtree(root, ignore_errors=True)
    sources = sorted(p for p in SAMPLES.iterdir() if p.is_dir())
    for i in range(runs):
        source = sources[i % len(sources)]
        shutil.copytree(source, root / f"run{i:02d}_{source.name}")
    return root


def timed(command: list[str], env: dict[str, str], repeat: int
          ) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system of the process and its children) per run."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600,
                                cwd=env["PYTHONPATH"])  # `-m` puts the cwd first on sys.path
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if result.returncode != 0:
            raise SystemExit(f"{command}: exit {result.returncode}: {result.stderr[-2000:]}")
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(REPO))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out")
    args = parser.parse_args()
    logdir = make_logdir(args.runs)
    run = sorted(p.name for p in logdir.iterdir())[min(6, args.runs - 1)]
    with tempfile.TemporaryDirectory(prefix="cli-speed-cache-") as cache:
        env = {**os.environ, "PYTHONPATH": args.repo, "TORCH_PROF_CACHE_DIR": cache}
        cli = [sys.executable, "-m", "tb_plugin"]
        commands = {
            "--help": [*cli, "--help"],
            "report overview": [*cli, "report", str(logdir), "--run", run, "--view",
                                "overview", "--format", "json"],
            "report findings": [*cli, "report", str(logdir), "--run", run, "--view",
                                "findings", "--format", "json"],
            "summary": [*cli, "summary", str(logdir), "--json"],
        }
        timed(commands["summary"], env, 1)  # fills the cache with every file
        rows = []
        for name, command in commands.items():
            if name == "report findings" and "findings" not in subprocess.run(
                    [*cli, "report", "--help"], env=env, capture_output=True, text=True,
                    cwd=args.repo).stdout:
                continue  # an older checkout without the view
            times, cpus = timed(command, env, args.repeat)
            row = {"command": name, "median_s": round(statistics.median(times), 3),
                   "min_s": round(min(times), 3), "max_s": round(max(times), 3),
                   "cpu_median_s": round(statistics.median(cpus), 3),
                   "load": round(os.getloadavg()[0], 1), "repo": args.repo, "runs": args.runs}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out:
        with open(args.out, "a") as out:
            out.write(f"\n`--repo {args.repo}`, {args.runs} runs, median of {args.repeat}:\n\n"
                      "| command | median s | min s | max s | CPU s (median) | load avg |\n"
                      "|---|---|---|---|---|---|\n")
            for row in rows:
                out.write(f"| {row['command']} | {row['median_s']} | {row['min_s']} | "
                          f"{row['max_s']} | {row['cpu_median_s']} | {row['load']} |\n")


if __name__ == "__main__":
    main()
