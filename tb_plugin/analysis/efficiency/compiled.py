"""torch.compile attribution: compiled regions -> their Inductor kernels -> device time.

A region is a `Torch-Compiled Region: <frame>/<compile id>` op (TorchDynamo's graph; the
backward graph runs as `CompiledFunctionBackward`), or a `## Call CompiledFxGraph <hash> ##`
annotation (Inductor's compiled graph called directly, as vLLM does, without a Dynamo frame)
that no Dynamo region encloses (inside one it is the same work, counted once, by the Dynamo
region). Inside it, on the operator tree:

- Inductor kernels: ops carrying `kernel_file` (Triton launches record `kernel_file`,
  `kernel_hash`, `kernel_backend`), and Inductor's C++ kernels (`cpp_fused_*`, recorded when
  `TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1`), whose source file is the generated wrapper module
  (`.../torchinductor_<user>/xx/<hash>.py`, holding the C++ source) seen as the enclosing
  `python_function` frame when stacks were recorded. The eager ops Inductor replaced are visible
  in the kernel's name (`triton_red_fused_add_mean_mul_pow_rsqrt_0` fused add, mean, mul, pow,
  rsqrt): `fused`.
- Extern ops: the outermost `aten::` ops the compiled graph still calls (mm, attention...).
- Host overhead: the guard check (`TorchDynamo Cache Lookup` right before the region on the same
  thread) and the kernel launch calls (runtime/driver `*Launch*`) made inside the region.
- Device time: kernels launched from inside the region (by correlation, through the op tree).

Everything is vectorised over the op tree's pre-order arrays; names are tested once per
distinct name.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ...ingest.schema import Kind, TraceTable
from ..events import category_flags
from ..memo import memoised
from ..node_kinds import FX_GRAPH_RE
from ..optree import OpTree, build_op_tree

REGION_RE = re.compile(r"^Torch-Compiled Region|^CompiledFunctionBackward$")
GUARD_NAME = "TorchDynamo Cache Lookup"
CPP_KERNEL_RE = re.compile(r"(?:^|_)cpp_fused_\w+")
INDUCTOR_FRAME_RE = re.compile(r"^(?P<file>.*torchinductor_[^/\\]*[/\\].*\.py)\((?P<line>\d+)\)")
_FUSED_RE = re.compile(r"(?:triton|cpp)_(?:[a-z]+_)?fused_(?P<ops>\w+?)(?:_\d+)?$")


def fused_ops(kernel: str) -> str:
    """What an Inductor kernel name says it fused, as written: `triton_poi_fused_add_cos_sin_0`
    -> "add_cos_sin" (op names are joined by `_` and may contain `_` themselves, so the text is
    not split); "" when the name says nothing."""
    match = _FUSED_RE.search(re.sub(r"^graph_\d+_", "", kernel))
    return match.group("ops") if match else ""


def enclosing(tree: OpTree, mask: np.ndarray) -> np.ndarray:
    """Per node: the nearest ancestor-or-self with `mask`, -1 when none (pre-order arrays)."""
    n = len(tree)
    idx = np.arange(n)
    owner = np.maximum.accumulate(np.where(mask, idx, -1)) if n else idx
    parent = tree.parent.astype(np.int64)
    for _ in range(64):  # one round per level of nested masked nodes
        bad = (owner >= 0) & (tree.subtree_end[np.maximum(owner, 0)] <= idx)
        if not bad.any():
            break
        up = parent[owner[bad]]
        owner[bad] = np.where(up >= 0, owner[np.maximum(up, 0)], -1)
    return owner


def compiled_frame(table: TraceTable) -> dict[str, Any]:
    """The region instances, their kernel ops and extern ops as frames (computed once)."""
    return memoised(table, "compiled_regions", lambda: _compiled(table))


def _node_args(table: TraceTable, tree: OpTree) -> pd.DataFrame:
    args = table.op_args.drop_duplicates("event").set_index("event")
    return args.reindex(tree.event)[["kernel_file", "kernel_hash", "kernel_backend"]]


def _compiled(table: TraceTable) -> dict[str, Any]:
    tree = build_op_tree(table)
    events = table.events
    is_dynamo = _name_flags(tree, lambda n: bool(REGION_RE.match(n)))
    is_fx = _name_flags(tree, lambda n: bool(FX_GRAPH_RE.match(n)))
    is_region = is_dynamo | (is_fx & (enclosing(tree, is_dynamo) < 0))
    region = enclosing(tree, is_region)
    region_nodes = np.flatnonzero(is_region)
    args = _node_args(table, tree)
    has_file = args["kernel_file"].notna().to_numpy()
    is_cpp = _name_flags(tree, lambda n: bool(CPP_KERNEL_RE.search(n)))
    is_kernel = (has_file | is_cpp | _name_flags(tree, lambda n: n.startswith("triton_"))) & (
        region >= 0) & ~is_region
    is_aten = _name_flags(tree, lambda n: n.startswith("aten::")) & (region >= 0)
    above = enclosing(tree, is_aten | is_region)[np.maximum(tree.parent, 0)]
    outer_aten = is_aten & (tree.parent >= 0) & (above >= 0) & is_region[np.maximum(above, 0)]
    # device time and launches per node, then per region
    dev_kernel = events["kind"].to_numpy()[tree.device_rows] == Kind.KERNEL
    dur = np.nan_to_num(events["dur"].to_numpy())
    kernel_rows, kernel_owner = tree.device_rows[dev_kernel], tree.device_owner[dev_kernel]
    device_by_node = np.bincount(kernel_owner, weights=dur[kernel_rows], minlength=len(tree))
    count_by_node = np.bincount(kernel_owner, minlength=len(tree))
    launch_names = category_flags(events["name"], lambda n: "launch" in n.lower(),
                                  tree.launch_rows)
    is_launch = launch_names[tree.launch_rows]
    launch_by_node = np.bincount(tree.launch_owner[is_launch],
                                 weights=dur[tree.launch_rows[is_launch]], minlength=len(tree))
    sub = np.concatenate(([0.0], np.cumsum(device_by_node)))
    sub_count = np.concatenate(([0], np.cumsum(count_by_node)))
    sub_launch = np.concatenate(([0.0], np.cumsum(launch_by_node)))
    ends = tree.subtree_end[region_nodes]
    regions = pd.DataFrame({
        "node": region_nodes,
        "name": _names(tree, region_nodes),
        "host_us": tree.end[region_nodes] - tree.start[region_nodes],
        "device_us": sub[ends] - sub[region_nodes],
        "kernels": sub_count[ends] - sub_count[region_nodes],
        "launch_us": sub_launch[ends] - sub_launch[region_nodes],
        "guard_us": _guards(tree, _name_flags(tree, lambda n: n == GUARD_NAME), region_nodes),
    })
    kernel_nodes = np.flatnonzero(is_kernel)
    files, lines = _sources(table, tree, kernel_nodes, args)
    kernels = pd.DataFrame({
        "node": kernel_nodes,
        "region": _names(tree, region[kernel_nodes]),
        "name": _names(tree, kernel_nodes),
        "file": files,
        "line": lines,
        "hash": args["kernel_hash"].to_numpy(dtype=object)[kernel_nodes],
        "backend": np.where(is_cpp[kernel_nodes], "cpp",
                            args["kernel_backend"].to_numpy(dtype=object)[kernel_nodes]),
        "host_us": tree.end[kernel_nodes] - tree.start[kernel_nodes],
        "device_us": sub[tree.subtree_end[kernel_nodes]] - sub[kernel_nodes],
        "device_kernels": sub_count[tree.subtree_end[kernel_nodes]] - sub_count[kernel_nodes],
    })
    extern_nodes = np.flatnonzero(outer_aten)
    extern = pd.DataFrame({
        "region": _names(tree, region[extern_nodes]),
        "name": _names(tree, extern_nodes),
        "host_us": tree.end[extern_nodes] - tree.start[extern_nodes],
        "device_us": sub[tree.subtree_end[extern_nodes]] - sub[extern_nodes],
    })
    return {"regions": regions, "kernels": kernels, "extern": extern}


def _names(tree: OpTree, nodes: np.ndarray) -> np.ndarray:
    """Names of some nodes (not roots) as an object array."""
    return tree.name_categories.to_numpy(dtype=object)[tree.name_code[nodes]] if len(
        nodes) else np.empty(0, dtype=object)


def _name_flags(tree: OpTree, predicate: Any) -> np.ndarray:
    """`predicate` per node name, tested once per distinct name (roots: False)."""
    cats = tree.name_categories
    flags = np.fromiter((predicate(str(c)) for c in cats), dtype=bool, count=len(cats))
    return np.append(flags, False)[tree.name_code]


def _guards(tree: OpTree, guard: np.ndarray, region_nodes: np.ndarray) -> np.ndarray:
    """Per region node: the duration of the guard check that ends right before it on its
    thread (the `TorchDynamo Cache Lookup` sibling just before it in pre-order), else 0."""
    out = np.zeros(len(region_nodes))
    if not len(region_nodes):
        return out
    guard_nodes = np.flatnonzero(guard)
    if not len(guard_nodes):
        return out
    pos = np.searchsorted(guard_nodes, region_nodes) - 1
    cand = guard_nodes[np.maximum(pos, 0)]
    ok = (pos >= 0) & (tree.thread[cand] == tree.thread[region_nodes]) & (
        tree.end[cand] <= tree.start[region_nodes]) & (tree.parent[cand] == tree.parent[
            region_nodes])
    # only if no other sibling region sits between the guard and this region
    prev_region = np.concatenate(([-1], region_nodes[:-1]))
    ok &= prev_region < cand
    out[ok] = (tree.end[cand] - tree.start[cand])[ok]
    return out


def _sources(table: TraceTable, tree: OpTree, nodes: np.ndarray, args: pd.DataFrame
             ) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel node: its Inductor source file and line (`kernel_file`, line None; else the
    innermost enclosing generated-module `python_function` frame on its thread)."""
    files = args["kernel_file"].to_numpy(dtype=object)[nodes].copy()
    lines = np.full(len(nodes), None, dtype=object)
    missing = np.flatnonzero(pd.isna(files))
    if not len(missing):
        return files, lines
    events = table.events
    frames = np.flatnonzero((events["kind"].to_numpy() == Kind.PYTHON_FUNCTION) & category_flags(
        events["name"], lambda n: bool(INDUCTOR_FRAME_RE.match(n))))
    if not len(frames):
        return files, lines
    ts = events["ts"].to_numpy()
    end = ts + np.nan_to_num(events["dur"].to_numpy())
    tid_codes = events["tid"].cat.codes.to_numpy()
    frame_df = pd.DataFrame({"ts": ts[frames], "end": end[frames], "tid": tid_codes[frames],
                             "row": frames}).sort_values("ts", kind="stable")
    node_events = tree.event[nodes[missing]]
    query = pd.DataFrame({"ts": ts[node_events], "tid": tid_codes[node_events],
                          "pos": missing}).sort_values("ts", kind="stable")
    joined = pd.merge_asof(query, frame_df, on="ts", by="tid", direction="backward")
    pos = joined["pos"].to_numpy()
    inside = joined["row"].notna().to_numpy() & (
        joined["end"].to_numpy() >= end[tree.event[nodes[pos]]])
    rows = joined["row"].to_numpy()[inside].astype(np.int64)
    codes = events["name"].cat.codes.to_numpy()[rows]
    uniq, inverse = np.unique(codes, return_inverse=True)
    parsed = [INDUCTOR_FRAME_RE.match(str(events["name"].cat.categories[c])) for c in uniq]
    file_of = np.array([m.group("file") for m in parsed], dtype=object)
    line_of = np.array([int(m.group("line")) for m in parsed], dtype=object)
    files[pos[inside]] = file_of[inverse]
    lines[pos[inside]] = line_of[inverse]
    return files, lines


def build_compiled(table: TraceTable) -> dict[str, Any]:
    """The Compiled payload: one entry per region name (its instances summed), with its
    Inductor kernels (by name and source) and extern ops (by name); durations in us, 3
    decimals; regions by device time then host time, descending."""
    frames = compiled_frame(table)
    regions, kernels, extern = frames["regions"], frames["kernels"], frames["extern"]
    out = []
    if len(regions):
        summed = regions.groupby("name").agg(
            calls=("node", "size"), host_us=("host_us", "sum"), guard_us=("guard_us", "sum"),
            launch_us=("launch_us", "sum"), device_us=("device_us", "sum"),
            kernels=("kernels", "sum")).reset_index()
        summed = summed.sort_values(["device_us", "host_us", "name"],
                                    ascending=[False, False, True])
        for r in summed.itertuples():
            out.append({"name": r.name, "calls": int(r.calls), "host_us": _us(r.host_us),
                        "guard_us": _us(r.guard_us), "launch_us": _us(r.launch_us),
                        "device_us": _us(r.device_us), "device_kernels": int(r.kernels),
                        "inductor_kernels": _kernel_rows(kernels[kernels["region"] == r.name]),
                        "extern_ops": _extern_rows(extern[extern["region"] == r.name])})
    return {"available": bool(len(regions) or len(kernels)), "regions": out,
            "inductor_kernels": int(len(kernels))}


def _us(value: float) -> float:
    return round(float(value), 3)


def _kernel_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    if not len(frame):
        return []
    keyed = frame.assign(file=frame["file"].fillna(""), hash=frame["hash"].fillna(""),
                         backend=frame["backend"].fillna(""), line=frame["line"].fillna(-1))
    grouped = keyed.groupby(["name", "file", "line", "hash", "backend"], sort=False).agg(
        calls=("node", "size"), host_us=("host_us", "sum"), device_us=("device_us", "sum"),
        device_kernels=("device_kernels", "sum")).reset_index()
    grouped = grouped.sort_values(["device_us", "host_us", "name"],
                                  ascending=[False, False, True])
    return [{"name": r.name, "file": r.file or None,
             "line": int(r.line) if r.line is not None and int(r.line) >= 0 else None,
             "hash": r.hash or None, "backend": r.backend or None, "fused": fused_ops(r.name),
             "calls": int(r.calls), "host_us": _us(r.host_us), "device_us": _us(r.device_us),
             "device_kernels": int(r.device_kernels)} for r in grouped.itertuples()]


def _extern_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    if not len(frame):
        return []
    grouped = frame.groupby("name").agg(
        calls=("name", "size"), host_us=("host_us", "sum"), device_us=("device_us", "sum")
    ).reset_index().sort_values(["device_us", "host_us", "name"],
                                ascending=[False, False, True])
    return [{"name": r.name, "calls": int(r.calls), "host_us": _us(r.host_us),
             "device_us": _us(r.device_us)} for r in grouped.itertuples()]
