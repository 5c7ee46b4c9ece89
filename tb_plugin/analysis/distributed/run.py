"""The run-level Distributed view, built from per-rank summaries only (`dist_summary`).

`build_distributed(inputs)` takes, per worker, a `TraceTable` (summarised here), a
`RankSummary`, or a summary's builtins (from the cache), so the server never holds the ranks'
tables: it reads one small summary per rank. Matching is in `dist_match`; the collective,
straggler, bandwidth and heat-map tables in `dist_tables`.

Per-step transfer / synchronizing / unmatched times are on each rank's own trace clock: the
union of its communication ranges (kernels, else host ranges) clipped to its device-adjusted step
windows, the same windows and ranges as the overlap chart, so transfer + synchronizing +
unmatched of a step equals the chart's communication time of that step. Transfer uses the
reference's model per range (the shortest duration of that range over the ranks).
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from .. import ranges as rg
from ..numbers import round3 as _round
from .fsdp import fsdp_advice, fsdp_layers
from .groups import group_rows, nodes
from .match import (
    call_frame,
    clock_offsets,
    group_sizes,
    match,
    matched_ranges,
    modes,
    with_waits,
)
from .rank import NODE_PROCESS, worker_node_pid
from .summary import RankSummary, decode, rank_summary
from .tables import (
    bandwidth_rows,
    collective_rows,
    collective_table,
    coverage,
    gpu_names,
    heat_maps,
    recommendations,
    straggler_rows,
)

SummaryInput = Union[TraceTable, RankSummary, dict]
OVERLAP_KEYS = ("computation", "overlap", "communication", "other")
WAIT_KEYS = ("transfer", "synchronizing", "unmatched")
CLOCKS = {
    "per_step": "Each rank's own trace clock: communication ranges (kernels, else host ranges) "
                "clipped to the rank's device-adjusted steps, the windows of the overlap chart.",
    "skew": "Clock-independent: a rank's wait is its duration in the collective (kernel span, "
            "else host range) minus the shortest duration over the ranks.",
    "aligned": "Arrivals on one clock: each rank's trace clock minus its offset, estimated from "
               "collective ends (everyone leaves a collective together), relative to the "
               "lowest rank of each set of ranks that share collectives (offset 0).",
}


def as_summary(value: SummaryInput) -> RankSummary:
    if isinstance(value, RankSummary):
        return value
    if isinstance(value, TraceTable):
        return rank_summary(value)
    return decode(value)


def build_distributed(inputs: dict[str, SummaryInput]) -> dict[str, Any]:
    """The distributed view of one span: `inputs` maps each worker to its table or summary.

    Old fields: workers, devices, steps, overlap, wait (now with `unmatched`), comm_ops,
    messages. New: coverage, clocks, collectives, stragglers, bandwidth, heatmap,
    recommendations, fsdp, fsdp_layers. Times are us (3 decimals); see `views.distributed.payload`.
    """
    workers = sorted(inputs)
    summaries = {w: as_summary(inputs[w]) for w in workers}
    messages: list[str] = []
    for worker, summary in summaries.items():
        messages.extend(f"{worker}: {m}" for m in summary.messages)
        if not summary.calls.name:
            messages.append(f"{worker}: no communication ops found.")
    calls = call_frame(summaries)
    sizes, world = group_sizes(summaries)
    matched = match(calls, sizes, world)
    keyed = with_waits(calls, matched) if len(calls) else calls.assign(id=[], wait=[],
                                                                        matched=[])
    _report_mismatches(workers, calls[~calls["by_seq"].astype(bool)], messages)
    ranges = matched_ranges(summaries, keyed)
    offsets = clock_offsets(keyed, len(workers)) if len(calls) else np.zeros(len(workers))
    ranges = ranges.sort_values("w", kind="stable").reset_index(drop=True)
    bounds = np.searchsorted(ranges["w"].to_numpy(np.int64), np.arange(len(workers) + 1))
    columns = {c: ranges[c].to_numpy(np.float64) for c in ("start", "end", "real_start")}
    columns["matched"] = ranges["matched"].to_numpy(bool)
    ops_rows = op_rows(len(workers), keyed, ranges)
    overlap, wait, ops_tables = {}, {}, {}
    for w, (worker, summary) in enumerate(summaries.items()):  # slices, no per-rank scans
        mine = {c: v[bounds[w]:bounds[w + 1]] for c, v in columns.items()}
        overlap[worker] = _overlap(summary)
        wait[worker] = _wait(summary, mine)
        ops_tables[worker] = {"rows": ops_rows[w]}
    step_names = _step_order(summaries)
    devices = device_table(summaries)
    node_source = devices[0]["node_source"] if devices else "worker"
    cover = coverage(summaries, world)
    if cover["message"]:
        messages.insert(0, cover["message"])
    fsdp = any(s.fsdp for s in summaries.values())
    stragglers = straggler_rows(workers, keyed, matched)
    layers = fsdp_layers(summaries, calls)
    table = collective_table(matched)  # once, for three tables
    by_group = group_rows(workers, [d["node"] for d in devices], node_source != "worker", keyed,
                          table, gpu_names(devices)) if len(calls) else {"total": 0, "rows": []}
    return {
        "workers": workers,
        "devices": devices,
        "steps": step_names,
        "overlap": _by_step(overlap, step_names, OVERLAP_KEYS),
        "wait": _by_step(wait, step_names, WAIT_KEYS),
        "comm_ops": ops_tables,
        "messages": messages,
        "coverage": cover,
        "matching": matching(modes(calls)),
        "clocks": {**CLOCKS, "offsets_us": {w: _round(o) for w, o in zip(workers, offsets)}},
        "collectives": collective_rows(workers, matched, table),
        "stragglers": stragglers,
        "bandwidth": bandwidth_rows(matched, devices, table),
        "heatmap": heat_maps(workers, keyed, matched),
        "groups": by_group,
        "recommendations": [*recommendations(stragglers, matched, devices, fsdp, cover=cover,
                                             groups=by_group), *fsdp_advice(layers)],
        "fsdp": fsdp,
        "fsdp_layers": layers,
    }


def matching(by_group: dict[str, str]) -> dict[str, Any]:
    """How collectives were matched across ranks: by sequence number, call order, or both."""
    kinds = set(by_group.values())
    by = "none" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"
    notes = {"sequence": "Matched by (process group, sequence number): every call carries "
                         "record_param_comms' Seq, so ranks whose windows differ still meet.",
             "order": "Matched by call order per process group (the trace has no Seq): right "
                      "only when every rank recorded the same steps.",
             "mixed": "By sequence number where every call of the group carries Seq, by call "
                      "order elsewhere (see groups).", "none": ""}
    return {"by": by, "groups": by_group, "note": notes[by]}


# --- per worker ------------------------------------------------------------------------------

def _overlap(summary: RankSummary) -> dict[str, dict[str, float]]:
    steps = summary.steps
    return {name: {k: getattr(steps, k)[i] for k in OVERLAP_KEYS}
            for i, name in enumerate(steps.names)}


def _wait(summary: RankSummary, mine: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Per step: transfer, synchronizing and unmatched us, clipped to the step windows."""
    steps = summary.steps
    starts, ends = np.asarray(steps.starts), np.asarray(steps.ends)
    matched = mine["matched"]
    every = rg.length_in_windows(rg.merge(mine["start"], mine["end"]), starts, ends)
    both = rg.length_in_windows(rg.merge(mine["start"][matched], mine["end"][matched]),
                                starts, ends)
    real = rg.length_in_windows(rg.merge(mine["real_start"][matched], mine["end"][matched]),
                                starts, ends)
    return {name: {"transfer": real[i], "synchronizing": both[i] - real[i],
                   "unmatched": every[i] - both[i]} for i, name in enumerate(steps.names)}


def merged_by_group(group: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pd.Series:
    """Length of the union of the intervals of each group (`ranges.merge` per group, at once)."""
    keep = ends > starts
    group, starts, ends = group[keep], starts[keep], ends[keep]
    if len(group) == 0:
        return pd.Series(dtype=np.float64)
    order = np.lexsort((starts, group))
    group, starts, ends = group[order], starts[order], ends[order]
    reach = pd.Series(ends).groupby(group).cummax().to_numpy()
    new = np.ones(len(group), dtype=bool)
    new[1:] = (group[1:] != group[:-1]) | (starts[1:] > reach[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(group) - 1)
    return pd.Series(reach[last] - starts[first]).groupby(group[first]).sum()


def op_rows(workers: int, keyed: pd.DataFrame, ranges: pd.DataFrame) -> list[list[dict[str, Any]]]:
    """Per worker, per op name (first-seen order): calls, bytes, latency (union of its ranges)
    and transfer (union of `[real_start, end)` of its matched calls), us."""
    out: list[list[dict[str, Any]]] = [[] for _ in range(workers)]
    if len(keyed) == 0:
        return out
    keyed = keyed.assign(unmatched=~keyed["matched"].astype(bool))
    calls = keyed.groupby(["w", "name"], sort=False).agg(
        calls=("call", "size"), size=("bytes", "sum"), unmatched=("unmatched", "sum"))
    index = pd.MultiIndex.from_frame(ranges[["w", "name"]])
    group = calls.index.get_indexer(index)
    latency = merged_by_group(group, ranges["start"].to_numpy(np.float64),
                              ranges["end"].to_numpy(np.float64))
    real = ranges["matched"].to_numpy(bool)
    transfer = merged_by_group(group[real], ranges["real_start"].to_numpy(np.float64)[real],
                               ranges["end"].to_numpy(np.float64)[real])
    latency = latency.reindex(np.arange(len(calls)), fill_value=0.0).to_numpy()
    transfer = transfer.reindex(np.arange(len(calls)), fill_value=0.0).to_numpy()
    for i, ((w, name), row) in enumerate(zip(calls.index, calls.itertuples(index=False))):
        n, size = int(row.calls), float(row.size)
        out[int(w)].append({
            "name": str(name), "calls": n, "total_bytes": int(size),
            "avg_bytes": int(round(size / n)), "total_latency_us": _round(latency[i]),
            "avg_latency_us": _round(latency[i] / n), "total_transfer_us": _round(transfer[i]),
            "avg_transfer_us": _round(transfer[i] / n), "unmatched_calls": int(row.unmatched),
        })
    return out


def _report_mismatches(workers: list[str], calls: pd.DataFrame, messages: list[str]) -> None:
    if len(calls) == 0:
        return
    counts = calls.groupby(["name", "w"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=range(len(workers)), fill_value=0)
    for name, row in counts.iterrows():  # one line per op name that differs
        present = row[row > 0]
        if present.nunique() > 1:
            detail = ", ".join(f"{workers[w]}: {n}" for w, n in present.items())
            messages.append(f"{name}: call counts differ between workers ({detail}); calls were "
                            f"matched in order per process group, the first {present.min()} on "
                            "every worker.")


# --- devices ---------------------------------------------------------------------------------

def device_table(summaries: dict[str, RankSummary]) -> list[dict[str, Any]]:
    """Workers by rank, node and pid from the trace (`groups.nodes`: hostname, else the GPU
    placement; the training process's pid), else from a `hostname_pid` worker name, else the
    worker and a running index."""
    rows, index = [], 0
    hosts, source = nodes(summaries)
    for (worker, summary), node in zip(summaries.items(), hosts):
        _, pid = worker_node_pid(worker, index)
        index += 0 if NODE_PROCESS.match(worker) else 1
        rows.append({
            "worker": worker, "node": node, "node_source": source, "pid": summary.pid or pid,
            "backend": summary.backend, "rank": summary.rank,
            "world_size": summary.world_size,
            "gpus": [{"id": g.id, "name": g.name, "memory_bytes": g.memory_bytes,
                      "compute_capability": g.compute_capability} for g in summary.gpus],
        })
    return rows


# --- shaping ---------------------------------------------------------------------------------

def _step_order(summaries: dict[str, RankSummary]) -> list[str]:
    names = {n for s in summaries.values() for n in s.steps.names}
    return sorted(names, key=lambda n: (0, int(n), n) if n.isdigit() else (1, 0, n))


def _by_step(per_worker: dict[str, dict[str, dict[str, float]]], step_names: list[str],
             keys: tuple[str, ...]) -> dict[str, dict[str, dict[str, float]]]:
    """{"all": {worker: mean over its steps}, step: {worker: values}} with rounded us."""
    out: dict[str, dict[str, dict[str, float]]] = {"all": {}}
    for worker, by_step in per_worker.items():
        if by_step:
            out["all"][worker] = {k: _round(float(np.mean([v[k] for v in by_step.values()])))
                                  for k in keys}
    for name in step_names:
        out[name] = {w: {k: _round(v[name][k]) for k in keys}
                     for w, v in per_worker.items() if name in v}
    return out
