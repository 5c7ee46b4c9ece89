"""The Diff view's verdict: per row of a diff node (and for the node itself), the change of
its per-step time with a bootstrap interval over the steps of the two traces, and whether it
is beyond noise (`analysis.compare`'s rules: the interval lies wholly above `min_change` of
the baseline's step time, or wholly below minus it).

A row's per-step samples: each of its nodes (a fold's members, a composite's nodes, a thread
node's children) is put in the step whose range holds its start, and its time (device time
where it has any, else host time, as `total_duration_us`) is summed per step; a step without
the node counts 0. Each side is one trace, so the interval is over steps only (run-to-run
variation is not in it: `torch-prof compare` takes repeated runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ..compare.compare import DEFAULT_MIN_CHANGE
from ..compare.stats import OVER_STEPS, bootstrap_deltas, verdict
from .side import DiffSide, Item, StepFold, ThreadNode

CONFIDENCE = 0.95
NOTE = ("one trace per side: the interval is over its steps only (run-to-run variation is not "
        "in it; torch-prof compare takes repeated runs)")


def _members(side: DiffSide, items: Sequence[Item]) -> list[Item]:
    out: list[Item] = []
    for item in items:
        if isinstance(item, StepFold):
            out += _members(side, item.members)
        elif isinstance(item, ThreadNode):
            out += _members(side, side.children(item))
        else:
            out.append(item)
    return out


def step_samples(side: DiffSide, items: Sequence[Item]) -> np.ndarray:
    """Per step of the side: the time of `items` that started in it, us."""
    starts = side.tree.start[side.steps]
    out = np.zeros(len(side.steps))
    for item in _members(side, items):
        at = int(np.searchsorted(starts, side.start(item), side="right")) - 1
        if 0 <= at < len(out):
            device = side.device(item)
            out[at] += device if device > 0 else side.host(item)
    return out


def diff_verdicts(base: DiffSide, exp: DiffSide, node: tuple[list[Item], list[Item]],
                  rows: list[tuple[list[Item], list[Item]]],
                  min_change: float = DEFAULT_MIN_CHANGE
                  ) -> tuple[Optional[dict[str, Any]], list[Optional[dict[str, Any]]]]:
    """(the node's verdict, each row's interval); (None, [None...]) without steps on both
    sides. The floor is `min_change` of the baseline's mean step time."""
    if len(base.steps) == 0 or len(exp.steps) == 0:
        return None, [None] * len(rows)
    columns = [node, *rows]
    left = np.column_stack([step_samples(base, lists[0]) for lists in columns])
    right = np.column_stack([step_samples(exp, lists[1]) for lists in columns])
    step_time = float(step_samples(base, base.top_items()).mean())
    floor = min_change * step_time
    intervals = bootstrap_deltas([left], [right], confidence=CONFIDENCE)
    out = [{"delta_us": round(iv.delta, 3), "low_us": round(iv.low, 3),
            "high_us": round(iv.high, 3), "verdict": verdict(iv, floor)} for iv in intervals]
    head = intervals[0]
    summary = {**out[0], "confidence": CONFIDENCE, "over": OVER_STEPS, "note": NOTE,
               "min_change": min_change, "floor_us": round(floor, 3),
               "relative": None if head.base == 0 else round(head.delta / head.base, 5)}
    return summary, out[1:]
