"""Memory curves (spec 1.6): allocated/reserved bytes per device over time, cut to a range, in
step-plot form and down-sampled so that peaks survive.

Records without `Total Allocated` (PyTorch < 1.10) still draw a curve, rebuilt from the running
sum of `Bytes` and marked approximate. The CPU allocator keeps no reserved pool (the profiler
still writes a `Total Reserved` there, which means nothing), so CPU curves have no reserved
series: it is null, as for traces without totals.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from ..numbers import floats3 as _floats
from .records import CPU_TYPE

#: Curves are down-sampled to at most this many points per device by default.
DEFAULT_MAX_POINTS = 2000


def device_curve(records: pd.DataFrame, device: str) -> tuple[np.ndarray, np.ndarray,
                                                              np.ndarray, bool]:
    """(t, allocated, reserved, approximate) of a device, one point per record.

    Uses `Total Allocated`/`Total Reserved` where written; without them (PyTorch < 1.10) the
    allocated curve is the running sum of `Bytes`, lifted so it never goes below zero (memory
    allocated before profiling is unknown), and reserved is NaN. Reserved is NaN on the CPU
    too (no reserved pool).
    """
    mine = records[(records["device"] == device).to_numpy()]
    total = mine["total_allocated"].to_numpy()
    has_total = np.isfinite(total)
    if has_total.any():
        reserved = mine["total_reserved"].to_numpy()[has_total]
        if (mine["device_type"].to_numpy() == CPU_TYPE).all():
            reserved = np.full(len(reserved), np.nan)
        return mine["ts"].to_numpy()[has_total], total[has_total], reserved, False
    running = np.cumsum(mine["bytes"].to_numpy())
    running = running - min(0.0, float(running.min(initial=0.0)))
    return mine["ts"].to_numpy(), running, np.full(len(running), np.nan), True


def window_points(t: np.ndarray, values: list[np.ndarray], start: Optional[float],
                  end: Optional[float]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Points within [start, end], plus a point at each bound carrying the value in force."""
    lo = 0 if start is None else int(np.searchsorted(t, start, side="left"))
    hi = len(t) if end is None else int(np.searchsorted(t, end, side="right"))
    t_out, v_out = t[lo:hi], [v[lo:hi] for v in values]
    if start is not None and lo > 0 and (hi == lo or t_out[0] > start):
        t_out = np.concatenate(([start], t_out))
        v_out = [np.concatenate(([v[lo - 1]], w)) for v, w in zip(values, v_out)]
    if end is not None and len(t_out) and t_out[-1] < end and hi < len(t):
        t_out = np.concatenate((t_out, [end]))
        v_out = [np.concatenate((w, [w[-1]])) for w in v_out]
    return t_out, v_out


def step_points(t: np.ndarray, values: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Step-plot form: before each point i > 0, a point (t_i, values_{i-1}); 2n-1 points."""
    if len(t) < 2:
        return t, values
    return np.repeat(t, 2)[1:], [np.repeat(v, 2)[:-1] for v in values]


def downsample(t: np.ndarray, y: np.ndarray, max_points: int) -> np.ndarray:
    """Indices of at most `max_points` points keeping the first, the last, and the minimum and
    maximum of `y` in each of (max_points - 2) // 2 equal time bins, so peaks always survive."""
    n = len(t)
    if n <= max_points:
        return np.arange(n)
    bins = max(1, (max_points - 2) // 2)
    inner = np.arange(1, n - 1)
    span = float(t[-1] - t[0])
    position = (t[inner] - t[0]) / span if span > 0 else inner / float(n)
    which = np.clip((position * bins).astype(np.int64), 0, bins - 1)
    order = inner[np.lexsort((y[inner], which))]  # by bin, then value
    b = which[order - 1]
    first = np.ones(len(order), dtype=bool)
    first[1:] = b[1:] != b[:-1]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = b[:-1] != b[1:]
    return np.unique(np.concatenate(([0], order[first], order[last], [n - 1])))


def curve_json(records: pd.DataFrame, device: str, start_us: Optional[float] = None,
               end_us: Optional[float] = None, max_points: int = DEFAULT_MAX_POINTS
               ) -> dict[str, Any]:
    t, allocated, reserved, approximate = device_curve(records, device)
    t, (allocated, reserved) = window_points(t, [allocated, reserved], start_us, end_us)
    t, (allocated, reserved) = step_points(t, [allocated, reserved])
    keep = downsample(t, allocated, max(4, max_points))
    return {
        "t_us": _floats(t[keep]),
        "allocated": _floats(allocated[keep]),
        "reserved": _floats(reserved[keep]),
        "approximate": approximate,
    }
