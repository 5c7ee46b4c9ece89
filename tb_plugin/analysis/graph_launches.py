"""CUDA/HIP graph launches, stream capture and launch backlogs: the facts the launch
statistics, the queue lengths and the critical path read so that a graph is one launch of N
kernels (`graphs.py` builds the Graph summary on top of them).

Rules (names are tested once per distinct name):
- A graph launch is a runtime/driver call named `cudaGraphLaunch`, `hipGraphLaunch` or
  `cuGraphLaunch`, with or without a version or per-thread suffix (`_v10000`, `_ptsz`,
  `_spt`). The device events it produced are those with its correlation id (`correlation.py`);
  the kernels of a replayed graph carry no launch of their own.
- The *charged* device event of a launch is its earliest-starting one (ties: lowest row) per
  stream: a launch call is charged once (its duration, its launch-to-start delay, one queue
  entry), whatever the number of kernels it started.
- A capture window is a `*StreamBeginCapture*` call up to the next `*StreamEndCapture*` call
  on the same thread (a Begin without an End runs to the end of the trace). A captured launch
  is a launch, copy or memset call (`Launch`, `Memcpy`, `Memset` in its name, not a graph
  launch) that starts inside a window: it recorded a graph node and ran nothing.
- Backlog: per GPU, the smallest launch-to-start delay (start − launch call end) over the
  charged device events. When it is ≥ `BACKLOG_MIN_US` over at least `BACKLOG_MIN_EVENTS`
  events, no launch in the window ever found the GPU ready: the delay is a backlog of work
  from before the window or a clock offset between host and device, not launch cost (a note;
  the critical path charges any launch-to-kernel wait of ≥ `BACKLOG_MIN_US` to "backlog").
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..ingest.schema import LAUNCH_KINDS, TraceTable
from .correlation import complete_rows
from .device_work import device_work
from .events import category_flags, event_ends
from .memo import memoised

GRAPH_LAUNCH_RE = re.compile(r"^(?:cuda|hip|cu)GraphLaunch(?:_v\d+|_ptsz|_spt)*$")
CAPTURE_BEGIN_RE = re.compile(r"^(?:cuda|hip|cu)StreamBeginCapture\w*$")
CAPTURE_END_RE = re.compile(r"^(?:cuda|hip|cu)StreamEndCapture\w*$")
CAPTURED_CALL_RE = re.compile(r"Launch|Memcpy|Memset")
BACKLOG_MIN_US = 1000.0
BACKLOG_MIN_EVENTS = 2


def _flags(table: TraceTable, pattern: re.Pattern) -> np.ndarray:
    return category_flags(table.events["name"], lambda n: bool(pattern.search(n)))


def graph_launch_mask(table: TraceTable) -> np.ndarray:
    """Per event row: a graph launch call (runtime or driver, complete event)."""
    def compute() -> np.ndarray:
        mask = np.zeros(len(table.events), dtype=bool)
        rows = complete_rows(table.events, LAUNCH_KINDS)
        mask[rows] = _flags(table, GRAPH_LAUNCH_RE)[rows]
        return mask
    return memoised(table, "graph_launch_mask", compute)


def charged_mask(table: TraceTable) -> np.ndarray:
    """Per row of `device_work(table)`: the event that carries its launch (the earliest of the
    launch's device events on its stream); True for device events without a launch."""
    def compute() -> np.ndarray:
        work = device_work(table)
        launch = work["launch"].to_numpy()
        device = work["device"].to_numpy()
        stream = np.nan_to_num(work["stream"].to_numpy(), nan=-1.0)
        order = np.lexsort((work["event"].to_numpy(), work["start"].to_numpy(), stream,
                            device, launch))
        first = np.ones(len(order), dtype=bool)
        first[1:] = ((launch[order][1:] != launch[order][:-1])
                     | (device[order][1:] != device[order][:-1])
                     | (stream[order][1:] != stream[order][:-1]))
        charged = np.empty(len(order), dtype=bool)
        charged[order] = first
        return charged | (launch < 0)
    return memoised(table, "graph_charged", compute)


def replayed_mask(table: TraceTable) -> np.ndarray:
    """Per row of `device_work(table)`: started by a graph launch."""
    launch = device_work(table)["launch"].to_numpy()
    is_graph = graph_launch_mask(table)
    return (launch >= 0) & is_graph[np.maximum(launch, 0)]


def capture_windows(table: TraceTable) -> pd.DataFrame:
    """Stream-capture windows: `thread` (tid code), `start`, `end` (us), one row per Begin."""
    events = table.events
    rows = complete_rows(events, LAUNCH_KINDS)
    begin = rows[_flags(table, CAPTURE_BEGIN_RE)[rows]]
    end_rows = rows[_flags(table, CAPTURE_END_RE)[rows]]
    ts, ends = events["ts"].to_numpy(), event_ends(events)
    tid = events["tid"].cat.codes.to_numpy()
    out = []
    for thread in np.unique(tid[begin]):
        b = begin[tid[begin] == thread]
        e = end_rows[tid[end_rows] == thread]
        e_ts = np.sort(ends[e])
        stop = np.full(len(b), np.inf)
        if len(e_ts):
            pos = np.searchsorted(e_ts, ts[b], side="left")
            stop = np.where(pos < len(e_ts), e_ts[np.minimum(pos, len(e_ts) - 1)], np.inf)
        out.append(pd.DataFrame({"thread": thread, "start": ts[b], "end": stop}))
    if not out:
        return pd.DataFrame({"thread": [], "start": [], "end": []})
    return pd.concat(out, ignore_index=True)


def captured_launch_rows(table: TraceTable) -> np.ndarray:
    """Launch/copy/memset calls starting inside a capture window on their thread, by time."""
    def compute() -> np.ndarray:
        windows = capture_windows(table)
        if len(windows) == 0:
            return np.empty(0, dtype=np.int64)
        events = table.events
        rows = complete_rows(events, LAUNCH_KINDS)
        rows = rows[_flags(table, CAPTURED_CALL_RE)[rows] & ~graph_launch_mask(table)[rows]]
        ts, tid = events["ts"].to_numpy()[rows], events["tid"].cat.codes.to_numpy()[rows]
        inside = np.zeros(len(rows), dtype=bool)
        for w in windows.itertuples():
            inside |= (tid == w.thread) & (ts >= w.start) & (ts < w.end)
        rows = rows[inside]
        return rows[np.lexsort((rows, events["ts"].to_numpy()[rows]))]
    return memoised(table, "graph_captured_launches", compute)


def backlog(table: TraceTable) -> list[dict[str, Any]]:
    """Per GPU with a backlog (module docstring): `device`, `offset_us` (the smallest delay),
    `median_delay_us`, `events` (charged device events with a launch) and a `message`."""
    return memoised(table, "graph_backlog", lambda: _backlog(table))


def _backlog(table: TraceTable) -> list[dict[str, Any]]:
    work = device_work(table)
    keep = charged_mask(table) & (work["launch"].to_numpy() >= 0)
    delay = work["start"].to_numpy()[keep] - work["launch_end"].to_numpy()[keep]
    device = work["device"].to_numpy()[keep]
    found = []
    for d in np.unique(device):
        mine = delay[device == d]
        if len(mine) < BACKLOG_MIN_EVENTS or mine.min() < BACKLOG_MIN_US:
            continue
        offset = float(mine.min())
        found.append({
            "device": int(d), "offset_us": offset, "median_delay_us": float(np.median(mine)),
            "events": int(len(mine)),
            "message": (f"GPU {int(d)}: kernels start ~{_human(offset)} after their launch "
                        "(every one of them): a backlog from before the window or a clock "
                        "offset, not launch time"),
        })
    return found


def _human(us: float) -> str:
    return f"{us / 1000:.0f} ms" if us >= 10_000 else f"{us / 1000:.1f} ms"
