"""The dependency model of one step that the what-if engine replays (`simulate.py`).

Host side, per thread: its top-level runtime/driver calls in time order (calls nested in another
call, e.g. a driver call inside `cudaLaunchKernel`, belong to it) and the gaps between them
(host computation: operators, Python). Device side: the kernels, copies and sets those calls
launched, in stream order. Dependencies (the same ones the critical path follows):
- host order: a call starts when the previous call on its thread ended plus the gap between them;
- launch: a device event starts after its launch call ended (for an event that started inside
  its call, a blocking copy, that far into the call) and after the previous event on its
  stream ended; whatever the trace shows beyond that is kept as a constant `slack` (launch
  latency, contention), so replaying the step unchanged reproduces it exactly;
- wait: a synchronising call, or a call that ended after the device work it launched (a
  blocking copy), ends `tail` after the later of its start and the end of the last device event
  it waits for, where `tail` is what it took in the trace after that point (so a sync that did
  not wait in the trace waits once an edit makes the device finish after the call starts).
  A synchronising call waits for every device event launched
  before it started that ended before it did.
The step ends when its own thread (the step marker's, else the thread with most calls) has run
its last gap up to the step's host end, and, in a steady state of repeated steps, no sooner than
its busiest device can finish the step's device work: predicted = max(host end, device busy
time − the backlog the trace shows), where the backlog is how much the device's busy time in
the trace exceeds the step (work carried into the next step); so an unedited replay reproduces
the step exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd

from ...ingest.schema import LAUNCH_KINDS, TraceTable
from ..correlation import complete_rows
from ..device_work import device_work
from ..events import category_flags, event_ends
from ..gpu_idle.critical_path import SYNC_NAME
from ..memo import memoised
from ..steps import MARKER_KINDS, STEP_PREFIX, compute_steps

_SYNC = re.compile(SYNC_NAME)


@dataclass
class StepModel:
    """One step's calls and device events (arrays indexed by call / device position)."""

    name: str
    start: float  # host start of the step (us)
    end: float  # host end
    main: int  # thread code of the step's own thread, -1 when it has no calls
    # calls: top-level runtime/driver calls, sorted by (thread, ts)
    call_row: np.ndarray
    call_thread: np.ndarray
    call_ts: np.ndarray
    call_end: np.ndarray
    call_sync: np.ndarray  # a synchronising call
    # device events launched by those calls, sorted by (device, stream, start)
    dev_row: np.ndarray
    dev_call: np.ndarray  # position of the launching call in `call_*`
    dev_start: np.ndarray
    dev_end: np.ndarray
    dev_prev: np.ndarray  # position of the previous event on the same stream, -1 none
    dev_inside: np.ndarray  # started before its launch call ended (a blocking copy)
    dev_device: np.ndarray  # device id
    call_blocking: np.ndarray  # a call that ended after device work it launched ended


@dataclass
class TraceModel:
    """What every step's model is cut from (computed once per table)."""

    calls: np.ndarray  # complete runtime/driver rows
    sync: np.ndarray  # per row of the table
    thread: np.ndarray  # per row: a code for (pid, tid)
    ts: np.ndarray
    ends: np.ndarray
    work: pd.DataFrame  # device_work
    steps: list[tuple[str, float, float, int]]  # name, host start, host end, marker thread


def trace_model(table: TraceTable) -> TraceModel:
    return memoised(table, "whatif_model", lambda: _trace_model(table))


def _trace_model(table: TraceTable) -> TraceModel:
    events = table.events
    ts, ends = events["ts"].to_numpy(), event_ends(events)
    pid = events["pid"].cat.codes.to_numpy().astype(np.int64)
    tid = events["tid"].cat.codes.to_numpy().astype(np.int64)
    thread = pid * (int(tid.max(initial=0)) + 2) + tid + 1
    sync = category_flags(events["name"], lambda n: bool(_SYNC.search(n)))
    steps = compute_steps(table)
    marker = np.flatnonzero(np.isin(events["kind"].to_numpy(), np.asarray(
        MARKER_KINDS, dtype=events["kind"].to_numpy().dtype)) & category_flags(
        events["name"], lambda n: n.startswith(STEP_PREFIX)))
    listed = []
    for name, lo, hi in zip(steps.names, steps.host_starts, steps.host_ends):
        at = marker[ts[marker] == lo]
        listed.append((str(name), float(lo), float(hi), int(thread[at[0]]) if len(at) else -1))
    return TraceModel(complete_rows(events, LAUNCH_KINDS), sync, thread, ts, ends,
                      device_work(table), listed)


def step_model(model: TraceModel, index: int) -> StepModel:
    name, lo, hi, marker_thread = model.steps[index]
    rows = model.calls[(model.ts[model.calls] >= lo) & (model.ts[model.calls] < hi)]
    rows, parent = _top_level(rows, model)
    order = np.lexsort((model.ts[rows], model.thread[rows]))
    rows = rows[order]
    position = np.full(len(model.ts), -1, dtype=np.int64)
    position[rows] = np.arange(len(rows))
    position[parent[0]] = position[parent[1]]  # nested calls -> their top-level call
    work = model.work
    launch = work["launch"].to_numpy()
    mine = (launch >= 0) & (position[np.maximum(launch, 0)] >= 0)
    work = work[mine]
    dev_call = position[work["launch"].to_numpy()]
    start, end = work["start"].to_numpy(), work["end"].to_numpy()
    call_ts, call_end = model.ts[rows], model.ends[rows]
    dev_prev = _stream_prev(work)
    blocking = np.zeros(len(rows), dtype=bool)
    blocking[dev_call[end <= call_end[dev_call]]] = True
    threads = model.thread[rows]
    main = marker_thread if marker_thread >= 0 else (
        int(pd.Series(threads).mode().iat[0]) if len(threads) else -1)
    return StepModel(name, lo, hi, main, rows, threads, call_ts, call_end, model.sync[rows],
                     work["event"].to_numpy(), dev_call, start, end, dev_prev,
                     start < call_end[dev_call], work["device"].to_numpy(), blocking)


def _top_level(rows: np.ndarray, model: TraceModel) -> tuple[np.ndarray, tuple]:
    """Calls not inside an earlier call of their thread, and (nested rows, their parents)."""
    if len(rows) == 0:
        return rows, (rows, rows)
    order = np.lexsort((-model.ends[rows], model.ts[rows], model.thread[rows]))
    rows = rows[order]
    thread, ts, ends = model.thread[rows], model.ts[rows], model.ends[rows]
    top = np.ones(len(rows), dtype=bool)
    owner = np.arange(len(rows))
    current, reach = -1, -np.inf
    for i in range(len(rows)):  # one pass; nesting is rare (driver inside runtime calls)
        if current >= 0 and thread[i] == thread[current] and ends[i] <= reach and ts[i] >= \
                ts[current]:
            top[i], owner[i] = False, current
        else:
            current, reach = i, ends[i]
    return rows[top], (rows[~top], rows[owner[~top]])


def _stream_prev(work: pd.DataFrame) -> np.ndarray:
    """Per device event: the previous one on its stream (device_work is sorted that way)."""
    dev, stream = work["device"].to_numpy(), work["stream"].to_numpy()
    prev = np.arange(len(work)) - 1
    if len(work):
        same = np.zeros(len(work), dtype=bool)
        same[1:] = (dev[1:] == dev[:-1]) & (stream[1:] == stream[:-1]) & np.isfinite(stream[1:])
        prev[~same] = -1
    return prev


def step_count(model: TraceModel) -> int:
    return len(model.steps)


def find_step(model: TraceModel, name: Optional[str]) -> Optional[int]:
    names = [s[0] for s in model.steps]
    if name is None:
        return 0 if names else None
    return names.index(name) if name in names else None
