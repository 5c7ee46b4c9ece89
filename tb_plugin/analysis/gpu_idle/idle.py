"""Why the GPU is idle: temporal breakdown per device, idle-time causes per stream, queue
length per stream, and memory-copy bandwidth over time. Pure numpy over `device_work`.

Formulas (also in `FORMULAS`, which the UI shows next to each chart):
- Temporal breakdown, per device over its window W = [first device event start, last end]:
  C, M, Y = merged compute, communication and memory (memcpy/memset) intervals;
  compute = |C|, communication = |M − C|, memory = |Y − (C ∪ M)|, idle = |W| − |C ∪ M ∪ Y|,
  and the overlap compute ∩ communication = |C ∩ M| (already inside compute). The four
  exclusive parts sum to |W|.
- Idle time, per stream: events sorted by start; gap_i = start_i − max(end_0..end_{i−1}) when
  > 0. host wait: the launch of event i started after the stream went idle
  (launch_start_i > previous end): the CPU did not enqueue work in time. kernel wait: event i was
  already queued (launched by then) and gap_i < `kernel_wait_us`: back-to-back launch overhead.
  other: the rest (queued but waiting longer: syncs, cross-stream dependencies, no launch link).
  (Strict comparisons, as HTA: a launch exactly at the previous end is not host wait.)
- Queue length, per stream (HTA's definition: operations enqueued and not yet started): +1 at
  each launch call's start, −1 at its device event's start (a graph launch is one entry,
  until its first kernel on that stream starts); time-weighted mean and max over
  [first launch, last start]; time with length ≥ `queue_full`.
- Bandwidth: each copy/memset contributes its `memory bandwidth (GB/s)` (else bytes / dur)
  while it runs; the sum over concurrent ones per copy kind (HtoD, DtoH, DtoD, memset, other).
  The series is that sum's mean per bucket; a kind's peak is the sum's true maximum (not the
  highest bucket mean) and its mean the sum's time-weighted mean over the busy time
  (Σ bandwidth_j · dur_j / busy, = bytes / busy when the bandwidth is bytes / dur), so
  peak ≥ mean always.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...ingest.schema import Kind, TraceTable
from .. import ranges as rg
from ..device_work import device_work, log_histogram
from ..graph_launches import charged_mask

FORMULAS = {
    "temporal": "Per device, over W = [first device event start, last end]: compute = |C|, "
                "communication = |M − C|, memory = |Y − (C ∪ M)|, idle = |W| − |C ∪ M ∪ Y| "
                "(C, M, Y: merged compute, communication and memcpy/memset intervals); "
                "overlap = |C ∩ M| is counted in compute.",
    "idle": "Per stream, gap_i = start_i − max(previous ends) > 0. Host wait: launch_start_i > "
            "previous end (the CPU enqueued it late). Kernel wait: launched by then and gap_i < "
            "kernel_wait_us (launch overhead between queued kernels). Other: the rest.",
    "queue": "Per stream, operations enqueued but not started: +1 at each launch call's "
             "start, −1 at its device event's start; mean is time-weighted over [first launch, "
             "last start]; full = length ≥ queue_full.",
    "bandwidth": "Sum of the running copies' `memory bandwidth (GB/s)` (else bytes / duration) "
                 "per copy kind, time-weighted per bucket; peak = the sum's maximum, mean = "
                 "its time-weighted mean over the busy time.",
}
#: Bandwidth and queue series are reduced to at most this many buckets.
MAX_POINTS = 400


def temporal_breakdown(table: TraceTable) -> list[dict[str, Any]]:
    """Per device: window, exclusive compute / communication / memory / idle us and the
    compute ∩ communication overlap (see the module docstring)."""
    work = device_work(table)
    result = []
    for device, group in work.groupby("device", sort=True):
        result.append(_device_breakdown(int(device), group))
    return result


def _device_breakdown(device: int, group: pd.DataFrame) -> dict[str, Any]:
    start, end, cls = (group[c].to_numpy() for c in ("start", "end", "cls"))
    compute = rg.merge(start[cls == 0], end[cls == 0])
    comm = rg.merge(start[cls == 1], end[cls == 1])
    busy = rg.merge(start, end)
    window = float(end.max() - start.min()) if len(start) else 0.0
    compute_us = rg.total_length(compute)
    comm_us = rg.total_length(rg.subtract(comm, compute))
    busy_us = rg.total_length(busy)
    memory_us = busy_us - compute_us - comm_us
    return {
        "device": device,
        "start_us": float(start.min()), "end_us": float(end.max()),
        "window_us": window,
        "compute_us": compute_us, "communication_us": comm_us, "memory_us": memory_us,
        "idle_us": window - busy_us,
        "compute_communication_overlap_us": rg.total_length(rg.intersect(compute, comm)),
        "idle_pct": 100.0 * (window - busy_us) / window if window > 0 else 0.0,
    }


def stream_gaps(work: pd.DataFrame, kernel_wait_us: float) -> pd.DataFrame:
    """Every idle gap of every stream: device, stream, start, end, gap (us), cause (0 host
    wait, 1 kernel wait, 2 other), next_event (row of the event after the gap)."""
    work = work[np.isfinite(work["stream"].to_numpy())]
    if len(work) == 0:
        return pd.DataFrame({c: np.empty(0) for c in
                             ("device", "stream", "start", "end", "gap", "cause", "next_event")})
    dev, stream = work["device"].to_numpy(), work["stream"].to_numpy()
    start, end = work["start"].to_numpy(), work["end"].to_numpy()
    launch = work["launch_start"].to_numpy()
    new_group = np.ones(len(work), dtype=bool)
    new_group[1:] = (dev[1:] != dev[:-1]) | (stream[1:] != stream[:-1])
    group_id = np.cumsum(new_group) - 1
    # running max of ends within each stream (offset per group keeps groups apart)
    offset = group_id * (float(np.nanmax(end) - np.nanmin(start)) * 2.0 + 1.0)
    reach = np.maximum.accumulate(end + offset) - offset
    prev_end = np.empty(len(work))
    prev_end[0] = np.nan
    prev_end[1:] = reach[:-1]
    prev_end[new_group] = np.nan
    gap = start - prev_end
    real = np.isfinite(gap) & (gap > 0)
    host_wait = np.isfinite(launch) & (launch > prev_end)
    kernel_wait = np.isfinite(launch) & ~host_wait & (gap < kernel_wait_us)
    cause = np.where(host_wait, 0, np.where(kernel_wait, 1, 2)).astype(np.int8)
    return pd.DataFrame({"device": dev[real], "stream": stream[real], "start": prev_end[real],
                         "end": start[real], "gap": gap[real], "cause": cause[real],
                         "next_event": work["event"].to_numpy()[real]})


CAUSES = ("host_wait", "kernel_wait", "other")


def idle_breakdown(table: TraceTable, kernel_wait_us: float) -> dict[str, Any]:
    """Per stream: busy, idle by cause (us) and the gap distribution; the whole-trace sum."""
    work = device_work(table)
    gaps = stream_gaps(work, kernel_wait_us)
    streams = []
    known = work[np.isfinite(work["stream"].to_numpy())]
    for (device, stream), group in known.groupby(["device", "stream"], sort=True):
        mine = gaps[(gaps["device"] == device) & (gaps["stream"] == stream)]
        by_cause = np.bincount(mine["cause"].to_numpy(dtype=np.int64),
                               weights=mine["gap"].to_numpy(), minlength=3)
        busy = rg.total_length(rg.merge(group["start"].to_numpy(), group["end"].to_numpy()))
        streams.append({
            "device": int(device), "stream": int(stream), "events": int(len(group)),
            "busy_us": busy, "idle_us": float(by_cause.sum()),
            **{f"{c}_us": float(v) for c, v in zip(CAUSES, by_cause)},
            "gaps": int(len(mine)),
        })
    top = gaps.nlargest(10, "gap")
    return {
        "kernel_wait_us": kernel_wait_us,
        "streams": streams,
        "gap_histogram": log_histogram(gaps["gap"].to_numpy()),
        "largest_gaps": [{"device": int(r.device), "stream": int(r.stream),
                          "start_us": float(r.start), "end_us": float(r.end),
                          "gap_us": float(r.gap), "cause": CAUSES[int(r.cause)],
                          "next_event": int(r.next_event)} for r in top.itertuples()],
    }


def queue_lengths(table: TraceTable, queue_full: int) -> list[dict[str, Any]]:
    """Per stream: max and time-weighted mean queue length, time with the queue full, and
    the series reduced to at most MAX_POINTS buckets (max per bucket)."""
    work = device_work(table)
    work = work[np.isfinite(work["stream"].to_numpy()) & np.isfinite(
        work["launch_start"].to_numpy()) & charged_mask(table)]  # a graph: one entry
    result = []
    for (device, stream), group in work.groupby(["device", "stream"], sort=True):
        times, length = queue_series(group["launch_start"].to_numpy(),
                                     group["start"].to_numpy())
        result.append({"device": int(device), "stream": int(stream),
                       **queue_summary(times, length, queue_full)})
    return result


def queue_series(launch_start: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step function of the queue length: at times[i] the length becomes length[i]. At equal
    times the −1s apply before the +1s (a kernel starting as the next is launched)."""
    times = np.concatenate((launch_start, start))
    delta = np.concatenate((np.ones(len(launch_start)), -np.ones(len(start))))
    order = np.lexsort((delta, times))
    return times[order], np.cumsum(delta[order])


def queue_summary(times: np.ndarray, length: np.ndarray, queue_full: int) -> dict[str, Any]:
    if len(times) < 2:
        return {"max": 0, "mean": 0.0, "full_us": 0.0, "series": {"t_us": [], "length": []}}
    held = np.diff(times)  # length[i] holds from times[i] to times[i+1]
    span = float(times[-1] - times[0])
    mean = float(np.sum(length[:-1] * held) / span) if span > 0 else 0.0
    full = float(np.sum(held[length[:-1] >= queue_full]))
    t, v = _reduce_max(times, length)
    return {"max": int(length.max()), "mean": mean, "full_us": full,
            "series": {"t_us": t, "length": v}}


def _reduce_max(times: np.ndarray, values: np.ndarray) -> tuple[list[float], list[float]]:
    if len(times) <= MAX_POINTS:
        return [float(x) for x in times], [float(x) for x in values]
    edges = np.linspace(times[0], times[-1], MAX_POINTS + 1)
    bucket = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, MAX_POINTS - 1)
    peak = np.full(MAX_POINTS, -np.inf)
    np.maximum.at(peak, bucket, values)
    keep = np.isfinite(peak)
    return [float(x) for x in edges[:-1][keep]], [float(x) for x in peak[keep]]


COPY_KINDS = ("HtoD", "DtoH", "DtoD", "memset", "other")


def bandwidth(table: TraceTable) -> dict[str, Any]:
    """Memory-copy bandwidth over time per copy kind (GB/s), time-weighted per bucket, plus
    each kind's bytes, busy time, mean and peak bandwidth (see the module docstring)."""
    work = device_work(table)
    work = work[work["cls"].to_numpy() == 2]
    if len(work) == 0:
        return {"kinds": [], "series": {"t_us": [], "gbps": {}}}
    events = table.events
    rows = work["event"].to_numpy()
    args = table.device_args.drop_duplicates("event").set_index("event").reindex(rows)
    nbytes = args["bytes"].to_numpy(dtype=np.float64)
    dur = work["dur"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        derived = np.where(dur > 0, nbytes / (dur * 1e3), np.nan)  # bytes/us/1e3 = GB/s
    gbps = args["bandwidth_gbps"].to_numpy(dtype=np.float64)
    gbps = np.nan_to_num(np.where(np.isfinite(gbps), gbps, derived), nan=0.0)
    kind = copy_kinds(events["name"], rows, events["kind"].to_numpy()[rows])
    start, end = work["start"].to_numpy(), work["end"].to_numpy()
    lo, hi = float(start.min()), float(end.max())
    edges = np.linspace(lo, hi, MAX_POINTS + 1) if hi > lo else np.array([lo, lo + 1.0])
    series, kinds = {}, []
    for k, label in enumerate(COPY_KINDS):
        sel = kind == k
        if not sel.any():
            continue
        series[label] = [float(x) for x in _time_weighted(start[sel], end[sel], gbps[sel],
                                                          edges)]
        busy = rg.total_length(rg.merge(start[sel], end[sel]))
        known = np.isfinite(nbytes[sel])
        total_bytes = float(np.nansum(nbytes[sel])) if known.any() else None
        area = float(np.sum(gbps[sel] * np.maximum(end[sel] - start[sel], 0.0)))
        kinds.append({"kind": label, "count": int(sel.sum()), "bytes": total_bytes,
                      "busy_us": busy,
                      "mean_gbps": area / busy if busy > 0 else None,
                      "peak_gbps": _step_max(start[sel], end[sel], gbps[sel])})
    return {"kinds": kinds, "series": {"t_us": [float(x) for x in edges[:-1]], "gbps": series}}


def _step_max(start: np.ndarray, end: np.ndarray, value: np.ndarray) -> float:
    """The highest level of Σ_j value_j · [start_j ≤ t < end_j] over t, counting only
    copies of positive length (a zero-length copy never runs alone for any time)."""
    run = end > start
    if not run.any():
        return 0.0
    times = np.concatenate((start[run], end[run]))
    delta = np.concatenate((value[run], -value[run]))
    # ends before starts at the same time: back-to-back copies do not add up
    order = np.lexsort((delta, times))
    return float(max(np.cumsum(delta[order]).max(), 0.0))


def copy_kinds(names: pd.Series, rows: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Index into COPY_KINDS of each copy/memset row, from its name."""
    text = pd.Series(names.cat.categories.astype(str))
    per_cat = np.select(
        [text.str.contains("HtoD|H2D", regex=True), text.str.contains("DtoH|D2H", regex=True),
         text.str.contains("DtoD|D2D|PtoP|P2P", regex=True)], [0, 1, 2], 4)
    per_cat = np.append(per_cat, 4)
    result = per_cat[names.cat.codes.to_numpy()[rows]]
    return np.where(kinds == Kind.MEMSET, 3, result)


def _time_weighted(start: np.ndarray, end: np.ndarray, value: np.ndarray,
                   edges: np.ndarray) -> np.ndarray:
    """Mean over each bucket [edges[i], edges[i+1]) of Σ value_j · [start_j ≤ t < end_j]:
    Σ_j value_j · |[start_j, end_j) ∩ bucket| / |bucket|, via the prefix of the step sum."""
    times = np.concatenate((start, end))
    delta = np.concatenate((value, -value))
    order = np.argsort(times, kind="stable")
    times, level = times[order], np.cumsum(delta[order])
    # integral of the step function up to each time
    area = np.concatenate(([0.0], np.cumsum(level[:-1] * np.diff(times))))

    def integral(x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(times, x, side="right") - 1
        kk = np.clip(k, 0, len(times) - 1)
        return np.where(k >= 0, area[kk] + level[kk] * (x - times[kk]), 0.0)

    widths = np.diff(edges)
    return (integral(edges[1:]) - integral(edges[:-1])) / widths
