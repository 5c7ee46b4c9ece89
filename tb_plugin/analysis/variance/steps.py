"""Step variance and slow-step root cause of one worker span.

- **CV**: population standard deviation of the step times / their mean (percent).
- **Outliers**: slow steps by the robust (modified) z-score of Iglewicz and Hoaglin,
  `z = 0.6745 (t - median) / MAD`; a step is an outlier when `z > Z_THRESHOLD` (strict). When
  the MAD is 0 (half the steps or more are equal), the mean absolute deviation from the median
  stands in: `z = (t - median) / (1.253314 MeanAD)`; when that is 0 too, no step is an outlier.
  Only slow steps are named (z > 0). Two steps never hold an outlier (both deviate from their
  median equally: z = 0.6745), nor does one.
- **Causes**: each us of a step goes to the first of `CAUSES` busy then (exclusive, like the
  step-time breakdown; a step's causes sum to its length):
  communication (collective ops and kernels), synchronisation (synchronising runtime calls),
  data_loading (DataLoader `__next__`), host_compute (host operators, user annotations and
  other runtime calls), device (kernels, memcpy, memset), host_stall (what is left: no operator,
  no runtime call and no device work; a GC pause, a sleep, I/O, pure-Python work).
  An outlier's cause is the one whose time grew most over that cause's median across the steps
  (ties: the first in `CAUSES`), with the longest range of that cause in the step as evidence.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ingest.schema import LAUNCH_KINDS, Kind, TraceTable
from .. import ranges as rg
from ..advice.costs import sync_mask
from ..events import (
    HOST_KINDS,
    category_flags,
    comm_kernel_mask,
    comm_op_mask,
    event_ends,
    is_dataloader_name,
    kind_mask,
    name_mask,
)
from ..memo import memoised
from ..steps import STEP_PREFIX, Steps, compute_steps

Z_THRESHOLD = 3.5
MAD_SCALE = 0.6745  # Phi^-1(0.75): the MAD of a normal sample is 0.6745 sigma
MEAN_AD_SCALE = 1.253314  # sqrt(pi / 2): the mean absolute deviation of a normal sample
CAUSES = ("communication", "synchronisation", "data_loading", "host_compute", "device",
          "host_stall")
#: Operator kinds: python_function events are not operators (their time is a host stall).
_OPERATOR_KINDS = tuple(k for k in HOST_KINDS if k != Kind.PYTHON)


def robust_z(values: np.ndarray) -> np.ndarray:
    """The modified z-score of each value (see the module docstring); zeros when the spread is
    0 or there are no values."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return values
    median = float(np.median(values))
    deviation = values - median
    mad = float(np.median(np.abs(deviation)))
    if mad > 0:
        return MAD_SCALE * deviation / mad
    mean_ad = float(np.mean(np.abs(deviation)))
    return deviation / (MEAN_AD_SCALE * mean_ad) if mean_ad > 0 else np.zeros(len(values))


def slow_mask(z: np.ndarray) -> np.ndarray:
    """The outliers among robust z-scores: above `Z_THRESHOLD`, strictly."""
    return np.asarray(z) > Z_THRESHOLD


def cause_ranges(table: TraceTable) -> dict[str, rg.Ranges]:
    """Merged busy ranges of each cause but host_stall, before priority."""
    events = table.events
    starts, ends = events["ts"].to_numpy(), event_ends(events)
    host = kind_mask(events, _OPERATOR_KINDS) & ~name_mask(
        events, lambda n: n.str.startswith(STEP_PREFIX))
    comm = (host & comm_op_mask(events)) | comm_kernel_mask(events)
    sync = sync_mask(table)
    loaders = host & ~comm & category_flags(events["name"], is_dataloader_name)
    masks = {
        "communication": comm,
        "synchronisation": sync,
        "data_loading": loaders,
        "host_compute": (host | kind_mask(events, LAUNCH_KINDS)) & ~comm & ~sync & ~loaders,
        "device": kind_mask(events, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)) & ~comm,
    }
    return {cause: rg.merge(starts[m], ends[m]) for cause, m in masks.items()}


def cause_split(roles: dict[str, rg.Ranges], steps: Steps
                ) -> tuple[dict[str, np.ndarray], dict[str, rg.Ranges]]:
    """Per cause, its us in each step (exclusive, by `CAUSES` order) and the ranges it took."""
    free = rg.merge(steps.starts, steps.ends)
    costs, taken_by = {}, {}
    for cause in CAUSES[:-1]:
        taken = rg.intersect(roles.get(cause, rg.empty()), free)
        costs[cause] = rg.length_in_windows(taken, steps.starts, steps.ends)
        taken_by[cause] = taken
        free = rg.subtract(free, taken)
    costs[CAUSES[-1]] = rg.length_in_windows(free, steps.starts, steps.ends)
    taken_by[CAUSES[-1]] = free
    return costs, taken_by


def step_variance(table: TraceTable) -> dict[str, Any]:
    """The variance section of the Overview (`views.overview.payload.StepVariance`), once per
    table."""
    return memoised(table, "step_variance", lambda: _step_variance(table, compute_steps(table)))


def _step_variance(table: TraceTable, steps: Steps) -> dict[str, Any]:
    totals = np.asarray(steps.ends - steps.starts, dtype=np.float64)
    n = len(totals)
    mean = float(totals.mean()) if n else 0.0
    std = float(totals.std()) if n else 0.0
    out: dict[str, Any] = {
        "steps": n, "mean_us": _r(mean), "median_us": _r(float(np.median(totals))) if n else 0.0,
        "std_us": _r(std), "cv_pct": _r(100.0 * std / mean) if mean > 0 else None,
        "z_threshold": Z_THRESHOLD, "outliers": []}
    z = robust_z(totals)
    slow = np.flatnonzero(slow_mask(z))
    if len(slow) == 0:
        return out
    costs, taken_by = cause_split(cause_ranges(table), steps)
    medians = {c: float(np.median(costs[c])) for c in CAUSES}
    median_total = float(np.median(totals))
    for i in slow[np.argsort(-totals[slow], kind="stable")]:
        growth = {c: _r(float(costs[c][i]) - medians[c]) for c in CAUSES}
        cause = CAUSES[int(np.argmax([growth[c] for c in CAUSES]))]
        lo, hi = float(steps.starts[i]), float(steps.ends[i])
        start, end = _longest(rg.clip(taken_by[cause], lo, hi))
        out["outliers"].append({
            "step": steps.names[i], "total_us": _r(totals[i]),
            "excess_us": _r(totals[i] - median_total), "z": _r(z[i]), "cause": cause,
            "cause_us": growth[cause], "growth_us": growth,
            "start_us": start, "end_us": end,
            "evidence_offset_us": None if start is None else _r(start - lo)})
    return out


def _longest(ranges: rg.Ranges) -> tuple[Any, Any]:
    starts, ends = ranges
    if len(starts) == 0:
        return None, None
    k = int(np.argmax(ends - starts))
    return float(starts[k]), float(ends[k])


def _r(value: float) -> float:
    return round(float(value), 3)
