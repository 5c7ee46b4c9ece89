"""Per-thread operator trees (spec 3.3), as flat arrays.

Nodes are stored in pre-order: each thread's synthetic root, then its nodes sorted by
(start asc, end desc), so a node's subtree is the contiguous slice `[i, subtree_end[i])` and
subtree sums are differences of one cumulative sum. Nesting is found without a stack: in a
laminar set sorted that way, a node's depth is the number of earlier nodes still open at its
start (counted with `searchsorted` on the sorted ends), and its parent is the last earlier node
one level up (one `searchsorted` over (depth, position) keys).

Launches join nodes as `correlation` says; deliberate differences from the reference:
- A node that starts inside another but ends after it (float timestamps rounded to 0.25 us, as in
  PyTorch 2.x traces) is clamped to end with its parent instead of being dropped with its runtimes.
- Launches with no external id, an id no node has, or ids that are really correlation ids, join
  the innermost node open at their start on their thread instead of being dropped.
- `gpu_user_annotation` events live on GPU streams and never enter the CPU trees (bug 7.6).
- Staled kernels are parked once, on the main thread only (not on every ProfilerStep thread), and
  count once in the root's device time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd

from ..heap import release_free_memory
from ..ingest.schema import Kind, TraceTable
from .correlation import (
    Launches,
    complete_rows,
    external_ids_usable,
    launches,
    lookup,
    match_external_ids,
)
from .efficiency.tensor_cores import event_tc_eligible_flags, event_tc_flags
from .memo import memoised
from .nesting import levels, nest, subtree_ends
from .node_kinds import NodeKind, node_kinds, operator_predicate

_OPERATOR_TYPED = (NodeKind.OPERATOR, NodeKind.DATALOADER, NodeKind.OPTIMIZER)
ROOT_NAME = "CallTreeRoot"


@dataclass
class OpTree:
    """All threads' trees of one trace. Per-node arrays are indexed by node number (pre-order).

    Kept for the table's lifetime, so stored compactly: node and event numbers as int32, and a
    device statistic that is zero everywhere (all of them in a CPU-only trace) as a read-only
    zero-stride view that takes no memory per node.
    """

    event: np.ndarray  # event row; -1 for roots
    kind: np.ndarray  # NodeKind
    thread: np.ndarray  # index into `tids`
    tids: list[str]  # thread ids, in first-seen order
    name_code: np.ndarray  # code into `name_categories`; -1 for roots
    name_categories: pd.Index
    start: np.ndarray
    end: np.ndarray  # clamped into the parent
    parent: np.ndarray  # -1 for roots
    depth: np.ndarray  # roots 0
    subtree_end: np.ndarray  # exclusive
    host_self: np.ndarray
    device_total: np.ndarray
    device_self: np.ndarray
    tc_self: np.ndarray  # tensor-core kernel time of the node's own launches
    tc_total: np.ndarray
    tc_eligible: np.ndarray
    is_operator: np.ndarray  # the operator-view predicate (spec 3.7)
    launch_rows: np.ndarray  # launches kept in the tree...
    launch_owner: np.ndarray  # ...and the node owning each
    device_rows: np.ndarray  # kernels/memcpy/memset reachable from the tree...
    device_owner: np.ndarray  # ...the node owning each (a root for staled kernels)
    device_launch: np.ndarray  # ...their launch row (-1 for staled kernels)
    own_kernel_time: np.ndarray  # kernels (not memcpy/memset) of the node's own launches
    staled_kernel_time: np.ndarray  # per node: staled kernels parked on it (roots only)
    clamped: int  # nodes whose end was clamped into their parent
    absorbed_rows: np.ndarray  # event rows of same-name single children merged into the parent

    def __len__(self) -> int:
        return len(self.event)

    @property
    def host_total(self) -> np.ndarray:
        return self.end - self.start

    @property
    def names(self) -> np.ndarray:
        """Node names as an object array (roots are "CallTreeRoot")."""
        cats = np.append(self.name_categories.to_numpy(dtype=object), ROOT_NAME)
        return cats[self.name_code]

    @property
    def roots(self) -> np.ndarray:
        return np.flatnonzero(self.kind == NodeKind.ROOT)

    def children(self, node: int) -> np.ndarray:
        span = np.arange(node + 1, self.subtree_end[node])
        return span[self.parent[span] == node]

    def tc_eligible_ops_kernel_ratio(self) -> float:
        """Own kernel time of the bottom-most TC-eligible nodes / that of all operators (3.9)."""
        eligible = np.concatenate(([0], np.cumsum(self.tc_eligible)))
        below = eligible[self.subtree_end] - eligible[np.arange(len(self)) + 1]
        bottom = self.tc_eligible & (below == 0)
        own = self.own_kernel_time - self.staled_kernel_time
        total = float(own[self.is_operator].sum())
        return float(own[bottom].sum()) / total if total > 0 else 0.0


def build_op_tree(table: TraceTable) -> OpTree:
    """The operator trees of every thread of a table, computed once."""
    return memoised(table, "optree", lambda: _build(table))


# --- building --------------------------------------------------------------------------------

@dataclass
class _Skeleton:
    event: np.ndarray
    kind: np.ndarray
    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    subtree_end: np.ndarray
    thread_tid_codes: np.ndarray  # per thread: its code in the events' `tid` categorical
    clamped: int


def _build(table: TraceTable) -> OpTree:
    events = table.events
    links = launches(table)
    sk, tids = _skeleton(table)
    release_free_memory()  # each stage frees most of what it allocated: reuse it, do not grow
    owner, rows = _launch_owners(table, sk, links)
    owner, absorbed = _remove_duplicates(events, sk, owner)
    release_free_memory()
    return _with_stats(table, sk, tids, rows, owner, links, absorbed)


def _skeleton(table: TraceTable) -> tuple[_Skeleton, list[str]]:
    events = table.events
    kinds = node_kinds(table)
    rows = complete_rows(events, tuple(Kind))
    rows = _index(rows[kinds[rows] >= 0])
    start = events["ts"].to_numpy()[rows]
    end = start + events["dur"].to_numpy()[rows]
    group, thread_codes = _thread_groups(events, rows, start)
    order, parent_pos, depth, end, clamped = nest(group, start, end)
    # Lay out roots: thread g's root goes right before its first node. Temporaries are dropped
    # as soon as they are used: building the tree is the analysis's memory peak.
    g = group[order]
    del group
    threads = np.arange(len(thread_codes))
    index = np.arange(len(order)) + g + 1
    root_index = np.searchsorted(g, threads) + threads
    total = len(order) + len(thread_codes)
    parent = np.where(parent_pos >= 0, index[np.maximum(parent_pos, 0)], root_index[g])
    del parent_pos
    parent = _scatter(total, index, _index(parent), root_index, -1)
    depth = _scatter(total, index, _index(depth + 1), root_index, 0)
    ordered_rows = rows[order]
    del rows
    sk = _Skeleton(
        event=_scatter(total, index, ordered_rows, root_index, -1),
        kind=_scatter(total, index, kinds[ordered_rows], root_index, NodeKind.ROOT),
        thread=_scatter(total, index, g, root_index, threads),
        start=_scatter(total, index, start[order], root_index, np.nan),
        end=_scatter(total, index, end[order], root_index, np.nan),
        parent=parent,
        depth=depth,
        subtree_end=np.empty(0, dtype=np.int32),
        thread_tid_codes=np.asarray(thread_codes, dtype=np.int64),
        clamped=clamped,
    )
    del ordered_rows, g, index, start, end, order
    sk.subtree_end = subtree_ends(parent, depth)
    categories = events["tid"].cat.categories
    tids = [str(categories[c]) if c >= 0 else "" for c in thread_codes]
    return sk, tids


def _thread_groups(events: pd.DataFrame, rows: np.ndarray, start: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per row its thread number (threads numbered in order of first start), and the threads'
    `tid` codes."""
    tid_codes = events["tid"].cat.codes.to_numpy()[rows]
    thread_codes = pd.unique(tid_codes[np.lexsort((rows, start))])
    thread = np.empty(len(events["tid"].cat.categories) + 1, dtype=np.int32)
    thread[thread_codes] = np.arange(len(thread_codes))
    return thread[tid_codes], thread_codes


def _scatter(n: int, index: np.ndarray, values, root_index: np.ndarray, root_values
             ) -> np.ndarray:
    values = np.asarray(values)
    out = np.empty(n, dtype=values.dtype)
    out[index] = values
    out[root_index] = root_values
    return out


def _launch_owners(table: TraceTable, sk: _Skeleton, links: Launches
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Node owning each launch: the op with its external id; its thread's root for id 0; else
    (no id, an unknown id, or ids that are correlation ids) the innermost node open at the launch
    on its thread. -1 when the launching thread has no tree."""
    events = table.events
    rows = links.launch_rows
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64), rows
    ext = events["external_id"].to_numpy()[rows]
    owner = np.full(len(rows), -1, dtype=np.int64)
    nodes = np.flatnonzero(sk.event >= 0)
    # modules carry no external id in the reference, so launches never attach to them
    candidates = nodes[sk.kind[nodes] != NodeKind.MODULE]
    # no candidate at all: a GPU-only trace (runtime and kernels, no CPU operator)
    if len(candidates) and external_ids_usable(ext, events["correlation"].to_numpy()[rows]):
        order = np.lexsort((sk.event[candidates], sk.start[candidates], sk.thread[candidates]))
        rank = np.empty(len(candidates), dtype=np.int64)
        rank[order] = np.arange(len(candidates))
        match = match_external_ids(ext, events["external_id"].to_numpy()[
            sk.event[candidates]], rank)
        owner = np.where(match >= 0, candidates[np.maximum(match, 0)], -1)
    thread = _thread_of_rows(events, sk, rows)
    roots = np.flatnonzero(sk.kind == NodeKind.ROOT)
    zero = (ext == 0) & (thread >= 0)
    owner[zero] = roots[thread[zero]]
    by_time = (owner < 0) & (ext != 0)
    owner[by_time] = _innermost_at(sk, thread[by_time], events["ts"].to_numpy()[rows[by_time]])
    return owner, rows


def _thread_of_rows(events: pd.DataFrame, sk: _Skeleton, rows: np.ndarray) -> np.ndarray:
    """Tree thread index of event rows (-1 when their tid has no tree)."""
    of_code = np.full(len(events["tid"].cat.categories) + 1, -1, dtype=np.int64)
    of_code[sk.thread_tid_codes] = np.arange(len(sk.thread_tid_codes))
    return of_code[events["tid"].cat.codes.to_numpy()[rows]]


def _innermost_at(sk: _Skeleton, thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The deepest non-module node of `thread` open at `ts` (its root if none); -1 for thread -1.
    One searchsorted per thread, then a vectorised walk up the ancestors."""
    roots = np.flatnonzero(sk.kind == NodeKind.ROOT)
    owner = np.full(len(ts), -1, dtype=np.int64)
    for g in np.unique(thread[thread >= 0]):
        root = roots[g]
        lo, hi = root + 1, sk.subtree_end[root]
        sel = np.flatnonzero(thread == g)
        pos = np.searchsorted(sk.start[lo:hi], ts[sel], "right") - 1 + lo
        owner[sel] = np.where(pos >= lo, pos, root)
    while (owner >= 0).any():  # none at all when no thread has a tree (a GPU-only trace)
        node = np.maximum(owner, 0)
        closed = (owner >= 0) & (sk.kind[node] != NodeKind.ROOT) & (
            (sk.end[node] <= ts) | (sk.kind[node] == NodeKind.MODULE))
        if not closed.any():
            return owner
        owner = np.where(closed, sk.parent[node], owner)
    return owner


def _remove_duplicates(events: pd.DataFrame, sk: _Skeleton, owner: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Collapse single-child chains of same-named "Operator" nodes into the top one (3.3 step 3,
    like `torch.autograd.profiler`): the top keeps its range, takes the bottom's children and
    launches, and the launches of the top and the middle are discarded.

    `sk` is compacted in place (each old array is freed as its compacted one is made); returns
    the launches' new owners and the event rows of the removed nodes."""
    n = len(sk.event)
    absorbed = _absorbed(events, sk)
    if not absorbed.any():
        return owner, np.zeros(0, dtype=np.int32)
    has_parent = sk.parent >= 0
    p = np.where(has_parent, sk.parent, 0)
    top = _chain_tops(sk.parent, absorbed)
    has_absorbed_child = np.bincount(sk.parent[absorbed], minlength=n) > 0
    owned = owner >= 0
    o = np.where(owned, owner, 0)
    bottom = absorbed[o] & ~has_absorbed_child[o]
    discarded = (absorbed[o] & ~bottom) | (~absorbed[o] & has_absorbed_child[o])
    owner = np.where(owned & bottom, top[o], np.where(owned & discarded, -1, owner))
    del has_absorbed_child, owned, o, bottom, discarded
    # re-parent onto the chain top, then drop the absorbed nodes
    parent = np.where(has_parent & absorbed[p], top[p], sk.parent)
    del has_parent, p, top
    ancestors = np.zeros(n + 1, dtype=np.int32)
    idx = np.flatnonzero(absorbed)
    np.add.at(ancestors, idx + 1, 1)
    np.add.at(ancestors, sk.subtree_end[idx], -1)
    depth = sk.depth - np.cumsum(ancestors, dtype=np.int32)[:n]
    del ancestors
    keep = ~absorbed
    kept_before = np.concatenate(([0], np.cumsum(keep, dtype=np.int32)))  # new index = this - 1
    parent = np.where(parent >= 0, kept_before[np.maximum(parent, 0) + 1] - 1, -1)
    owner = np.where(owner >= 0, kept_before[np.maximum(owner, 0) + 1] - 1, -1)
    removed_rows = sk.event[absorbed]
    sk.subtree_end = kept_before[sk.subtree_end[keep]]
    del kept_before
    sk.event, sk.kind, sk.thread = sk.event[keep], sk.kind[keep], sk.thread[keep]
    sk.start, sk.end = sk.start[keep], sk.end[keep]
    sk.parent, sk.depth = _index(parent[keep]), _index(depth[keep])
    return owner, removed_rows


def _absorbed(events: pd.DataFrame, sk: _Skeleton) -> np.ndarray:
    """Nodes that are the only child of an "Operator"-type node of the same name."""
    names = np.where(sk.event >= 0, events["name"].cat.codes.to_numpy()[np.maximum(sk.event, 0)],
                     -1)
    dup_kind = _operator_typed(events, sk)
    has_parent = sk.parent >= 0
    p = np.where(has_parent, sk.parent, 0)
    only_child = np.bincount(sk.parent[has_parent], minlength=len(p)) == 1
    return has_parent & dup_kind & dup_kind[p] & (names == names[p]) & only_child[p]


def _chain_tops(parent: np.ndarray, absorbed: np.ndarray) -> np.ndarray:
    """For every node, its nearest ancestor-or-self that is not absorbed."""
    top = np.arange(len(parent), dtype=parent.dtype)
    while True:
        step = absorbed[top]
        if not step.any():
            return top
        top = np.where(step, parent[top], top)


def _with_stats(table: TraceTable, sk: _Skeleton, tids: list[str], launch_rows: np.ndarray,
                launch_owner: np.ndarray, links: Launches, absorbed: np.ndarray) -> OpTree:
    events = table.events
    n, subtree_end = len(sk.event), sk.subtree_end
    dur = events["dur"].to_numpy()
    event = np.maximum(sk.event, 0)
    names = events["name"]
    name_code = np.where(sk.event >= 0, names.cat.codes.to_numpy()[event], -1)
    in_tree = launch_owner >= 0
    launch_rows, launch_owner = launch_rows[in_tree], launch_owner[in_tree]
    device_rows, device_owner, device_launch = _device_owners(events, sk, links, launch_rows,
                                                              launch_owner)
    _fix_root_ranges(sk)
    nonroot = sk.parent >= 0
    host_self = sk.end - sk.start
    host_self -= np.bincount(sk.parent[nonroot], weights=host_self[nonroot], minlength=n)
    host_self -= np.bincount(launch_owner, weights=dur[launch_rows], minlength=n)
    device_dur = dur[device_rows]
    kernel = events["kind"].to_numpy()[device_rows] == Kind.KERNEL
    device_self = _per_node(device_owner, device_dur, n)
    tc_self = _per_node(device_owner, np.where(event_tc_flags(table)[device_rows] & kernel,
                                               device_dur, 0.0), n)
    own_kernel = _per_node(device_owner, np.where(kernel, device_dur, 0.0), n)
    staled = _per_node(device_owner, np.where(device_launch < 0, device_dur, 0.0), n)
    device_total = _subtree_sum(device_self, subtree_end)
    tc_total = _subtree_sum(tc_self, subtree_end)
    static_tc = np.where(sk.event >= 0, event_tc_eligible_flags(table)[event], False)
    is_operator = operator_predicate(sk.kind, name_code, names.cat.categories)
    if device_total.any():  # an operator's device time counts in its module parent's self
        modules = np.isin(sk.kind, (NodeKind.MODULE, NodeKind.PL_MODULE))
        op_child = nonroot & is_operator & modules[np.where(nonroot, sk.parent, 0)]
        device_self = _zero_free(device_self + np.bincount(
            sk.parent[op_child], weights=device_total[op_child], minlength=n))
    return OpTree(
        event=_index(sk.event), kind=sk.kind, thread=_index(sk.thread), tids=tids,
        name_code=name_code, name_categories=names.cat.categories, start=sk.start, end=sk.end,
        parent=_index(sk.parent), depth=_index(sk.depth), subtree_end=_index(subtree_end),
        host_self=host_self, device_total=device_total, device_self=device_self,
        tc_self=tc_self, tc_total=tc_total,
        tc_eligible=_propagate_tc(events, sk, static_tc, tc_self),
        is_operator=is_operator, launch_rows=_index(launch_rows),
        launch_owner=_index(launch_owner), device_rows=_index(device_rows),
        device_owner=_index(device_owner), device_launch=_index(device_launch),
        own_kernel_time=own_kernel, staled_kernel_time=staled,
        clamped=sk.clamped, absorbed_rows=_index(absorbed),
    )


def _index(values: np.ndarray) -> np.ndarray:
    """Node or event numbers as int32 (2**31 events would be a ~500 GB trace)."""
    return values.astype(np.int32, copy=False)


def _zero_free(values: np.ndarray) -> np.ndarray:
    """A per-node statistic, or a read-only zero-stride view of 0.0 when it is zero everywhere."""
    return values if values.any() else np.broadcast_to(np.float64(0.0), values.shape)


def _device_owners(events: pd.DataFrame, sk: _Skeleton, links: Launches,
                   launch_rows: np.ndarray, launch_owner: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Device events reachable from the tree: those of kept launches, plus staled kernels (not
    memcpy/memset) on the main thread's root."""
    owner_of_launch = pd.Series(launch_owner, index=launch_rows).sort_index()
    owner = lookup(owner_of_launch, links.device_launch.astype(np.float64))
    launched = owner >= 0
    rows, owners, launch = (links.device_rows[launched], owner[launched],
                            links.device_launch[launched])
    main_root = _main_root(sk)
    staled = links.staled_rows
    staled = staled[events["kind"].to_numpy()[staled] == Kind.KERNEL]
    if main_root is None or len(staled) == 0:
        return rows, owners, launch
    return (np.concatenate((rows, staled)),
            np.concatenate((owners, np.full(len(staled), main_root))),
            np.concatenate((launch, np.full(len(staled), -1))))


def _main_root(sk: _Skeleton) -> Optional[int]:
    """Root of the thread with the most ProfilerStep nodes (first seen on ties), if any."""
    steps = sk.kind == NodeKind.PROFILER_STEP
    if not steps.any():
        return None
    counts = np.bincount(sk.thread[steps])
    thread = int(np.argmax(counts))
    return int(np.flatnonzero((sk.kind == NodeKind.ROOT) & (sk.thread == thread))[0])


def _fix_root_ranges(sk: _Skeleton) -> None:
    """A root spans from its first child's start to its last child's end (3.3 step 5)."""
    top = np.flatnonzero(sk.depth == 1)
    if len(top) == 0:
        return
    parent = sk.parent[top]
    first = np.unique(parent, return_index=True)[1]
    last = len(parent) - 1 - np.unique(parent[::-1], return_index=True)[1]
    owners = np.unique(parent)
    sk.start[owners] = sk.start[top[first]]
    sk.end[owners] = sk.end[top[last]]


def _per_node(owner: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """Sum of `weights` per owning node (see `_zero_free`)."""
    if len(owner) == 0:
        return np.broadcast_to(np.float64(0.0), (n,))
    return _zero_free(np.bincount(owner, weights=weights, minlength=n))


def _subtree_sum(values: np.ndarray, subtree_end: np.ndarray) -> np.ndarray:
    if not values.any():
        return values
    acc = np.concatenate(([0.0], np.cumsum(values)))
    return acc[subtree_end] - acc[:-1]


def _operator_typed(events: pd.DataFrame, sk: _Skeleton) -> np.ndarray:
    """The reference's `type == Operator`: cpu_op events other than ProfilerSteps (so loaders and
    optimizer steps too, but not user annotations): duplicate removal and TC propagation."""
    cpu_op = np.where(sk.event >= 0, events["kind"].to_numpy()[np.maximum(sk.event, 0)]
                      == Kind.CPU_OP, False)
    return cpu_op & np.isin(sk.kind, np.asarray(_OPERATOR_TYPED, dtype=sk.kind.dtype))


def _propagate_tc(events: pd.DataFrame, sk: _Skeleton, static: np.ndarray,
                  tc_self: np.ndarray) -> np.ndarray:
    """An "Operator"-type node is TC-eligible if listed, if its own launches ran TC kernels, or
    if any child is eligible (bottom-up, one vectorised step per depth level)."""
    n = len(static)
    op_type = _operator_typed(events, sk)
    eligible = static | (op_type & (tc_self > 0))
    child_eligible = np.zeros(n, dtype=np.int32)
    for level in reversed(levels(sk.depth)):
        eligible[level] |= op_type[level] & (child_eligible[level] > 0)
        inner = level[sk.parent[level] >= 0]
        np.add.at(child_eligible, sk.parent[inner], eligible[inner])
    return eligible
