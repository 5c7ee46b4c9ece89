"""CUDA/HIP graph traces: what the trace is (replay, capture or neither), how much replayed
kernel time is attributed to the code that launched it, and the merge of a capture trace
with its replay. The launch-level rules are in `graph_launches.py`.

- Replayed kernel: a kernel whose launch is a graph launch (`graph_launches.GRAPH_LAUNCH_RE`).
- Attributed: a replayed kernel whose graph launch call lies inside an operator-tree node that
  is not a thread root or a ProfilerStep (an operator, module, optimizer step...) or inside a
  host `record_function` annotation on the launching thread (leaf-most wins, as in
  `launch_stats.annotation_breakdown`); it is attributed to that node or annotation.
- Mode: "replay" when the trace has replayed kernels, else "capture" when it has captured
  launches (`graph_launches.captured_launch_rows`): kernels recorded into a graph, never run,
  so no utilization, MFU or idle number of the trace describes a workload; else "none".
- Capture and replay are paired by run: the run `<R>/capture` (a `capture/` subfolder of the
  replay's run folder) holds the capture of run `<R>` (`paired_capture_run`). A replayed
  graph's kernels, in start order, are matched one to one with the launches of a capture
  window, in call order, whose count is the same (the first such window); each replayed
  kernel is then attributed to the operator that captured it. Kineto writes no graph node id
  in the traces we have, so the order is the key.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable
from .device_work import device_work
from .gpu_idle.launch_stats import leaf_containing
from .graph_launches import (
    backlog,
    capture_windows,
    captured_launch_rows,
    graph_launch_mask,
    replayed_mask,
)
from .memo import memoised
from .node_kinds import NodeKind
from .optree import build_op_tree
from .steps import STEP_PREFIX

CAPTURE_SUFFIX = "/capture"
TOP_OWNERS = 20
CAPTURE_NOTE = ("Graph capture trace: its kernels were recorded into a CUDA/HIP graph, not "
                "executed, so GPU utilization, MFU and idle time are not computed for it.")


def graph_summary(table: TraceTable) -> dict[str, Any]:
    """The graph facts of one trace:

    - `mode`: "replay" | "capture" | "none" (module docstring);
    - `launches`: graph launch calls; `launch_us`: the sum of their durations;
    - `replayed_kernels`, `replayed_kernel_us`: kernels started by them, their GPU time (us);
    - `attributed_kernel_us`: the part of it attributed to an operator or annotation;
    - `owners`: the top `TOP_OWNERS` of those, {"name", "kind" ("operator"|"annotation"),
      "kernels", "kernel_us"}, by time;
    - `captured_launches`, `capture_windows`: launches recorded in stream capture, windows;
    - `backlog`: `graph_launches.backlog` (GPUs whose kernels all start long after launch);
    - `notes`: sentences for the UI (capture label, attribution, backlog).
    """
    return memoised(table, "graph_summary", lambda: _summary(table))


def _summary(table: TraceTable) -> dict[str, Any]:
    work = device_work(table)
    replayed = replayed_mask(table) & (work["kind"].to_numpy() == Kind.KERNEL)
    rows = work["event"].to_numpy()[replayed]
    dur = work["dur"].to_numpy()[replayed]
    owner_name, owner_kind = attribute_kernels(table, rows)
    attributed = owner_kind != ""
    events = table.events
    launch_rows = np.flatnonzero(graph_launch_mask(table))
    captured = captured_launch_rows(table)
    mode = "replay" if len(rows) else ("capture" if len(captured) else "none")
    summary: dict[str, Any] = {
        "mode": mode,
        "launches": int(len(launch_rows)),
        "launch_us": float(np.nansum(events["dur"].to_numpy()[launch_rows])),
        "replayed_kernels": int(len(rows)),
        "replayed_kernel_us": float(dur.sum()),
        "attributed_kernel_us": float(dur[attributed].sum()),
        "owners": _owners(owner_name[attributed], owner_kind[attributed], dur[attributed]),
        "captured_launches": int(len(captured)),
        "capture_windows": int(len(capture_windows(table))),
        "backlog": backlog(table),
    }
    summary["notes"] = _notes(summary)
    return summary


def _notes(summary: dict[str, Any]) -> list[str]:
    notes = []
    if summary["mode"] == "capture":
        notes.append(CAPTURE_NOTE)
    if summary["mode"] == "replay":
        share = (100.0 * summary["attributed_kernel_us"] / summary["replayed_kernel_us"]
                 if summary["replayed_kernel_us"] > 0 else 0.0)
        notes.append(f"CUDA/HIP graph trace: {summary['launches']} graph launch(es) replayed "
                     f"{summary['replayed_kernels']} kernels; each launch is counted once, and "
                     f"{share:.1f}% of the replayed kernel time is attributed to the operator or "
                     "annotation around its launch.")
    notes.extend(b["message"] for b in summary["backlog"])
    return notes


def attribute_kernels(table: TraceTable, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per device event row: (name, kind) of what encloses its launch: the op-tree node owning
    it when that is not a root or a ProfilerStep ("operator"), else the leaf-most host
    annotation on the launch's thread ("annotation"), else ("", "")."""
    name = np.full(len(rows), "", dtype=object)
    kind = np.full(len(rows), "", dtype=object)
    if len(rows) == 0:
        return name, kind
    tree = build_op_tree(table)
    pos = pd.Series(np.arange(len(tree.device_rows)), index=tree.device_rows)
    found = pos.reindex(rows).to_numpy()
    has = np.isfinite(found)
    owner = np.where(has, tree.device_owner[np.nan_to_num(found).astype(np.int64)], -1)
    usable = (owner >= 0)
    usable[usable] = ~np.isin(tree.kind[owner[usable]], (NodeKind.ROOT, NodeKind.PROFILER_STEP))
    names = tree.names
    name[usable] = names[owner[usable]]
    kind[usable] = "operator"
    rest = ~usable
    if rest.any():
        ann_name = _annotation_of_launch(table, rows[rest])
        hit = ann_name != ""
        idx = np.flatnonzero(rest)[hit]
        name[idx], kind[idx] = ann_name[hit], "annotation"
    return name, kind


def graph_annotations(table: TraceTable, rows: np.ndarray) -> np.ndarray:
    """Per device event row: the host annotation its graph launch lies in, when it is a
    replayed kernel with no operator around the launch ("" otherwise): the Kernel view's
    operator for it, instead of N/A."""
    out = np.full(len(rows), "", dtype=object)
    work = device_work(table)
    replayed = pd.Series(replayed_mask(table), index=work["event"].to_numpy()).reindex(
        rows).fillna(False).to_numpy(dtype=bool)
    if replayed.any():
        name, kind = attribute_kernels(table, rows[replayed])
        out[np.flatnonzero(replayed)] = np.where(kind == "annotation", name, "")
    return out


def _annotation_of_launch(table: TraceTable, rows: np.ndarray) -> np.ndarray:
    events = table.events
    work = device_work(table)
    launch = pd.Series(work["launch"].to_numpy(), index=work["event"].to_numpy()).reindex(
        rows).fillna(-1).to_numpy().astype(np.int64)
    out = np.full(len(rows), "", dtype=object)
    kind = events["kind"].to_numpy()
    cats = events["name"].cat.categories.astype(str)
    codes = events["name"].cat.codes.to_numpy()
    is_step = np.append(np.asarray(cats.str.startswith(STEP_PREFIX)), False)[codes]
    dur = events["dur"].to_numpy()
    ann = np.flatnonzero((kind == Kind.USER_ANNOTATION) & ~is_step & np.isfinite(dur)
                         & (dur > 0))
    ok = launch >= 0
    if len(ann) == 0 or not ok.any():
        return out
    ts, tid = events["ts"].to_numpy(), events["tid"].cat.codes.to_numpy()
    pts = launch[ok]
    hit = leaf_containing(tid[ann], ts[ann], ts[ann] + dur[ann], tid[pts], ts[pts])
    got = np.where(hit >= 0, np.asarray(cats)[codes[ann[np.maximum(hit, 0)]]], "")
    out[np.flatnonzero(ok)] = got
    return out


def _owners(name: np.ndarray, kind: np.ndarray, dur: np.ndarray) -> list[dict[str, Any]]:
    if len(name) == 0:
        return []
    frame = pd.DataFrame({"name": name, "kind": kind, "dur": dur})
    agg = frame.groupby(["name", "kind"], sort=False).agg(
        kernels=("dur", "size"), kernel_us=("dur", "sum")).reset_index()
    agg = agg.sort_values(["kernel_us", "name"], ascending=[False, True]).head(TOP_OWNERS)
    return [{"name": str(r.name), "kind": str(r.kind), "kernels": int(r.kernels),
             "kernel_us": float(r.kernel_us)} for r in agg.itertuples()]


def paired_capture_run(run: str, runs: list[str]) -> Optional[str]:
    """The capture run of replay run `run` among `runs`: `<run>/capture`, None when absent."""
    candidate = run + CAPTURE_SUFFIX
    return candidate if candidate in runs else None


def merge_capture(replay: TraceTable, capture: TraceTable) -> pd.DataFrame:
    """Replayed kernels of `replay` matched with the launches of `capture` (module docstring):
    one row per replayed kernel: `launch` (the graph launch's event row), `index` (order in
    its graph), `event`, `kernel`, `dur_us`, `window` (capture window number, −1 unmatched),
    `captured_by` (the operator that captured it, "" unmatched or outside any operator)."""
    work = device_work(replay)
    sel = replayed_mask(replay) & (work["kind"].to_numpy() == Kind.KERNEL)
    frame = pd.DataFrame({"launch": work["launch"].to_numpy()[sel],
                          "event": work["event"].to_numpy()[sel],
                          "start": work["start"].to_numpy()[sel],
                          "dur_us": work["dur"].to_numpy()[sel]})
    frame = frame.sort_values(["launch", "start", "event"], kind="stable", ignore_index=True)
    frame["index"] = frame.groupby("launch").cumcount()
    names = replay.events["name"].cat.categories.astype(str)
    frame["kernel"] = np.asarray(names)[replay.events["name"].cat.codes.to_numpy()[
        frame["event"].to_numpy()]]
    frame["window"] = -1
    frame["captured_by"] = ""
    windows = _capture_window_owners(capture)
    for _, group in frame.groupby("launch", sort=True):
        match = next((i for i, w in enumerate(windows) if len(w) == len(group)), None)
        if match is not None:
            frame.loc[group.index, "window"] = match
            frame.loc[group.index, "captured_by"] = windows[match]
    return frame.drop(columns="start")[["launch", "index", "event", "kernel", "dur_us",
                                        "window", "captured_by"]]


def _capture_window_owners(capture: TraceTable) -> list[np.ndarray]:
    """Per capture window (by start): the operator name owning each captured launch, in
    call order ("" outside any operator)."""
    rows = captured_launch_rows(capture)
    windows = capture_windows(capture).sort_values("start", kind="stable")
    events = capture.events
    ts, tid = events["ts"].to_numpy()[rows], events["tid"].cat.codes.to_numpy()[rows]
    tree = build_op_tree(capture)
    pos = pd.Series(np.arange(len(tree.launch_rows)), index=tree.launch_rows)
    found = pos.reindex(rows).to_numpy()
    owner = np.where(np.isfinite(found),
                     tree.launch_owner[np.nan_to_num(found).astype(np.int64)], -1)
    usable = owner >= 0
    usable[usable] = ~np.isin(tree.kind[owner[usable]], (NodeKind.ROOT, NodeKind.PROFILER_STEP))
    names_of = tree.names if len(tree) else np.array([""], dtype=object)  # no tree: no op
    names = np.where(usable, names_of[np.maximum(owner, 0)], "").astype(object)
    out = []
    for w in windows.itertuples():
        inside = (tid == w.thread) & (ts >= w.start) & (ts < w.end)
        out.append(names[inside])
    return out
