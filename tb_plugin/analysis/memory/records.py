"""Memory records of one trace and their attribution (spec 3.11): device names, the deepest op-tree
node containing each record, alloc/free pairs and the alloc/free table rows.

Every record is attributed to the deepest op-tree node (`optree`) that contains its timestamp on
its own thread: one `searchsorted` per thread plus a climb up the parents, one vectorised step
per tree level. Alloc/free pairs are matched by (device, address), not by address alone (bug
7.9: CPU and GPU addresses collide); pairing runs over the whole trace, and a range selects the
pairs whose allocation or release falls in it. Any device type gets a name ("XPU0", "MPS0",
"device type 7:0") instead of `None` (bug 12e).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from ..memo import memoised
from ..optree import OpTree, build_op_tree

#: c10::DeviceType values as written in `Device Type`; CUDA (1) is shown as "GPU<id>".
DEVICE_TYPE_NAMES = {0: "CPU", 1: "GPU", 2: "MKLDNN", 6: "HIP", 8: "MAIA", 9: "XLA", 10: "Vulkan",
                     11: "Metal", 12: "XPU", 13: "MPS", 15: "HPU", 16: "VE", 17: "Lazy",
                     18: "IPU", 19: "MTIA", 20: "PrivateUse1"}
CPU_TYPE, CUDA_TYPE = 0, 1
UNKNOWN_OP = "<unknown>"


def device_name(device_type: float, device_id: float) -> str:
    """CPU, GPU<id> for CUDA, <TYPE><id> for other known types, "device type N:id" otherwise."""
    if not math.isfinite(device_type):
        return "unknown device"
    kind = int(device_type)
    if kind == CPU_TYPE:
        return "CPU"
    suffix = str(int(device_id)) if math.isfinite(device_id) and device_id >= 0 else ""
    name = DEVICE_TYPE_NAMES.get(kind)
    if name is None:
        return f"device type {kind}" + (f":{suffix}" if suffix else "")
    return name + (":" if name[-1].isdigit() and suffix else "") + suffix


def _device_sort_key(kind: float, ident: float) -> tuple[int, float, float]:
    """CPU first, then CUDA GPUs by id, then other types by (type, id); unknown last."""
    if not math.isfinite(kind):
        return (3, 0.0, 0.0)
    rank = 0 if kind == CPU_TYPE else 1 if kind == CUDA_TYPE else 2
    return (rank, kind, ident if math.isfinite(ident) else -1.0)


def memory_records(table: TraceTable) -> pd.DataFrame:
    """All `[memory]` records in time order, with device name and tree attribution, computed once.

    Columns: ts, device (categorical, categories in display order), addr, bytes, total_allocated,
    total_reserved, node (deepest op-tree node, -1 if none), op (that node when it is an operator,
    else -1 for "staled" records), parent (the node's parent unless a root, else -1).
    """
    return memoised(table, "memory_records", lambda: _memory_records(table))


def _memory_records(table: TraceTable) -> pd.DataFrame:
    memory = table.memory
    order = np.argsort(memory["ts"].to_numpy(dtype=np.float64), kind="stable")
    mem = memory.iloc[order].reset_index(drop=True)
    kind = mem["device_type"].to_numpy(dtype=np.float64)
    ident = mem["device_id"].to_numpy(dtype=np.float64)
    device = _device_column(kind, ident)
    ts = mem["ts"].to_numpy(dtype=np.float64)
    frame = pd.DataFrame({
        "ts": ts,
        "device": device,
        "addr": mem["addr"].to_numpy(dtype=np.float64),
        "bytes": np.nan_to_num(mem["bytes"].to_numpy(dtype=np.float64)),
        "total_allocated": mem["total_allocated"].to_numpy(dtype=np.float64),
        "total_reserved": mem["total_reserved"].to_numpy(dtype=np.float64),
        "device_type": kind,
        "device_id": ident,
    })
    tree = build_op_tree(table)
    node = attribute_to_nodes(tree, mem["tid"].astype(str).to_numpy(dtype=object), ts)
    found = node >= 0
    op = np.full(len(node), -1, dtype=np.int64)
    parent = np.full(len(node), -1, dtype=np.int64)
    op[found] = np.where(tree.is_operator[node[found]], node[found], -1)
    parent[found] = tree.parent[node[found]]
    has_parent = parent >= 0
    top_level = np.zeros(len(node), dtype=bool)  # a top-level node's parent is its thread root
    top_level[has_parent] = tree.parent[parent[has_parent]] < 0
    frame["node"], frame["op"] = node, op
    frame["parent"] = np.where(top_level, -1, parent)
    return frame


def _device_column(kind: np.ndarray, ident: np.ndarray) -> pd.Categorical:
    """Device names per record, one name per distinct (type, id) pair, in display order."""
    key = np.nan_to_num(kind, nan=-1.0) * 1e7 + np.nan_to_num(ident, nan=-2.0)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    pairs = sorted((_device_sort_key(kind[i], ident[i]), device_name(kind[i], ident[i]), code)
                   for code, i in enumerate(first))
    names = np.empty(len(first), dtype=object)
    for _, name, code in pairs:
        names[code] = name
    ordered = list(dict.fromkeys(name for _, name, _ in pairs))
    return pd.Categorical(names[inverse.reshape(-1)], categories=ordered)


def attribute_to_nodes(tree: OpTree, tids: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Deepest non-root node with start <= ts < end on the record's thread, else -1.

    Per thread (its nodes are one pre-order slice sorted by start): the last node starting at or
    before `ts`, then up the parents while that node has already ended.
    """
    node = np.full(len(ts), -1, dtype=np.int64)
    thread_of = {tid: g for g, tid in enumerate(tree.tids)}
    roots = tree.roots
    root_of = np.empty(len(tree.tids), dtype=np.int64)
    root_of[tree.thread[roots]] = roots
    unique = pd.unique(tids)  # one dict look-up per distinct tid
    per_tid = np.array([thread_of.get(t, -1) for t in unique], dtype=np.int64)
    record_thread = per_tid[pd.Index(unique).get_indexer(tids)] if len(tids) else per_tid
    for thread in np.unique(record_thread[record_thread >= 0]):  # one pass per thread
        sel = np.flatnonzero(record_thread == thread)
        root = int(root_of[thread])
        first, stop = root + 1, int(tree.subtree_end[root])
        found = root + np.searchsorted(tree.start[first:stop], ts[sel], side="right")
        found = _climb(tree, found, ts[sel], root)
        node[sel] = np.where(found == root, -1, found)
    return node


def _climb(tree: OpTree, node: np.ndarray, ts: np.ndarray, root: int) -> np.ndarray:
    """Move each candidate up to its nearest ancestor that has not ended at `ts`."""
    while True:
        ended = (node != root) & (tree.end[node] <= ts)
        if not ended.any():
            return node
        node = np.where(ended, tree.parent[node], node)


def op_labels(table: TraceTable, records: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Display label of the op of each record row: "<parent> (aten::empty...)" for empty ops,
    as the reference shows them, "<unknown>" for records outside any operator."""
    op = records["op"].to_numpy()[rows]
    parent = records["parent"].to_numpy()[rows]
    if len(rows) == 0:
        return np.empty(0, dtype=object)
    names = np.append(build_op_tree(table).names, UNKNOWN_OP)  # index -1: no node
    label = names[op].astype(object)
    empty = (op >= 0) & (parent >= 0) & pd.Series(label).str.startswith("aten::empty").to_numpy()
    label[empty] = names[parent[empty]] + " (" + label[empty] + ")"
    return label


def devices_of(records: pd.DataFrame) -> list[str]:
    present = set(records["device"].dropna().unique())
    return [d for d in records["device"].cat.categories if d in present]


#: Accelerators in the order the Memory view prefers to show them first.
ACCELERATORS = ("GPU", "HIP", "XPU", "MPS", "MTIA", "HPU", "PrivateUse1", "MAIA", "XLA")


def default_device(devices: list[str]) -> Optional[str]:
    """The first accelerator (CUDA GPU, then HIP, XPU, MPS, MTIA, HPU, PrivateUse1, ...), else
    CPU, else the first device (spec 1.6, generalised to every device type)."""
    for kind in ACCELERATORS:
        found = [d for d in devices if d.startswith(kind) and d[len(kind):][:1].isdigit()
                 or d.startswith(kind + ":")]
        if found:
            return found[0]
    return "CPU" if "CPU" in devices else (devices[0] if devices else None)


# --- alloc/free pairs ----------------------------------------------------------------------

def memory_pairs(table: TraceTable) -> pd.DataFrame:
    """Allocations with their release, plus releases of unknown allocations, computed once.

    Columns: device, alloc (record row, -1 for a release without allocation), free (record
    row, -1 while still allocated), bytes (> 0), t_alloc, t_free (NaN when absent).
    """
    return memoised(table, "memory_pairs", lambda: _memory_pairs(memory_records(table)))


def _memory_pairs(records: pd.DataFrame) -> pd.DataFrame:
    rows = np.flatnonzero(records["addr"].notna().to_numpy() & (records["bytes"] != 0))
    device = records["device"].cat.codes.to_numpy()
    addr = records["addr"].to_numpy()
    size = records["bytes"].to_numpy()
    # group by (device, address); within a group records stay in time order (row order)
    s = rows[np.lexsort((rows, addr[rows], device[rows]))]
    same_next = (device[s[1:]] == device[s[:-1]]) & (addr[s[1:]] == addr[s[:-1]])
    paired = same_next & (size[s[:-1]] > 0) & (size[s[1:]] < 0)
    free_of = np.full(len(s), -1, dtype=np.int64)
    free_of[:-1][paired] = s[1:][paired]
    is_alloc = size[s] > 0
    claimed = np.zeros(len(s), dtype=bool)
    claimed[1:] = paired
    orphan = s[~is_alloc & ~claimed]
    allocs, frees = s[is_alloc], free_of[is_alloc]
    ts = records["ts"].to_numpy()
    alloc_rows = np.concatenate((allocs, np.full(len(orphan), -1)))
    free_rows = np.concatenate((frees, orphan))
    key = np.where(alloc_rows >= 0, alloc_rows, free_rows)
    order = np.argsort(key, kind="stable")
    alloc_rows, free_rows, key = alloc_rows[order], free_rows[order], key[order]
    return pd.DataFrame({
        "device": pd.Categorical.from_codes(device[key], records["device"].cat.categories)
        if len(key) else pd.Categorical([], categories=records["device"].cat.categories),
        "alloc": alloc_rows,
        "free": free_rows,
        "bytes": np.abs(size[key]),
        "t_alloc": np.where(alloc_rows >= 0, ts[np.maximum(alloc_rows, 0)], np.nan),
        "t_free": np.where(free_rows >= 0, ts[np.maximum(free_rows, 0)], np.nan),
    })


def event_rows(table: TraceTable, device: Optional[str] = None, start_us: Optional[float] = None,
               end_us: Optional[float] = None, limit: Optional[int] = None
               ) -> tuple[list[dict[str, Any]], int]:
    """Alloc/free pairs whose allocation or release lies in [start, end] (inclusive), in time
    order, and how many there are; with `limit`, only the `limit` largest are returned."""
    records, pairs = memory_records(table), memory_pairs(table)
    if device is not None:
        pairs = pairs[pairs["device"] == device]
    t_alloc, t_free = pairs["t_alloc"].to_numpy(), pairs["t_free"].to_numpy()
    keep = in_window(t_alloc, start_us, end_us) | in_window(t_free, start_us, end_us)
    pairs = pairs[keep]
    total = len(pairs)
    if limit is not None and total > limit:
        largest = np.argsort(-pairs["bytes"].to_numpy(), kind="stable")[:limit]
        pairs = pairs.iloc[np.sort(largest)]
    labelled = np.where(pairs["alloc"] >= 0, pairs["alloc"], pairs["free"]).astype(np.int64)
    label = op_labels(table, records, labelled)
    label = np.where(pairs["alloc"].to_numpy() >= 0, label, UNKNOWN_OP)  # frees get no op
    frame = pd.DataFrame({
        "device": pairs["device"].astype(str).to_numpy(),
        "op": label,
        "bytes": pairs["bytes"].to_numpy().astype(np.int64),
        "alloc_t_us": rounded(pairs["t_alloc"].to_numpy()),
        "free_t_us": rounded(pairs["t_free"].to_numpy()),
        "duration_us": rounded(pairs["t_free"].to_numpy() - pairs["t_alloc"].to_numpy()),
    })
    return records_json(frame), total


def in_window(t: np.ndarray, start: Optional[float], end: Optional[float]) -> np.ndarray:
    ok = np.isfinite(t)
    if start is not None:
        ok &= t >= start
    if end is not None:
        ok &= t <= end
    return ok


def rounded(values: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(values, dtype=np.float64), 3)


def records_json(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts of plain Python values, NaN as None (column-wise `tolist`, no per-cell
    pandas boxing)."""
    columns = []
    for name in frame.columns:
        values = frame[name].to_numpy()
        if values.dtype.kind == "f":
            values = np.where(np.isnan(values), None, values.astype(object))
        columns.append(values.tolist())
    keys = list(frame.columns)
    return [dict(zip(keys, row)) for row in zip(*columns)]
