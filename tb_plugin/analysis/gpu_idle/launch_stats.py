"""Kernel launch statistics, frequent kernel sequences (fusion candidates) and the
user-annotation breakdown of GPU time. Vectorised over `device_work` and the op tree.

Formulas (`FORMULAS`, shown in the UI):
- Per launch call of kernels: cpu = the runtime/driver call's duration, gpu = the duration
  of the kernel it started (a CUDA/HIP graph launch: the sum over the N kernels it replayed,
  so the call is charged once), delay = its first kernel's start − end of the call. Short
  kernel: gpu < cpu (the launch costs more than the work). Runtime outlier:
  cpu > `runtime_cutoff_us`; delay outlier: delay > `delay_cutoff_us`.
- Sequence: an operator (the innermost op owning the launches) with the ordered names of the
  kernels it launched; counted over all its calls, with Σ gpu of its kernels and Σ of the
  operator's host duration. Sequences of ≥ 2 kernels are fusion candidates.
- Annotation: each kernel goes to the leaf-most `record_function` range (user_annotation,
  same thread) containing its launch's start, and to the leaf-most `gpu_user_annotation`
  range (same device) containing its start; gpu = Σ durations of those kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...ingest.schema import Kind, TraceTable
from ..device_work import device_work, log_histogram
from ..nesting import nest
from ..node_kinds import NodeKind
from ..optree import build_op_tree
from ..steps import STEP_PREFIX

FORMULAS = {
    "launch": "Per launch call: cpu = its duration, gpu = its kernel's duration (a graph "
              "launch: the sum over its N kernels, charged once), delay = first kernel "
              "start − launch call end. Short: gpu < cpu. Outliers: cpu > runtime_cutoff_us, "
              "delay > delay_cutoff_us.",
    "sequences": "Operator + the ordered kernels it launched, counted over its calls; gpu = Σ "
                 "kernel durations, cpu = Σ operator host durations. ≥ 2 kernels: fusion "
                 "candidate.",
    "annotations": "A kernel belongs to the leaf-most record_function range containing its "
                   "launch (same thread) and the leaf-most gpu_user_annotation containing its "
                   "start (same device); gpu = Σ those kernels' durations.",
}
TOP_SEQUENCES = 20
TOP_OUTLIERS = 10


def kernel_launches(table: TraceTable) -> pd.DataFrame:
    """One row per launch call of kernels: event (its first kernel), launch, name code (of the
    launch call), cpu_us, gpu_us (Σ its kernels), delay_us (first kernel start − launch end),
    start, kernels (how many it started). A graph launch is one launch of N kernels
    (`graph_launches`): charged once, not once per kernel."""
    work = device_work(table)
    work = work[(work["kind"].to_numpy() == Kind.KERNEL) & (work["launch"].to_numpy() >= 0)]
    work = work.sort_values(["launch", "start", "event"], kind="stable")
    launch_all = work["launch"].to_numpy()
    first = np.ones(len(work), dtype=bool)
    first[1:] = launch_all[1:] != launch_all[:-1]
    starts = np.flatnonzero(first)
    gpu = np.add.reduceat(work["dur"].to_numpy(), starts) if len(starts) else np.empty(0)
    counts = np.diff(np.append(starts, len(work)))
    work = work[first]
    events = table.events
    launch = work["launch"].to_numpy()
    frame = pd.DataFrame({
        "event": work["event"].to_numpy(), "launch": launch,
        "start": work["start"].to_numpy(),
        "cpu_us": work["launch_end"].to_numpy() - work["launch_start"].to_numpy(),
        "gpu_us": gpu,
        "delay_us": work["start"].to_numpy() - work["launch_end"].to_numpy(),
        "launch_name": events["name"].cat.codes.to_numpy()[launch],
        "kernels": counts.astype(np.int64),
    }, index=work.index)
    return frame.sort_index().reset_index(drop=True)  # device_work's order


def launch_stats(table: TraceTable, runtime_cutoff_us: float, delay_cutoff_us: float
                 ) -> dict[str, Any]:
    frame = kernel_launches(table)
    cpu, gpu, delay = (frame[c].to_numpy() for c in ("cpu_us", "gpu_us", "delay_us"))
    short = gpu < cpu
    names = table.events["name"].cat.categories.astype(str)
    kernel_names = table.events["name"].cat.codes.to_numpy()

    def top(values: np.ndarray, mask: np.ndarray) -> list[dict[str, Any]]:
        idx = np.flatnonzero(mask)
        idx = idx[np.argsort(-values[idx], kind="stable")[:TOP_OUTLIERS]]
        return [{"event": int(frame["event"].iat[i]), "launch_event": int(launch_rows[i]),
                 "name": str(names[kernel_names[int(frame['event'].iat[i])]]),
                 "start_us": float(frame["start"].iat[i]), "cpu_us": float(cpu[i]),
                 "gpu_us": float(gpu[i]), "delay_us": float(delay[i])} for i in idx]

    launch_rows = frame["launch"].to_numpy()
    return {
        "kernels": int(frame["kernels"].sum()),
        "runtime_cutoff_us": runtime_cutoff_us, "delay_cutoff_us": delay_cutoff_us,
        "cpu_us_total": float(cpu.sum()), "gpu_us_total": float(gpu.sum()),
        "short_kernels": int(short.sum()),
        "short_kernel_gpu_us": float(gpu[short].sum()),
        "mean_delay_us": float(delay.mean()) if len(delay) else None,
        "median_delay_us": float(np.median(delay)) if len(delay) else None,
        "runtime_outliers": int((cpu > runtime_cutoff_us).sum()),
        "delay_outliers": int((delay > delay_cutoff_us).sum()),
        "top_runtime_outliers": top(cpu, cpu > runtime_cutoff_us),
        "top_delay_outliers": top(delay, delay > delay_cutoff_us),
        "histograms": {"cpu_us": log_histogram(cpu), "gpu_us": log_histogram(gpu),
                       "delay_us": log_histogram(np.maximum(delay, 0.0))},
    }


def kernel_sequences(table: TraceTable) -> list[dict[str, Any]]:
    """The most frequent (operator, ordered kernel names) pairs, by total GPU time."""
    tree = build_op_tree(table)
    kind = table.events["kind"].to_numpy()
    is_kernel = kind[tree.device_rows] == Kind.KERNEL
    rows, owner = tree.device_rows[is_kernel], tree.device_owner[is_kernel]
    keep = tree.kind[owner] != NodeKind.ROOT
    rows, owner = rows[keep], owner[keep]
    if len(rows) == 0:
        return []
    events = table.events
    ts = events["ts"].to_numpy()[rows]
    dur = np.nan_to_num(events["dur"].to_numpy()[rows])
    code = events["name"].cat.codes.to_numpy()[rows]
    frame = pd.DataFrame({"owner": owner, "ts": ts, "dur": dur, "code": code}).sort_values(
        ["owner", "ts"], kind="stable")
    per_call = frame.groupby("owner", sort=False).agg(
        seq=("code", tuple), gpu=("dur", "sum"))
    owners = per_call.index.to_numpy()
    per_call["op"] = tree.name_code[owners]
    per_call["cpu"] = tree.host_total[owners]
    grouped = per_call.groupby(["op", "seq"], sort=False).agg(
        count=("gpu", "size"), gpu=("gpu", "sum"), cpu=("cpu", "sum"))
    grouped = grouped.sort_values(["gpu", "count"], ascending=False).head(TOP_SEQUENCES)
    names = events["name"].cat.categories.astype(str)
    return [{"operator": str(tree.name_categories[op]),
             "kernels": [str(names[c]) for c in seq], "count": int(r["count"]),
             "gpu_us": float(r["gpu"]), "cpu_us": float(r["cpu"]),
             "fusion_candidate": len(seq) >= 2}
            for (op, seq), r in grouped.iterrows()]


def leaf_containing(group: np.ndarray, start: np.ndarray, end: np.ndarray,
                    point_group: np.ndarray, point: np.ndarray) -> np.ndarray:
    """For each point, the index of the leaf-most interval of its group containing it
    (start ≤ point < end), −1 when none. Intervals are nested per group (`nesting.nest`):
    the candidate is the last interval of the group starting at or before the point; while it
    has ended, climb to its parent (all points at once, one round per nesting level)."""
    if len(start) == 0 or len(point) == 0:
        return np.full(len(point), -1, dtype=np.int64)
    nesting = nest(group.astype(np.int64), start, end)
    order = nesting.order
    s_sorted, e_sorted, g_sorted = start[order], nesting.end[order], group[order]
    # nesting order is sorted by (group, start): search the points among those pairs
    pos = _search_pairs(g_sorted, s_sorted, point_group, point)
    cand = pos.copy()
    for _ in range(int(nesting.depth.max(initial=0)) + 1):
        valid = cand >= 0
        safe = np.where(valid, cand, 0)
        ended = valid & ((e_sorted[safe] <= point) | (g_sorted[safe] != point_group))
        if not ended.any():
            break
        cand = np.where(ended, nesting.parent[safe], cand)
    return np.where(cand >= 0, order[np.maximum(cand, 0)], -1)


def _search_pairs(g: np.ndarray, s: np.ndarray, pg: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Position of the last pair (g, s) with g == pg and s ≤ p in pairs sorted by (g, s), −1
    when none (one searchsorted per distinct group: threads or devices, a handful)."""
    pos = np.full(len(p), -1, dtype=np.int64)
    for value in np.unique(pg):
        lo, hi = np.searchsorted(g, value, side="left"), np.searchsorted(g, value, side="right")
        if hi == lo:
            continue
        mine = pg == value
        found = np.searchsorted(s[lo:hi], p[mine], side="right") - 1
        pos[mine] = np.where(found >= 0, found + lo, -1)
    return pos


def annotation_breakdown(table: TraceTable) -> list[dict[str, Any]]:
    """Per annotation name (host `record_function` and GPU-side ranges): ranges, wall us,
    kernels attributed (leaf-most wins) and their GPU us."""
    events = table.events
    kind = events["kind"].to_numpy()
    names = events["name"]
    step_marker = names.cat.categories.astype(str).str.startswith(STEP_PREFIX)
    is_step = np.append(np.asarray(step_marker), False)[names.cat.codes.to_numpy()]
    ts, dur = events["ts"].to_numpy(), events["dur"].to_numpy()
    launches = kernel_launches(table)
    work = device_work(table)
    kernels = work[work["kind"].to_numpy() == Kind.KERNEL]
    result: list[dict[str, Any]] = []
    for side, ann_kind in (("host", Kind.USER_ANNOTATION), ("gpu", Kind.GPU_USER_ANNOTATION)):
        rows = np.flatnonzero((kind == ann_kind) & ~is_step & np.isfinite(dur) & (dur > 0))
        if len(rows) == 0:
            continue
        if side == "host":
            group = events["tid"].cat.codes.to_numpy()[rows]
            pts = launches["launch"].to_numpy()
            point_group = events["tid"].cat.codes.to_numpy()[pts]
            point, weight = ts[pts], launches["gpu_us"].to_numpy()
            count_weight = launches["kernels"].to_numpy()
        else:
            group = pd.to_numeric(events["pid"].astype(str).to_numpy()[rows],
                                  errors="coerce")
            group = np.nan_to_num(np.asarray(group, dtype=np.float64), nan=-1).astype(np.int64)
            point_group = kernels["device"].to_numpy().astype(np.int64)
            point, weight = kernels["start"].to_numpy(), kernels["dur"].to_numpy()
            count_weight = np.ones(len(point), dtype=np.int64)
        owner = leaf_containing(group, ts[rows], ts[rows] + dur[rows], point_group, point)
        code = names.cat.codes.to_numpy()[rows]
        hit = owner >= 0
        gpu = np.bincount(owner[hit], weights=weight[hit], minlength=len(rows))
        count = np.bincount(owner[hit], weights=count_weight[hit], minlength=len(rows))
        frame = pd.DataFrame({"code": code, "wall": dur[rows], "gpu": gpu, "kernels": count})
        agg = frame.groupby("code", sort=False).agg(
            ranges=("wall", "size"), wall=("wall", "sum"), gpu=("gpu", "sum"),
            kernels=("kernels", "sum"))
        cats = names.cat.categories.astype(str)
        result.extend({"side": side, "name": str(cats[c]), "ranges": int(r["ranges"]),
                       "wall_us": float(r["wall"]), "gpu_us": float(r["gpu"]),
                       "kernels": int(round(r["kernels"]))} for c, r in agg.iterrows())
    return sorted(result, key=lambda r: (-r["gpu_us"], -r["wall_us"], r["name"]))
