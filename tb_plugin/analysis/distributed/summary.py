"""The per-rank distributed summary: everything the run-level Distributed view needs from one
trace, as a small, versioned msgspec Struct computed by a pure function of one table.

A parser child computes it right after parsing (`server/parse_child.py`) and the cache keeps it
next to the table, so the run-level view reads one summary per rank and never holds the ranks'
tables (`dist_run.build_distributed`). It is plain data (lists of numbers and strings), so it
encodes with msgspec (JSON or msgpack) for any transport.

Clocks: every time in a summary is on the rank's own trace clock (us). Calls are placed in the
rank's steps by their device start (kernel start), else their host start; steps are the
device-adjusted steps of `steps.compute_steps`, the same windows the overlap chart uses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Optional

import msgspec
import numpy as np

from ...ingest.schema import Kind, TraceTable
from ..memo import memoised
from ..steps import compute_steps
from .comm_bytes import TYPE_SIZES
from .modules import call_modules, compute_overlap
from .rank import comm_ops, gpus, overlap_costs

#: Bumped whenever the summary's content changes (cached summaries are recomputed).
SUMMARY_VERSION = 3  # 2: calls carry module and compute_overlap (FSDP layers)
# 3: calls carry seq; visible_gpus; the table's load state and messages
DEFAULT_GROUP = "default"
_FSDP = re.compile(r"FSDP|FullyShardedDataParallel")


class Group(msgspec.Struct):
    """A process group from `distributedInfo.pg_config`."""

    name: str
    size: int
    ranks: list[int]
    desc: str = ""


class Gpu(msgspec.Struct):
    id: int
    name: Optional[str] = None
    memory_bytes: Optional[int] = None
    compute_capability: Optional[str] = None


class Calls(msgspec.Struct):
    """One entry per logical communication call of the rank, in host start order."""

    name: list[str]  # backend event name, e.g. "nccl:all_reduce"
    collective: list[str]  # normalised: all_reduce, all_gather, ... (see `collective_kind`)
    group: list[str]  # "Process Group Name", else DEFAULT_GROUP
    group_size: list[float]  # "Group size"; NaN when the trace does not say
    bytes: list[float]  # message size (comm_bytes), 0 when unknown
    out_bytes: list[float]  # output message size (Out msg nelems x dtype), NaN when unknown
    dtype: list[str]
    host_start: list[float]  # host enqueue (the call's host range), us
    host_end: list[float]
    dev_start: list[float]  # first communication kernel start, NaN without kernels
    dev_end: list[float]
    step: list[int]  # index into `Steps.names`, -1 outside every step
    #: innermost enclosing nn.Module / FSDP module event on the call's thread, "" when none
    module: list[str] = msgspec.field(default_factory=list)
    #: us of the call's device span (else host range) overlapped by computation
    compute_overlap: list[float] = msgspec.field(default_factory=list)
    #: record_param_comms "Seq": the call's sequence number in its process group, NaN if absent
    seq: list[float] = msgspec.field(default_factory=list)


class Ranges(msgspec.Struct):
    """The calls' ranges (host range and kernels), by (call, start, -end)."""

    call: list[int]
    start: list[float]
    end: list[float]


class Steps(msgspec.Struct):
    """Device-adjusted steps and the overlap split per step (us)."""

    names: list[str]
    starts: list[float]
    ends: list[float]
    computation: list[float]
    overlap: list[float]
    communication: list[float]
    other: list[float]


class RankSummary(msgspec.Struct):
    version: int
    rank: Optional[int]
    world_size: Optional[int]
    backend: Optional[str]
    hostname: Optional[str]
    pid: Optional[str]
    groups: list[Group]
    fsdp: bool
    gpus: list[Gpu]
    steps: Steps
    calls: Calls
    ranges: Ranges
    messages: list[str]
    module_source: str = ""  # where `Calls.module` comes from (`dist_modules`), "" when none
    visible_gpus: Optional[int] = None  # entries of `deviceProperties` (GPUs the process saw)
    #: the table's load state and messages (a reader of the cached summary needs no table)
    load_state: str = "ok"
    load_messages: list[str] = msgspec.field(default_factory=list)


def rank_summary(table: TraceTable) -> RankSummary:
    """The summary of one table, computed once per table."""
    return memoised(table, "rank_summary", lambda: _rank_summary(table))


def _rank_summary(table: TraceTable) -> RankSummary:
    info = table.metadata.distributed_info or {}
    ops = comm_ops(table)
    steps = compute_steps(table)
    overlap = overlap_costs(table)
    calls = ops.ops
    dev_start = calls["dev_start"].to_numpy(dtype=np.float64)
    placed = np.where(np.isfinite(dev_start), dev_start, calls["start"].to_numpy(np.float64))
    out_nelems = calls["out_nelems"].to_numpy(dtype=np.float64)
    element = _element_sizes(calls["dtype"].to_numpy(dtype=object))
    host_start = calls["start"].to_numpy(np.float64)
    modules, module_source = call_modules(table, calls["thread"].to_numpy(np.int64), host_start)
    device = np.isfinite(dev_start) & np.isfinite(calls["dev_end"].to_numpy(np.float64))
    lo = np.where(device, dev_start, host_start)
    hi = np.where(device, calls["dev_end"].to_numpy(np.float64), calls["end"].to_numpy(np.float64))
    return RankSummary(
        version=SUMMARY_VERSION,
        rank=_int(info.get("rank")), world_size=_int(info.get("world_size")),
        backend=_text(info.get("backend")),
        hostname=_text(table.metadata.extra.get("host_name")
                       or table.metadata.extra.get("hostname")),
        pid=_host_pid(table), groups=_groups(info.get("pg_config")),
        fsdp=is_fsdp(table), gpus=[msgspec.convert(g, Gpu) for g in gpus(table)],
        steps=Steps(
            names=list(steps.names), starts=_floats(steps.starts), ends=_floats(steps.ends),
            **{k: [float(overlap[n][k]) for n in steps.names]
               for k in ("computation", "overlap", "communication", "other")}),
        calls=Calls(
            name=[str(n) for n in calls["name"]],
            collective=[collective_kind(n, c) for n, c in zip(calls["name"],
                                                               calls["collective"])],
            group=[str(g) if g is not None else DEFAULT_GROUP for g in calls["group"]],
            group_size=_floats(calls["group_size"]), bytes=_floats(calls["bytes"]),
            out_bytes=_floats(out_nelems * element), dtype=_dtypes(calls),
            host_start=_floats(calls["start"]), host_end=_floats(calls["end"]),
            dev_start=_floats(dev_start), dev_end=_floats(calls["dev_end"]),
            step=[int(s) for s in _step_of(placed, steps.starts, steps.ends)],
            module=modules, compute_overlap=_floats(compute_overlap(table, lo, hi)),
            seq=_floats(calls["seq"])),
        ranges=Ranges(call=[int(c) for c in _call_index(calls["op"].to_numpy(),
                                                        ops.ranges["op"].to_numpy())],
                      start=_floats(ops.ranges["start"]), end=_floats(ops.ranges["end"])),
        messages=list(ops.messages), module_source=module_source,
        visible_gpus=len(table.metadata.device_properties or []) or None,
        load_state=str(table.status.state), load_messages=list(table.status.messages),
    )


#: Normalised collective kinds, first match wins (letters only, lower case).
_KINDS = (("allreduce", "all_reduce"), ("reducescatter", "reduce_scatter"),
          ("allgather", "all_gather"), ("alltoall", "all_to_all"), ("broadcast", "broadcast"),
          ("barrier", "barrier"), ("reduce", "reduce"), ("gather", "gather"),
          ("scatter", "scatter"), ("send", "send"), ("recv", "recv"))


def collective_kind(name: Any, collective: Any = None) -> str:
    """all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, barrier, reduce, gather,
    scatter, send, recv or other: from record_param_comms' "Collective name" where present,
    else from the op name (`nccl:_all_gather_base`, `c10d::allreduce_`, `gloo:broadcast`)."""
    for text in (collective, name):
        if not isinstance(text, str) or not text:
            continue
        letters = re.sub(r"[^a-z]", "", text.split(":")[-1].lower())
        for key, kind in _KINDS:
            if key in letters:
                return kind
    return "other"


def _step_of(at: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    if len(starts) == 0:
        return np.full(len(at), -1, dtype=np.int64)
    k = np.searchsorted(starts, at, side="right") - 1
    inside = (k >= 0) & (at < ends[np.maximum(k, 0)])
    return np.where(inside, k, -1)


def _call_index(ops: np.ndarray, range_ops: np.ndarray) -> np.ndarray:
    """Row of each range's op in the (start-ordered) calls."""
    order = np.argsort(ops, kind="stable")
    return order[np.searchsorted(ops[order], range_ops)] if len(ops) else range_ops


def _element_sizes(dtypes: np.ndarray) -> np.ndarray:
    return np.array([TYPE_SIZES.get(d, np.nan) if isinstance(d, str) else np.nan
                     for d in dtypes], dtype=np.float64)


def _dtypes(calls: Any) -> list[str]:
    return [d if isinstance(d, str) else "" for d in calls["dtype"]]


def _groups(config: Any) -> list[Group]:
    if not isinstance(config, list):
        return []
    out = []
    for entry in config:
        if not isinstance(entry, dict) or "pg_name" not in entry:
            continue
        ranks = [int(r) for r in entry.get("ranks") or [] if isinstance(r, (int, float))]
        size = _int(entry.get("pg_size"))
        out.append(Group(name=str(entry["pg_name"]), size=size if size is not None
                         else len(ranks), ranks=ranks, desc=str(entry.get("pg_desc") or "")))
    return out


def _host_pid(table: TraceTable) -> Optional[str]:
    """The pid of the process with the most CPU ops (the training process)."""
    events = table.events
    host = events["kind"].to_numpy() == Kind.CPU_OP
    if not host.any():
        return None
    codes = events["pid"].cat.codes.to_numpy()[host]
    return str(events["pid"].cat.categories[int(np.bincount(codes).argmax())])


def is_fsdp(table: TraceTable) -> bool:
    names = table.events["name"].cat.categories.astype(str)
    return bool(names.str.contains(_FSDP).any())


def _floats(values: Sequence[Any] | np.ndarray | Any) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64)]


def _int(value: Any) -> Optional[int]:
    return int(value) if isinstance(value, (int, float)) and np.isfinite(value) else None


def _text(value: Any) -> Optional[str]:
    return str(value) if isinstance(value, (str, int)) and str(value) else None


def summary_builtins(table: TraceTable) -> Any:
    """The summary of one table as the cache stores it (the Distributed spec's `summarize`)."""
    return encode(rank_summary(table))


def wants_summary(features: dict[str, Any]) -> bool:
    """Parser children precompute the summary of files with communication ops."""
    return int(features.get("comm_ops") or 0) > 0


def encode(summary: RankSummary) -> Any:
    """JSON-able builtins (the cache stores JSON; NaN stays NaN)."""
    return msgspec.to_builtins(summary)


def decode(data: Any) -> RankSummary:
    """A summary from `encode`'s builtins; raises msgspec.ValidationError if malformed."""
    return msgspec.convert(data, RankSummary)
