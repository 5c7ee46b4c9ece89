"""Interval nesting: the one kernel behind the op tree, the call stacks and the timeline rows.

Contract (the reference's stack sweep, clamping instead of dropping): per group, intervals are
visited in the order (start asc, end desc, input index); an interval pops every open interval
that has ended by its start, becomes the child of the one left on top, and when it outlasts
that parent its end is clamped to the parent's (float timestamps rounded to 0.25 us or 1 ns
overshoot by a hair). Its depth is the number of open intervals.

Rules for ties and zero-length intervals (every caller relies on exactly these):
- Intervals are half-open: one that ends where the next one starts has closed (a sibling).
- Identical intervals nest: the first in input order is the parent of the second.
- Equal starts: the longer interval is the parent of the shorter one.
- Zero-length intervals (instants) contain nothing: they are leaves, even of equal instants.

`nest` is vectorised: for a laminar set sorted as above, a node's depth is the number of earlier
nodes still open at its start (counted with `searchsorted` on the sorted ends), and its parent is
the last earlier node one level up. Overlaps are clamped in rounds (each round settles those no
earlier overlap can have misplaced); pathological chains of overlaps go through the plain loop
(`_nest_sequential`), which is the contract itself.
"""

from __future__ import annotations

import logging
from typing import NamedTuple, Optional

import numpy as np

log = logging.getLogger(__name__)

_MAX_CLAMP_ROUNDS = 32  # each round clamps every overlap that no earlier one can affect


class Nesting(NamedTuple):
    """`order`: input indices sorted by (group, start asc, original end desc, input index), a
    pre-order of each group's forest; `parent` (position in `order`, -1 at top level) and
    `depth` per sorted position; `end`: the clamped end per input index; `clamped`: how many
    ends were clamped."""

    order: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    end: np.ndarray
    clamped: int


def nest(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> Nesting:
    """Nest intervals per group (integer group ids) under the module's rules. `end` is not
    modified (a clamped copy is returned)."""
    n = len(start)
    ranks, distinct = dense_ranks(start, end)
    width = distinct + 1  # exact integer keys: group-major, then time rank
    # int32 keys when they fit: nesting a big trace's ops is the analysis's memory peak
    key_type = np.int32 if (int(group.max(initial=0)) + 1) * width < 2**31 else np.int64
    s_key = group.astype(key_type)
    s_key *= width
    e_key = s_key + ranks[n:]
    s_key += ranks[:n]
    del ranks
    # The stack visits nodes in this order; clamping never reorders them (a clamped node stays
    # right after its parent), so the order is fixed and only the ends change.
    order = np.lexsort((-e_key, s_key))  # lexsort is stable: ties keep input order
    s_sorted, g_sorted = s_key[order], group[order]
    clamped = 0
    for _ in range(_MAX_CLAMP_ROUNDS):
        es = e_key[order]
        parent, depth = _nest_laminar(s_sorted, es, g_sorted, width)
        has_parent = parent >= 0
        violating = has_parent & (es > es[np.where(has_parent, parent, 0)])
        if not violating.any():
            return Nesting(order, parent, depth, end, clamped)
        safe = _safe_violations(violating, es, s_sorted)
        target, source = order[safe], order[parent[safe]]
        if not clamped:  # the caller's array is left alone; most traces never get here
            end = end.copy()
        e_key[target] = e_key[source]
        end[target] = end[source]
        clamped += int(safe.sum())
    return _nest_sequential(order, g_sorted, s_sorted, e_key, end.copy(), clamped)


def dense_ranks(*parts: np.ndarray) -> tuple[np.ndarray, int]:
    """(rank of each value among the distinct values, number of distinct values) of the
    concatenated `parts`, like `np.unique(values, return_inverse=True)` (NaNs are one value,
    ranked last) but several times faster on trace times: a stable sort (timsort) runs in
    near-linear time on data that is already almost in time order. Ranks are int32 below 2**31
    values; each temporary is dropped as soon as it is used (the op tree's memory peak)."""
    values = np.concatenate(parts)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    del values
    new = np.empty(len(ordered), dtype=bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    nan = np.isnan(ordered)
    del ordered
    new[1:] &= ~(nan[1:] & nan[:-1])
    del nan
    rank_type = np.int32 if len(new) < 2**31 else np.int64
    counted = np.cumsum(new, dtype=rank_type)
    del new
    counted -= 1
    ranks = np.empty(len(counted), dtype=rank_type)
    ranks[order] = counted
    return ranks, int(counted[-1]) + 1 if len(counted) else 0


def _nest_sequential(order: np.ndarray, group: np.ndarray, s: np.ndarray, e_key: np.ndarray,
                     end: np.ndarray, clamped: int) -> Nesting:
    """The contract as a plain loop: only for pathological chains of overlaps that would need
    too many vectorised rounds."""
    log.info("nesting: %d interval(s) with chained overlaps nested by the loop", len(order))
    es, groups = e_key[order].tolist(), group.tolist()
    parent, depth = [-1] * len(order), [0] * len(order)
    stack: list[int] = []
    for i, (g, start) in enumerate(zip(groups, s.tolist())):
        while stack and (groups[stack[-1]] != g or start >= es[stack[-1]]):
            stack.pop()
        if stack:
            parent[i] = stack[-1]
            if es[i] > es[parent[i]]:
                es[i] = es[parent[i]]
                end[order[i]] = end[order[parent[i]]]
                clamped += 1
        depth[i] = len(stack)
        stack.append(i)
    return Nesting(order, np.asarray(parent), np.asarray(depth), end, clamped)


def _nest_laminar(s: np.ndarray, e: np.ndarray, group: np.ndarray, width: np.int64
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Parent position and depth of properly nested intervals (integer keys) listed in
    pre-order by start: a node's ancestors are exactly the earlier nodes still open at its
    start, and every other earlier node has closed by then."""
    group_floor = group.astype(s.dtype)
    group_floor *= width
    # depth = earlier nodes of the group (since its first position) minus those closed by then
    depth = np.arange(len(s)) - np.searchsorted(s, group_floor, "left")
    sorted_e = np.sort(e)
    depth -= np.searchsorted(sorted_e, s, "right")
    depth += np.searchsorted(sorted_e, group_floor, "left")
    del sorted_e, group_floor
    # zero-length intervals at the same start sort after this one yet "close" before it
    zero = np.concatenate(([0], np.cumsum(e == s)))
    depth += zero[np.searchsorted(s, s, "right")]
    depth -= zero[:-1]
    del zero
    return _parents(depth), depth


def _parents(depth: np.ndarray) -> np.ndarray:
    """In a pre-order with these depths, each node's parent: the last earlier node one level
    up (-1 at depth 0). One searchsorted per level, so only one level is in memory at a time."""
    parent = np.full(len(depth), -1, dtype=np.int64)
    above: Optional[np.ndarray] = None
    for level in levels(depth):  # ascending depth, positions ascending within a level
        if above is not None and len(level):
            earlier = np.searchsorted(above, level)
            if len(above):
                parent[level] = above[np.maximum(earlier - 1, 0)]
            orphans = level[earlier == 0]  # all of them under an empty level
            if len(orphans):
                parent[orphans] = _parents_by_key(depth, orphans)
        above = level
    return parent


def _parents_by_key(depth: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """`_parents` of nodes with no earlier node one level up, which only the intermediate
    rounds of clamping (not yet laminar) produce: the node with the largest (depth, position)
    below (depth - 1, node), as over keys sorted by level."""
    n = len(depth)
    keys = depth.astype(np.int64) * (n + 1) + np.arange(n)
    by_level = np.argsort(keys, kind="stable")
    above = np.searchsorted(keys[by_level], (depth[nodes].astype(np.int64) - 1) * (n + 1)
                            + nodes) - 1
    return by_level[np.maximum(above, 0)]


def _safe_violations(violating: np.ndarray, e: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Violations whose computed parent is trustworthy: no earlier violator is still open at
    their start (its unclamped end could have miscounted the depth). The first always is."""
    open_end = np.maximum.accumulate(np.where(violating, e, -1))
    before = np.concatenate(([-1], open_end[:-1]))
    return violating & (before <= s)


def subtree_ends(parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Exclusive end of each node's pre-order slice, summing subtree sizes level by level."""
    size = np.ones(len(parent), dtype=np.int32)
    for level in reversed(levels(depth)[1:]):
        np.add.at(size, parent[level], size[level])
    size += np.arange(len(parent), dtype=np.int32)
    return size


def levels(depth: np.ndarray) -> list[np.ndarray]:
    """Node indices grouped by depth (index order kept within a level)."""
    deepest = int(depth.max(initial=0))
    if int(depth.min(initial=0)) >= 0 and deepest < 2**15:
        depth = depth.astype(np.int16)  # numpy's stable sort is a radix sort for 16 bits: 5x
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(deepest + 2))
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
