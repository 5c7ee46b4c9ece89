"""Critical path of each step through the dependencies the trace carries.

Nodes: host runtime/driver calls (launches, syncs, other runtime calls) and device events
(kernels, memcpy, memset), identified by their event row. Edges, built with column operations:
- host order: each call → the next call on the same thread (what runs between them is host
  compute: operators, Python);
- stream order: each device event → the next one on the same stream;
- launch: a launch call → the device event with its correlation id (a graph launch → its first
  device event on each stream: the others follow in stream order);
- blocking: a device event → the call that launched it when the call ended after it (a
  synchronous copy; never a graph launch, which returns while its kernels run);
- sync: the last device event of each stream still running when a `*Synchronize` call started
  → that call (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, hip*).
`cudaStreamWaitEvent`/`cudaEventRecord` pairs are not linked: Kineto writes no event handle.

Path: nodes in topological order are nodes sorted by end time (every edge goes from an
earlier to a later end). Each node's binding dependency is the predecessor that finished last
(the one that bounded it); the critical path of a step is the chain of binding dependencies
back from the node that ends last in the step. This is the longest path in time through the
DAG: every edge's slack on it is zero except the gaps it shows. Its time is split into
host compute (host-order gaps and time before the first call), launch (launch calls, and the
wait between a launch call and its kernel when under 1 ms), backlog (such a wait of ≥ 1 ms,
`graph_launches.BACKLOG_MIN_US`: no launch takes that long; the kernel waited for work the
trace does not show, from before the window or behind another stream's event, or the clocks
are offset), runtime (other
runtime calls, e.g. cudaMalloc), kernel (device events), sync (synchronising calls after
their device work ended... and while waiting), and idle (gaps between device events on a
stream). The parts sum to the step length.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import LAUNCH_KINDS, TraceTable
from ..correlation import complete_rows
from ..device_work import device_work
from ..events import event_ends
from ..graph_launches import BACKLOG_MIN_US, charged_mask, graph_launch_mask
from ..memo import memoised
from ..steps import compute_steps

SHARES = ("host_compute", "launch", "runtime", "kernel", "sync", "idle", "backlog")
HOST_ORDER, STREAM, LAUNCH, BLOCKING, SYNC = 0, 1, 2, 3, 4
_EDGE_GAP = {HOST_ORDER: "host_compute", STREAM: "idle", LAUNCH: "launch", BLOCKING: "idle",
             SYNC: "idle"}
SYNC_NAME = r"(?:cuda|hip|cu)\w*Synchronize|Synchronize$"
MAX_STEPS = 64
FORMULA = ("Longest path in time through the dependency DAG (host order per thread, stream "
           "order, launch correlation, blocking copies, synchronize calls): from the node that "
           "ends last in the step, repeatedly step to the dependency that finished last; its "
           "time splits into host compute, launch, runtime, kernel, sync, idle and backlog (a "
           "launch-to-kernel wait of >= 1 ms: work the trace does not show, or a clock "
           "offset), summing to the step length.")


class Graph:
    """Binding predecessor of every node (event row → row, −1 none) and node kinds."""

    def __init__(self, n: int) -> None:
        self.pred = np.full(n, -1, dtype=np.int64)
        self.edge = np.full(n, -1, dtype=np.int8)
        self.node = np.full(n, "", dtype=object)  # share label of each node's own time


def dependency_graph(table: TraceTable) -> Graph:
    return memoised(table, "critical_graph", lambda: _graph(table))


def _graph(table: TraceTable) -> Graph:
    events = table.events
    n = len(events)
    ts, ends = events["ts"].to_numpy(), event_ends(events)
    graph = Graph(n)
    host = complete_rows(events, LAUNCH_KINDS)
    work = device_work(table)
    dev = work["event"].to_numpy()
    names = events["name"]
    is_sync = np.append(np.asarray(names.cat.categories.astype(str).str.contains(
        SYNC_NAME, regex=True)), False)[names.cat.codes.to_numpy()]
    launching = np.zeros(n, dtype=bool)
    launching[work["launch"].to_numpy()[work["launch"].to_numpy() >= 0]] = True
    graph.node[host] = np.where(is_sync[host], "sync",
                                np.where(launching[host], "launch", "runtime"))
    graph.node[dev] = "kernel"
    src, dst, kind = [], [], []
    # host order per thread
    tid = events["tid"].cat.codes.to_numpy()[host]
    order = np.lexsort((ts[host], tid))
    h, t = host[order], tid[order]
    same = t[1:] == t[:-1]
    src.append(h[:-1][same]), dst.append(h[1:][same]), kind.append(np.full(same.sum(), HOST_ORDER))
    # stream order (device_work is sorted by device, stream, start)
    d_dev, d_str = work["device"].to_numpy(), work["stream"].to_numpy()
    same = (d_dev[1:] == d_dev[:-1]) & (d_str[1:] == d_str[:-1]) & np.isfinite(d_str[1:])
    src.append(dev[:-1][same]), dst.append(dev[1:][same]), kind.append(np.full(same.sum(), STREAM))
    # launch and blocking
    launch = work["launch"].to_numpy()
    linked = launch >= 0
    charged = linked & charged_mask(table)  # a graph launch → its first kernel per stream
    src.append(launch[charged]), dst.append(dev[charged])
    kind.append(np.full(charged.sum(), LAUNCH))
    blocking = linked & (work["end"].to_numpy() <= work["launch_end"].to_numpy())
    blocking &= ~graph_launch_mask(table)[np.maximum(launch, 0)]  # graph launches are async
    src.append(dev[blocking]), dst.append(launch[blocking])
    kind.append(np.full(blocking.sum(), BLOCKING))
    # sync: per stream, the last device event ending in (sync start, sync end]
    syncs = host[is_sync[host]]
    if len(syncs) and len(dev):
        keys = pd.Series(np.arange(len(work))).groupby([d_dev, np.nan_to_num(d_str, nan=-1)])
        for _, idx in keys:  # one round per stream
            stream_rows = dev[idx.to_numpy()]
            stream_ends = np.maximum.accumulate(ends[stream_rows])
            pos = np.searchsorted(stream_ends, ends[syncs], side="right") - 1
            ok = pos >= 0
            cand = stream_rows[np.maximum(pos, 0)]
            ok &= ends[cand] > ts[syncs]
            src.append(cand[ok]), dst.append(syncs[ok]), kind.append(np.full(ok.sum(), SYNC))
    s, d, k = (np.concatenate(x) for x in (src, dst, kind))  # never empty lists
    s, d, k = s.astype(np.int64), d.astype(np.int64), k.astype(np.int8)
    # topological order: (end, start, row) ascending; only edges going forward in it
    forward = (ends[s] < ends[d]) | ((ends[s] == ends[d]) & (
        (ts[s] < ts[d]) | ((ts[s] == ts[d]) & (s < d))))
    s, d, k = s[forward], d[forward], k[forward]
    if len(s):
        # binding predecessor: the latest-ending source per destination (ties: later kind)
        order = np.lexsort((k, ends[s], d))
        last = np.append(d[order][1:] != d[order][:-1], True)
        pick = order[last]
        graph.pred[d[pick]] = s[pick]
        graph.edge[d[pick]] = k[pick]
    return graph


def critical_paths(table: TraceTable, step: Optional[str] = None) -> dict[str, Any]:
    """Per step (the first MAX_STEPS): length and shares (us); the event rows on the path of
    `step` (default the first step) for the Trace view's highlight."""
    steps = compute_steps(table)
    result = []
    chosen = step if step is not None else (steps.names[0] if len(steps) else None)
    path_ids: list[int] = []
    for i, name in enumerate(steps.names[:MAX_STEPS]):
        lo, hi = float(steps.starts[i]), float(steps.ends[i])
        found = _step_walk(table, lo, hi)
        if found is None:
            continue
        shares, path = found
        result.append({"step": name, "start_us": lo, "end_us": hi, "length_us": hi - lo,
                       "nodes": len(path),
                       "shares_us": {k: float(v) for k, v in shares.items()}})
        if name == chosen:
            path_ids = sorted(int(v) for v in path)
    return {"formula": FORMULA, "steps": result, "truncated": len(steps) > MAX_STEPS,
            "step": chosen if path_ids else None, "event_ids": path_ids}


def step_path(table: TraceTable, step: str) -> dict[str, Any]:
    """The critical path of the step named `step` (any step, not only the first MAX_STEPS),
    for the Trace view's highlight: `rows` (event rows, source first: the order the path runs
    in time), `edges` (EDGE_NAMES index of the edge into each row; -1 for the first), the
    step's `start_us`/`end_us`. Memoised per step. KeyError: no step of that name."""
    return memoised(table, f"critical_step:{step}", lambda: _step_path(table, step))


EDGE_NAMES = ("host_order", "stream", "launch", "blocking", "sync")


def _step_path(table: TraceTable, step: str) -> dict[str, Any]:
    steps = compute_steps(table)
    where = [i for i, name in enumerate(steps.names) if name == step]
    if not where:
        raise KeyError(step)
    lo, hi = float(steps.starts[where[0]]), float(steps.ends[where[0]])
    found = _step_walk(table, lo, hi)
    rows = np.asarray(found[1][::-1] if found else [], dtype=np.int64)
    edges = dependency_graph(table).edge[rows].astype(np.int64)
    if len(edges):
        edges[0] = -1
    return {"step": step, "start_us": lo, "end_us": hi, "rows": rows, "edges": edges}


def _step_walk(table: TraceTable, lo: float, hi: float
               ) -> Optional[tuple[dict[str, float], list[int]]]:
    """(shares, path rows from the sink back) of the step [lo, hi); None without nodes."""
    graph = dependency_graph(table)
    events = table.events
    ts, ends = events["ts"].to_numpy(), event_ends(events)
    nodes = memoised(table, "critical_nodes", lambda: np.flatnonzero(graph.node != ""))
    inside = nodes[(ts[nodes] >= lo) & (ts[nodes] < hi)]
    if len(inside) == 0:
        return None
    sink = int(inside[np.argmax(ends[inside])])
    return walk(graph, ts, ends, sink, lo, hi)


def walk(graph: Graph, ts: np.ndarray, ends: np.ndarray, sink: int, lo: float, hi: float
         ) -> tuple[dict[str, float], list[int]]:
    """Follow binding predecessors back from `sink` and split [lo, hi] into SHARES."""
    shares = dict.fromkeys(SHARES, 0.0)
    cursor = hi
    shares["host_compute"] += max(0.0, hi - min(ends[sink], hi))  # after the last node
    cursor = min(cursor, ends[sink])
    path = []
    v = sink
    while True:  # one iteration per node on the path, never per event of the trace
        path.append(v)
        u = int(graph.pred[v])
        bound = ends[u] if u >= 0 else -np.inf
        begin = max(ts[v], bound, lo)
        if cursor > begin:
            shares[graph.node[v]] += cursor - begin
            cursor = begin
        if u < 0 or bound <= lo:
            lead = "host_compute" if graph.node[v] != "kernel" else "idle"
            if u >= 0:
                lead = _EDGE_GAP[int(graph.edge[v])]
            _charge_gap(shares, graph, v, lead, max(0.0, cursor - lo))
            return shares, path
        gap_start = max(bound, lo)
        if cursor > gap_start:
            _charge_gap(shares, graph, v, _EDGE_GAP[int(graph.edge[v])], cursor - gap_start)
            cursor = gap_start
        v = u


def _charge_gap(shares: dict[str, float], graph: Graph, v: int, label: str, gap: float) -> None:
    """A gap before `v` goes to `label`, except a launch-to-kernel wait of ≥ `BACKLOG_MIN_US`:
    no launch takes that long, so it goes to "backlog" (the kernel waited for work the trace
    does not show: from before the window, or behind an event of another stream; or a clock
    offset)."""
    if label == "launch" and graph.edge[v] == LAUNCH and gap >= BACKLOG_MIN_US:
        label = "backlog"
    shares[label] += gap
