"""Memory peaks against device capacity, and the growth flag (spec 3.11, issue 17).

The peak carries the GPU's capacity (`deviceProperties[].totalGlobalMem`, the reference's
always-empty `totals`, bug 11).

The leak rule: memory is flagged only when the allocated level at the end of each profiler
step (host step ends, where the allocations are recorded) rises at every one of at least
`LEAK_MIN_STEPS` steps, each rise above the noise (`noise_bytes`: the larger of
`LEAK_NOISE_BYTES` and `LEAK_NOISE_FRACTION` of the highest step-end level) and the total
rise at least `LEAK_GROWTH_BYTES`. The flag names the operators that allocated what stays:
allocations made after the first step end that are still live at the end of the window.
Memory that is simply alive when the window ends (weights, optimizer state, the last step's
activations) is never a leak by itself: it is shown as `end_bytes` of the peak, not flagged.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from ..launch import device_properties
from ..numbers import round3 as _round
from ..steps import compute_steps
from .curves import device_curve
from .records import CUDA_TYPE, memory_pairs, memory_records, op_labels

#: A device is flagged only over at least this many profiler steps...
LEAK_MIN_STEPS = 3
#: ...when the step-end level rose by at least this many bytes in all...
LEAK_GROWTH_BYTES = 1 << 20
#: ...and each step-over-step rise exceeds the noise: the larger of this many bytes...
LEAK_NOISE_BYTES = 16 << 10
#: ...and this fraction of the highest step-end level.
LEAK_NOISE_FRACTION = 0.005
TOP_LEAK_OPS = 5


def device_capacity(table: TraceTable, device_type: float, device_id: float) -> Optional[float]:
    """`totalGlobalMem` of a CUDA device (by `id`, else by list position), else None."""
    if device_type != CUDA_TYPE or not math.isfinite(device_id):
        return None
    value = device_properties(table, int(device_id)).get("totalGlobalMem")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def peaks(table: TraceTable, devices: list[str], end_us: Optional[float] = None
          ) -> dict[str, dict[str, Any]]:
    """Peak allocated bytes per device, when it happened, the device capacity if known, and
    what is still allocated at the end of the window (`end_us`, default the last record)."""
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
        last = len(t) - 1 if end_us is None else int(np.searchsorted(t, end_us, "right")) - 1
        out[device] = {
            "bytes": int(peak),
            "t_us": _round(t[at]),
            "reserved_bytes": int(np.nanmax(reserved)) if np.isfinite(reserved).any() else None,
            "capacity_bytes": int(capacity) if capacity else None,
            "fraction_of_capacity": round(peak / capacity, 4) if capacity else None,
            "approximate": approximate,
            "end_bytes": int(allocated[last]) if last >= 0 else 0,
        }
    return out


def growth_leak(t: np.ndarray, allocated: np.ndarray, step_names: list[str],
                step_ends: np.ndarray, min_steps: int = LEAK_MIN_STEPS,
                threshold: float = LEAK_GROWTH_BYTES) -> Optional[dict[str, Any]]:
    """The allocated level sampled at each step end, flagged when every step-over-step rise is
    above the noise and the total rise is at least `threshold` (at least `min_steps` steps)."""
    if len(step_ends) < min_steps or len(t) == 0:
        return None
    at = np.searchsorted(t, step_ends, side="right") - 1
    if (at < 0).any():
        return None
    values = allocated[at]
    noise = max(float(LEAK_NOISE_BYTES), LEAK_NOISE_FRACTION * float(values.max()))
    rises = np.diff(values)
    growth = float(values[-1] - values[0])
    if not (rises > noise).all() or growth < threshold:
        return None
    return {
        "kind": "growth",
        "steps": list(step_names),
        "allocated_at_step_end": [int(v) for v in values],
        "growth_bytes": int(growth),
        "per_step_bytes": int(growth / (len(values) - 1)),
        "noise_bytes": int(noise),
    }


def staying_ops(table: TraceTable, device: str, after_us: float, top: int = TOP_LEAK_OPS
                ) -> list[dict[str, Any]]:
    """The operators whose allocations made after `after_us` are still live at the end of the
    window, most bytes first: what the growth is made of."""
    pairs = memory_pairs(table)
    stay = pairs[(pairs["device"] == device).to_numpy() & (pairs["free"] < 0).to_numpy()
                 & (pairs["alloc"] >= 0).to_numpy() & (pairs["t_alloc"] > after_us).to_numpy()]
    if len(stay) == 0:
        return []
    labels = op_labels(table, memory_records(table), stay["alloc"].to_numpy())
    by_op = pd.DataFrame({"name": labels, "bytes": stay["bytes"].to_numpy()}).groupby(
        "name").agg(count=("bytes", "size"), bytes=("bytes", "sum"))
    by_op = by_op.sort_values(["bytes", "count"], ascending=False, kind="stable").head(top)
    return [{"name": str(n), "count": int(r["count"]), "bytes": int(r["bytes"])}
            for n, r in by_op.iterrows()]


def leaks(table: TraceTable, devices: list[str]) -> list[dict[str, Any]]:
    """Growth flags per device (see the module's rule); none without profiler steps."""
    records = memory_records(table)
    steps = compute_steps(table)
    if not steps.from_markers or len(steps) == 0:
        return []
    out = []
    for device in devices:
        t, allocated, _, approximate = device_curve(records, device)
        flag = growth_leak(t, allocated, steps.names, steps.host_ends)
        if flag:
            top = staying_ops(table, device, float(steps.host_ends[0]))
            out.append({"device": device, **flag, "approximate": approximate, "top_ops": top})
    return out
