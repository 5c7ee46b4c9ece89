"""The snapshot view: an allocator snapshot's allocated and reserved memory over its trace (with
level of detail), its segments and blocks at an instant, and the largest live allocations at
the peak with their stacks (issue 17).

Curves: allocated moves by +size at `alloc` and -size at `free_completed`, reserved by the
segment actions; both are anchored at the dump (the sum of the allocated blocks and of the
segments), so memory allocated before the trace starts is counted. The x axis is the entries'
`time_us`: on the trace's clock (`time_us - baseTimeNanoseconds / 1000`, the clock of every
other Memory payload) when a trace of the same period is given, else on the snapshot's own
clock; a snapshot without times is drawn over its entry numbers. Down-sampling and ranges use
the memory curves' machinery (`memory_curves`), so the peak always survives.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ...ingest.schema import TraceTable
from ...ingest.snapshot import (
    ALLOC,
    FREE_COMPLETED,
    OOM,
    SEGMENT_ALLOC,
    SEGMENT_FREE,
    SEGMENT_MAP,
    SEGMENT_UNMAP,
    Snapshot,
    snapshot_device_name,
)
from ..numbers import floats3 as _floats
from ..numbers import round3 as _round
from ..steps import compute_steps
from .curves import DEFAULT_MAX_POINTS, downsample, step_points, window_points
from .snapshot_state import (
    allocation_lifetimes,
    device_rows,
    dump_blocks,
    dump_segments,
    segment_lifetimes,
    segments_at,
    top_live,
)

#: Frames whose file contains one of these are the framework's own, skipped in block labels.
_INTERNAL = ("/torch/", "\\torch\\", "<frozen", "??", "CUDACachingAllocator")
MAX_OOMS = 100


class UnknownSnapshotDeviceError(KeyError):
    """The requested device has no entries or segments in the snapshot."""


def snapshot_devices(snap: Snapshot) -> list[int]:
    present = np.union1d(snap.entries["device"], snap.segments["device"])
    return [int(d) for d in present]


def build_memory_snapshot(snap: Snapshot, name: str, table: Optional[TraceTable] = None,
                          device: Optional[str] = None, start: Optional[float] = None,
                          end: Optional[float] = None, at: Optional[float] = None,
                          max_points: int = DEFAULT_MAX_POINTS,
                          snapshots: Optional[list[str]] = None) -> dict[str, Any]:
    """The `/memory/snapshot` payload (`views.memory.snapshot_payload.MemorySnapshotPayload`)."""
    indices = snapshot_devices(snap)
    names = [snapshot_device_name(i) for i in indices]
    if device is not None and device not in names:
        raise UnknownSnapshotDeviceError(device)
    chosen = indices[names.index(device)] if device is not None else (
        indices[0] if indices else 0)
    rows = device_rows(snap, chosen)
    messages = list(snap.messages)
    x, clock, base_ns = _axis(snap, rows, table, messages)
    curve, peak = _curves(snap, chosen, rows, x, start, end, max_points, messages)
    allocs = allocation_lifetimes(snap, chosen)
    segments = segment_lifetimes(snap, chosen)
    label = _labeller(snap)
    peak_position = peak.pop("position")
    position = peak_position if at is None else int(np.searchsorted(x, at, "right")) - 1
    state = segments_at(allocs, segments, position, label)
    state["at"] = _round(x[position]) if 0 <= position < len(x) else None
    top = top_live(allocs, peak_position)
    return {
        "name": name,
        "snapshots": list(snapshots) if snapshots is not None else [name],
        "devices": names,
        "device": snapshot_device_name(chosen) if indices else None,
        "clock": clock,
        "base_time_ns": base_ns,
        "range": [start, end],
        "extent": [_round(x[0]), _round(x[-1])] if len(x) else [None, None],
        "entries": int(len(rows["action"])),
        "curve": curve,
        "peak": peak,
        "segments": state,
        "top_allocations": [_allocation(allocs, i, x, snap) for i in top.tolist()],
        "ooms": _ooms(rows, x),
        "steps": _steps(table) if clock == "trace" else [],
        "skipped": snap.skipped,
        "messages": messages,
    }


def _axis(snap: Snapshot, rows: dict[str, np.ndarray], table: Optional[TraceTable],
          messages: list[str]) -> tuple[np.ndarray, str, Optional[int]]:
    """(x of each entry, clock, baseTimeNanoseconds used)."""
    time = rows["time_us"]
    n = len(time)
    if n == 0 or not (np.isfinite(time).all() and (time > 0).all()):
        if n:
            messages.append("The snapshot's entries have no times (PyTorch < 2.1): the x axis "
                            "is the entry number, and it cannot share the trace's time axis.")
        return np.arange(n, dtype=np.float64), "entry", None
    if table is None:
        return time.astype(np.float64), "snapshot", None
    base = int(table.metadata.base_time_ns or 0)
    x = time - base / 1000.0
    lo, hi = _trace_extent(table)
    if lo is None or hi is None or x[-1] < lo or x[0] > hi:
        messages.append("The snapshot does not overlap this trace's period: it is shown on its "
                        "own clock.")
        return time.astype(np.float64), "snapshot", None
    return x, "trace", base


def overlaps_trace(snap: Snapshot, table: TraceTable) -> bool:
    """Whether the snapshot's entries (with times) fall in the trace's period."""
    time = snap.entries["time_us"]
    if not snap.has_time:
        return False
    lo, hi = _trace_extent(table)
    if lo is None or hi is None:
        return False
    x = time - int(table.metadata.base_time_ns or 0) / 1000.0
    return bool(x.max() >= lo and x.min() <= hi)


def _trace_extent(table: TraceTable) -> tuple[Optional[float], Optional[float]]:
    ts = table.events["ts"].to_numpy(dtype=np.float64)
    end = ts + np.nan_to_num(table.events["dur"].to_numpy(dtype=np.float64))
    if not len(ts) or not np.isfinite(ts).any():
        return None, None
    return float(np.nanmin(ts)), float(np.nanmax(end))


def _curves(snap: Snapshot, device: int, rows: dict[str, np.ndarray], x: np.ndarray,
            start: Optional[float], end: Optional[float], max_points: int,
            messages: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    action, size = rows["action"], rows["size"]
    alloc_delta = np.where(action == ALLOC, size, 0) - np.where(action == FREE_COMPLETED, size, 0)
    grow = np.isin(action, (SEGMENT_ALLOC, SEGMENT_MAP))
    shrink = np.isin(action, (SEGMENT_FREE, SEGMENT_UNMAP))
    reserved_delta = np.where(grow, size, 0) - np.where(shrink, size, 0)
    end_allocated = int(dump_blocks(snap, device)["size"].sum())
    end_reserved = int(dump_segments(snap, device)["total_size"].sum())
    allocated = end_allocated - int(alloc_delta.sum()) + np.cumsum(alloc_delta)
    reserved = end_reserved - int(reserved_delta.sum()) + np.cumsum(reserved_delta)
    if len(allocated) and allocated.min() < 0:
        messages.append("The trace and the dump disagree (allocated memory would go below "
                        "zero): the curve is lifted to start at zero.")
        allocated = allocated - allocated.min()
    if len(x) == 0:
        empty = {"t": [], "allocated": [], "reserved": []}
        return empty, {"bytes": end_allocated, "t": None, "reserved_bytes": end_reserved,
                       "position": -1}
    at = int(np.argmax(allocated))
    peak = {"bytes": int(allocated[at]), "t": _round(x[at]),
            "reserved_bytes": int(reserved.max()), "position": at}
    t, (a, r) = window_points(x, [allocated.astype(np.float64), reserved.astype(np.float64)],
                              start, end)
    t, (a, r) = step_points(t, [a, r])
    keep = downsample(t, a, max(4, max_points))
    return {"t": _floats(t[keep]), "allocated": _ints(a[keep]), "reserved": _ints(r[keep])}, peak


def _labeller(snap: Snapshot) -> Any:
    def label(stack: int) -> Optional[str]:
        if stack < 0:
            return None
        frames = snap.stacks[stack]
        user = next((f for f in frames if not any(k in f[0] for k in _INTERNAL)), frames[0])
        return f"{user[2]} ({user[0].rsplit('/', 1)[-1]}:{user[1]})"
    return label


def _allocation(allocs: Any, i: int, x: np.ndarray, snap: Snapshot) -> dict[str, Any]:
    start, stop, stack = int(allocs.start[i]), int(allocs.end[i]), int(allocs.stack[i])
    frames = snap.stacks[stack] if stack >= 0 else []
    return {
        "address": int(allocs.addr[i]),
        "size": int(allocs.size[i]),
        "alloc_t": _round(x[start]) if start >= 0 else None,
        "free_t": _round(x[stop]) if stop < len(x) else None,
        "frames": [{"filename": f[0], "line": f[1], "name": f[2]} for f in frames],
    }


def _ooms(rows: dict[str, np.ndarray], x: np.ndarray) -> list[dict[str, Any]]:
    at = np.flatnonzero(rows["action"] == OOM)[:MAX_OOMS]
    return [{"t": _round(x[i]), "bytes": int(rows["size"][i]),
             "device_free": int(rows["device_free"][i]) if rows["device_free"][i] >= 0
             else None} for i in at.tolist()]


def _steps(table: Optional[TraceTable]) -> list[dict[str, Any]]:
    if table is None:
        return []
    steps = compute_steps(table)
    if not steps.from_markers:
        return []
    return [{"name": n, "start": _round(s), "end": _round(e)}
            for n, s, e in zip(steps.names, steps.host_starts.tolist(),
                               steps.host_ends.tolist())]




def _ints(values: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(values, dtype=np.float64).tolist()]
