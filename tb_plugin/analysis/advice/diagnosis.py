"""The diagnosis numbers the recommendations read (`recommendations.Facts`), from the GPU
Idle analyses, the steps and the distributed overlap. Vectorised; names tested once per
distinct name.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np

from ...ingest.schema import LAUNCH_KINDS, Kind, TraceTable
from ..breakdown import Breakdown
from ..distributed.rank import overlap_costs
from ..distributed.summary import is_fsdp
from ..events import DATALOADER_RE, HOST_KINDS, category_flags, event_ends, kind_mask
from ..gpu_idle.idle import idle_breakdown, temporal_breakdown
from ..gpu_idle.launch_stats import kernel_launches
from ..graphs import graph_summary
from ..steps import MARKER_KINDS, STEP_PREFIX
from ..variance.steps import step_variance
from ..vendor import trace_vendor
from .costs import device_costs, host_compute_us, kernel_generation, sync_mask
from .facts import Facts

#: Runtime/driver calls that belong to device and context start-up or first-use warm-up.
STARTUP_RE = re.compile(
    r"^(?:cuda|hip)(?:DeviceGetStreamPriorityRange|Free|Malloc|MallocHost|HostAlloc|Init"
    r"|SetDevice|GetDeviceProperties\w*|DeviceGetAttribute|GetDeviceCount|StreamCreate\w*"
    r"|FuncGetAttributes|ModuleLoad\w*|DeviceCanAccessPeer|DeviceEnablePeerAccess)$"
    r"|^cu(?:Init|DevicePrimaryCtxRetain|CtxCreate\w*|ModuleLoad\w*|LibraryLoad\w*)$")
MFMA_RE = re.compile(r"_MI\d+x\d+x\d+|mfma", re.IGNORECASE)
KERNEL_WAIT_US = 30.0


def add_diagnosis(facts: Facts, table: TraceTable, breakdown: Breakdown) -> Facts:
    """Fill the diagnosis fields of `facts` (in place) and return it."""
    steps = breakdown.steps
    events = table.events
    facts.vendor = trace_vendor(table)
    facts.variance = step_variance(table)
    if len(steps):
        lo, hi = float(steps.starts[0]), float(steps.ends[-1])
        facts.steps_range = (lo, hi)
        facts.steps_us = float(np.sum(steps.lengths))
        facts.step_count = int(len(steps.lengths))
        facts.step_bounds = [(str(n), float(s), float(e))
                             for n, s, e in zip(steps.names, steps.starts, steps.ends)]
    else:
        lo, hi = -np.inf, np.inf
    ts, ends = events["ts"].to_numpy(), event_ends(events)
    inside = (ts >= lo) & (ts < hi)
    _startup(facts, table, inside, ts, ends)
    facts.foreign_marker = foreign_marker(table)
    _idle(facts, table)
    _launch(facts, table, inside)
    _sync(facts, table, inside, ts, ends)
    _costs(facts, table, lo, hi)
    _comm(facts, table, breakdown)
    facts.graph_mode = graph_summary(table)["mode"]
    facts.kernel_capability = kernel_generation(table)
    kernels = kind_mask(events, (Kind.KERNEL,))
    facts.matrix_core_kernels = int(np.count_nonzero(
        kernels & category_flags(events["name"], lambda n: bool(MFMA_RE.search(n)),
                                 np.flatnonzero(kernels))))
    loader = kind_mask(events, HOST_KINDS) & category_flags(
        events["name"], lambda n: bool(DATALOADER_RE.search(n)))
    facts.dataloader_range = _longest(loader & inside, ts, ends)
    return facts


def _longest(mask: np.ndarray, ts: np.ndarray, ends: np.ndarray) -> Optional[tuple[float, float]]:
    rows = np.flatnonzero(mask)
    if len(rows) == 0:
        return None
    row = rows[np.argmax(ends[rows] - ts[rows])]
    return float(ts[row]), float(ends[row])


def _startup(facts: Facts, table: TraceTable, inside: np.ndarray, ts: np.ndarray,
             ends: np.ndarray) -> None:
    events = table.events
    mask = kind_mask(events, LAUNCH_KINDS) & inside & category_flags(
        events["name"], lambda n: bool(STARTUP_RE.match(n)))
    rows = np.flatnonzero(mask)
    if len(rows) == 0:
        return
    dur = ends[rows] - ts[rows]
    codes = events["name"].cat.codes.to_numpy()[rows]
    per_name = np.bincount(codes, weights=dur)
    top = np.argsort(-per_name, kind="stable")
    names = events["name"].cat.categories.astype(str)
    facts.startup_calls = [(str(names[c]), float(per_name[c])) for c in top if per_name[c] > 0]
    facts.startup_us = float(dur.sum())
    facts.startup_range = _longest(mask, ts, ends)


def foreign_marker(table: TraceTable) -> Optional[dict[str, Any]]:
    """The longest `ProfilerStep#N` marker recorded by a process that ran none of the trace's
    operators, when another process did run them; None otherwise."""
    events = table.events
    pid_codes = events["pid"].cat.codes.to_numpy()
    ops = kind_mask(events, (Kind.CPU_OP,))
    if not ops.any():
        return None
    op_counts = np.bincount(pid_codes[ops] + 1, minlength=len(events["pid"].cat.categories) + 1)
    markers = kind_mask(events, MARKER_KINDS) & category_flags(
        events["name"], lambda n: n.startswith(STEP_PREFIX))
    foreign = markers & (op_counts[pid_codes + 1] == 0)
    rows = np.flatnonzero(foreign)
    if len(rows) == 0:
        return None
    dur = np.nan_to_num(events["dur"].to_numpy()[rows])
    row = int(rows[np.argmax(dur)])
    pids = events["pid"].cat.categories.astype(str)
    ts = float(events["ts"].iat[row])
    return {"name": str(events["name"].iat[row]), "pid": str(pids[pid_codes[row]]),
            "ops_pid": str(pids[int(np.argmax(op_counts)) - 1]), "dur_us": float(dur.max()),
            "range": (ts, ts + float(dur.max()))}


def _idle(facts: Facts, table: TraceTable) -> None:
    devices = temporal_breakdown(table)
    if not devices:
        return
    facts.gpu_idle_pct = max(d["idle_pct"] for d in devices)
    idle = idle_breakdown(table, KERNEL_WAIT_US)
    if idle["largest_gaps"]:
        gap = idle["largest_gaps"][0]
        facts.largest_gap = (gap["start_us"], gap["end_us"])


def _launch(facts: Facts, table: TraceTable, inside: np.ndarray) -> None:
    frame = kernel_launches(table)
    frame = frame[inside[frame["event"].to_numpy()]]
    facts.kernels = int(len(frame))
    facts.short_kernels = int((frame["gpu_us"] < frame["cpu_us"]).sum())
    facts.launch_cpu_us = float(frame["cpu_us"].sum())


def _costs(facts: Facts, table: TraceTable, lo: float, hi: float) -> None:
    """Device idle time by cause on the device's own timeline (`advice_costs`): the host wait
    share of the idle time and the prices of launch overhead and synchronisation."""
    costs = device_costs(table, lo, hi)
    facts.idle_us, facts.host_wait_us = costs.idle_us, costs.host_wait_us
    facts.launch_idle_us, facts.sync_idle_us = costs.launch_us, costs.sync_us
    facts.stalled_us, facts.stall_range = costs.stalled_us, costs.stall_range
    if costs.idle_us > 0:
        facts.host_wait_pct = 100.0 * costs.host_wait_us / costs.idle_us
    facts.host_compute_us = host_compute_us(table, lo, hi)


def _sync(facts: Facts, table: TraceTable, inside: np.ndarray, ts: np.ndarray,
          ends: np.ndarray) -> None:
    events = table.events
    mask = sync_mask(table) & inside
    rows = np.flatnonzero(mask)
    if len(rows) == 0:
        return
    facts.sync_calls = int(len(rows))
    facts.sync_us = float(np.sum(ends[rows] - ts[rows]))
    facts.sync_names = sorted({str(n) for n in events["name"].to_numpy()[rows]})
    facts.sync_range = _longest(mask, ts, ends)


def _comm(facts: Facts, table: TraceTable, breakdown: Breakdown) -> None:
    facts.uses_fsdp = is_fsdp(table)  # by FSDP's own names, as the Distributed view says
    if breakdown.average.get("Communication", 0.0) <= 0 or facts.steps_us <= 0:
        return
    costs = overlap_costs(table)
    exposed = sum(step["communication"] for step in costs.values())
    facts.exposed_comm_pct = 100.0 * exposed / facts.steps_us
