"""Diff of two traces (spec 3.14): align their operator trees and compare time per node.

Each side is the *main* thread's tree (the ProfilerStep thread, else the longest one that is not
an autograd backward thread), not the first thread as in the reference (its bug 7.9). The top
level is the children of every ProfilerStep, concatenated (the root's children without steps).
When fwdbwd flows attribute backward ops to modules (see `modules.backward_attribution`), the
attributed `evaluate_function:` ops move under virtual `<module>.backward` nodes, nested like the
modules and placed where the backward ran (spec 3.4); unattributed ones stay where they were
(the reference dropped them).

Alignment, per node pair: scan the left children; each anchor (Backward, DataLoader, Module,
Optimizer, ProfilerStep) pairs with the first right child at or after the cursor with the same
(kind, name). The unmatched runs between pairs become one composite child (a list per side; a
one-element list is that node; an empty side is "Blank"). When no anchor pairs up (inside a
composite, or under an operator) any (kind, name) may pair, so composites and operators can be
drilled into too (the reference stopped there). Children of a pair are recomputed on demand
along the requested `path` ("0", "0-1", ...), so a request costs one root-to-node walk.

Step counts. The root compares whole profiled windows that may hold different numbers of steps,
so its numbers (durations and the operator deltas) are per-step averages (`per_step`); every
other node is one node or one run of nodes and is compared as is. With unequal step counts the
extra steps of the longer side end up in a trailing composite.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Union

import numpy as np
import pandas as pd

from ..ingest.schema import TraceTable
from ..payloads import DiffPayload
from .memo import memoised
from .modules import BACKWARD_PREFIX, MODULE_KINDS, backward_attribution, nearest, node_at
from .node_kinds import NodeKind
from .optree import ROOT_NAME, OpTree, build_op_tree

ANCHOR_KINDS = (NodeKind.DATALOADER, NodeKind.MODULE, NodeKind.PL_MODULE, NodeKind.OPTIMIZER,
                NodeKind.PROFILER_STEP)
BLANK, COMPOSITE, BACKWARD = "Blank", "CompositeNodes", "backward"
_KIND_NAMES = [kind.name.lower() for kind in NodeKind]
_OP_STATS = ("calls", "host_total_us", "host_self_us", "device_total_us", "device_self_us")


class UnknownDiffPathError(KeyError):
    """No diff node at that path: the server answers 404."""


class BackwardNode(NamedTuple):
    """The virtual backward node of one forward module call (an op-tree module node)."""

    module: int


Item = Union[int, BackwardNode]  # an op-tree node, or a virtual backward node


@dataclass
class DiffSide:
    """One trace's main-thread tree as the diff walks it."""

    tree: OpTree
    names: np.ndarray  # per node (object)
    thread: int  # index into tree.tids, -1 for an empty trace
    root: int  # the main thread's root node, -1 for an empty trace
    steps: np.ndarray  # top-level ProfilerStep nodes of the main thread
    removed: np.ndarray  # per node: a backward op moved under a virtual backward node
    inserted: dict[int, list[BackwardNode]] = field(default_factory=dict)  # node -> added
    #: attributed backward ops sorted by owning module node; a module's backward node holds
    #: the ops of every module in its op-tree slice, i.e. one contiguous run of these
    backward_owner: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    backward_ops: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    module_parent: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    device_acc: np.ndarray = field(default_factory=lambda: np.zeros(1))  # cumsum, own device
    inserted_at: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    cross_thread: bool = False  # some moved backward ops ran on another thread
    anchor: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @property
    def tid(self) -> Optional[str]:
        return self.tree.tids[self.thread] if self.thread >= 0 else None

    def top_items(self) -> list[Item]:
        if self.root < 0:
            return []
        if len(self.steps) == 0:
            return self.children(self.root)
        return [item for step in self.steps for item in self.children(int(step))]

    def children(self, item: Item) -> list[Item]:
        if isinstance(item, BackwardNode):
            return self._backward_children(item.module)
        kids = self.tree.children(item)
        found: list[Item] = [int(k) for k in kids[~self.removed[kids]]]
        found += self.inserted.get(item, [])
        return sorted(found, key=self.start)

    def start(self, item: Item) -> float:
        if isinstance(item, BackwardNode):
            return float(self.tree.start[self.backward_of(item.module)].min())
        return float(self.tree.start[item])

    def key(self, item: Item) -> tuple[str, str]:
        if isinstance(item, BackwardNode):
            return BACKWARD, f"{self.names[item.module]}.backward"
        return _KIND_NAMES[self.tree.kind[item]], str(self.names[item])

    def is_anchor(self, item: Item) -> bool:
        return isinstance(item, BackwardNode) or bool(self.anchor[item])

    def ranges(self, item: Item) -> np.ndarray:
        """Pre-order node ranges [lo, hi) making up the item (may overlap), shape (k, 2)."""
        tree = self.tree
        if isinstance(item, BackwardNode):
            roots = self.backward_of(item.module)
            return np.stack((roots, tree.subtree_end[roots]), axis=1)
        out = [np.asarray([[item, tree.subtree_end[item]]])]
        at = self.inserted_at  # backward nodes inserted below (their ops may be elsewhere)
        for parent in at[np.searchsorted(at, item):np.searchsorted(at, tree.subtree_end[item])]:
            out += [self.ranges(node) for node in self.inserted[int(parent)]]
        return np.concatenate(out)

    def host(self, item: Item) -> float:
        if isinstance(item, BackwardNode):
            return float(self.tree.host_total[self.backward_of(item.module)].sum())
        return float(self.tree.host_total[item])

    def backward_of(self, module: int, nested: bool = True) -> np.ndarray:
        """Backward ops of a module call, with those of the modules it called (nested)."""
        owner = self.backward_owner
        end = self.tree.subtree_end[module] if nested else module + 1
        return self.backward_ops[np.searchsorted(owner, module):np.searchsorted(owner, end)]

    def _backward_children(self, module: int) -> list[Item]:
        """Its own backward ops, and the backward nodes of its direct submodules, by start."""
        tree, owner, ops = self.tree, self.backward_owner, self.backward_ops
        span = np.arange(module + 1, tree.subtree_end[module])
        kids = span[self.module_parent[span] == module]
        lo, hi = np.searchsorted(owner, kids), np.searchsorted(owner, tree.subtree_end[kids])
        kids, lo = kids[lo < hi], lo[lo < hi]  # disjoint, increasing runs of ops
        own = self.backward_of(module, nested=False)
        kid_start = np.minimum.reduceat(tree.start[ops], lo) if len(lo) else np.zeros(0)
        items: list[Item] = [int(op) for op in own]
        items += [BackwardNode(int(kid)) for kid in kids]
        order = np.argsort(np.concatenate((tree.start[own], kid_start)), kind="stable")
        return [items[i] for i in order]

    def device(self, item: Item) -> float:
        if not isinstance(item, BackwardNode) and not self.cross_thread:
            return float(self.tree.device_total[item])
        lo, hi = _merged(self.ranges(item))
        return float((self.device_acc[hi] - self.device_acc[lo]).sum())


def diff_side(table: TraceTable) -> DiffSide:
    """The diff view of one trace's main thread, computed once per table."""
    return memoised(table, "diff_side", lambda: _diff_side(table))


def _diff_side(table: TraceTable) -> DiffSide:
    tree = build_op_tree(table)
    thread = main_thread(tree)
    root = int(tree.roots[thread]) if thread >= 0 else -1
    steps = np.flatnonzero((tree.kind == NodeKind.PROFILER_STEP) & (tree.thread == thread))
    top_steps = steps[tree.parent[steps] == root]
    nonroot = tree.parent >= 0
    own = tree.device_total - np.bincount(tree.parent[nonroot], weights=tree.device_total[
        nonroot], minlength=len(tree))
    side = DiffSide(tree=tree, names=tree.names, thread=thread, root=root,
                    steps=top_steps if len(top_steps) else steps,
                    removed=np.zeros(len(tree), dtype=bool),
                    anchor=np.isin(tree.kind, ANCHOR_KINDS),
                    device_acc=np.concatenate(([0.0], np.cumsum(own))))
    if root >= 0:
        _add_backward_nodes(table, side)
    return side


def main_thread(tree: OpTree) -> int:
    """The thread with the most ProfilerSteps; else the longest root span among threads that
    do not start with a backward op (spec 3.4 step 1); -1 when there is no tree."""
    roots = tree.roots
    if len(roots) == 0:
        return -1
    steps = tree.kind == NodeKind.PROFILER_STEP
    if steps.any():
        return int(np.argmax(np.bincount(tree.thread[steps])))
    span = np.nan_to_num(tree.end[roots] - tree.start[roots], nan=-1.0)
    first = np.minimum(roots + 1, len(tree) - 1)
    backward = np.asarray([str(n).startswith(BACKWARD_PREFIX) for n in tree.names[first]])
    backward &= (roots + 1) < tree.subtree_end[roots]
    if not backward.all():
        span = np.where(backward, -np.inf, span)
    return int(np.argmax(span))


def _add_backward_nodes(table: TraceTable, side: DiffSide) -> None:
    """Move attributed backward ops under virtual `<module>.backward` nodes (spec 3.4)."""
    tree = side.tree
    attribution = backward_attribution(table)
    ok = attribution.module >= 0
    if not ok.any():
        return
    roots, owners = attribution.roots[ok], attribution.module[ok]
    side.removed[roots] = True
    side.cross_thread = bool((tree.thread[roots] != side.thread).any())
    order = np.lexsort((roots, owners))
    side.backward_owner, side.backward_ops = owners[order], roots[order]
    is_module = np.isin(tree.kind, MODULE_KINDS)
    side.module_parent = nearest(tree, np.where(tree.parent >= 0, tree.parent, -1), is_module)
    modules = np.flatnonzero(is_module & (side.module_parent < 0))  # top-level module calls
    first = np.searchsorted(side.backward_owner, modules)
    modules = modules[first < np.searchsorted(side.backward_owner, tree.subtree_end[modules])]
    for module, parent in zip(modules.tolist(), _containers(side, modules).tolist()):
        side.inserted.setdefault(parent, []).append(BackwardNode(module))
    side.inserted_at = np.asarray(sorted(side.inserted), dtype=np.int64)


def _containers(side: DiffSide, modules: np.ndarray) -> np.ndarray:
    """The deepest main-thread node (not a moved op) containing each top-level module's
    backward ops (spec 3.4 step 6)."""
    tree = side.tree
    lo = np.searchsorted(side.backward_owner, modules)  # disjoint, increasing runs
    ops = side.backward_ops
    start = np.minimum.reduceat(tree.start[ops], lo) if len(lo) else np.zeros(0)
    end = np.maximum.reduceat(tree.end[ops], lo) if len(lo) else np.zeros(0)
    node = node_at(tree, np.full(len(modules), side.thread), start)
    hidden = _hidden(side)
    while True:
        up = (node != side.root) & (hidden[node] | (tree.end[node] < end))
        if not up.any():
            return node
        node = np.where(up, tree.parent[node], node)


def _hidden(side: DiffSide) -> np.ndarray:
    """Moved backward ops and everything under them."""
    idx = np.flatnonzero(side.removed)
    marks = np.zeros(len(side.tree) + 1, dtype=np.int64)
    np.add.at(marks, idx, 1)
    np.add.at(marks, side.tree.subtree_end[idx], -1)
    return np.cumsum(marks)[:-1] > 0


def _merged(ranges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [lo, hi) index ranges as disjoint (lo, hi) arrays."""
    if len(ranges) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ranges = ranges[np.argsort(ranges[:, 0], kind="stable")]
    lo, hi = ranges[:, 0], np.maximum.accumulate(ranges[:, 1])
    new = np.concatenate(([True], lo[1:] >= hi[:-1]))
    starts = np.flatnonzero(new)
    ends = np.concatenate((starts[1:], [len(lo)])) - 1
    return lo[starts], hi[ends]


# --- alignment -------------------------------------------------------------------------------

@dataclass
class _Pair:
    left: list[Item]
    right: list[Item]
    root: bool = False  # the root compares its two lists directly, even one-element ones


def _align(base: DiffSide, exp: DiffSide, left: list[Item], right: list[Item]
           ) -> list[tuple[int, int]]:
    """Greedy in-order pairs (i, j) of equal keys: anchors first, any key if no anchor pairs."""
    right_keys = [exp.key(r) for r in right]
    positions: dict[tuple[str, str], list[int]] = {}
    for j, key in enumerate(right_keys):
        positions.setdefault(key, []).append(j)
    left_keys = [base.key(item) for item in left]
    anchors = [base.is_anchor(item) for item in left]
    for anchors_only in (True, False):
        pairs, cursor = [], 0
        for i, key in enumerate(left_keys):
            if anchors_only and not anchors[i]:
                continue
            candidates = positions.get(key, [])
            k = bisect.bisect_left(candidates, cursor)
            if k < len(candidates):
                pairs.append((i, candidates[k]))
                cursor = candidates[k] + 1
        if pairs:
            return pairs
    return []


def _child_lists(base: DiffSide, exp: DiffSide, pair: _Pair
                 ) -> Optional[tuple[list[Item], list[Item]]]:
    """What a pair's children are aligned from: two nodes' children, or two lists."""
    if pair.root or (len(pair.left) > 1 and len(pair.right) > 1):
        return pair.left, pair.right
    if len(pair.left) == 1 and len(pair.right) == 1:
        return base.children(pair.left[0]), exp.children(pair.right[0])
    return None  # a node against a list or a blank: nothing to compare below


def _children(base: DiffSide, exp: DiffSide, pair: _Pair) -> list[_Pair]:
    lists = _child_lists(base, exp, pair)
    if lists is None:
        return []
    left, right = lists
    out: list[_Pair] = []
    li = ri = 0
    for i, j in _align(base, exp, left, right):
        if li < i or ri < j:
            out.append(_Pair(left[li:i], right[ri:j]))
        out.append(_Pair([left[i]], [right[j]]))
        li, ri = i + 1, j + 1
    if out and (li < len(left) or ri < len(right)):
        out.append(_Pair(left[li:], right[ri:]))
    return out


def _resolve(base: DiffSide, exp: DiffSide, path: str) -> _Pair:
    parts = str(path).split("-")
    if parts[0] != "0" or not all(p.isdigit() for p in parts[1:]):
        raise UnknownDiffPathError(f"bad diff path {path!r}: expected '0', '0-1', ...")
    pair = _Pair(base.top_items(), exp.top_items(), root=True)
    for depth, part in enumerate(parts[1:], start=1):
        children = _children(base, exp, pair)
        if int(part) >= len(children):
            raise UnknownDiffPathError(
                f"no diff node {path!r}: node {'-'.join(parts[:depth])} has "
                f"{len(children)} children")
        pair = children[int(part)]
    return pair


# --- payload ---------------------------------------------------------------------------------

def _summary(side: DiffSide, items: list[Item], scale: float, root: bool = False
             ) -> dict[str, Any]:
    if root:
        name, kind = ROOT_NAME, "root"
    elif not items:
        name, kind = BLANK, "blank"
    elif len(items) == 1:
        name, kind = side.key(items[0])[1], side.key(items[0])[0]
    else:
        name, kind = COMPOSITE, "composite"
    host = [side.host(item) for item in items]
    device = [side.device(item) for item in items]
    total = sum(d if d > 0 else h for h, d in zip(host, device))
    return {"name": name, "type": kind, "count": len(items),
            "host_duration_us": round(sum(host) / scale, 3),
            "device_duration_us": round(sum(device) / scale, 3),
            "total_duration_us": round(total / scale, 3)}


def _delta(left: dict[str, Any], right: dict[str, Any]) -> dict[str, float]:
    keys = ("host_duration_us", "device_duration_us", "total_duration_us")
    return {key: round(right[key] - left[key], 3) for key in keys}


def _items_ranges(side: DiffSide, items: list[Item]) -> np.ndarray:
    """Node ranges of many items; plain nodes in one go unless backward ops moved across
    threads (only then may a node's ranges reach outside its own slice)."""
    nodes = np.asarray([i for i in items if not isinstance(i, BackwardNode)], dtype=np.int64)
    others = [i for i in items if isinstance(i, BackwardNode) or side.cross_thread]
    parts = [side.ranges(item) for item in others]
    if not side.cross_thread:
        parts.append(np.stack((nodes, side.tree.subtree_end[nodes]), axis=1))
    return np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)


def _op_aggregates(side: DiffSide, items: list[Item], scale: float) -> pd.DataFrame:
    """Per operator name under the items: calls and host/device total/self (divided by scale)."""
    tree = side.tree
    lo, hi = _merged(_items_ranges(side, items))
    marks = np.zeros(len(tree) + 1, dtype=np.int64)
    np.add.at(marks, lo, 1)
    np.add.at(marks, hi, -1)
    ops = np.flatnonzero((np.cumsum(marks)[:-1] > 0) & tree.is_operator)
    frame = pd.DataFrame({
        "name": side.names[ops].astype(str), "calls": np.ones(len(ops)),
        "host_total_us": tree.host_total[ops], "host_self_us": tree.host_self[ops],
        "device_total_us": tree.device_total[ops], "device_self_us": tree.device_self[ops]})
    return frame.groupby("name", sort=True)[list(_OP_STATS)].sum() / scale


def _operator_deltas(base: DiffSide, exp: DiffSide, pair: _Pair, scales: tuple[float, float]
                     ) -> tuple[list[dict[str, Any]], str]:
    """Baseline/experiment/delta per operator name, sorted by |delta| of total time (device
    total when either side ran device work, else host total), ties by name."""
    left = _op_aggregates(base, pair.left, scales[0])
    right = _op_aggregates(exp, pair.right, scales[1])
    joined = left.add_suffix("_l").join(right.add_suffix("_r"), how="outer").fillna(0.0)
    out = pd.DataFrame(index=joined.index)
    for stat in _OP_STATS:
        out["base_" + stat] = joined[stat + "_l"]
        out["exp_" + stat] = joined[stat + "_r"]
        out["delta_" + stat] = joined[stat + "_r"] - joined[stat + "_l"]
    device = bool((out[["base_device_total_us", "exp_device_total_us"]] > 0).any().any())
    sort_by = "delta_device_total_us" if device else "delta_host_total_us"
    out = out.assign(_abs=out[sort_by].abs()).reset_index()
    out = out.sort_values(["_abs", "name"], ascending=[False, True]).drop(columns="_abs")
    if scales == (1.0, 1.0):  # plain counts below the root; per-step means at the root
        calls = ["base_calls", "exp_calls", "delta_calls"]
        out[calls] = out[calls].astype(np.int64)
    return out.round(3).to_dict("records"), sort_by


def _node_json(base: DiffSide, exp: DiffSide, pair: _Pair, path: str,
               scales: tuple[float, float]) -> dict[str, Any]:
    left = _summary(base, pair.left, scales[0], pair.root)
    right = _summary(exp, pair.right, scales[1], pair.root)
    return {"path": path, "left": left, "right": right, "delta": _delta(left, right)}


def build_diff(base: TraceTable, exp: TraceTable, path: str = "0") -> DiffPayload:
    """One node of the diff of two traces, with its direct children and operator deltas.

    ```
    {"path": "0-1",
     "left"/"right": {"name", "type": "module"|"operator"|"backward"|"dataloader"|...|
                      "composite"|"blank"|"root", "count": nodes on that side,
                      "host_duration_us", "device_duration_us", "total_duration_us"},
     "delta": {"host_duration_us", "device_duration_us", "total_duration_us"},  # right - left
     "children": [{"path", "left", "right", "delta", "expandable": bool}],
     "operator_deltas": [{"name", "base_calls", "exp_calls", "delta_calls",
                          "base_/exp_/delta_" + host_total_us|host_self_us|device_total_us|
                          device_self_us}],
     "operator_sort": "delta_device_total_us" | "delta_host_total_us",
     "per_step": bool,  # numbers of this node are per-step averages (the root only)
     "base"/"exp": {"tid", "steps"}}
    ```
    `total_duration_us` sums device time per node where it has any, else host time. Raises
    `UnknownDiffPathError` (a KeyError) for a path that names no node.
    """
    left, right = diff_side(base), diff_side(exp)
    pair = _resolve(left, right, path)
    per_step = pair.root and len(left.steps) > 0 and len(right.steps) > 0
    scales = (float(len(left.steps)), float(len(right.steps))) if per_step else (1.0, 1.0)
    out = _node_json(left, right, pair, str(path), scales)
    out["children"] = [
        {**_node_json(left, right, child, f"{path}-{i}", (1.0, 1.0)),
         "expandable": bool(_children(left, right, child))}
        for i, child in enumerate(_children(left, right, pair))]
    out["operator_deltas"], out["operator_sort"] = _operator_deltas(left, right, pair, scales)
    out["per_step"] = per_step
    out["base"] = {"tid": left.tid, "steps": int(len(left.steps))}
    out["exp"] = {"tid": right.tid, "steps": int(len(right.steps))}
    return out
