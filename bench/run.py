"""Benchmark torch-prof against the deprecated torch-tb-profiler 0.4.3 on real traces.

One command does everything, reusing whatever earlier runs already produced:

    .venv/bin/python bench/run.py [--sizes 50,200,800] [--huge] [--skip-old]

1. record one real CPU trace per size with torch.profiler (bench/_work/traces/<size>mb/);
2. with --huge, synthesize a ~4 GB trace from a recorded one (ours only);
3. create bench/_work/oldvenv with torch-tb-profiler==0.4.3 (no torch);
4. time parse+analysis and peak RSS of both plugins, each in a fresh child process;
5. print the table and write bench/results.md and bench/_work/results.json.

See bench/README.md for what exactly is measured and why.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import harness
import report
from benchpaths import RESULTS_JSON, RESULTS_MD, log
from oldvenv import ensure_old_venv, pip_freeze
from record import DEFAULT_MEM_CAP_GB
from synth import ensure_huge
from tracegen import TraceInfo, ensure_trace


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line; defaults are the sizes the project's targets are stated for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="50,200,800",
        help="comma-separated trace sizes in MB (MiB) to record and compare",
    )
    parser.add_argument(
        "--huge", action="store_true", help="also synthesize a ~4 GB trace and measure ours on it"
    )
    parser.add_argument("--huge-mb", type=int, default=4096, help="size of the --huge trace")
    parser.add_argument(
        "--skip-old",
        action="store_true",
        help="do not run the old plugin (its last numbers for the same file are "
        "shown, marked cached)",
    )
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds before one measurement is abandoned"
    )
    parser.add_argument(
        "--record-mem-cap-gb",
        type=float,
        default=DEFAULT_MEM_CAP_GB,
        help="address-space cap for the torch recorder process",
    )
    args = parser.parse_args(argv)
    args.size_list = [int(s) for s in args.sizes.split(",") if s.strip()]
    return args


def prepare_traces(args: argparse.Namespace) -> list[TraceInfo]:
    """Record (or reuse) every requested trace before measuring, so torch is long gone by then."""
    traces = [ensure_trace(size, args.record_mem_cap_gb) for size in args.size_list]
    if args.huge:
        traces.append(ensure_huge(traces, args.huge_mb))
    return traces


def measure_row(trace: TraceInfo, args: argparse.Namespace, old_cache: dict) -> report.Row:
    """Both plugins on one trace: old first (unless skipped or synthetic), then ours."""
    old: dict[str, Any] | None
    if args.skip_old or trace.synthetic:
        old = None if trace.synthetic else report.cached_old(trace, old_cache)
    else:
        log(f"{trace.size_label}: old plugin ...")
        old = harness.measure_old(trace, args.timeout)
        report.remember_old(trace, old)
    log(f"{trace.size_label}: old plugin: {harness.describe(old)}")
    log(f"{trace.size_label}: ours ...")
    ours = harness.measure_ours(trace, args.timeout)
    log(f"{trace.size_label}: ours: {harness.describe(ours)}")
    return {"trace": vars(trace).copy(), "old": old, "ours": ours}


def old_plugin_info(args: argparse.Namespace) -> dict[str, Any]:
    """Set up the old venv unless it is not needed; its versions go into results.json."""
    if args.skip_old:
        return {"version": "0.4.3 (cached results)" if report.previous_old_results() else None}
    version = ensure_old_venv()
    log(f"old plugin: torch-tb-profiler {version}")
    return {"version": version, "freeze": pip_freeze()}


def main(argv: list[str] | None = None) -> int:
    """Run the whole benchmark; exit status is 0 whatever the numbers (no timing is asserted)."""
    args = parse_args(argv)
    machine = report.machine_info()
    machine["command"] = " ".join([".venv/bin/python", "bench/run.py", *sys.argv[1:]])
    log(f"machine: {machine['summary']}, load {machine['loadavg_1m_at_start']}")
    traces = prepare_traces(args)
    old_info = old_plugin_info(args)
    old_cache = report.previous_old_results()
    rows = [measure_row(trace, args, old_cache) for trace in traces]
    harness.cleanup_tmp()
    report.save(rows, machine, old_info)
    print()
    print(report.render_text(rows))
    print()
    for line in report.target_lines(rows):
        print(line)
    log(f"wrote {RESULTS_MD} and {RESULTS_JSON}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
