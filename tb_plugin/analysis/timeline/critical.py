"""The critical path of one step laid over a `/timeline` window (`critical_step` option).

The path comes from `critical_path.step_path` (the same walk as the GPU Idle view's card).
Each level-of-detail run of the window (an event drawn alone, or a block of merged events)
is marked when it holds a path event: runs cover contiguous index positions, so a path
event's run is found with one `searchsorted` over the runs' first positions. The path's
edges (predecessor end -> where it bound the node, in path order) are sent when they touch
the window, an even sample of MAX_EDGES when more. Cost: O(path length + runs) per request.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...ingest.schema import TraceTable
from ..events import event_ends
from ..gpu_idle.critical_path import EDGE_NAMES, step_path
from .index import TimelineIndex

MAX_EDGES = 2000


def mark_runs(index: TimelineIndex, runs: dict[str, np.ndarray], rows: np.ndarray
              ) -> np.ndarray:
    """Per run of `runs`: how many of the event `rows` it holds (0: none)."""
    first, count = runs["first"], runs["count"]
    marks = np.zeros(first.size, dtype=np.int64)
    pos = index.position[rows] if rows.size else np.empty(0, dtype=np.int64)
    pos = np.sort(pos[pos >= 0])
    if pos.size == 0 or first.size == 0:
        return marks
    run = np.searchsorted(first, pos, side="right") - 1
    inside = (run >= 0) & (pos < first[np.maximum(run, 0)] + count[np.maximum(run, 0)])
    np.add.at(marks, run[inside], 1)
    return marks


def critical_overlay(table: TraceTable, index: TimelineIndex, step: str, ws_us: float,
                     we_us: float, rel: Callable[[np.ndarray], list]) -> tuple[np.ndarray,
                                                                             dict[str, Any]]:
    """(path event rows, the payload's `critical` object) for the window [ws_us, we_us]
    (trace us); `rel` turns trace us into the payload's relative times. KeyError: no step of
    that name."""
    path = step_path(table, step)
    rows, kinds = path["rows"], path["edges"]
    events = table.events
    ts, ends = events["ts"].to_numpy(), event_ends(events)
    src, dst, kind = rows[:-1], rows[1:], kinds[1:]
    a, b = ends[src], np.maximum(ts[dst], ends[src])
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    touch = np.flatnonzero((hi >= ws_us) & (lo <= we_us))
    total = int(touch.size)
    if total > MAX_EDGES:
        touch = touch[np.linspace(0, total - 1, MAX_EDGES).astype(np.int64)]
    src, dst, kind = src[touch], dst[touch], kind[touch]
    edges: dict[str, Any] = {"total": total, "capped": total > MAX_EDGES, "kinds": list(EDGE_NAMES),
                             "kind": kind.tolist()}
    # an edge ends where it bound its node: the later of the node's start and its predecessor's
    # end (a synchronize call returns after the kernel it waited for)
    bound = np.minimum(np.maximum(ts[dst], ends[src]), ends[dst])
    for label, sel, t in (("from", src, ends[src]), ("to", dst, bound)):
        pos = index.position[sel] if sel.size else np.empty(0, dtype=np.int64)
        found = pos >= 0
        safe = np.where(found, pos, 0)
        row = index.row_of(safe)
        edges[f"{label}_track"] = np.where(found, index.row_track[row], -1).tolist()
        edges[f"{label}_depth"] = np.where(found, index.row_depth[row], 0).tolist()
        edges[f"{label}_ts"] = rel(t)
        edges[f"{label}_id"] = sel.tolist()
    return rows, {"step": step, "start_us": path["start_us"], "end_us": path["end_us"],
                  "nodes": int(rows.size), "edges": edges}
