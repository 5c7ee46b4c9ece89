"""One trace's side of a diff (`diff.py`): every thread's operator tree as the diff walks it.

The main thread (`main_thread`) gives the top level; attributed backward ops move under virtual
`<module>.backward` nodes (`BackwardNode`, spec 3.4); every other thread with operators left is
one virtual `ThreadNode`. See `diff.py` for the alignment and the payload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Union

import numpy as np

from ...ingest.schema import TraceTable
from ..memo import memoised
from ..modules import BACKWARD_PREFIX, MODULE_KINDS, backward_attribution, nearest, node_at
from ..node_kinds import NodeKind
from ..optree import OpTree, build_op_tree

ANCHOR_KINDS = (NodeKind.DATALOADER, NodeKind.MODULE, NodeKind.PL_MODULE, NodeKind.OPTIMIZER,
                NodeKind.PROFILER_STEP)
BACKWARD, THREAD = "backward", "thread"
_KIND_NAMES = [kind.name.lower() for kind in NodeKind]


class BackwardNode(NamedTuple):
    """The virtual backward node of one forward module call (an op-tree module node)."""

    module: int


class ThreadNode(NamedTuple):
    """A thread other than the main one: its root's remaining children, under one node."""

    root: int
    label: str  # "autograd thread", "autograd thread 2", "thread 2", ...


class StepFold(NamedTuple):
    """The same child in every step: the k-th child of a (kind, name) in each step (or in each
    member of a fold), one member per step where it occurs. Its numbers are its members'
    sums, so on the per-step basis a module that runs once per step shows its time per step,
    not a share of it per occurrence."""

    members: tuple  # of Item, in step order


Item = Union[int, BackwardNode, ThreadNode, StepFold]  # an op-tree node, or a virtual node


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
    threads: list[ThreadNode] = field(default_factory=list)  # the other threads, by start

    @property
    def tid(self) -> Optional[str]:
        return self.tree.tids[self.thread] if self.thread >= 0 else None

    def top_items(self) -> list[Item]:
        if self.root < 0:
            return []
        if len(self.steps) == 0:
            return self.children(self.root) + list(self.threads)
        return self.fold([self.children(int(step)) for step in self.steps]) + list(
            self.threads)

    def fold(self, lists: list[list[Item]]) -> list[Item]:
        """One item per (key, k-th occurrence of that key) over the lists (one per step),
        in first-seen order; an item present in a single list stays itself."""
        groups: dict[tuple[tuple[str, str], int], list[Item]] = {}
        for items in lists:
            seen: dict[tuple[str, str], int] = {}
            for item in items:
                key = self.key(item)
                seen[key] = seen.get(key, -1) + 1
                groups.setdefault((key, seen[key]), []).append(item)
        return [members[0] if len(members) == 1 else StepFold(tuple(members))
                for members in groups.values()]

    def children(self, item: Item) -> list[Item]:
        if isinstance(item, StepFold):
            return self.fold([self.children(member) for member in item.members])
        if isinstance(item, BackwardNode):
            return self._backward_children(item.module)
        if isinstance(item, ThreadNode):
            return self.children(item.root)
        kids = self.tree.children(item)
        found: list[Item] = [int(k) for k in kids[~self.removed[kids]]]
        found += self.inserted.get(item, [])
        return sorted(found, key=self.start)

    def start(self, item: Item) -> float:
        if isinstance(item, StepFold):
            return self.start(item.members[0])
        if isinstance(item, BackwardNode):
            return float(self.tree.start[self.backward_of(item.module)].min())
        if isinstance(item, ThreadNode):
            return float(self.tree.start[item.root])
        return float(self.tree.start[item])

    def key(self, item: Item) -> tuple[str, str]:
        if isinstance(item, StepFold):
            return self.key(item.members[0])
        if isinstance(item, BackwardNode):
            return BACKWARD, f"{self.names[item.module]}.backward"
        if isinstance(item, ThreadNode):
            return THREAD, item.label
        return _KIND_NAMES[self.tree.kind[item]], str(self.names[item])

    def is_anchor(self, item: Item) -> bool:
        if isinstance(item, StepFold):
            return self.is_anchor(item.members[0])
        return not isinstance(item, int) or bool(self.anchor[item])

    def ranges(self, item: Item) -> np.ndarray:
        """Pre-order node ranges [lo, hi) making up the item (may overlap), shape (k, 2)."""
        tree = self.tree
        if isinstance(item, StepFold):
            return np.concatenate([self.ranges(member) for member in item.members])
        if isinstance(item, BackwardNode):
            roots = self.backward_of(item.module)
            return np.stack((roots, tree.subtree_end[roots]), axis=1)
        if isinstance(item, ThreadNode):
            parts = [self.ranges(kid) for kid in self.children(item)]
            return np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)
        out = [np.asarray([[item, tree.subtree_end[item]]])]
        at = self.inserted_at  # backward nodes inserted below (their ops may be elsewhere)
        for parent in at[np.searchsorted(at, item):np.searchsorted(at, tree.subtree_end[item])]:
            out += [self.ranges(node) for node in self.inserted[int(parent)]]
        return np.concatenate(out)

    def host(self, item: Item) -> float:
        if isinstance(item, StepFold):
            return sum(self.host(member) for member in item.members)
        if isinstance(item, BackwardNode):
            return float(self.tree.host_total[self.backward_of(item.module)].sum())
        if isinstance(item, ThreadNode):
            return sum(self.host(kid) for kid in self.children(item))
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
        if isinstance(item, StepFold):
            return sum(self.device(member) for member in item.members)
        if isinstance(item, int) and not self.cross_thread:
            return float(self.tree.device_total[item])
        lo, hi = merged_ranges(self.ranges(item))
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
        side.threads = _other_threads(side)
    return side


def _other_threads(side: DiffSide) -> list[ThreadNode]:
    """A node per thread other than the main one that keeps operators after the move of
    attributed backward ops, labelled by kind and order of start (to pair across traces):
    "autograd thread", "autograd thread 2", ...; "thread 2", "thread 3", ... (1 is the main)."""
    tree, out = side.tree, []
    roots = tree.roots
    counts = {True: 0, False: 1}
    for root in roots[np.argsort(tree.start[roots], kind="stable")].tolist():
        kids = side.children(root) if tree.thread[root] != side.thread else []
        if not kids:
            continue
        backward = isinstance(kids[0], int) and str(side.names[kids[0]]).startswith(
            BACKWARD_PREFIX)
        counts[backward] += 1
        if backward:
            label = "autograd thread" + (f" {counts[True]}" if counts[True] > 1 else "")
        else:
            label = f"thread {counts[False]}"
        out.append(ThreadNode(int(root), label))
    return out


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
    side.module_parent = nearest(tree, tree.parent, is_module)  # parent: -1 for roots
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


def merged_ranges(ranges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [lo, hi) index ranges as disjoint (lo, hi) arrays."""
    if len(ranges) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ranges = ranges[np.argsort(ranges[:, 0], kind="stable")]
    lo, hi = ranges[:, 0], np.maximum.accumulate(ranges[:, 1])
    new = np.concatenate(([True], lo[1:] >= hi[:-1]))
    starts = np.flatnonzero(new)
    ends = np.concatenate((starts[1:], [len(lo)])) - 1
    return lo[starts], hi[ends]
