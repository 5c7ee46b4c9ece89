"""Memory view (spec 1.6, 3.11): per-device curves, alloc/free pairs, per-operator statistics,
peaks against device capacity and leak flags, from the `[memory]` instants of one trace.

Every record is attributed to the deepest op-tree node (`optree`) that contains its timestamp on
its own thread: one `searchsorted` per thread plus a climb up the parents, one vectorised step
per tree level. Deliberate differences from the reference:
- alloc/free pairs are matched by (device, address), not by address alone (bug 7.9: CPU and GPU
  addresses collide); pairing runs over the whole trace, and a range selects the pairs whose
  allocation or release falls in it;
- any device type gets a name ("XPU0", "MPS0", "device type 7:0") instead of `None` (bug 12e);
- records without `Total Allocated` (PyTorch < 1.10) still draw a curve, rebuilt from the running
  sum of `Bytes` and marked approximate; records without `Addr` only skip the pairing;
- the peak carries the GPU's capacity (`deviceProperties[].totalGlobalMem`, the reference's
  always-empty `totals`, bug 11);
- operator `calls` counts every operator node overlapping the range (the reference skipped the
  subtrees of nodes no record reached, which only ever lowered the count).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import TraceTable
from ..payloads import MemoryPayload
from .launch import device_properties
from .optree import OpTree, build_op_tree
from .steps import compute_steps

#: c10::DeviceType values as written in `Device Type`; CUDA (1) is shown as "GPU<id>".
DEVICE_TYPE_NAMES = {0: "CPU", 1: "GPU", 2: "MKLDNN", 6: "HIP", 8: "MAIA", 9: "XLA", 10: "Vulkan",
                     11: "Metal", 12: "XPU", 13: "MPS", 15: "HPU", 16: "VE", 17: "Lazy",
                     18: "IPU", 19: "MTIA", 20: "PrivateUse1"}
CPU_TYPE, CUDA_TYPE = 0, 1
UNKNOWN_OP = "<unknown>"
#: Curves are down-sampled to at most this many points per device by default.
DEFAULT_MAX_POINTS = 2000
#: A device whose allocated memory at each step end rises over this many steps is flagged...
LEAK_MIN_STEPS = 3
#: ...when the total rise exceeds this many bytes.
LEAK_GROWTH_BYTES = 1 << 20
TOP_LEAK_OPS = 5


class UnknownDeviceError(KeyError):
    """The requested device has no memory records (the server answers 404)."""


# --- records ---------------------------------------------------------------------------------

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
    return table.memo("memory_records", lambda: _memory_records(table))


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


def default_device(devices: list[str]) -> Optional[str]:
    """The first GPU, else CPU, else the first device (spec 1.6, generalised)."""
    gpus = [d for d in devices if d.startswith("GPU")]
    if gpus:
        return gpus[0]
    return "CPU" if "CPU" in devices else (devices[0] if devices else None)


# --- alloc/free pairs ----------------------------------------------------------------------

def memory_pairs(table: TraceTable) -> pd.DataFrame:
    """Allocations with their release, plus releases of unknown allocations, computed once.

    Columns: device, alloc (record row, -1 for a release without allocation), free (record
    row, -1 while still allocated), bytes (> 0), t_alloc, t_free (NaN when absent).
    """
    return table.memo("memory_pairs", lambda: _memory_pairs(memory_records(table)))


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
    keep = _in_window(t_alloc, start_us, end_us) | _in_window(t_free, start_us, end_us)
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
        "alloc_t_us": _rounded(pairs["t_alloc"].to_numpy()),
        "free_t_us": _rounded(pairs["t_free"].to_numpy()),
        "duration_us": _rounded(pairs["t_free"].to_numpy() - pairs["t_alloc"].to_numpy()),
    })
    return _records_json(frame), total


def _in_window(t: np.ndarray, start: Optional[float], end: Optional[float]) -> np.ndarray:
    ok = np.isfinite(t)
    if start is not None:
        ok &= t >= start
    if end is not None:
        ok &= t <= end
    return ok


# --- operator statistics -----------------------------------------------------------------

_STAT_COLUMNS = ("self_increase_bytes", "self_alloc_bytes", "self_alloc_count",
                 "increase_bytes", "alloc_bytes", "alloc_count")


def operator_stats(table: TraceTable, start_us: Optional[float] = None,
                   end_us: Optional[float] = None) -> pd.DataFrame:
    """Per (device, operator name): calls and self/inclusive increase, allocation size and count
    over the records in [start, end] (spec 3.11). Rows with all six metrics zero are dropped."""
    records = memory_records(table)
    columns = ["device", "name", "calls", *_STAT_COLUMNS]
    if len(records) == 0:
        return pd.DataFrame({c: [] for c in columns})
    tree = build_op_tree(table)
    nodes = _window_operators(tree, start_us, end_us)
    names = pd.Series(tree.names[nodes])
    calls = names.value_counts()
    in_range = _in_window(records["ts"].to_numpy(), start_us, end_us) & (records["op"] >= 0)
    in_range &= records["device"].notna().to_numpy()
    frames = [_device_stats(tree, records[in_range & (records["device"] == d)], nodes, names, d)
              for d in devices_of(records[in_range])]
    if not frames:
        return pd.DataFrame({c: [] for c in columns})
    stats = pd.concat(frames, ignore_index=True)
    stats["calls"] = calls.reindex(stats["name"]).fillna(0).astype(np.int64).to_numpy()
    return stats[columns].sort_values(["device", "name"], kind="stable").reset_index(drop=True)


def _window_operators(tree: OpTree, start: Optional[float], end: Optional[float]) -> np.ndarray:
    """Operator nodes overlapping the range (the reference's inclusive node filter)."""
    keep = tree.is_operator.copy()
    if start is not None:
        keep &= ~(tree.end < start)
    if end is not None:
        keep &= ~(tree.start > end)
    return np.flatnonzero(keep)


def _device_stats(tree: OpTree, records: pd.DataFrame, nodes: np.ndarray, names: pd.Series,
                  device: str) -> pd.DataFrame:
    """Self metrics from the node's own records; inclusive ones from its pre-order slice."""
    order = np.argsort(records["op"].to_numpy(), kind="stable")
    owner = records["op"].to_numpy()[order]
    size = records["bytes"].to_numpy()[order]
    alloc = size > 0
    prefix = {
        "increase_bytes": np.concatenate(([0.0], np.cumsum(size))),
        "alloc_bytes": np.concatenate(([0.0], np.cumsum(np.where(alloc, size, 0.0)))),
        "alloc_count": np.concatenate(([0], np.cumsum(alloc))),
    }
    self_lo = np.searchsorted(owner, nodes, side="left")
    self_hi = np.searchsorted(owner, nodes, side="right")
    sub_hi = np.searchsorted(owner, tree.subtree_end[nodes], side="left")
    data: dict[str, Any] = {"device": device, "name": names.to_numpy()}
    for metric, acc in prefix.items():
        data[f"self_{metric}"] = acc[self_hi] - acc[self_lo]
        data[metric] = acc[sub_hi] - acc[self_lo]
    per_node = pd.DataFrame(data)
    grouped = per_node.groupby(["device", "name"], sort=False, as_index=False).sum()
    metrics = grouped[list(_STAT_COLUMNS)].to_numpy()
    return grouped[(metrics != 0).any(axis=1)]


def operator_rows(table: TraceTable, device: Optional[str] = None,
                  start_us: Optional[float] = None, end_us: Optional[float] = None
                  ) -> list[dict[str, Any]]:
    stats = operator_stats(table, start_us, end_us)
    if device is not None:
        stats = stats[stats["device"] == device]
    stats = stats.astype({c: np.int64 for c in _STAT_COLUMNS})
    return _records_json(stats)


# --- curves, peaks ---------------------------------------------------------------------------

def device_curve(records: pd.DataFrame, device: str) -> tuple[np.ndarray, np.ndarray,
                                                              np.ndarray, bool]:
    """(t, allocated, reserved, approximate) of a device, one point per record.

    Uses `Total Allocated`/`Total Reserved` where written; without them (PyTorch < 1.10) the
    allocated curve is the running sum of `Bytes`, lifted so it never goes below zero (memory
    allocated before profiling is unknown), and reserved is NaN.
    """
    mine = records[(records["device"] == device).to_numpy()]
    total = mine["total_allocated"].to_numpy()
    has_total = np.isfinite(total)
    if has_total.any():
        return (mine["ts"].to_numpy()[has_total], total[has_total],
                mine["total_reserved"].to_numpy()[has_total], False)
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


# --- leaks -----------------------------------------------------------------------------------

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


# --- payload ---------------------------------------------------------------------------------

def build_memory(table: TraceTable, device: Optional[str] = None,
                 start_us: Optional[float] = None, end_us: Optional[float] = None,
                 max_points: int = DEFAULT_MAX_POINTS, max_events: Optional[int] = None
                 ) -> MemoryPayload:
    """The memory view of one trace; times are trace us, sizes bytes. `device` restricts the
    curves and tables to one device (`UnknownDeviceError` if it has no records); [start_us,
    end_us] selects a time range; `max_events` caps the alloc/free table (largest first).

    {"devices": [names], "default_device", "time_origin_us", "range_us": [start, end],
     "curves": {dev: {"t_us", "allocated", "reserved", "approximate"}},
     "peaks": {dev: {"bytes", "t_us", "reserved_bytes", "capacity_bytes",
                     "fraction_of_capacity", "approximate"}},
     "events": {"rows": [{device, op, bytes, alloc_t_us, free_t_us, duration_us}], "total",
                "truncated"},
     "operators": {"rows": [{device, name, calls, self_increase_bytes, self_alloc_bytes,
                             self_alloc_count, increase_bytes, alloc_bytes, alloc_count}]},
     "leaks": [{device, kind: "growth", steps, allocated_at_step_end, growth_bytes,
                per_step_bytes, approximate} | {device, kind: "unfreed", count, bytes, top_ops}],
     "messages": [str]}
    """
    records = memory_records(table)
    devices = devices_of(records)
    if device is not None and device not in devices:
        raise UnknownDeviceError(device)
    shown = [device] if device is not None else devices
    events, event_count = event_rows(table, device, start_us, end_us, max_events)
    return {
        "devices": devices,
        "default_device": default_device(devices),
        "time_origin_us": _time_origin(table),
        "range_us": [start_us, end_us],
        "curves": {d: curve_json(records, d, start_us, end_us, max_points) for d in shown},
        "peaks": peaks(table, shown),
        "events": {"rows": events, "total": event_count, "truncated": len(events) < event_count},
        "operators": {"rows": operator_rows(table, device, start_us, end_us)},
        "leaks": leaks(table, shown),
        "messages": _messages(records),
    }


def _time_origin(table: TraceTable) -> Optional[float]:
    """The profiler start (earliest event or memory record), for relative time axes."""
    starts = [table.events["ts"].min(), table.memory["ts"].min()]
    finite = [float(s) for s in starts if s is not None and np.isfinite(s)]
    return min(finite) if finite else None


def _messages(records: pd.DataFrame) -> list[str]:
    messages = []
    if len(records) == 0:
        messages.append("The trace has no memory records (profile_memory=True records them).")
        return messages
    if records["addr"].isna().all():
        messages.append("Memory records have no addresses (PyTorch < 1.10): allocation/release "
                        "pairs are unavailable.")
    if records["total_allocated"].isna().all():
        messages.append("Memory records have no totals (PyTorch < 1.10): curves are rebuilt "
                        "from allocation sizes and start at zero.")
    staled = int((records["op"] < 0).sum())
    if staled:
        messages.append(f"{staled} of {len(records)} memory records happened outside any "
                        "operator and count in no operator's statistics.")
    return messages


def _round(value: float) -> Optional[float]:
    return round(float(value), 3) if math.isfinite(value) else None


def _rounded(values: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(values, dtype=np.float64), 3)


def _floats(values: np.ndarray) -> list[Optional[float]]:
    values = np.round(np.asarray(values, dtype=np.float64), 3)
    return [None if not math.isfinite(v) else v for v in values.tolist()]


def _records_json(frame: pd.DataFrame) -> list[dict[str, Any]]:
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
