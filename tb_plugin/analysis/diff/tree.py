"""Diff of two traces (spec 3.14): align their operator trees and compare time per node.

Each side is every thread of the trace. The *main* thread (the ProfilerStep thread, else the
longest one that is not an autograd backward thread; not the first thread as in the reference,
its bug 7.9) gives the top level: the children of the ProfilerSteps, folded across steps
(below; the root's children without steps). Every other thread with operators left after the
move below follows as one virtual `thread` node ("autograd thread", "thread 2", ...: labels
pair threads across the traces), so backward kernels launched from the autograd thread count.
When fwdbwd flows attribute backward ops to modules (see `modules.backward_attribution`), the
attributed `evaluate_function:` ops move under virtual `<module>.backward` nodes, nested like
the modules and placed where the backward ran (spec 3.4); unattributed ones stay where they
were (the reference dropped them).

Alignment, per node pair: scan the left children; each anchor (Backward, DataLoader, Module,
Optimizer, ProfilerStep) pairs with the first right child at or after the cursor with the same
(kind, name). The unmatched runs between pairs become one composite child (a list per side; a
one-element list is that node; an empty side is "Blank"). When no anchor pairs up (inside a
composite, or under an operator) any (kind, name) may pair, so composites and operators can be
drilled into too (the reference stopped there). Children of a pair are recomputed on demand
along the requested `path` ("0", "0-1", ...), so a request costs one root-to-node walk.

Basis. One basis holds for every number of a payload (the node, its children, the operator
deltas): `per_step` divides each side's numbers by its own step count (the default, so windows
of different lengths compare), `total` does not; `per_step` falls back to `total` when a side
has no ProfilerStep (the payload's `basis` says which was used). The root's numbers are then
exactly the sums of its children's. The per-step basis is defined per path: the top level folds
the steps (`DiffSide.fold`), so a child is the k-th (kind, name) of every step, and its numbers
(and those of every node below it, folded the same way) are its occurrences' sums divided by
the step count: a module that runs once per step shows its time per step, whatever the number
of steps of either side.
"""


from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from ...views.diff.payload import DiffPayload
from ..optree import ROOT_NAME
from .side import DiffSide, Item, ThreadNode, diff_side, merged_ranges
from .verdict import diff_verdicts

BLANK, COMPOSITE = "Blank", "CompositeNodes"
BASES = ("per_step", "total")
_OP_STATS = ("calls", "host_total_us", "host_self_us", "device_total_us", "device_self_us")


class UnknownDiffPathError(KeyError):
    """No diff node at that path: the server answers 404."""


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
    if not pair.root:
        return _aligned(base, exp, left, right)
    out = []  # the main thread's items, then the other threads (paired by label)
    for part in (False, True):
        lpart = [i for i in left if isinstance(i, ThreadNode) == part]
        rpart = [i for i in right if isinstance(i, ThreadNode) == part]
        aligned = _aligned(base, exp, lpart, rpart)
        out += aligned if aligned or not (lpart or rpart) else [_Pair(lpart, rpart)]
    return out


def _aligned(base: DiffSide, exp: DiffSide, left: list[Item], right: list[Item]
             ) -> list[_Pair]:
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
    nodes = np.asarray([i for i in items if isinstance(i, int)], dtype=np.int64)
    others = [i for i in items if not isinstance(i, int) or side.cross_thread]
    parts = [side.ranges(item) for item in others]
    if not side.cross_thread:
        parts.append(np.stack((nodes, side.tree.subtree_end[nodes]), axis=1))
    return np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)


def _op_aggregates(side: DiffSide, items: list[Item], scale: float) -> pd.DataFrame:
    """Per operator name under the items: calls and host/device total/self (divided by scale)."""
    tree = side.tree
    lo, hi = merged_ranges(_items_ranges(side, items))
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


def build_diff(base: TraceTable, exp: TraceTable, path: str = "0", basis: str = "per_step"
               ) -> DiffPayload:
    """One node of the diff of two traces, with its direct children and operator deltas.

    ```
    {"path": "0-1", "basis": "per_step" | "total",
     "left"/"right": {"name", "type": "module"|"operator"|"backward"|"thread"|...|
                      "composite"|"blank"|"root", "count": nodes on that side,
                      "host_duration_us", "device_duration_us", "total_duration_us"},
     "delta": {"host_duration_us", "device_duration_us", "total_duration_us"},  # right - left
     "children": [{"path", "left", "right", "delta", "expandable": bool,
                   "interval": {"delta_us", "low_us", "high_us", "verdict"} | None}],
     "verdict": {"verdict", "delta_us", "low_us", "high_us", "confidence", "over", "note",
                 "min_change", "floor_us", "relative"} | None,  # analysis/diff/verdict.py
     "operator_deltas": [{"name", "base_calls", "exp_calls", "delta_calls",
                          "base_/exp_/delta_" + host_total_us|host_self_us|device_total_us|
                          device_self_us}],
     "operator_sort": "delta_device_total_us" | "delta_host_total_us",
     "per_step": bool,  # basis == "per_step"
     "base"/"exp": {"tid", "steps"}}
    ```
    Every number is on `basis` (see the module docstring), so the root's numbers (the headline)
    are the sums of its children's (up to rounding to 3 decimals); a node's host time also holds
    its own time between its children. `total_duration_us` sums device time per node
    where it has any, else host time: host and device time are also given on their own. Raises
    `UnknownDiffPathError` (a KeyError) for a path that names no node.
    """
    if basis not in BASES:
        raise ValueError(f"unknown diff basis {basis!r}; expected one of {', '.join(BASES)}")
    left, right = diff_side(base), diff_side(exp)
    pair = _resolve(left, right, path)
    per_step = basis == "per_step" and len(left.steps) > 0 and len(right.steps) > 0
    scales = (float(len(left.steps)), float(len(right.steps))) if per_step else (1.0, 1.0)
    out = _node_json(left, right, pair, str(path), scales)
    children = _children(left, right, pair)
    node_verdict, intervals = diff_verdicts(left, right, (pair.left, pair.right),
                                            [(c.left, c.right) for c in children])
    out["children"] = [
        {**_node_json(left, right, child, f"{path}-{i}", scales),
         "expandable": bool(_children(left, right, child)), "interval": interval}
        for i, (child, interval) in enumerate(zip(children, intervals))]
    out["verdict"] = node_verdict
    out["operator_deltas"], out["operator_sort"] = _operator_deltas(left, right, pair, scales)
    out["per_step"] = per_step
    out["basis"] = "per_step" if per_step else "total"
    out["base"] = {"tid": left.tid, "steps": int(len(left.steps))}
    out["exp"] = {"tid": right.tid, "steps": int(len(right.steps))}
    return out
