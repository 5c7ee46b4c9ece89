"""The run-level Distributed view, built from per-rank summaries only (`dist_summary`).

`build_distributed(inputs)` takes, per worker, a `TraceTable` (summarised here), a
`RankSummary`, or a summary's builtins (from the cache), so the server never holds the ranks'
tables: it reads one small summary per rank. Matching is in `dist_match`; the collective,
straggler, bandwidth and heat-map tables in `dist_tables`.

Per-step transfer / synchronizing / unmatched times are on each rank's own trace clock: the
union of its communication ranges (host ranges and kernels) clipped to its device-adjusted step
windows, the same windows and ranges as the overlap chart, so transfer + synchronizing +
unmatched of a step equals the chart's communication time of that step. Transfer uses the
reference's model per range (the shortest duration of that range over the ranks).
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import pandas as pd

from ..ingest.schema import TraceTable
from . import ranges as rg
from .dist_match import call_frame, clock_offsets, group_sizes, match, matched_ranges, with_waits
from .dist_summary import RankSummary, decode, rank_summary
from .dist_tables import (
    bandwidth_rows,
    collective_rows,
    coverage,
    heat_maps,
    recommendations,
    straggler_rows,
)
from .distributed import NODE_PROCESS, worker_node_pid

SummaryInput = Union[TraceTable, RankSummary, dict]
OVERLAP_KEYS = ("computation", "overlap", "communication", "other")
WAIT_KEYS = ("transfer", "synchronizing", "unmatched")
CLOCKS = {
    "per_step": "Each rank's own trace clock: communication ranges (host ranges and kernels) "
                "clipped to the rank's device-adjusted steps, the windows of the overlap chart.",
    "skew": "Clock-independent: a rank's wait is its duration in the collective (kernel span, "
            "else host range) minus the shortest duration over the ranks.",
    "aligned": "Arrivals on one clock: each rank's trace clock minus its offset, estimated from "
               "collective ends (everyone leaves a collective together).",
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
    recommendations, fsdp. Times are us (3 decimals); see `payloads.distributed`.
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
    _report_mismatches(workers, calls, messages)
    ranges = matched_ranges(summaries, keyed)
    offsets = clock_offsets(keyed, len(workers)) if len(calls) else np.zeros(len(workers))
    overlap, wait, ops_tables = {}, {}, {}
    for w, (worker, summary) in enumerate(summaries.items()):
        mine = ranges[ranges["w"] == w]
        overlap[worker] = _overlap(summary)
        wait[worker] = _wait(summary, mine)
        ops_tables[worker] = {"rows": _op_rows(keyed[keyed["w"] == w], mine)}
    step_names = _step_order(summaries)
    devices = device_table(summaries)
    cover = coverage(summaries, world)
    if cover["message"]:
        messages.insert(0, cover["message"])
    fsdp = any(s.fsdp for s in summaries.values())
    stragglers = straggler_rows(workers, keyed, matched)
    return {
        "workers": workers,
        "devices": devices,
        "steps": step_names,
        "overlap": _by_step(overlap, step_names, OVERLAP_KEYS),
        "wait": _by_step(wait, step_names, WAIT_KEYS),
        "comm_ops": ops_tables,
        "messages": messages,
        "coverage": cover,
        "clocks": {**CLOCKS, "offsets_us": {w: _round(o) for w, o in zip(workers, offsets)}},
        "collectives": collective_rows(workers, matched),
        "stragglers": stragglers,
        "bandwidth": bandwidth_rows(matched, devices),
        "heatmap": heat_maps(workers, keyed, matched),
        "recommendations": recommendations(stragglers, matched, devices, fsdp),
        "fsdp": fsdp,
    }


# --- per worker ------------------------------------------------------------------------------

def _overlap(summary: RankSummary) -> dict[str, dict[str, float]]:
    steps = summary.steps
    return {name: {k: getattr(steps, k)[i] for k in OVERLAP_KEYS}
            for i, name in enumerate(steps.names)}


def _wait(summary: RankSummary, mine: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per step: transfer, synchronizing and unmatched us, clipped to the step windows."""
    steps = summary.steps
    starts, ends = np.asarray(steps.starts), np.asarray(steps.ends)
    matched = mine[mine["matched"].astype(bool)]
    every = rg.length_in_windows(rg.merge(mine["start"].to_numpy(np.float64),
                                          mine["end"].to_numpy(np.float64)), starts, ends)
    both = rg.length_in_windows(rg.merge(matched["start"].to_numpy(np.float64),
                                         matched["end"].to_numpy(np.float64)), starts, ends)
    real = rg.length_in_windows(rg.merge(matched["real_start"].to_numpy(np.float64),
                                         matched["end"].to_numpy(np.float64)), starts, ends)
    return {name: {"transfer": real[i], "synchronizing": both[i] - real[i],
                   "unmatched": every[i] - both[i]} for i, name in enumerate(steps.names)}


def _merged_length(starts: Any, ends: Any) -> float:
    return rg.total_length(rg.merge(np.asarray(starts, np.float64), np.asarray(ends, np.float64)))


def _op_rows(mine_calls: pd.DataFrame, mine: pd.DataFrame) -> list[dict[str, Any]]:
    """Per op name (first-seen order): calls, bytes, latency (union of its ranges) and transfer
    (union of `[real_start, end)` of its matched calls), us."""
    rows = []
    for name, group in mine_calls.groupby("name", sort=False):
        sel = mine[mine["name"] == name]
        real = sel[sel["matched"].astype(bool)]
        calls = len(group)
        latency = _merged_length(sel["start"], sel["end"])
        transfer = _merged_length(real["real_start"], real["end"])
        size = float(group["bytes"].sum())
        rows.append({
            "name": str(name), "calls": calls, "total_bytes": int(size),
            "avg_bytes": int(round(size / calls)), "total_latency_us": _round(latency),
            "avg_latency_us": _round(latency / calls), "total_transfer_us": _round(transfer),
            "avg_transfer_us": _round(transfer / calls),
            "unmatched_calls": int((~group["matched"].astype(bool)).sum()),
        })
    return rows


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
    """Workers by rank, host and pid from the trace (`distributedInfo`, `host_name`, the
    training process's pid), else from a `hostname_pid` worker name, else the worker and a
    running index."""
    rows, index = [], 0
    for worker, summary in summaries.items():
        node, pid = worker_node_pid(worker, index)
        index += 0 if NODE_PROCESS.match(worker) else 1
        rows.append({
            "worker": worker, "node": summary.hostname or node, "pid": summary.pid or pid,
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


def _round(value: float) -> float:
    return round(float(value), 3)
