"""Memory peaks against device capacity, and leak flags (spec 3.11).

The peak carries the GPU's capacity (`deviceProperties[].totalGlobalMem`, the reference's
always-empty `totals`, bug 11). Two leak flags: allocated memory that rises at every step end,
and allocations never released before the trace ends.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import TraceTable
from .launch import device_properties
from .memory_curves import device_curve
from .memory_records import CUDA_TYPE, memory_pairs, memory_records, op_labels
from .steps import compute_steps

#: A device whose allocated memory at each step end rises over this many steps is flagged...
LEAK_MIN_STEPS = 3
#: ...when the total rise exceeds this many bytes.
LEAK_GROWTH_BYTES = 1 << 20
TOP_LEAK_OPS = 5


def device_capacity(table: TraceTable, device_type: float, device_id: float) -> Optional[float]:
    """`totalGlobalMem` of a CUDA device (by `id`, else by list position), else None."""
    if device_type != CUDA_TYPE or not math.isfinite(device_id):
        return None
    value = device_properties(table, int(device_id)).get("totalGlobalMem")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def peaks(table: TraceTable, devices: list[str]) -> dict[str, dict[str, Any]]:
    """Peak allocated bytes per device, when it happened, and the device capacity if known."""
    records = memory_records(table)
    out = {}
    for device in devices:
        t, allocated, reserved, approximate = device_curve(records, device)
        mine = records[(records["device"] == device).to_numpy()].iloc[:1]
        capacity = device_capacity(table, float(mine["device_type"].iloc[0]),
                                   float(mine["device_id"].iloc[0])) if len(mine) else None
        if len(t) == 0:
            continue
        at = int(np.argmax(allocated))
        peak = float(allocated[at])
        out[device] = {
            "bytes": int(peak),
            "t_us": _round(t[at]),
            "reserved_bytes": int(np.nanmax(reserved)) if np.isfinite(reserved).any() else None,
            "capacity_bytes": int(capacity) if capacity else None,
            "fraction_of_capacity": round(peak / capacity, 4) if capacity else None,
            "approximate": approximate,
        }
    return out


def growth_leak(t: np.ndarray, allocated: np.ndarray, step_names: list[str],
                step_ends: np.ndarray, min_steps: int = LEAK_MIN_STEPS,
                threshold: float = LEAK_GROWTH_BYTES) -> Optional[dict[str, Any]]:
    """Allocated memory sampled at each step end, flagged when it rises at every step and by
    more than `threshold` overall (at least `min_steps` steps)."""
    if len(step_ends) < min_steps or len(t) == 0:
        return None
    at = np.searchsorted(t, step_ends, side="right") - 1
    if (at < 0).any():
        return None
    values = allocated[at]
    rises = np.diff(values)
    growth = float(values[-1] - values[0])
    if not (rises > 0).all() or growth <= threshold:
        return None
    return {
        "kind": "growth",
        "steps": list(step_names),
        "allocated_at_step_end": [int(v) for v in values],
        "growth_bytes": int(growth),
        "per_step_bytes": int(growth / (len(values) - 1)),
    }


def unfreed_leak(table: TraceTable, device: str, top: int = TOP_LEAK_OPS
                 ) -> Optional[dict[str, Any]]:
    """Allocations never released before the trace ends, with the ops allocating most of it."""
    pairs = memory_pairs(table)
    open_ = pairs[(pairs["device"] == device).to_numpy() & (pairs["free"] < 0).to_numpy()
                  & (pairs["alloc"] >= 0).to_numpy()]
    if len(open_) == 0:
        return None
    labels = op_labels(table, memory_records(table), open_["alloc"].to_numpy())
    by_op = pd.DataFrame({"name": labels, "bytes": open_["bytes"].to_numpy()}).groupby(
        "name").agg(count=("bytes", "size"), bytes=("bytes", "sum"))
    by_op = by_op.sort_values(["bytes", "count"], ascending=False, kind="stable").head(top)
    return {
        "kind": "unfreed",
        "count": int(len(open_)),
        "bytes": int(open_["bytes"].sum()),
        "top_ops": [{"name": str(n), "count": int(r["count"]), "bytes": int(r["bytes"])}
                    for n, r in by_op.iterrows()],
    }


def leaks(table: TraceTable, devices: list[str]) -> list[dict[str, Any]]:
    records = memory_records(table)
    steps = compute_steps(table)
    out = []
    for device in devices:
        t, allocated, _, approximate = device_curve(records, device)
        flag = growth_leak(t, allocated, steps.names, steps.ends)
        if flag:
            out.append({"device": device, **flag, "approximate": approximate})
        flag = unfreed_leak(table, device)
        if flag:
            out.append({"device": device, **flag})
    return out


def _round(value: float) -> Optional[float]:
    return round(float(value), 3) if math.isfinite(value) else None
