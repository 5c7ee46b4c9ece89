"""Serving steps of one trace: each step's annotation counts, host range, device work, and
whether it belongs to the steady-state window.

- A step is a host `user_annotation` whose name `annotations.parse_step_name` reads; an
  annotation nested in another step's on the same thread is the same step (SGLang writes
  `execute_...` around `step[...]`), its counts merged (`annotations.merge`).
- A step's device work: the kernels, copies and sets whose launch call starts inside the
  step's host range [start, end) on the step's thread (a graph launch brings all its kernels).
  `gpu_us` = the length of the union of their intervals (the GPU's busy time for the step),
  `span_us` = first start to last end; `time_us` = `gpu_us`, or the host range's length for a
  step that launched nothing.
- Steady state: a step is left out as **capture** when its host range holds a launch recorded
  into a CUDA/HIP graph (`graph_launches.captured_launch_rows`: it ran nothing), as **idle**
  when its phase is idle or other (no tokens to serve), and as **warm-up** when it is one of
  the leading steps of its phase (in start order, among the rest) whose `time_us` is more
  than `WARMUP_FACTOR` times the median `time_us` of the steps of that phase (strictly more;
  the leading run ends at the phase's first step that is not). Every other step is steady.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from .. import ranges
from ..device_work import device_work
from ..events import event_ends
from ..graph_launches import captured_launch_rows
from ..memo import memoised
from .annotations import FIELDS, IDLE, OTHER, merge, parse_step_name, serving_annotation_mask

WARMUP_FACTOR = 2.0
STEADY, WARMUP, CAPTURE, SKIPPED_IDLE = "steady", "warm-up", "capture", "idle"


def serving_steps(table: TraceTable) -> pd.DataFrame:
    """One row per step in start order: `step` (0-based), `name` (the outermost annotation's),
    `thread` (tid code), `start`, `end` (us), `host_us`, `phase`, `source`, `mode`, the
    `annotations.FIELDS` counts (NaN when unknown), `device_events`, `gpu_us`, `span_us`,
    `gpu_start`, `gpu_end`, `time_us`, `state` (steady | warm-up | capture | idle) and
    `events` (the device work rows of the step, a list)."""
    return memoised(table, "inference_steps", lambda: _steps(table))


def _steps(table: TraceTable) -> pd.DataFrame:
    events = table.events
    rows = np.flatnonzero(serving_annotation_mask(table))
    ts, ends = events["ts"].to_numpy(), event_ends(events)
    tid = events["tid"].cat.codes.to_numpy()
    cats = np.asarray(events["name"].cat.categories.astype(str), dtype=object)
    codes = events["name"].cat.codes.to_numpy()
    order = rows[np.lexsort((-ends[rows], ts[rows], tid[rows]))]
    steps: list[dict[str, Any]] = []
    for row in order:
        parsed = parse_step_name(cats[codes[row]])
        last = steps[-1] if steps else None
        if last is not None and last["thread"] == tid[row] and ts[row] >= last["start"] \
                and ends[row] <= last["end"]:
            last.update(merge(last, parsed))  # nested: the same step
            continue
        steps.append({"name": cats[codes[row]], "thread": int(tid[row]),
                      "start": float(ts[row]), "end": float(ends[row]), **parsed})
    frame = pd.DataFrame(steps, columns=["name", "thread", "start", "end", *FIELDS, "phase",
                                         "source", "mode"])
    frame = frame.sort_values(["start", "thread"], ignore_index=True)
    for f in FIELDS:
        frame[f] = pd.to_numeric(frame[f], errors="coerce").astype(np.float64)
    frame.insert(0, "step", np.arange(len(frame)))
    frame["host_us"] = frame["end"] - frame["start"]
    _device(table, frame)
    frame["state"] = _states(table, frame)
    return frame


def _device(table: TraceTable, frame: pd.DataFrame) -> None:
    work = device_work(table)
    events = table.events
    launch = work["launch"].to_numpy()
    has = launch >= 0
    owner = np.full(len(work), -1, dtype=np.int64)
    if len(frame) and has.any():
        tid = events["tid"].cat.codes.to_numpy()[np.maximum(launch, 0)]
        owner = _owner(frame, tid, work["launch_start"].to_numpy(), has)
    starts, stops = work["start"].to_numpy(), work["end"].to_numpy()
    rows = work["event"].to_numpy()
    per: list[list[int]] = [[] for _ in range(len(frame))]
    busy = np.zeros(len(frame))
    first = np.full(len(frame), np.nan)
    last = np.full(len(frame), np.nan)
    owned = np.flatnonzero(owner >= 0)
    owned = owned[np.argsort(owner[owned], kind="stable")]
    cuts = np.flatnonzero(np.diff(owner[owned])) + 1
    for mine in np.split(owned, cuts) if len(owned) else []:
        i = int(owner[mine[0]])
        per[i] = rows[mine].tolist()
        busy[i] = ranges.total_length(ranges.merge(starts[mine], stops[mine]))
        first[i], last[i] = starts[mine].min(), stops[mine].max()
    frame["device_events"] = [len(p) for p in per]
    frame["gpu_us"] = busy
    frame["gpu_start"], frame["gpu_end"] = first, last
    frame["span_us"] = last - first
    frame["time_us"] = np.where(frame["device_events"] > 0, busy, frame["host_us"])
    frame["events"] = per


def _owner(frame: pd.DataFrame, tid: np.ndarray, point: np.ndarray, has: np.ndarray
           ) -> np.ndarray:
    """Per device event: the step whose [start, end) on the launch's thread holds its launch
    call's start (steps of one thread never overlap), −1 when none."""
    out = np.full(len(point), -1, dtype=np.int64)
    for thread, group in frame.groupby("thread", sort=False):
        starts = group["start"].to_numpy()
        stops = group["end"].to_numpy()
        mine = np.flatnonzero(has & (tid == thread))
        pos = np.searchsorted(starts, point[mine], side="right") - 1
        ok = (pos >= 0) & (point[mine] < stops[np.maximum(pos, 0)])
        out[mine[ok]] = group.index.to_numpy()[pos[ok]]
    return out


def _states(table: TraceTable, frame: pd.DataFrame) -> np.ndarray:
    state = np.full(len(frame), STEADY, dtype=object)
    captured = captured_launch_rows(table)
    if len(captured) and len(frame):
        events = table.events
        cts = events["ts"].to_numpy()[captured]
        ctid = events["tid"].cat.codes.to_numpy()[captured]
        for i, s in enumerate(frame.itertuples()):
            if ((ctid == s.thread) & (cts >= s.start) & (cts < s.end)).any():
                state[i] = CAPTURE
    state[(state == STEADY) & frame["phase"].isin((IDLE, OTHER)).to_numpy()] = SKIPPED_IDLE
    candidates = np.flatnonzero(state == STEADY)
    time = frame["time_us"].to_numpy()
    phase = frame["phase"].to_numpy()
    for p in np.unique(phase[candidates]):
        mine = candidates[phase[candidates] == p]
        limit = WARMUP_FACTOR * float(np.median(time[mine]))
        for i in mine:
            if time[i] <= limit:
                break
            state[i] = WARMUP
    return state
