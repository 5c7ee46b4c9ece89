"""Counter tracks and step ranges of the timeline, sampled per pixel of the requested window.

Steps come from steps.py and the GPU ranges from gpu_metrics.py, so the timeline agrees with
the overview.

GPU utilization and est. SM efficiency (spec 3.10 definitions) are time-weighted means over
each pixel bin: the reference's buckets, at pixel size instead of a power of ten (the maximum
of the instantaneous 0/1 busy signal would just be 1 wherever a kernel runs). Memory
allocated/reserved keeps the maximum per bin (value entering the bin or any sample inside), so
no peak disappears when zoomed out. Every series is a step function: point i holds from t[i] to
t[i+1] (the last to the window end) and repeated values are dropped, so a series has at most
`width` points.

Times are index ticks (relative to the trace start, so a 10 us window keeps ns precision).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from ..gpu_metrics import gpu_metrics
from ..memo import memoised
from ..steps import compute_steps
from .index import TimelineIndex, build_timeline_index

_DEVICE_TYPES = {0: "CPU", 1: "GPU"}


@dataclass
class Series:
    """A piecewise-constant series: either coverage segments (a, b, value) integrated per bin
    (`mean`), or samples (t, value) whose max per bin is kept (`peak`)."""

    name: str
    kind: str
    device: str
    unit: str
    mode: str  # "mean" | "peak"
    t: np.ndarray  # mean: segment starts; peak: sample times (ticks, sorted)
    value: np.ndarray
    t_end: Optional[np.ndarray] = None  # mean: segment ends
    area: Optional[np.ndarray] = None  # mean: integral before each segment


@dataclass
class TimelineExtras:
    series: list[Series] = field(default_factory=list)
    step_names: list[str] = field(default_factory=list)
    step_start: np.ndarray = field(default_factory=lambda: np.empty(0))  # ticks, sorted
    step_end: np.ndarray = field(default_factory=lambda: np.empty(0))


def timeline_extras(table: TraceTable) -> TimelineExtras:
    """Counter series and steps of the table, computed once."""
    return memoised(table, "timeline_extras", lambda: _extras(table, build_timeline_index(table)))


def _extras(table: TraceTable, index: TimelineIndex) -> TimelineExtras:
    extras = TimelineExtras(series=_gpu_series(table, index) + _memory_series(table, index))
    steps = compute_steps(table)  # device-adjusted, as the overview reports them
    extras.step_names = list(steps.names)
    extras.step_start = index.ticks(np.asarray(steps.starts, dtype=np.float64))
    extras.step_end = index.ticks(np.asarray(steps.ends, dtype=np.float64))
    return extras


def _gpu_series(table: TraceTable, index: TimelineIndex) -> list[Series]:
    """Utilization and est. SM efficiency per GPU, from gpu_metrics' whole-trace ranges."""
    out: list[Series] = []
    for device, metrics in gpu_metrics(table).items():  # one iteration per GPU
        label = f"GPU {device}"
        busy_a, busy_b = (index.ticks(np.asarray(x, dtype=np.float64))
                          for x in metrics.kernel_ranges)
        out.append(_mean_series(f"{label} Utilization", "gpu_utilization", label, "fraction",
                                busy_a, busy_b, np.ones(busy_a.size)))
        a, b, value = metrics.sm_ranges
        if len(a):
            out.append(_mean_series(f"{label} Est. SM Efficiency", "sm_efficiency", label,
                                    "fraction", index.ticks(a), index.ticks(b), value))
    return out


def _mean_series(name: str, kind: str, device: str, unit: str, a: np.ndarray, b: np.ndarray,
                 value: np.ndarray) -> Series:
    area = np.concatenate(([0.0], np.cumsum((b - a) * value)))
    return Series(name, kind, device, unit, "mean", a, value, t_end=b, area=area)


# ----------------------------------------------------------------------------------------------
# Memory


def _memory_series(table: TraceTable, index: TimelineIndex) -> list[Series]:
    memory = table.memory
    if len(memory) == 0:
        return []
    frame = pd.DataFrame({
        "t": index.ticks(memory["ts"].to_numpy()),
        "type": memory["device_type"].to_numpy(), "id": memory["device_id"].to_numpy(),
        "bytes": memory["bytes"].to_numpy(), "allocated": memory["total_allocated"].to_numpy(),
        "reserved": memory["total_reserved"].to_numpy(),
    }).sort_values("t", kind="stable")
    out: list[Series] = []
    for (dtype, did), group in frame.groupby(["type", "id"], sort=True):  # one per device
        label = _memory_device(dtype, did)
        allocated = group["allocated"].to_numpy()
        if not np.isfinite(allocated).any():  # old traces: only per-event bytes
            allocated = np.cumsum(np.nan_to_num(group["bytes"].to_numpy()))
        t = group["t"].to_numpy()
        for kind, values in (("memory_allocated", allocated),
                             ("memory_reserved", group["reserved"].to_numpy())):
            ok = np.isfinite(values)
            if ok.any():
                title = "Allocated" if kind == "memory_allocated" else "Reserved"
                out.append(Series(f"{label} Memory {title}", kind, label, "bytes", "peak",
                                  t[ok], values[ok]))
    return out


def _memory_device(device_type: float, device_id: float) -> str:
    name = _DEVICE_TYPES.get(int(device_type), f"device type {int(device_type)}") if np.isfinite(
        device_type) else "device"
    if name == "CPU" or not np.isfinite(device_id) or device_id < 0:
        return name
    return f"{name} {int(device_id)}"


# ----------------------------------------------------------------------------------------------
# Sampling per request


def sample(series: Series, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bin starts, values) over the bins between `edges`, repeated values dropped; bins
    without data (before the first memory sample) are left out."""
    values = _bin_means(series, edges) if series.mode == "mean" else _bin_peaks(series, edges)
    t = edges[:-1]
    ok = np.isfinite(values)
    t, values = t[ok], values[ok]
    if values.size:
        change = np.concatenate(([True], values[1:] != values[:-1]))
        t, values = t[change], values[change]
    return t, values


def _bin_means(series: Series, edges: np.ndarray) -> np.ndarray:
    covered = _integral(series, edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.diff(covered) / np.diff(edges)


def _integral(series: Series, x: np.ndarray) -> np.ndarray:
    """Integral of the series from -inf to each x."""
    a, b, value, area = series.t, series.t_end, series.value, series.area
    if a.size == 0:
        return np.zeros(x.size)
    k = np.searchsorted(a, x, side="right") - 1
    kk = np.maximum(k, 0)
    partial = area[kk] + np.clip(x - a[kk], 0.0, b[kk] - a[kk]) * value[kk]
    return np.where(k >= 0, partial, 0.0)


def _bin_peaks(series: Series, edges: np.ndarray) -> np.ndarray:
    """Max of the value entering each bin and of the samples inside it (O(samples in window))."""
    t, value = series.t, series.value
    idx = np.searchsorted(t, edges, side="left")
    carried = np.where(idx[:-1] > 0, value[np.maximum(idx[:-1] - 1, 0)], np.nan)
    lo, hi = int(idx[0]), int(idx[-1])
    inside = np.full(edges.size - 1, np.nan)
    nonempty = np.flatnonzero(idx[1:] > idx[:-1])
    if nonempty.size:
        inside[nonempty] = np.maximum.reduceat(value[lo:hi], idx[:-1][nonempty] - lo)
    return np.fmax(carried, inside)


def describe(series: Series) -> dict[str, Any]:
    return {"name": series.name, "kind": series.kind, "device": series.device,
            "unit": series.unit}
