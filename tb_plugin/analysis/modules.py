"""Module view (spec 3.13): the nn.Module hierarchy with per-module stats, a flame graph, and the
backward time of each module (spec 3.4, `fwdbwd` flows).

Hierarchy. A module call is a `python_function` event with a "Python module id" (named
`nn.Module: <Cls>[_<n>]`). Its parent module call is its nearest module ancestor in the Python
call graph ("Python id" / "Python parent id"), found for all calls at once by pointer jumping.
Calls are then merged by *path* of (name, module id) from the root, level by level: identical
subtrees (every training step calls the same modules) collapse into one row, and so do shared
paths of slightly different subtrees (their children are united). Lightning traces use the
`[pl][module]<type>: <name>` operators instead, nested by their dotted names (spec 3.13).

Stats come from the module nodes of the operator tree (`optree`), joined by event row: per row,
occurrences, direct operator children, host/device total and self time. Unlike the reference,
stats are per hierarchy row (per path), not per (name, module id) over the whole trace: the two
agree unless one module instance is called from two places, where per-path stats keep children
within their parent. A hierarchy call with no tree node (an incomplete event...) is counted in
`occurrences` but not in the times, and the payload says so instead of raising (reference 12f).

Backward. A `fwdbwd` flow links a forward op (`s`, at its start) to the backward op it produced
(`f`). The forward op's nearest enclosing module owns the backward pass's top-level
`autograd::engine::evaluate_function: ...` op containing the `f` end, plus the AccumulateGrad ops
that directly follow it (grouping as in spec 3.4). The reference only looked at a module's
*direct* operator children, which in PyTorch 2.x misses most flows (they start on nested ops such
as `aten::convolution` under `aten::conv2d`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable
from ..views.modules.payload import ModulesPayload
from .memo import memoised
from .node_kinds import NodeKind
from .optree import OpTree, build_op_tree

MODULE_PREFIX = "nn.Module: "
PL_MODULE_PREFIX = "[pl][module]"
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
ACCUMULATE_GRAD = BACKWARD_PREFIX + "torch::autograd::AccumulateGrad"
MODULE_KINDS = (NodeKind.MODULE, NodeKind.PL_MODULE)
_MAX_JUMPS = 64  # pointer-jumping rounds: covers call depths up to 2**64; more means a cycle
NO_MODULES = ("This trace has no module events: record with torch.profiler "
              "with_stack=True and with_modules=True (PyTorch 1.10+) to get the Module view.")


# --- backward attribution --------------------------------------------------------------------

@dataclass
class BackwardAttribution:
    """Backward-pass ops of a trace and the forward module instance each is attributed to."""

    roots: np.ndarray  # optree nodes: top-level `evaluate_function:` ops, in pre-order
    module: np.ndarray  # per root: the forward module node owning it, -1 if unattributed
    pairs: int  # fwdbwd flow pairs (s and f) in the trace
    matched: int  # pairs whose forward op sits in a module and whose backward op was found

    def per_module(self, tree: OpTree) -> tuple[np.ndarray, np.ndarray]:
        """Backward (host, device) time attributed directly to each node (module nodes only)."""
        ok = self.module >= 0
        owner, roots = self.module[ok], self.roots[ok]
        host = np.bincount(owner, weights=tree.host_total[roots], minlength=len(tree))
        device = np.bincount(owner, weights=tree.device_total[roots], minlength=len(tree))
        return host, device


def backward_attribution(table: TraceTable) -> BackwardAttribution:
    """Which module's forward pass produced each backward op, computed once per table."""
    return memoised(table, "module_backward", lambda: _attribute_backward(table,
                                                                     build_op_tree(table)))


def _attribute_backward(table: TraceTable, tree: OpTree) -> BackwardAttribution:
    flagged = _name_flags(tree, lambda n: n.startswith(BACKWARD_PREFIX))
    roots = np.flatnonzero(flagged & (_flagged_ancestors(tree, flagged) == 0))
    group = _backward_groups(tree, roots)
    fwd, bwd = _flow_ends(table, tree)
    module = nearest(tree, fwd, np.isin(tree.kind, MODULE_KINDS))
    is_backward_root = np.zeros(len(tree), dtype=bool)
    is_backward_root[roots] = True
    top = nearest(tree, bwd, is_backward_root)
    ok = (module >= 0) & (top >= 0)
    # a group goes to the module of its first flow (pairs are in forward time order)
    root_index = np.searchsorted(roots, top[ok])
    groups, first = np.unique(group[root_index], return_index=True)
    group_module = np.full(int(group.max(initial=-1)) + 1, -1, dtype=np.int64)
    group_module[groups] = module[ok][first]
    owner = group_module[group] if len(roots) else np.zeros(0, dtype=np.int64)
    return BackwardAttribution(roots=roots, module=owner, pairs=len(fwd), matched=int(ok.sum()))


def _name_flags(tree: OpTree, predicate: Callable[[str], bool]) -> np.ndarray:
    """`predicate(name)` per node, evaluated once per distinct name (roots: False)."""
    cats = tree.name_categories
    flags = np.fromiter((bool(predicate(str(c))) for c in cats), dtype=bool, count=len(cats))
    return np.append(flags, False)[tree.name_code]


def _flagged_ancestors(tree: OpTree, flagged: np.ndarray) -> np.ndarray:
    """Number of flagged strict ancestors of every node (subtree slices as +1/-1 marks)."""
    idx = np.flatnonzero(flagged)
    marks = np.zeros(len(tree) + 1, dtype=np.int64)
    np.add.at(marks, idx + 1, 1)
    np.add.at(marks, tree.subtree_end[idx], -1)
    return np.cumsum(marks)[:-1]


def _backward_groups(tree: OpTree, roots: np.ndarray) -> np.ndarray:
    """Group number per backward root: an AccumulateGrad joins the group before it (3.4)."""
    if len(roots) == 0:
        return np.zeros(0, dtype=np.int64)
    accumulate = _name_flags(tree, lambda n: n == ACCUMULATE_GRAD)[roots]
    thread = tree.thread[roots]
    starts = ~accumulate | np.concatenate(([True], thread[1:] != thread[:-1]))
    starts[0] = True
    return np.cumsum(starts) - 1


def _flow_ends(table: TraceTable, tree: OpTree) -> tuple[np.ndarray, np.ndarray]:
    """Tree nodes at the forward (`s`) and backward (`f`) ends of each fwdbwd pair, in forward
    time order (-1 where an end's thread has no tree)."""
    flows = table.flows
    keep = (flows["cat"] == "fwdbwd").to_numpy() & np.isfinite(flows["id"].to_numpy())
    flows = flows[keep]  # (categorical compares: no per-row strings)
    ends = [flows[(flows["ph"] == ph).to_numpy()].drop_duplicates("id") for ph in ("s", "f")]
    pairs = ends[0].merge(ends[1], on="id", suffixes=("_s", "_f")).sort_values("ts_s")
    nodes = []
    for suffix in ("_s", "_f"):
        thread = pd.Index(tree.tids).get_indexer(pairs["tid" + suffix].astype(str))
        nodes.append(node_at(tree, thread, pairs["ts" + suffix].to_numpy(dtype=np.float64)))
    return nodes[0], nodes[1]


def node_at(tree: OpTree, thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The deepest node of each `thread` open at `ts` (the last one starting there wins); the
    thread's root when none is; -1 for thread -1."""
    roots = tree.roots
    node = np.full(len(ts), -1, dtype=np.int64)
    for g in np.unique(thread[thread >= 0]):
        root = roots[g]
        lo, hi = root + 1, tree.subtree_end[root]
        sel = np.flatnonzero(thread == g)
        pos = np.searchsorted(tree.start[lo:hi], ts[sel], "right") - 1 + lo
        node[sel] = np.where(pos >= lo, pos, root)
    while True:
        n = np.maximum(node, 0)
        closed = ((node >= 0) & (tree.parent[n] >= 0) & (tree.end[n] <= ts)
                  & (tree.start[n] < ts))
        if not closed.any():
            return node
        node = np.where(closed, tree.parent[n], node)


def nearest(tree: OpTree, nodes: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The nearest ancestor-or-self of each node with `target` set, else -1."""
    node = nodes.astype(np.int64, copy=True)
    while True:
        n = np.maximum(node, 0)
        up = (node >= 0) & ~target[n]
        if not up.any():
            return node
        node = np.where(up, tree.parent[n], node)


# --- hierarchy -------------------------------------------------------------------------------

@dataclass
class Hierarchy:
    """Merged module rows and the module calls (events) behind them."""

    name: list[str]  # display name per row
    module_id: np.ndarray
    parent: np.ndarray  # row, -1 for top-level rows
    depth: np.ndarray
    module_type: Optional[list[str]]  # Lightning: the module class per row
    call_row: np.ndarray  # per call: its row
    call_node: np.ndarray  # per call: its op-tree node, -1 when the tree has none
    call_start: np.ndarray
    source: str  # "python_function" or "lightning"
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.name)


def module_hierarchy(table: TraceTable) -> Optional[Hierarchy]:
    """The module rows of a trace (None without module events), computed once."""
    return memoised(table, "module_hierarchy", lambda: _hierarchy(table, build_op_tree(table)))


def _hierarchy(table: TraceTable, tree: OpTree) -> Optional[Hierarchy]:
    if table.metadata.framework == "pytorch-lightning":
        return _lightning_hierarchy(tree)
    return _python_hierarchy(table, tree)


def _python_hierarchy(table: TraceTable, tree: OpTree) -> Optional[Hierarchy]:
    events = table.events
    args = table.python_args.drop_duplicates("event")
    rows = args["event"].to_numpy()
    python = events["kind"].to_numpy()[rows] == Kind.PYTHON_FUNCTION
    args, rows = args[python], rows[python]
    is_module = np.isfinite(args["python_module_id"].to_numpy())
    if not is_module.any():
        return None
    warnings: list[str] = []
    parent = _python_parents(args["python_id"].to_numpy(), args["python_parent_id"].to_numpy(),
                             warnings)
    up = _nearest_marked(parent, is_module, warnings)
    calls = np.flatnonzero(is_module)
    call_index = np.full(len(rows), -1, dtype=np.int64)
    call_index[calls] = np.arange(len(calls))
    call_parent = np.where(up[calls] >= 0, call_index[np.maximum(up[calls], 0)], -1)
    names = events["name"]
    codes = names.cat.codes.to_numpy()[rows[calls]]
    module_id = args["python_module_id"].to_numpy()[calls].astype(np.int64)
    start = events["ts"].to_numpy()[rows[calls]]
    merged = _merge_paths(call_parent, codes, module_id, warnings)
    row_codes, row_ids, row_parent, row_depth, call_row = merged
    labels = [_strip(str(names.cat.categories[c])) if c >= 0 else "" for c in row_codes]
    return Hierarchy(name=labels, module_id=row_ids, parent=row_parent, depth=row_depth,
                     module_type=None, call_row=call_row,
                     call_node=_node_of_events(tree, rows[calls]), call_start=start,
                     source="python_function", warnings=warnings)


def _strip(name: str) -> str:
    return name[len(MODULE_PREFIX):] if name.startswith(MODULE_PREFIX) else name


def _python_parents(ids: np.ndarray, parent_ids: np.ndarray, warnings: list[str]) -> np.ndarray:
    """Index of each Python call's parent call, -1 for roots and unknown parents."""
    valid = np.flatnonzero(np.isfinite(ids))
    unique_ids, first = np.unique(ids[valid], return_index=True)
    if len(unique_ids) < len(valid):
        warnings.append("Some Python ids repeat; the first call with each id is used.")
    if len(unique_ids) == 0:
        return np.full(len(ids), -1, dtype=np.int64)
    pos = np.clip(np.searchsorted(unique_ids, parent_ids), 0, len(unique_ids) - 1)
    found = np.isfinite(parent_ids) & (unique_ids[pos] == parent_ids)
    return np.where(found, valid[first[pos]], -1)


def _nearest_marked(parent: np.ndarray, marked: np.ndarray, warnings: list[str]) -> np.ndarray:
    """Each node's nearest marked strict ancestor (-1 if none), by pointer jumping: a pointer
    to an unmarked node is replaced by that node's pointer, doubling the distance per round."""
    up = parent.copy()
    for _ in range(_MAX_JUMPS):
        pending = (up >= 0) & ~marked[np.maximum(up, 0)]
        if not pending.any():
            return up
        up = np.where(pending, up[np.maximum(up, 0)], up)
    warnings.append("The Python parent ids form a cycle; the modules on it are shown as roots.")
    return np.where((up >= 0) & ~marked[np.maximum(up, 0)], -1, up)


def _merge_paths(call_parent: np.ndarray, codes: np.ndarray, module_id: np.ndarray,
                 warnings: list[str]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Merge calls with the same path of (name, module id) into rows, one level at a time.

    Returns per row (name code, module id, parent row, depth) and per call its row."""
    call_parent, depth = _forest(call_parent, warnings)
    call_row = np.full(len(codes), -1, dtype=np.int64)
    levels: list[np.ndarray] = []  # per level: unique (parent row, name code, module id) keys
    for level in range(int(depth.max(initial=-1)) + 1):
        calls = np.flatnonzero(depth == level)
        parent_row = np.where(call_parent[calls] >= 0, call_row[call_parent[calls]], -1)
        keys = np.stack((parent_row, codes[calls].astype(np.int64), module_id[calls]), axis=1)
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        call_row[calls] = sum(len(k) for k in levels) + inverse.ravel()
        levels.append(unique)
    rows = np.concatenate(levels) if levels else np.zeros((0, 3), dtype=np.int64)
    row_depth = np.repeat(np.arange(len(levels)), [len(k) for k in levels])
    return rows[:, 1], rows[:, 2], rows[:, 0], row_depth, call_row


def _forest(parent: np.ndarray, warnings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(parent, depth) of a forest given as parent indices, depths by pointer jumping (list
    ranking); nodes on or under a cycle of malformed ids become roots."""
    up, depth = parent.copy(), (parent >= 0).astype(np.int64)
    for _ in range(_MAX_JUMPS):
        live = up >= 0
        if not live.any():
            return parent, depth
        at = np.maximum(up, 0)
        depth, up = np.where(live, depth + depth[at], depth), np.where(live, up[at], up)
    warnings.append("Module calls form a cycle (malformed Python ids); they are shown as roots.")
    parent = np.where(up >= 0, -1, parent)
    return _forest(parent, warnings)


def _node_of_events(tree: OpTree, rows: np.ndarray) -> np.ndarray:
    """Op-tree node of each event row, -1 when the event is not a tree node."""
    nodes = np.flatnonzero(tree.event >= 0)
    lookup = pd.Series(nodes, index=tree.event[nodes])
    return lookup.reindex(rows).fillna(-1).to_numpy(dtype=np.int64)


def _lightning_hierarchy(tree: OpTree) -> Optional[Hierarchy]:
    """Rows from `[pl][module]<type>: <name>` ops; a row's parent is its nearest dotted-name
    prefix that is itself a module (`layer.0` under `layer`); module ids are 0."""
    calls = np.flatnonzero(tree.kind == NodeKind.PL_MODULE)
    if len(calls) == 0:
        return None
    cats = tree.name_categories
    parsed = [_split_pl(str(c)) for c in cats]
    types, names = zip(*parsed) if parsed else ((), ())
    call_names = np.asarray(names, dtype=object)[tree.name_code[calls]]
    row_names, call_row = np.unique(call_names.astype(str), return_inverse=True)
    index = {n: i for i, n in enumerate(row_names)}
    parent = np.asarray([_dotted_parent(n, index) for n in row_names], dtype=np.int64)
    parent, depth = _forest(parent, [])  # dotted prefixes are shorter: never a cycle
    row_type = {n: types[c] for n, c in zip(call_names, tree.name_code[calls])}
    return Hierarchy(name=[str(n) for n in row_names],
                     module_id=np.zeros(len(row_names), dtype=np.int64), parent=parent,
                     depth=depth, module_type=[row_type[n] for n in row_names],
                     call_row=call_row.ravel(), call_node=calls, call_start=tree.start[calls],
                     source="lightning")


def _split_pl(name: str) -> tuple[str, str]:
    """`[pl][module]<type>: <name>` -> (type, name); other names -> ("", name)."""
    if not name.startswith(PL_MODULE_PREFIX):
        return "", name
    module_type, _, module_name = name[len(PL_MODULE_PREFIX):].partition(": ")
    return module_type, module_name


def _dotted_parent(name: str, index: dict[str, int]) -> int:
    while "." in name:
        name = name[:name.rfind(".")]
        if name in index:
            return index[name]
    return -1


# --- stats and payload -----------------------------------------------------------------------

def _row_stats(tree: OpTree, h: Hierarchy, backward: Optional[BackwardAttribution]
               ) -> dict[str, np.ndarray]:
    """Per-row sums over the row's calls that have a tree node."""
    n = len(h)
    has = h.call_node >= 0
    rows, nodes = h.call_row[has], h.call_node[has]
    nonroot = tree.parent >= 0
    op_children = np.bincount(tree.parent[nonroot & tree.is_operator], minlength=len(tree))
    per_node = {"host_total_us": tree.host_total, "host_self_us": tree.host_self,
                "device_total_us": tree.device_total, "device_self_us": tree.device_self,
                "operators": op_children}
    if backward is not None:
        host, device = backward.per_module(tree)
        per_node.update(backward_self_host_us=host, backward_self_device_us=device)
    out = {key: np.bincount(rows, weights=values[nodes], minlength=n)
           for key, values in per_node.items()}
    out["occurrences"] = np.bincount(h.call_row, minlength=n)
    out["missing"] = np.bincount(h.call_row[~has], minlength=n)
    if backward is not None:  # a module's backward includes its submodules' backward
        out["backward_host_us"] = _subtree_sums(h, out["backward_self_host_us"])
        out["backward_device_us"] = _subtree_sums(h, out["backward_self_device_us"])
    return out


def _subtree_sums(h: Hierarchy, values: np.ndarray) -> np.ndarray:
    total = values.astype(np.float64, copy=True)
    for level in range(int(h.depth.max(initial=0)), 0, -1):
        rows = np.flatnonzero((h.depth == level) & (h.parent >= 0))
        np.add.at(total, h.parent[rows], total[rows])
    return total


def _row_order(h: Hierarchy) -> tuple[list[int], dict[int, list[int]]]:
    """Top-level rows sorted by name (as the reference), children in order of first call."""
    first = np.full(len(h), np.inf)
    np.minimum.at(first, h.call_row, h.call_start)
    children: dict[int, list[int]] = {}
    for row in np.lexsort((np.arange(len(h)), first)):
        children.setdefault(int(h.parent[row]), []).append(int(row))
    top = sorted(children.get(-1, []), key=lambda r: (h.name[r], int(h.module_id[r])))
    return top, children


def _row_json(h: Hierarchy, stats: dict[str, np.ndarray], row: int, key: str,
              has_backward: bool) -> dict[str, Any]:
    occurrences = int(stats["occurrences"][row])
    counted = max(occurrences - int(stats["missing"][row]), 1)
    host, device = stats["host_total_us"][row], stats["device_total_us"][row]
    out: dict[str, Any] = {
        "key": key,
        "name": h.name[row],
        "module_id": int(h.module_id[row]),
        "occurrences": occurrences,
        "operators": int(stats["operators"][row]),
        "host_total_us": round(float(host), 3),
        "host_self_us": round(float(stats["host_self_us"][row]), 3),
        "device_total_us": round(float(device), 3),
        "device_self_us": round(float(stats["device_self_us"][row]), 3),
        # the reference's avg_duration: mean device total if any, else mean host total
        "avg_duration_us": round(float(device if device > 0 else host) / counted, 3),
    }
    if h.module_type is not None:
        out["module_type"] = h.module_type[row]
    if has_backward:
        out["backward_host_us"] = round(float(stats["backward_host_us"][row]), 3)
        out["backward_device_us"] = round(float(stats["backward_device_us"][row]), 3)
    if stats["missing"][row]:
        out["missing_calls"] = int(stats["missing"][row])
    return out


def _tree_json(h: Hierarchy, stats: dict[str, np.ndarray], has_backward: bool,
               has_device: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(table rows with nested "children", flame graph roots {name, module_id, value,
    children}); the flame value is total device time when the trace has any, else host."""
    top, children = _row_order(h)
    value_key = "device_total_us" if has_device else "host_total_us"

    def build(row: int, key: str) -> tuple[dict[str, Any], dict[str, Any]]:
        table_row = _row_json(h, stats, row, key, has_backward)
        flame = {"name": table_row["name"], "module_id": table_row["module_id"],
                 "value": table_row[value_key]}
        kids = [build(c, f"{key}-{i}") for i, c in enumerate(children.get(row, []))]
        table_row["children"] = [k[0] for k in kids]
        flame["children"] = [k[1] for k in kids]
        return table_row, flame

    built = [build(row, str(i)) for i, row in enumerate(top)]
    return [b[0] for b in built], [b[1] for b in built]


def build_modules(table: TraceTable) -> ModulesPayload:
    """The Module view of one trace, computed once.

    ```
    {"available": bool,
     "message": str,            # only when unavailable, or when stats are incomplete
     "source": "python_function" | "lightning",
     "has_device": bool,        # any module ran device work
     "has_backward": bool,      # fwdbwd flows attributed backward ops to modules
     "rows": [{"key": "0-1", "name": "Conv2d_0", "module_id": 0, ["module_type" (Lightning)],
               "occurrences", "operators", "host_total_us", "host_self_us", "device_total_us",
               "device_self_us", "avg_duration_us", ["backward_host_us", "backward_device_us"],
               ["missing_calls"], "children": [rows]}],
     "flamegraph": [{"name", "module_id", "value": us, "children": [...]}],  # one per root
     "backward": {"pairs", "matched", "attributed_ops", "unattributed_ops"},
     "warnings": [str]}
    ```
    Times are totals over all calls of a row (us, 3 decimals); names lose "nn.Module: ".
    """
    return memoised(table, "modules", lambda: _build_modules(table))


def _build_modules(table: TraceTable) -> dict[str, Any]:
    tree = build_op_tree(table)
    h = module_hierarchy(table)
    if h is None or len(h) == 0:
        message = (NO_MODULES if table.metadata.framework != "pytorch-lightning" else
                   "This Lightning trace has no [pl][module] events.")
        return {"available": False, "message": message, "rows": [], "flamegraph": []}
    backward = backward_attribution(table)
    has_backward = bool((backward.module >= 0).any())
    stats = _row_stats(tree, h, backward if has_backward else None)
    has_device = bool((stats["device_total_us"] > 0).any())
    rows, flame = _tree_json(h, stats, has_backward, has_device)
    out: dict[str, Any] = {
        "available": True, "source": h.source, "has_device": has_device,
        "has_backward": has_backward, "rows": rows, "flamegraph": flame,
        "backward": {"pairs": backward.pairs, "matched": backward.matched,
                     "attributed_ops": int((backward.module >= 0).sum()),
                     "unattributed_ops": int((backward.module < 0).sum())},
        "warnings": list(h.warnings),
    }
    missing = int(stats["missing"].sum())
    if missing:
        out["message"] = (f"{missing} of {len(h.call_row)} module calls have no node in the "
                          "operator tree (incomplete or malformed events); they count in "
                          "occurrences but not in the times.")
        out["warnings"].append(out["message"])
    return out
