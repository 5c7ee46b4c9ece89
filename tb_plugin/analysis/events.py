"""Selecting events: masks by kind and name, name predicates, ends, launch links, device ids.

Names are tested once per distinct name (the `name` categorical's categories), never per event.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import DEVICE_KINDS, LAUNCH_KINDS, Kind, TraceTable

#: Host-side kinds that can be operators, comm ops or data loading (the GPU-side mirror
#: `gpu_user_annotation` is device time, not CPU work).
HOST_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)

_COLLECTIVE = (r"(?:all_?reduce|all_?gather|reduce_?scatter|broadcast|reduce|all_?to_?all"
               r"|gather|scatter|send|recv|barrier|coalesced)")
_COMM_NAME = re.compile(
    r"record_param_comms$"
    r"|(?:nccl|rccl|gloo|mpi|ucc|xccl|hccl):\S"  # backend-prefixed ops: nccl:all_to_all, gloo:...
    rf"|(?:c10d|_c10d_functional|c10d_functional)::_?{_COLLECTIVE}\w*$"  # c10d::allreduce_
    r"|_?(?:all_?gather|reduce_?scatter)_base_?$"  # ProcessGroup._allgather_base
)
#: NCCL/RCCL device kernels: ncclKernel_AllReduce_..., ncclDevKernel_..., ncclAllReduceRing..Kernel
_NCCL_KERNEL = re.compile(r"nccl\w*Kernel")
#: Data loading ranges: `enumerate(DataLoader)#...__next__`, `enumerate(DataPipe)#...`.
DATALOADER_RE = re.compile(r"^enumerate\(DataLoader\)#.*\.__next__$|^enumerate\(DataPipe\)#")


def is_comm_op_name(name: str) -> bool:
    """Whether a host op/annotation name is a collective or point-to-point communication op.

    Covers the reference's `nccl:`/`gloo:` collectives and PyTorch 2.x names
    (`record_param_comms`, `c10d::*` collectives, all_to_all, send/recv, `_allgather_base`,
    `_reduce_scatter_base`, coalesced ops).
    """
    return bool(_COMM_NAME.match(name))


def is_nccl_kernel_name(name: str) -> bool:
    return bool(_NCCL_KERNEL.match(name))


def is_dataloader_name(name: str) -> bool:
    return bool(DATALOADER_RE.search(name))


def kind_mask(events: pd.DataFrame, kinds: tuple[Kind, ...]) -> np.ndarray:
    return np.isin(events["kind"].to_numpy(), np.asarray(kinds, dtype=np.int8))


def name_mask(events: pd.DataFrame, predicate: Callable[[pd.Index], np.ndarray]) -> np.ndarray:
    """Rows whose `name` satisfies `predicate`, evaluated once on the Index of distinct names."""
    names = events["name"]
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype("category")
    categories = pd.Index(names.cat.categories.astype(str))
    hits = np.append(np.asarray(predicate(categories), dtype=bool), False)  # code -1 = no name
    return hits[names.cat.codes.to_numpy()]


def category_flags(names: pd.Series, predicate: Any,
                   rows: Optional[np.ndarray] = None) -> np.ndarray:
    """`predicate` over a categorical's categories, expanded to one bool per row (NaN -> False).
    With `rows`, only the categories those rows use are tested (the others read False)."""
    cat = names.cat if isinstance(names.dtype, pd.CategoricalDtype) else names.astype(
        "category").cat
    codes = cat.codes.to_numpy()
    categories = cat.categories
    used = np.arange(len(categories)) if rows is None else np.unique(codes[rows])
    used = used[used >= 0]
    flags = np.zeros(len(categories) + 1, dtype=bool)
    flags[used] = np.fromiter((predicate(str(categories[c])) for c in used), dtype=bool,
                              count=len(used))
    return flags[codes]


def filled_categorical(codes: np.ndarray, categories: pd.Index, missing: str) -> pd.Categorical:
    """A categorical of `codes` into `categories`, `missing` where a code is -1 (`missing`
    becomes a category if it is not one)."""
    if missing not in categories:
        categories = categories.append(pd.Index([missing], dtype=object))
    fill = int(categories.get_loc(missing))
    return pd.Categorical.from_codes(np.where(codes >= 0, codes, fill), categories)


def event_ends(events: pd.DataFrame) -> np.ndarray:
    """ts + dur, with instants (NaN dur) as zero-length."""
    return events["ts"].to_numpy() + np.nan_to_num(events["dur"].to_numpy(), nan=0.0)


def comm_op_mask(events: pd.DataFrame) -> np.ndarray:
    """Host events that are communication ops."""
    return kind_mask(events, HOST_KINDS) & category_flags(events["name"], is_comm_op_name)


def comm_kernel_mask(events: pd.DataFrame) -> np.ndarray:
    """Kernels doing communication: NCCL by name, or launched under a (non-Gloo) comm op."""
    kernels = kind_mask(events, (Kind.KERNEL,))
    by_name = kernels & category_flags(events["name"], is_nccl_kernel_name)
    comm_ops = comm_op_mask(events) & ~name_mask(events, lambda n: n.str.startswith("gloo:"))
    external = events["external_id"].to_numpy()
    comm_ids = external[comm_ops]
    comm_ids = comm_ids[np.isfinite(comm_ids) & (comm_ids != 0)]
    by_id = kernels & np.isin(external, comm_ids)
    return by_name | by_id


def launched_device_events(events: pd.DataFrame) -> pd.DataFrame:
    """Device events (kernel/memcpy/memset) joined to the launch (runtime or driver call) with the
    same `correlation`: columns `event`, `launch` (row numbers), start, end, launch_start,
    launch_end. Device events without a launch are left out."""
    kinds = events["kind"].to_numpy()
    corr = events["correlation"].to_numpy()
    launch_rows = np.flatnonzero(np.isin(kinds, LAUNCH_KINDS) & np.isfinite(corr))
    device_rows = np.flatnonzero(np.isin(kinds, DEVICE_KINDS) & np.isfinite(corr))
    if launch_rows.size == 0 or device_rows.size == 0:
        return pd.DataFrame({c: np.empty(0) for c in
                             ("event", "launch", "start", "end", "launch_start", "launch_end")})
    # One launch per correlation id (the earliest), so a device event joins at most one launch.
    launch_rows = launch_rows[np.argsort(events["ts"].to_numpy()[launch_rows], kind="stable")]
    unique_corr, first = np.unique(corr[launch_rows], return_index=True)
    launch_rows = launch_rows[first]
    pos = np.clip(np.searchsorted(unique_corr, corr[device_rows]), 0, unique_corr.size - 1)
    found = unique_corr[pos] == corr[device_rows]
    device_rows, launches = device_rows[found], launch_rows[pos[found]]
    ts, ends = events["ts"].to_numpy(), event_ends(events)
    return pd.DataFrame({
        "event": device_rows, "launch": launches,
        "start": ts[device_rows], "end": ends[device_rows],
        "launch_start": ts[launches], "launch_end": ends[launches],
    })


def kernel_device_ids(table: TraceTable, rows: np.ndarray) -> np.ndarray:
    """GPU id of device events: `args.device`, else a numeric `pid`; NaN when neither exists."""
    args = table.device_args
    device = np.full(len(rows), np.nan)
    if len(args):
        lookup = pd.Series(args["device"].to_numpy(dtype=np.float64),
                           index=args["event"].to_numpy())
        lookup = lookup[~lookup.index.duplicated()]
        device = lookup.reindex(rows).to_numpy(dtype=np.float64)
    pids = table.events["pid"]
    pid_num = pd.to_numeric(pd.Series(pids.cat.categories.astype(str)), errors="coerce")
    pid_num = np.append(pid_num.to_numpy(dtype=np.float64), np.nan)
    fallback = pid_num[pids.cat.codes.to_numpy()[rows]]
    return np.where(np.isfinite(device), device, fallback)
