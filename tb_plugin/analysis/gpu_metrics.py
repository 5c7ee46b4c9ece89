"""Per-GPU metrics over the step window (spec 3.10): utilization, estimated SM efficiency,
estimated achieved occupancy, and the utilization timeline the trace view draws as counters.

Only kernels count (memcpy/memset excluded, NCCL kernels included). A kernel's GPU is its
`device` arg, else its numeric `pid`. When Kineto did not write `blocks per SM` or
`est. achieved occupancy %`, they are derived from grid/block and `deviceProperties`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable
from . import ranges as rg
from .events import event_ends, kind_mask, name_mask
from .launch import fill_launch_estimates
from .memo import memoised
from .steps import compute_steps

#: The timeline uses power-of-ten buckets (in us) and at most this many of them.
MAX_BUCKETS = 100

Window = tuple[Optional[float], Optional[float]]  # (start, end) in us, None when unknown


@dataclass
class Timeline:
    """Utilization per bucket: `times[i]` is bucket i's start; a final (end, 0) point closes it."""

    bucket_us: float
    times: np.ndarray
    values: np.ndarray


@dataclass
class GpuMetrics:
    device: int
    utilization: Optional[float]  # fraction of the step window with a kernel running
    sm_efficiency: Optional[float]  # fraction; None without blocks-per-SM data in the window
    achieved_occupancy: Optional[float]  # percent; None without occupancy data in the window
    kernel_ranges: rg.Ranges  # merged, whole trace
    sm_ranges: tuple[np.ndarray, np.ndarray, np.ndarray]  # (starts, ends, value), whole trace
    timeline: Timeline


def kernel_frame(table: TraceTable) -> pd.DataFrame:
    """Kernels with start, end, device, blocks_per_sm, occupancy (Kineto's or derived)."""
    return memoised(table, "gpu_kernels", lambda: _kernel_frame(table))


def _kernel_frame(table: TraceTable) -> pd.DataFrame:
    events = table.events
    rows = np.flatnonzero(kind_mask(events, (Kind.KERNEL,)))
    args = device_args_of(table, rows)
    device = _devices(events, rows, args)
    frame = pd.DataFrame({
        "event": rows,
        "start": events["ts"].to_numpy()[rows],
        "end": event_ends(events)[rows],
        "device": device,
        "blocks_per_sm": args["blocks_per_sm"].to_numpy(dtype=np.float64),
        "occupancy": args["occupancy"].to_numpy(dtype=np.float64),
    })
    frame = frame[np.isfinite(frame["device"].to_numpy())].reset_index(drop=True)
    frame["device"] = frame["device"].astype("int64")
    args = args.reindex(frame["event"])
    fill_launch_estimates(table, frame, args["grid"], args["block"],
                          args["registers_per_thread"].to_numpy(dtype=np.float64),
                          args["shared_memory"].to_numpy(dtype=np.float64))
    return frame


def device_args_of(table: TraceTable, rows: np.ndarray) -> pd.DataFrame:
    """`device_args` aligned with the given event rows (all-NaN where an event has none)."""
    return table.device_args.drop_duplicates("event").set_index("event").reindex(rows)


def _devices(events: pd.DataFrame, rows: np.ndarray, args: pd.DataFrame) -> np.ndarray:
    device = np.array(args["device"], dtype=np.float64)  # a writable copy
    missing = ~np.isfinite(device)
    if missing.any():  # legacy traces: the GPU index is the pid
        pid = events["pid"].iloc[rows[missing]].astype(str)
        device[missing] = pd.to_numeric(pid, errors="coerce").to_numpy(dtype=np.float64)
    return device


def event_devices(table: TraceTable, rows: np.ndarray) -> np.ndarray:
    """GPU id of each event row: its `device` arg, else its numeric pid, else NaN."""
    return _devices(table.events, rows, device_args_of(table, rows))


def gpu_metrics(table: TraceTable) -> dict[int, GpuMetrics]:
    """Metrics of every GPU that ran kernels, keyed by GPU id (sorted), computed once."""
    return memoised(table, "gpu_metrics", lambda: _gpu_metrics(table))


def _gpu_metrics(table: TraceTable) -> dict[int, GpuMetrics]:
    kernels = kernel_frame(table)
    steps = compute_steps(table)
    window = (steps.steps_start, steps.steps_end)
    span = global_span(table)
    result = {}
    for device, group in kernels.groupby("device", sort=True):  # one iteration per GPU
        result[int(device)] = _device_metrics(int(device), group, window, span)
    return result


def _device_metrics(device: int, kernels: pd.DataFrame, window: Window, span: Window
                    ) -> GpuMetrics:
    starts = kernels["start"].to_numpy()
    ends = kernels["end"].to_numpy()
    busy = rg.merge(starts, ends)
    sm_ranges = weighted_coverage(starts, ends, kernels["blocks_per_sm"].to_numpy())
    lo, hi = window
    if lo is None or hi is None or hi <= lo:
        utilization = sm_efficiency = occupancy = None
    else:
        utilization = rg.total_length(rg.clip(busy, lo, hi)) / (hi - lo)
        sm_efficiency = _sm_efficiency(sm_ranges, lo, hi)
        occupancy = _occupancy(starts, ends, kernels["occupancy"].to_numpy(), lo, hi)
    return GpuMetrics(device, utilization, sm_efficiency, occupancy, busy, sm_ranges,
                      utilization_timeline(busy, *span))


def weighted_coverage(starts: np.ndarray, ends: np.ndarray, weights: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Elementary intervals where kernels with weight > 0 run, valued min(Σ weights, 1).

    A sweep over sorted endpoints: the running weight is a cumulative sum; the running kernel
    count (integers, so exact) decides where something runs.
    """
    use = np.isfinite(weights) & (weights > 0) & (ends > starts)
    starts, ends, weights = starts[use], ends[use], weights[use]
    if starts.size == 0:
        return np.empty(0), np.empty(0), np.empty(0)
    times = np.concatenate((starts, ends))
    deltas = np.concatenate((weights, -weights))
    counts = np.concatenate((np.ones(starts.size), -np.ones(starts.size)))
    order = np.lexsort((-counts, times))  # at equal times a start sorts before an end
    times, deltas, counts = times[order], deltas[order], counts[order]
    running = np.cumsum(deltas)[:-1]
    active = np.cumsum(counts)[:-1] > 0
    a, b = times[:-1], times[1:]
    keep = active & (b > a)
    return a[keep], b[keep], np.clip(running[keep], 0.0, 1.0)


def _sm_efficiency(sm_ranges: tuple[np.ndarray, np.ndarray, np.ndarray], lo: float, hi: float
                   ) -> Optional[float]:
    a, b, value = sm_ranges
    clipped = np.minimum(b, hi) - np.maximum(a, lo)
    inside = clipped > 0
    if not inside.any():
        return None
    return float(np.sum(value[inside] * clipped[inside]) / (hi - lo))


def _occupancy(starts: np.ndarray, ends: np.ndarray, occupancy: np.ndarray, lo: float, hi: float
               ) -> Optional[float]:
    clipped = np.minimum(ends, hi) - np.maximum(starts, lo)
    use = np.isfinite(occupancy) & (occupancy >= 0) & (clipped > 0)
    weight = clipped[use].sum()
    if weight <= 0:
        return None
    return float(np.sum(occupancy[use] * clipped[use]) / weight)


def global_span(table: TraceTable) -> Window:
    """The profiling window: the `PyTorch Profiler (0)` trace span, else all events' extent."""
    events = table.events
    if len(events) == 0:
        return None, None
    trace = kind_mask(events, (Kind.TRACE,)) & name_mask(
        events, lambda names: names == "PyTorch Profiler (0)")
    trace &= np.isfinite(events["dur"].to_numpy())
    if trace.any():
        row = np.flatnonzero(trace)[0]
        return float(events["ts"].iat[row]), float(event_ends(events)[row])
    return float(np.nanmin(events["ts"].to_numpy())), float(np.nanmax(event_ends(events)))


def utilization_timeline(busy: rg.Ranges, start: Optional[float], end: Optional[float]
                         ) -> Timeline:
    """Busy share per power-of-ten bucket over [start, end]; the last bucket runs to the end."""
    if start is None or end is None or end - start < 1.0:
        return Timeline(0.0, np.empty(0), np.empty(0))
    span = end - start
    bucket = 1.0
    while span / bucket > MAX_BUCKETS:
        bucket *= 10.0
    count = int(span // bucket)
    bucket_starts = start + np.arange(count) * bucket
    bucket_ends = np.append(bucket_starts[1:], end)
    values = rg.length_in_windows(busy, bucket_starts, bucket_ends) / (bucket_ends - bucket_starts)
    return Timeline(bucket, np.append(bucket_starts, end), np.append(values, 0.0))
