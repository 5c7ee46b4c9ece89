"""Compare two sets of per-step summaries (`summary.step_summary`): per metric, the delta of
the per-step mean with a bootstrap interval (`stats`), a verdict per metric and one for the
comparison.

A side is a list of runs, each a list of file summaries (its ranks and spans): the steps of
one run's files are pooled, runs are repetitions (see `stats` for the resampling).

Verdicts. A metric regressed when its whole interval lies above the floor, improved when it
lies below minus the floor, else it is unchanged (within noise). The floor is `min_change`
times the baseline's step time (its statistic: `stats`), for every metric: an operator is
flagged only when it moved the step by at least that much. The comparison's verdict is the step
time's, or "not comparable" with the reasons when the sides ran on different devices, are
different models (different nn.Module names; without modules, fewer than `MIN_SHARED_OPERATORS`
of the operator names in common) or have a different step structure (the anchors under a step:
modules, DataLoader, optimizer), or when a side has no steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .stats import (
    MEAN,
    NOT_COMPARABLE,
    OVER_STEPS,
    REGRESSED,
    bootstrap_deltas,
    quantile_of,
    verdict,
)
from .summary import STEP_TOTAL

COMPARE_VERSION = 1
DEFAULT_MIN_CHANGE = 0.01
MIN_SHARED_OPERATORS = 0.5  # Jaccard of the operator names, used without module names
_LISTED = 3  # names listed in a reason
KINDS = ("step", "operator", "kernel", "op_category")

Side = Sequence[Sequence[dict[str, Any]]]  # runs -> file summaries


def _names(values: set[str]) -> str:
    shown = sorted(values)[:_LISTED]
    more = len(values) - len(shown)
    return ", ".join(shown) + (f" (and {more} more)" if more else "")


def _union(side: Side, key: str) -> set[str]:
    return {v for run in side for s in run for v in s[key]}


def incomparable(base: Side, exp: Side) -> list[str]:
    """Why the two sides cannot be compared (empty when they can)."""
    reasons = []
    for label, side in (("baseline", base), ("experiment", exp)):
        if not any(s["steps"] for run in side for s in run):
            reasons.append(f"the {label} has no steps")
    devices = [sorted({s["device"] for run in side for s in run}) for side in (base, exp)]
    if devices[0] != devices[1]:
        reasons.append(f"different device: {', '.join(devices[0])} (baseline) vs "
                       f"{', '.join(devices[1])} (experiment)")
    modules = _union(base, "modules"), _union(exp, "modules")
    if modules[0] or modules[1]:
        if modules[0] != modules[1]:
            reasons.append("different model: " + "; ".join(
                f"modules only in the {label}: {_names(only)}" for label, only in (
                    ("baseline", modules[0] - modules[1]), ("experiment", modules[1] - modules[0]))
                if only))
    else:
        ops = _union(base, "operators"), _union(exp, "operators")
        union = ops[0] | ops[1]
        shared = len(ops[0] & ops[1]) / len(union) if union else 1.0
        if shared < MIN_SHARED_OPERATORS:
            reasons.append(f"different model: {shared:.0%} of the operator names in common "
                           f"(at least {MIN_SHARED_OPERATORS:.0%} needed)")
    shapes = [{tuple(s["structure"]) for run in side for s in run if s["steps"]}
              for side in (base, exp)]
    if shapes[0] and shapes[1] and shapes[0] != shapes[1]:
        first = [" > ".join(sorted(shape)[0]) or "(none)" for shape in shapes]
        reasons.append(f"different step structure: a baseline step runs {first[0]}; an "
                       f"experiment step runs {first[1]}")
    return reasons


def _run_matrix(run: Sequence[dict[str, Any]], metrics: list[str]) -> np.ndarray:
    """(steps of all the run's files, metrics); a metric a file lacks is 0 in its steps."""
    blocks = []
    for summary in run:
        n = len(summary["steps"])
        if n == 0:
            continue
        values = summary["metrics"]
        blocks.append(np.column_stack([values.get(m, np.zeros(n)) for m in metrics]))
    return np.concatenate(blocks) if blocks else np.zeros((0, len(metrics)))


def compare(base: Side, exp: Side, *, confidence: float = 0.95,
            min_change: float = DEFAULT_MIN_CHANGE, replicates: int = 2000,
            statistic: str = MEAN) -> dict[str, Any]:
    """The comparison payload (JSON-able): verdict, reasons, per-metric rows, the top
    regressed operators (with their source frames where the traces had stacks)."""
    if min_change < 0:
        raise ValueError(f"min_change must be >= 0, got {min_change}")
    quantile_of(statistic)
    out: dict[str, Any] = {
        "version": COMPARE_VERSION, "confidence": confidence, "min_change": min_change,
        "statistic": statistic,
        "base": _side_info(base), "exp": _side_info(exp)}
    reasons = incomparable(base, exp)
    if reasons:
        return {**out, "verdict": NOT_COMPARABLE, "reasons": reasons, "interval_over": None,
                "headline": None, "metrics": [], "top_regressed": []}
    metrics = sorted(set().union(*(s["metrics"] for side in (base, exp) for run in side
                                   for s in run)),
                     key=lambda m: (KINDS.index(m.split(":", 1)[0]), m != STEP_TOTAL, m))
    base_runs = [m for m in (_run_matrix(r, metrics) for r in base) if len(m)]
    exp_runs = [m for m in (_run_matrix(r, metrics) for r in exp) if len(m)]
    intervals = bootstrap_deltas(base_runs, exp_runs, confidence=confidence,
                                 replicates=replicates, statistic=statistic)
    step_mean = intervals[metrics.index(STEP_TOTAL)].base
    floor = min_change * step_mean
    rows = [_row(name, iv, verdict(iv, floor)) for name, iv in zip(metrics, intervals)]
    headline = rows[metrics.index(STEP_TOTAL)]
    sources = {}
    for side in (exp, base):
        for run in side:
            for s in run:
                for name, frames in s["sources"].items():
                    sources.setdefault(name, frames)
    top = sorted((r for r in rows if r["kind"] == "operator" and r["verdict"] == REGRESSED),
                 key=lambda r: (-r["delta_us"], r["name"]))
    over = intervals[0].over
    return {**out, "verdict": headline["verdict"], "reasons": [], "interval_over": over,
            "note": ("one run per side: the interval is over steps only (run-to-run "
                     "variation is not in it)") if over == OVER_STEPS else None,
            "floor_us": floor, "headline": headline, "metrics": rows,
            "top_regressed": [{**r, "source": sources.get(r["name"], [])} for r in top]}


def _row(metric: str, iv: Any, verdict_: str) -> dict[str, Any]:
    kind, name = metric.split(":", 1)
    return {"metric": metric, "kind": kind, "name": name, "base_us": iv.base,
            "exp_us": iv.exp, "delta_us": iv.delta, "low_us": iv.low, "high_us": iv.high,
            "relative": iv.relative, "verdict": verdict_}


def _side_info(side: Side) -> dict[str, Any]:
    return {"runs": len(side), "files": sum(len(run) for run in side),
            "steps": sum(len(s["steps"]) for run in side for s in run),
            "device": ", ".join(sorted({s["device"] for run in side for s in run}))}
