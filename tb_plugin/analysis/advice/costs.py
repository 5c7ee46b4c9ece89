"""What each piece of advice would save: device idle time priced per cause, on the device's own
timeline (all streams of a device merged), within the profiled steps.

A device is idle when none of its streams runs anything. Each idle gap of a device ends with
the device event that starts it again; the gap's cause is read from that event's launch:
- host wait: the launch call started after the device went idle (`launch_start > gap start`,
  strict, as HTA): the CPU had nothing queued. Only host-wait time can be saved by making the
  host faster, and only where the device waited.
  A host-wait gap whose event then starts more than `STALL_MIN_US` (strict) after its launch
  call ended is split: up to the later of the gap start and the call's end it is host wait,
  the rest is a stall (below).
- stall: the device had the work queued (its launch call had returned) and still did not
  start it for more than `STALL_MIN_US`: something the trace does not show held the device
  (another process, a lazy kernel/module load, a blocking call of another library) or the host
  and device clocks disagree. A faster host saves none of it.
- launch: the part of a host-wait gap spent inside the launch call that ends it
  (|[launch_start, launch_end] ∩ gap|): what replaying the work as a CUDA/HIP graph removes
  at least. A queue that never empties (no host-wait gap) costs no launch time at all, however
  short the kernels.
- synchronisation: device idle time from each synchronising call's start until the device's
  next event starts (the CPU blocked, then refilled the queue). A sync that waits on a busy
  device costs only the idle part of that window.

- host computation: operator/annotation subtrees that launch nothing on any device (CPU work:
  preprocessing, Python, CPU operators), outside communication and data loading, while no
  device runs anything: what moving that work off the step's path saves at most.

All times are us; the worst device (most host-wait time) is the one priced, like the GPU idle
share of the Overview.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import DEVICE_KINDS, LAUNCH_KINDS, Kind, TraceTable
from .. import ranges as rg
from ..device_work import device_work
from ..events import category_flags, comm_op_mask, event_ends, is_dataloader_name, kind_mask
from ..gpu_idle.critical_path import SYNC_NAME
from ..optree import build_op_tree

_SYNC = re.compile(SYNC_NAME)
#: NVIDIA kernel names that carry the architecture they were built for (cuBLAS/cuDNN/CUTLASS).
_GENERATIONS = ((re.compile(r"(?:^|_)sm_?1[02]\d(?:_|a|$)"), (10, 0)),
                (re.compile(r"(?:^|_)sm_?90(?:_|a|$)|hopper"), (9, 0)),
                (re.compile(r"(?:^|_)sm_?8\d(?:_|$)|ampere"), (8, 0)),
                (re.compile(r"^turing_|(?:^|_)sm_?75(?:_|$)"), (7, 5)),
                (re.compile(r"^volta_|(?:^|_)sm_?70(?:_|$)"), (7, 0)))
#: A launched event that starts more than this long (us) after its launch call returned stalled:
#: far beyond any launch latency (5-50 us).
STALL_MIN_US = 1000.0


class DeviceCosts(NamedTuple):
    """Per-cause device idle time (us) of the priced device, within the steps."""

    device: Optional[int]
    idle_us: float  # every idle gap
    host_wait_us: float  # gaps whose next launch started after the device went idle
    launch_us: float  # the launch-call part of the host-wait gaps
    sync_us: float  # idle from a synchronising call's start to the device's next event
    stalled_us: float = 0.0  # work queued (launch returned) but not started (`STALL_MIN_US`)
    stall_range: Optional[tuple[float, float]] = None  # the longest stall


NO_COSTS = DeviceCosts(None, 0.0, 0.0, 0.0, 0.0)


def device_gaps(work: pd.DataFrame) -> pd.DataFrame:
    """Every idle gap of every device (streams merged): device, start, end, launch_start,
    launch_end (of the event that ends the gap; NaN without a launch)."""
    work = work.sort_values(["device", "start"])
    dev, start, end = (work[c].to_numpy() for c in ("device", "start", "end"))
    if len(work) == 0:
        return pd.DataFrame({c: np.empty(0) for c in
                             ("device", "start", "end", "launch_start", "launch_end")})
    new_group = np.ones(len(work), dtype=bool)
    new_group[1:] = dev[1:] != dev[:-1]
    group_id = np.cumsum(new_group) - 1
    offset = group_id * (float(np.nanmax(end) - np.nanmin(start)) * 2.0 + 1.0)
    reach = np.maximum.accumulate(end + offset) - offset
    prev_end = np.full(len(work), np.nan)
    prev_end[1:] = reach[:-1]
    prev_end[new_group] = np.nan
    real = np.isfinite(prev_end) & (start > prev_end)
    return pd.DataFrame({"device": dev[real], "start": prev_end[real], "end": start[real],
                         "launch_start": work["launch_start"].to_numpy()[real],
                         "launch_end": work["launch_end"].to_numpy()[real]})


def device_costs(table: TraceTable, lo: float, hi: float) -> DeviceCosts:
    """The idle time of the device with the most host wait, by cause, clipped to [lo, hi)."""
    work = device_work(table)
    work = work[np.isfinite(work["device"].to_numpy())]
    if len(work) == 0:
        return NO_COSTS
    gaps = device_gaps(work)
    sync = sync_windows(table)
    best = NO_COSTS
    for device in np.unique(work["device"].to_numpy()):
        mine = gaps[gaps["device"].to_numpy() == device]
        costs = _costs(int(device), mine, work[work["device"].to_numpy() == device], sync, lo, hi)
        if best.device is None or costs.host_wait_us > best.host_wait_us:
            best = costs
    return best


def _costs(device: int, gaps: pd.DataFrame, work: pd.DataFrame, sync: rg.Ranges, lo: float,
           hi: float) -> DeviceCosts:
    g_start = np.maximum(gaps["start"].to_numpy(), lo)
    g_end = np.minimum(gaps["end"].to_numpy(), hi)
    keep = g_end > g_start
    g_start, g_end = g_start[keep], g_end[keep]
    l_start = gaps["launch_start"].to_numpy()[keep]
    l_end = gaps["launch_end"].to_numpy()[keep]
    host = np.isfinite(l_start) & (l_start > gaps["start"].to_numpy()[keep])
    in_call = np.clip(np.minimum(l_end, g_end) - np.maximum(l_start, g_start), 0.0, None)
    stall_from = np.maximum(np.where(np.isfinite(l_end), l_end, g_end), g_start)
    stalled = host & (g_end - stall_from > STALL_MIN_US)
    stall = np.where(stalled, g_end - stall_from, 0.0)
    idle = rg.merge(g_start, g_end)
    longest = int(np.argmax(stall)) if stalled.any() else -1
    return DeviceCosts(
        device=device,
        idle_us=float(np.sum(g_end - g_start)),
        host_wait_us=float(np.sum((g_end - g_start - stall)[host])),
        launch_us=float(np.sum(np.where(host, in_call, 0.0))),
        sync_us=rg.total_length(rg.subtract(rg.intersect(idle, _refill_windows(sync, work)),
                                            rg.merge(stall_from[stalled], g_end[stalled]))),
        stalled_us=float(np.sum(stall)),
        stall_range=(float(stall_from[longest]), float(g_end[longest])) if longest >= 0 else None,
    )


def _refill_windows(sync: rg.Ranges, work: pd.DataFrame) -> rg.Ranges:
    """[sync start, the device's first event start after the sync ended) for each sync."""
    starts, ends = sync
    if len(starts) == 0:
        return rg.empty()
    device_starts = np.sort(work["start"].to_numpy())
    nxt = np.searchsorted(device_starts, ends, side="left")
    refill = np.where(nxt < len(device_starts),
                      device_starts[np.minimum(nxt, len(device_starts) - 1)], ends)
    return rg.merge(starts, np.maximum(refill, ends))


def sync_windows(table: TraceTable) -> rg.Ranges:
    """Merged intervals of the synchronising runtime calls (`critical_path.SYNC_NAME`)."""
    events = table.events
    mask = sync_mask(table)
    ts, ends = events["ts"].to_numpy(), event_ends(events)
    return rg.merge(ts[mask], ends[mask])


def sync_mask(table: TraceTable) -> np.ndarray:
    """Runtime/driver calls that block the CPU until the device (or a stream/event) is done."""
    events = table.events
    return kind_mask(events, LAUNCH_KINDS) & category_flags(
        events["name"], lambda n: bool(_SYNC.search(n)))


def kernel_generation(table: TraceTable) -> Optional[tuple[int, int]]:
    """The newest NVIDIA architecture named by a kernel (e.g. `volta_sgemm_128x64_nn` ->
    (7, 0)), for traces without device properties; None when no kernel names one."""
    events = table.events
    kernels = np.flatnonzero(kind_mask(events, (Kind.KERNEL,)))
    if len(kernels) == 0:
        return None
    names = events["name"].cat.categories.astype(str)
    used = np.unique(events["name"].cat.codes.to_numpy()[kernels])
    found = [capability for code in used for pattern, capability in _GENERATIONS
             if pattern.search(names[code].lower())]
    return max(found) if found else None


def host_compute_us(table: TraceTable, lo: float, hi: float) -> float:
    """Time in [lo, hi) covered by host-only subtrees (no launch anywhere below them; not
    communication, not data loading) while no device event runs."""
    tree = build_op_tree(table)
    n = len(tree.event)
    if n == 0:
        return 0.0
    owned = np.bincount(tree.launch_owner, minlength=n) if len(tree.launch_owner) else \
        np.zeros(n, dtype=np.int64)
    below = np.concatenate(([0], np.cumsum(owned)))
    launches_below = below[tree.subtree_end] - below[np.arange(n)]
    events = table.events
    rows = np.where(tree.event >= 0, tree.event, 0)
    excluded = (comm_op_mask(events) | category_flags(events["name"], is_dataloader_name))[rows]
    host_only = (tree.event >= 0) & (launches_below == 0) & ~excluded
    parent_host_only = np.where(tree.parent >= 0, host_only[np.maximum(tree.parent, 0)], False)
    top = host_only & ~parent_host_only
    work = rg.merge(tree.start[top], tree.end[top])
    device = kind_mask(events, DEVICE_KINDS)
    busy = rg.merge(events["ts"].to_numpy()[device], event_ends(events)[device])
    return rg.total_length(rg.clip(rg.subtract(work, busy), lo, hi))
