"""Training steps of one trace: `ProfilerStep#N` markers, adjusted to the device work they launch.

Follows the reference (spec 3.5): host steps from CPU-side markers, a whole-trace fallback step
"0", the device-side adjustment (a step lasts until the last kernel/memcpy/memset its launches
produced, and starts after the previous step's device work), and tail trimming. Fixes: GPU-side
`gpu_user_annotation` markers are ignored (they duplicated every step), `cuda_driver` launches
(`cuLaunchKernel`, Triton) count like runtime launches, and `ProfilerStep#abc` is skipped instead
of crashing.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd

from ..ingest.schema import DEVICE_KINDS, Kind, TraceTable
from .events import event_ends, kind_mask, launched_device_events, name_mask
from .memo import memoised

log = logging.getLogger(__name__)

STEP_PREFIX = "ProfilerStep#"
_STEP_NAME = re.compile(r"ProfilerStep#(\d{1,18})$")  # fits in int64
#: Event kinds whose `ProfilerStep#N` marks a host step (never the GPU-side mirror).
MARKER_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)
#: Kinds spanned by the fallback step when there are no markers (user annotations excluded).
FALLBACK_KINDS = (Kind.CPU_OP, Kind.PYTHON)
#: A last step with fewer device events than this share of the previous one is incomplete.
TAIL_KEEP_RATIO = 0.8


@dataclass
class Steps:
    """Steps in time order. `starts`/`ends` are the (device-adjusted) step ranges in us."""

    names: list[str]
    starts: np.ndarray
    ends: np.ndarray
    host_starts: np.ndarray
    host_ends: np.ndarray
    from_markers: bool = True  # False for the whole-trace fallback step "0"
    device_adjusted: bool = False
    trimmed: int = 0  # tail steps dropped as incomplete
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def lengths(self) -> np.ndarray:
        return self.ends - self.starts

    @property
    def steps_start(self) -> Optional[float]:
        return float(self.starts[0]) if len(self.names) else None

    @property
    def steps_end(self) -> Optional[float]:
        return float(self.ends[-1]) if len(self.names) else None


def compute_steps(table: TraceTable) -> Steps:
    """The table's steps, computed once per table."""
    return memoised(table, "steps", lambda: _compute_steps(table))


def _compute_steps(table: TraceTable) -> Steps:
    events = table.events
    steps = _marker_steps(events)
    if steps is None:
        steps = _fallback_step(events)
    if len(steps) == 0:
        return steps
    _adjust_to_device(events, steps)
    return steps


def _marker_steps(events: pd.DataFrame) -> Optional[Steps]:
    """Host steps from `ProfilerStep#N` markers; repeated numbers are joined into one step."""
    is_marker = kind_mask(events, MARKER_KINDS) & name_mask(
        events, lambda names: names.str.match(_STEP_NAME.pattern))
    is_marker &= np.isfinite(events["dur"].to_numpy())
    if not is_marker.any():
        return None
    markers = pd.DataFrame({
        "number": events["name"][is_marker].astype(str).str[len(STEP_PREFIX):].astype("int64"),
        "start": events["ts"].to_numpy()[is_marker],
        "end": event_ends(events)[is_marker],
    })
    per_step = markers.groupby("number").agg(start=("start", "min"), end=("end", "max"))
    per_step = per_step.reset_index().sort_values(["start", "number"], kind="stable")
    starts = per_step["start"].to_numpy(dtype=np.float64)
    ends = per_step["end"].to_numpy(dtype=np.float64)
    names = [str(n) for n in per_step["number"]]
    return Steps(names, starts.copy(), ends.copy(), starts, ends)


def _fallback_step(events: pd.DataFrame) -> Steps:
    """One step "0" over all CPU ops (any duration event if there are none)."""
    durations = np.isfinite(events["dur"].to_numpy())
    span = kind_mask(events, FALLBACK_KINDS) & durations
    if not span.any():
        span = durations & ~kind_mask(events, (Kind.TRACE, Kind.OTHER))
    if not span.any():
        empty = np.empty(0, dtype=np.float64)
        return Steps([], empty, empty.copy(), empty.copy(), empty.copy(), from_markers=False)
    start = float(events["ts"].to_numpy()[span].min())
    end = float(event_ends(events)[span].max())
    starts, ends = np.array([start]), np.array([end])
    return Steps(["0"], starts.copy(), ends.copy(), starts, ends, from_markers=False)


def _adjust_to_device(events: pd.DataFrame, steps: Steps) -> None:
    """Stretch steps over the device work launched inside them, then trim incomplete tails."""
    launched = launched_device_events(events)
    step = _step_of_launch(launched, steps.host_starts, steps.host_ends)
    matched = step >= 0
    if not matched.any():
        return
    n = len(steps)
    count = np.bincount(step[matched], minlength=n)
    dev_min = np.full(n, np.inf)
    dev_max = np.full(n, -np.inf)
    np.minimum.at(dev_min, step[matched], launched["start"].to_numpy()[matched])
    np.maximum.at(dev_max, step[matched], launched["end"].to_numpy()[matched])
    prev_end = _first_step_floor(events, launched["event"].to_numpy()[matched], steps, dev_min)
    for i in range(n):  # one iteration per step
        start = max(prev_end, steps.host_starts[i])
        end = max(steps.host_ends[i], dev_max[i] if count[i] else start)
        if end < start:
            steps.warnings.append(f"step {steps.names[i]} ends before it starts; made empty")
            end = start
        steps.starts[i], steps.ends[i] = start, end
        prev_end = end
    steps.device_adjusted = True
    _trim_tail(steps, count)


def _step_of_launch(launched: pd.DataFrame, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Index of the host step that fully contains each device event's launch, else -1.

    Launches straddling a step boundary belong to no step, as in the reference's two-pointer scan.
    """
    launch_start = launched["launch_start"].to_numpy()
    launch_end = launched["launch_end"].to_numpy()
    k = np.searchsorted(starts, launch_start, side="right") - 1
    kk = np.maximum(k, 0)
    inside = (k >= 0) & (launch_start >= starts[kk]) & (launch_end <= ends[kk])
    return np.where(inside, k, -1)


def _first_step_floor(events: pd.DataFrame, matched_events: np.ndarray, steps: Steps,
                      dev_min: np.ndarray) -> float:
    """Where step 0 may start: after device work from before profiling (launched outside every
    step) that finished before step 0's own device work began."""
    floor = float(steps.host_starts[0])
    if not np.isfinite(dev_min[0]):
        return floor
    device_rows = np.flatnonzero(kind_mask(events, DEVICE_KINDS))
    unmatched = np.setdiff1d(device_rows, matched_events, assume_unique=True)
    ends = event_ends(events)[unmatched]
    earlier = ends[ends < dev_min[0]]
    return max(floor, float(earlier.max())) if earlier.size else floor


def _trim_tail(steps: Steps, count: np.ndarray) -> None:
    """Drop trailing steps without device work, and the last one if it looks incomplete."""
    n = len(steps)
    if n <= 1:
        return
    with_device = np.flatnonzero(count > 0)
    last = int(with_device[-1])
    keep = last + 1
    if last > 0 and count[last - 1] * TAIL_KEEP_RATIO > count[last]:
        keep = last
    if keep < n:
        message = (f"Removed the last {n - keep} step(s): the profiler may not have captured all "
                   "the device work they launched")
        log.info(message)
        steps.warnings.append(message)
        steps.trimmed = n - keep
        steps.names = steps.names[:keep]
        for name in ("starts", "ends", "host_starts", "host_ends"):
            setattr(steps, name, getattr(steps, name)[:keep])
