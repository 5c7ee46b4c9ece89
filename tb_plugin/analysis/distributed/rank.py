"""Distributed view (spec 1.5, 3.12) over all workers of a span: devices per node/process,
per-step computation/communication overlap, data-transfer vs synchronizing time, and
communication-op statistics.

A *logical* communication op is one collective call on one thread. PyTorch 2.x writes several
nested events per call (`c10d::allreduce_` > `record_param_comms` > `nccl:all_reduce`), so
comm events nested on one thread form one op, named after its backend event (`nccl:*`,
`gloo:*`...), else its `c10d::*` op, else `record_param_comms:<collective>`. When a worker has
backend events, ops without one are the enqueue side of a collective whose backend event runs on
another thread (gloo's worker thread) and are left out so nothing counts twice.

An op's ranges are its communication kernels (NCCL kernels by name or by external id), linked
by the external id of any of its events, else by the launch call inside it; an op without
kernels (a CPU collective) has its host range instead (issue 28: the host enqueue of a GPU
collective is not communication time, and counted as overlap with compute when it was not).
Ops are matched across workers by order of occurrence per name; for each matched range the
shortest duration over the workers is the transfer time and the rest of each worker's range is
synchronization (the reference's model). Unlike the reference, workers with different op counts
or without communication degrade with a message instead of disabling the view, and a comm op
with `Input Dims` but no `Input type` counts 0 bytes instead of dropping the run (bug 12d).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...ingest.schema import DEVICE_KINDS, Kind, TraceTable
from .. import ranges as rg
from ..breakdown import KERNEL, role_ranges
from ..events import (
    comm_kernel_mask,
    comm_op_mask,
    event_ends,
    kind_mask,
    launched_device_events,
)
from ..gpu_metrics import event_devices
from ..launch import device_properties
from ..memo import memoised
from ..node_kinds import NodeKind
from ..optree import build_op_tree
from ..steps import compute_steps
from .comm_bytes import comm_bytes

NODE_PROCESS = re.compile(r"^(.*)_(\d+)")
#: record_param_comms entries that are not transfers.
NON_TRANSFER_COLLECTIVES = frozenset(("wait",))
BACKEND, FRONTEND, PARAM_COMMS = 0, 1, 2  # naming/size priority of a call's nested events
PARAM_COMMS_NAME = "record_param_comms"


# --- one worker: logical comm ops ------------------------------------------------------------

@dataclass
class CommOps:
    """One worker's communication ops (one row per call) and their ranges."""

    #: op, name, start, end, bytes, thread, collective (record_param_comms "Collective name"),
    #: group ("Process Group Name"), group_size, dtype, out_nelems, seq ("Seq": the call's
    #: sequence number in its process group, NaN when absent), dev_start/dev_end (first
    #: kernel start, last kernel end; NaN without kernels); in start order.
    ops: pd.DataFrame
    #: op, start, end: its kernels, else (a call without kernels) its host range, by (op,
    #: start, -end); the host enqueue of a call with kernels is no communication time
    ranges: pd.DataFrame
    messages: list[str] = field(default_factory=list)


def comm_ops(table: TraceTable) -> CommOps:
    """The communication ops of one trace, computed once."""
    return memoised(table, "comm_ops", lambda: _comm_ops(table))


def _comm_ops(table: TraceTable) -> CommOps:
    events = table.events
    rows = _comm_rows(table)
    messages: list[str] = []
    if len(rows) == 0:
        return CommOps(_empty_ops(), _empty_ranges(), messages)
    calls = _group_calls(events, rows)
    rows = calls["row"].to_numpy()  # now in (thread, start) order
    calls["tier"] = _tiers(events, rows)
    calls["bytes"] = comm_bytes(table, rows, messages)
    calls["collective"] = _collectives(table, rows)
    for column, values in _call_args(table, rows).items():
        calls[column] = values
    ops = _summarise_calls(calls)
    if (ops["has_backend"]).any():  # the others enqueue work a backend event shows elsewhere
        ops = ops[ops["has_backend"]]
    ops = ops.sort_values(["start", "op"], kind="stable").reset_index(drop=True)
    kernel_ranges = _kernel_ranges(table, calls[calls["op"].isin(ops["op"])], ops, messages)
    device = kernel_ranges.groupby("op").agg(dev_start=("start", "min"), dev_end=("end", "max"))
    ops = ops.join(device, on="op")
    host = ops.loc[~np.isfinite(ops["dev_start"].to_numpy(np.float64)), ["op", "start", "end"]]
    ranges = pd.concat([host, kernel_ranges], ignore_index=True)  # kernels, else host range
    ranges = ranges.sort_values(["op", "start", "end"], ascending=[True, True, False],
                                kind="stable").reset_index(drop=True)
    return CommOps(ops[OP_COLUMNS].reset_index(drop=True), ranges, messages)


OP_COLUMNS = ["op", "name", "start", "end", "bytes", "thread", "collective", "group",
              "group_size", "dtype", "out_nelems", "seq", "dev_start", "dev_end"]
_TEXT_ARGS = {"group": "process_group", "dtype": "dtype"}
_NUMBER_ARGS = {"group_size": "group_size", "out_nelems": "out_msg_nelems", "seq": "seq"}


def _empty_ops() -> pd.DataFrame:
    text = {"name", "collective", "group", "dtype"}
    return pd.DataFrame({c: np.empty(0, object) if c in text else
                         np.empty(0, np.int64) if c in ("op", "thread") else np.empty(0)
                         for c in OP_COLUMNS})


def _call_args(table: TraceTable, rows: np.ndarray) -> dict[str, np.ndarray]:
    """record_param_comms arguments of each comm event: process group, group size, dtype and
    output element count (None / NaN where absent)."""
    args = table.op_args.drop_duplicates("event").set_index("event")
    out: dict[str, np.ndarray] = {}
    for name, column in _TEXT_ARGS.items():
        if column in args and len(args):
            values = args[column].astype(object).reindex(rows)
            out[name] = values.where(values.notna(), None).to_numpy(dtype=object)
        else:
            out[name] = np.full(len(rows), None, dtype=object)
    for name, column in _NUMBER_ARGS.items():
        out[name] = (args[column].reindex(rows).to_numpy(dtype=np.float64)
                     if column in args and len(args) else np.full(len(rows), np.nan))
    return out


def _empty_ranges() -> pd.DataFrame:
    return pd.DataFrame({"op": np.empty(0, np.int64), "start": np.empty(0), "end": np.empty(0)})


def _comm_rows(table: TraceTable) -> np.ndarray:
    """Host comm events (complete X events), minus record_param_comms `wait` markers."""
    events = table.events
    mask = comm_op_mask(events) & np.isfinite(events["dur"].to_numpy())  # instants have no dur
    args = table.op_args
    if len(args):
        collective = args["collective"].astype(object)
        waits = args["event"].to_numpy()[collective.isin(NON_TRANSFER_COLLECTIVES).to_numpy()]
        mask[waits] = False
    return np.flatnonzero(mask)


def _group_calls(events: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """Comm events nested on one thread form one call: a new call starts on each thread
    wherever an event starts at or after the latest end seen so far."""
    start = events["ts"].to_numpy()[rows]
    end = start + events["dur"].to_numpy()[rows]
    thread = (events["pid"].cat.codes.to_numpy()[rows].astype(np.int64)
              * (len(events["tid"].cat.categories) + 1)
              + events["tid"].cat.codes.to_numpy()[rows])
    order = np.lexsort((-end, start, thread))
    rows, start, end, thread = rows[order], start[order], end[order], thread[order]
    reach = pd.Series(end).groupby(thread).cummax().to_numpy()
    new = np.ones(len(rows), dtype=bool)
    new[1:] = (thread[1:] != thread[:-1]) | (start[1:] >= reach[:-1])
    return pd.DataFrame({"row": rows, "op": np.cumsum(new) - 1, "start": start, "end": end,
                         "thread": thread, "name": events["name"].to_numpy()[rows]})


def _tiers(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    names = events["name"].iloc[rows].astype(str)
    tier = np.full(len(rows), BACKEND, dtype=np.int8)
    tier[names.str.contains("::", regex=False).to_numpy()] = FRONTEND
    tier[(names == PARAM_COMMS_NAME).to_numpy()] = PARAM_COMMS
    return tier


def _collectives(table: TraceTable, rows: np.ndarray) -> np.ndarray:
    args = table.op_args.drop_duplicates("event").set_index("event")
    if "collective" not in args or len(args) == 0:
        return np.full(len(rows), None, dtype=object)
    values = args["collective"].astype(object).reindex(rows)
    return values.where(values.notna(), None).to_numpy(dtype=object)


def _summarise_calls(calls: pd.DataFrame) -> pd.DataFrame:
    """One row per call: range, name and size from its most specific event (backend event, then
    c10d op, then record_param_comms), thread, and whether it has a backend event."""
    ranked = calls.sort_values(["op", "tier", "start"], kind="stable")
    first = ranked.groupby("op", sort=True).first()
    sizes = ranked.dropna(subset=["bytes"]).groupby("op")["bytes"].first()
    span = calls.groupby("op").agg(start=("start", "min"), end=("end", "max"),
                                   thread=("thread", "first"))
    extra = calls.groupby("op")[["collective", *_TEXT_ARGS, *_NUMBER_ARGS]].first()
    name = np.array(first["name"], dtype=object)  # a writable copy
    is_param = first["tier"].to_numpy() == PARAM_COMMS
    name[is_param] = [f"{PARAM_COMMS_NAME}:{c}" if isinstance(c, str) and c else PARAM_COMMS_NAME
                      for c in first["collective"].to_numpy()[is_param]]
    return pd.DataFrame({
        "op": span.index.to_numpy(), "name": name, "start": span["start"].to_numpy(),
        "end": span["end"].to_numpy(), "thread": span["thread"].to_numpy(),
        "bytes": sizes.reindex(span.index).fillna(0.0).to_numpy(),
        "has_backend": (calls.groupby("op")["tier"].min() == BACKEND).to_numpy(),
        **{c: extra[c].reindex(span.index).to_numpy() for c in extra.columns},
    })


# --- kernels of comm ops -------------------------------------------------------------------

def _kernel_ranges(table: TraceTable, calls: pd.DataFrame, ops: pd.DataFrame,
                   messages: list[str]) -> pd.DataFrame:
    """[start, end) of the communication kernels of each op: by the external id of any of the
    op's events, else by the launch (runtime/driver call) that lies inside the op."""
    events = table.events
    kernels = np.flatnonzero(comm_kernel_mask(events) & kind_mask(events, (Kind.KERNEL,)))
    kernels = kernels[np.isfinite(events["dur"].to_numpy()[kernels])]
    if len(kernels) == 0 or len(ops) == 0:
        return _empty_ranges()
    op = _ops_by_external_id(events, calls, kernels)
    missing = op < 0
    if missing.any():
        op[missing] = _ops_by_launch(table, ops, kernels[missing])
    if (op < 0).any():
        messages.append(f"{int((op < 0).sum())} communication kernel(s) could not be tied to a "
                        "communication op; they count as communication time only.")
    linked = op >= 0
    start = events["ts"].to_numpy()[kernels[linked]]
    return pd.DataFrame({"op": op[linked], "start": start,
                         "end": start + events["dur"].to_numpy()[kernels[linked]]})


def _ops_by_external_id(events: pd.DataFrame, calls: pd.DataFrame,
                        kernels: np.ndarray) -> np.ndarray:
    ext = events["external_id"].to_numpy()
    call_ext = ext[calls["row"].to_numpy()]
    usable = np.isfinite(call_ext) & (call_ext != 0)
    table = pd.Series(calls["op"].to_numpy()[usable], index=call_ext[usable])
    table = table[~table.index.duplicated()].sort_index()
    keys = ext[kernels]
    if len(table) == 0:
        return np.full(len(kernels), -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(table.index.to_numpy(), keys), len(table) - 1)
    found = table.index.to_numpy()[pos] == keys
    return np.where(found, table.to_numpy()[pos], -1).astype(np.int64)


def _ops_by_launch(table: TraceTable, ops: pd.DataFrame, kernels: np.ndarray) -> np.ndarray:
    """The op on the launching thread whose range holds the kernel's launch call."""
    events = table.events
    links = launched_device_events(events)
    launch_of = pd.Series(links["launch"].to_numpy(), index=links["event"].to_numpy())
    launch = launch_of.reindex(kernels).fillna(-1).to_numpy(dtype=np.int64)
    has = launch >= 0
    thread = np.full(len(kernels), -1, dtype=np.int64)
    at = np.full(len(kernels), np.nan)
    rows = launch[has]
    thread[has] = (events["pid"].cat.codes.to_numpy()[rows].astype(np.int64)
                   * (len(events["tid"].cat.categories) + 1)
                   + events["tid"].cat.codes.to_numpy()[rows])
    at[has] = events["ts"].to_numpy()[rows]
    result = np.full(len(kernels), -1, dtype=np.int64)
    for key, group in ops.groupby("thread"):  # one pass per thread with comm ops
        group = group.sort_values("start")
        sel = np.flatnonzero(thread == key)
        k = np.searchsorted(group["start"].to_numpy(), at[sel], side="right") - 1
        inside = (k >= 0) & (at[sel] < group["end"].to_numpy()[np.maximum(k, 0)])
        result[sel[inside]] = group["op"].to_numpy()[k[inside]]
    return result


def overlap_costs(table: TraceTable) -> dict[str, dict[str, float]]:
    """Per step: computation-only, overlapping, communication-only and other us (spec 3.12).
    Computation is kernel time, or, when the trace has no kernels, the time of CPU operators
    that are not communication, not inside one and enclose none (`host_compute_ranges`): a
    user annotation or a step-level operator around a collective is not computation that
    overlaps it."""
    steps = compute_steps(table)
    roles = role_ranges(table)
    compute = roles[KERNEL] if len(roles[KERNEL][0]) else host_compute_ranges(table)
    comm = communication_ranges(table)
    both = rg.intersect(compute, comm)
    comp = rg.length_in_windows(compute, steps.starts, steps.ends)
    com = rg.length_in_windows(comm, steps.starts, steps.ends)
    over = rg.length_in_windows(both, steps.starts, steps.ends)
    other = steps.lengths + over - comp - com
    return {name: {"computation": comp[i] - over[i], "overlap": over[i],
                   "communication": com[i] - over[i], "other": other[i]}
            for i, name in enumerate(steps.names)}


def communication_ranges(table: TraceTable) -> rg.Ranges:
    """Merged communication time: each call's kernels, else (no kernels: a CPU collective) its
    host range, plus communication kernels tied to no call; the host enqueue range of a call
    whose kernels run later is not communication (it overlapped compute kernels only on the
    host, issue 28)."""
    events = table.events
    kernels = comm_kernel_mask(events) & kind_mask(events, (Kind.KERNEL,))
    starts, ends = events["ts"].to_numpy()[kernels], event_ends(events)[kernels]
    ranges = comm_ops(table).ranges
    return rg.merge(np.concatenate([starts, ranges["start"].to_numpy(np.float64)]),
                    np.concatenate([ends, ranges["end"].to_numpy(np.float64)]))


def host_compute_ranges(table: TraceTable) -> rg.Ranges:
    """Merged intervals of the CPU operators (op-tree operator nodes) that are not
    communication, not inside a communication op and enclose no communication op."""
    tree = build_op_tree(table)
    n = len(tree.event)
    if n == 0:
        return rg.empty()
    rows = np.where(tree.event >= 0, tree.event, 0)
    comm = (tree.event >= 0) & comm_op_mask(table.events)[rows]
    count = np.concatenate(([0], np.cumsum(comm)))
    encloses = (count[tree.subtree_end] - count[np.arange(n)]) > 0  # itself or below
    inside = np.zeros(n + 1, dtype=np.int64)  # +1 over each comm op's subtree slice
    np.add.at(inside, np.flatnonzero(comm), 1)
    np.add.at(inside, tree.subtree_end[comm], -1)
    within = np.cumsum(inside)[:n] > 0
    keep = (tree.kind == NodeKind.OPERATOR) & ~encloses & ~within
    return rg.merge(tree.start[keep], tree.end[keep])


# --- devices ---------------------------------------------------------------------------------

def worker_node_pid(worker: str, index: int) -> tuple[str, str]:
    """Node and process from the `hostname_pid` worker naming, else (worker, running index)."""
    match = NODE_PROCESS.match(worker)
    return (match.group(1), match.group(2)) if match else (worker, str(index))


def gpus(table: TraceTable) -> list[dict[str, Any]]:
    rows = np.flatnonzero(kind_mask(table.events, DEVICE_KINDS))
    ids = event_devices(table, rows)
    out = []
    for gpu in sorted({int(d) for d in ids[np.isfinite(ids)]}):  # one per used GPU
        entry = device_properties(table, gpu)
        major, minor = entry.get("computeMajor"), entry.get("computeMinor")
        memory = entry.get("totalGlobalMem")
        out.append({
            "id": gpu, "name": entry.get("name"),
            "memory_bytes": int(memory) if isinstance(memory, (int, float)) else None,
            "compute_capability": f"{major}.{minor}" if major is not None and minor is not None
            else None,
        })
    return out
