"""`torch-prof compare BASE EXP` and `torch-prof baseline save|list`: regression verdicts
between two sets of traces, a CI gate, and named baselines.

A side (BASE, EXP, or a `baseline save` LOGDIR) is a trace file, a run folder or a logdir:
every run under it is one repetition, and every trace file of a run (its ranks and spans) adds
its steps to that run. Each file is reduced to its per-step summary
(`analysis.compare.summary`, cached per file and code version like the views' payloads); a
file that cannot be read is named on stderr and left out, the others are compared.

Exit codes: 0 when the comparison ran (and the gate, if any, passed); 1 when the `--gate`
failed (the metric regressed by more than the threshold at the chosen confidence); 2 for
usage errors (a bad flag value, a missing path, an unknown baseline or metric); 3 when a
side has no readable trace, or, with `--gate`, when the sides are not comparable (the gate
cannot vouch for them).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

from .analysis.compare.compare import DEFAULT_MIN_CHANGE, compare
from .analysis.compare.stats import MEAN, NOT_COMPARABLE, Interval, gate_fails, quantile_of
from .analysis.compare.summary import STEP_TOTAL, step_summary
from .baseline_store import (
    BaselineError,
    default_store,
    list_baselines,
    load_baseline,
    save_baseline,
)
from .cache import TraceCache, default_cache_dir
from .cli_common import cache_of
from .discovery import discover_runs
from .load import load_trace
from .output.compare_report import junit, markdown
from .output.encoding import pretty_json
from .storage import FileRef, filesystem, open_ref
from .views.spec import code_fingerprint

COMMANDS = ("compare", "baseline")
EXIT_GATE, EXIT_USAGE, EXIT_NO_DATA = 1, 2, 3


class UsageError(Exception):
    pass


class NoData(Exception):
    pass


def percent(text: str) -> float:
    """"3%" -> 0.03; a value without "%" is refused (is 3 three percent or 300?)."""
    value = text.strip()
    if not value.endswith("%"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a percentage such as 3%")
    try:
        number = float(value[:-1])
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage") from None
    if not 0 <= number < 1000:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 0% to 1000%")
    return number / 100.0


def confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.5 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 0.5 <= confidence < 1 (0.95)")
    return value


def statistic(text: str) -> str:
    try:
        quantile_of(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_parser(commands: Any) -> None:
    cmp = commands.add_parser(
        "compare", help="regression verdict of EXP against BASE (or --baseline NAME)",
        description="Per step category, operator, kernel and operator category: the change "
        "of the per-step mean with a bootstrap interval, and a verdict.")
    cmp.add_argument("paths", nargs="+", metavar="PATH",
                     help="BASE EXP (trace file, run folder or logdir each), or only EXP "
                     "with --baseline")
    cmp.add_argument("--baseline", help="compare with this stored baseline (baseline save)")
    cmp.add_argument("--store", help="baseline store: folder or fsspec URL (default "
                     "<cache dir>/baselines)")
    cmp.add_argument("--gate", type=percent, help="exit 1 when --metric regressed by more "
                     "than this (e.g. 3%%) at --confidence")
    cmp.add_argument("--metric", default=STEP_TOTAL, help="the gated metric (default "
                     f"{STEP_TOTAL}; e.g. step:DataLoader, operator:aten::mm)")
    cmp.add_argument("--confidence", type=confidence, default=0.95,
                     help="two-sided confidence of the intervals (default 0.95)")
    cmp.add_argument("--min-change", type=percent, default=DEFAULT_MIN_CHANGE,
                     help="changes smaller than this share of the baseline step time are "
                     f"unchanged (default {DEFAULT_MIN_CHANGE * 100:g}%%)")
    cmp.add_argument("--statistic", type=statistic, default=MEAN,
                     help="per run, over its steps: mean (default), median or pNN (e.g. p20: "
                     "robust to steps stalled by other jobs on a shared host)")
    cmp.add_argument("--format", choices=("json", "markdown", "junit"), default="json")
    cmp.add_argument("--output", "-o", help="write the report here instead of stdout")
    base = commands.add_parser("baseline", help="save or list named baselines")
    actions = base.add_subparsers(dest="action", required=True)
    save = actions.add_parser("save", help="store LOGDIR's per-step summaries as NAME")
    save.add_argument("name")
    save.add_argument("logdir", help="trace file, run folder or logdir")
    save.add_argument("--store", help="folder or fsspec URL (default <cache dir>/baselines)")
    listing = actions.add_parser("list", help="the stored baselines")
    listing.add_argument("--store", help="folder or fsspec URL (default <cache dir>/baselines)")


def run(args: argparse.Namespace) -> int:
    cache = cache_of(args)
    store = args.store or default_store(default_cache_dir(cache.config))
    try:
        if args.command == "baseline":
            return _baseline(args, cache, store)
        return _compare(args, cache, store)
    except (UsageError, BaselineError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    except NoData as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_NO_DATA


def _baseline(args: argparse.Namespace, cache: TraceCache, store: str) -> int:
    if args.action == "list":
        sys.stdout.write("".join(f"{name}\n" for name in list_baselines(store)))
        return 0
    runs = load_side(args.logdir, cache)
    where = save_baseline(store, args.name, runs, args.logdir)
    steps = sum(len(s["steps"]) for r in runs for s in r)
    sys.stderr.write(f"saved baseline {args.name!r}: {len(runs)} run(s), "
                     f"{sum(len(r) for r in runs)} file(s), {steps} steps -> {where}\n")
    return 0


def _compare(args: argparse.Namespace, cache: TraceCache, store: str) -> int:
    wanted = 1 if args.baseline else 2
    if len(args.paths) != wanted:
        raise UsageError("give BASE and EXP, or --baseline NAME and EXP" if wanted == 2 else
                         "with --baseline give only EXP")
    if args.baseline:
        base = load_baseline(store, args.baseline)["runs"]
    else:
        base = load_side(args.paths[0], cache)
    exp = load_side(args.paths[-1], cache)
    result = compare(base, exp, confidence=args.confidence, min_change=args.min_change,
                     statistic=args.statistic)
    gate = _gate(args, result) if args.gate is not None else None
    if gate is not None:
        result["gate"] = gate
    text = {"json": lambda: pretty_json(result), "markdown": lambda: markdown(result, gate),
            "junit": lambda: junit(result, gate)}[args.format]()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    if gate is None:
        return 0
    if result["verdict"] == NOT_COMPARABLE:
        sys.stderr.write("gate: not comparable: " + "; ".join(result["reasons"]) + "\n")
        return EXIT_NO_DATA
    if gate["failed"]:
        sys.stderr.write(f"gate failed: {gate['metric']} regressed by more than "
                         f"{args.gate * 100:g}% at {args.confidence * 100:g}% confidence\n")
        return EXIT_GATE
    return 0


def _gate(args: argparse.Namespace, result: dict[str, Any]) -> dict[str, Any]:
    gate: dict[str, Any] = {"metric": args.metric, "threshold": args.gate,
                            "confidence": args.confidence, "failed": False, "row": None,
                            "evaluated": result["verdict"] != NOT_COMPARABLE}
    if result["verdict"] == NOT_COMPARABLE:
        return gate
    row = next((r for r in result["metrics"] if r["metric"] == args.metric), None)
    if row is None:
        steps = [r["metric"] for r in result["metrics"] if r["kind"] == "step"]
        raise UsageError(f"no metric {args.metric!r} in either side; step metrics: "
                         f"{', '.join(steps)} (and operator:NAME, kernel:NAME, "
                         "op_category:NAME)")
    interval = Interval(row["base_us"], row["exp_us"], row["delta_us"], row["low_us"],
                        row["high_us"], args.confidence, result["interval_over"])
    gate.update(failed=gate_fails(interval, args.gate), row=row)
    return gate


def load_side(path: str, cache: TraceCache) -> list[list[dict[str, Any]]]:
    """The per-step summaries of a trace file, run folder or logdir: one list per run."""
    try:
        fs, root = filesystem(path)
        exists, is_dir = fs.exists(root), fs.isdir(root)
    except (OSError, ValueError, ImportError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if not exists:
        raise UsageError(f"{path} does not exist")
    if not is_dir:
        files = [[open_ref(path)]]
    else:
        files = [[span.ref for spans in r.workers.values() for span in spans]
                 for r in discover_runs(
                     path, serve_outside_logdir=cache.config.serve_outside_logdir)]
    runs = []
    for refs in files:
        summaries = [s for s in (_summary(ref, cache) for ref in refs) if s is not None]
        if summaries:
            runs.append(summaries)
    if not runs:
        raise NoData(f"no readable trace under {path}")
    return runs


def _summary(ref: FileRef, cache: TraceCache) -> Optional[dict[str, Any]]:
    table = None

    def compute() -> dict[str, Any]:
        nonlocal table
        table = load_trace(ref, cache=cache)
        if table.status.state == "error":
            raise NoData("; ".join(table.status.messages))
        return step_summary(table)

    try:
        summary = cache.payload(ref, f"torch-prof-compare/summary#{code_fingerprint()}",
                                compute)
    except NoData as exc:
        sys.stderr.write(f"warning: {ref.url} left out: {exc}\n")
        return None
    why = "; ".join(summary["messages"])
    if not summary["steps"]:
        sys.stderr.write(f"warning: {ref.url} left out: no steps ({summary['state']}"
                         f"{': ' + why if why else ''})\n")
        return None
    if summary["state"] != "ok":
        sys.stderr.write(f"warning: {ref.url} is {summary['state']}: {why}\n")
    return summary
