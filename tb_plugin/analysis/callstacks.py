"""Python call stacks of operators derived from `python_function` events (PyTorch 2.x).

PyTorch 1.x wrote a `Call stack` argument on every cpu_op recorded with `with_stack=True`
(`file(line): func;file(line): func;...`, innermost first). Kineto (PyTorch 2.x) writes none:
the Python stack is recorded as `python_function` events (names like `train.py(42): train_step`,
`nn.Module: Conv2d_0`, `<built-in method conv2d of type object at 0x...>`) that nest in time,
on the same thread, around the operators they called. This module rebuilds the 1.x string for
every cpu_op / user annotation from those events, vectorised (no Python loop per event):

1. Frames that never appear in a stack (see the rule below) are left out first: nesting is by
   time, so removing them changes no kept frame's ancestors. The kept ones are nested per
   (pid, tid) with `nesting.nest` (pre-order, parent positions, depths; an end overhanging its
   parent's, as rounded 2.x timestamps do, is clamped into the parent like in the op tree).
2. Each distinct stack gets an id, top-down one depth level at a time: an event's id interns
   the pair (its parent's id, its name) with `np.unique`, so every iteration of a training
   loop maps to the same few ids, however many events it has.
3. An operator's stack is that of its innermost enclosing kept frame: per thread, one
   `searchsorted` on the pre-order starts gives the last frame starting at or before the
   operator; while that one has already ended, its parent is tried (one vectorised step per
   level). The operator's own start decides (start <= op start < end).
4. Only the distinct stacks the operators use become strings, innermost frame first and at most
   `MAX_FRAMES` frames (the outermost are cut), interned once per table (`table.memo`).

The result agrees with walking the tracer's own `Python parent id` links (tested on the samples);
time nesting is used because it also works where ids are missing or point outside the window.

Frame rule: a frame is kept when its name has the `file(line): func` form the UI's
jump-to-source parses (`^(.*)\\((\\d+)\\):\\s*(.*)$`), exactly the frames 1.x stacks held.
Dropped: C functions (`<built-in method conv2d ...>`, `<built-in function len>`) and module
markers (`nn.Module: Conv2d_0`, `nn.Module: MyModel`), which carry no source location (the
module hierarchy has its own view) and would only split otherwise equal stacks by instance
names. A `;` inside a frame (never seen in practice) becomes `,` so frames split cleanly.

Line numbers are what the Python tracer recorded: for a function entered while profiling, the
line of its `def` (or first statement), not the line of the call inside the caller; for frames
already on the stack when profiling started (the training loop, `main`, `<module>`), the line
running at that moment. File paths are as recorded (usually relative to a `sys.path` entry,
e.g. `torch/nn/modules/module.py`, or the script's path as it was invoked).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable
from .correlation import complete_rows
from .events import filled_categorical
from .memo import memoised
from .nesting import levels, nest

#: Frames kept per stack (innermost first); deeper frames, the outermost, are cut.
MAX_FRAMES = 64
#: The UI's frame pattern: a frame it can open in the editor.
FRAME_RE = re.compile(r"^(.*)\((\d+)\):\s*(.*)$")
#: Events that get a stack: what the operator tree's nodes are made of.
STACK_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)


@dataclass
class CallStacks:
    """Derived stacks of one table: per event row in `rows` (sorted), a code into `stacks`."""

    rows: np.ndarray  # event rows of the cpu_ops / user annotations, ascending
    code: np.ndarray  # per row: index into `stacks`; -1 when no kept Python frame encloses it
    stacks: pd.Index  # distinct stack strings `file(line): func;...`, innermost frame first
    python_events: int  # python_function events considered

    def __len__(self) -> int:
        return len(self.rows)

    def codes_of(self, rows: np.ndarray) -> np.ndarray:
        """Stack code of arbitrary event rows (-1 for rows without a derived stack)."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(self.rows) == 0 or len(self.stacks) == 0:
            return np.full(len(rows), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
        return np.where(self.rows[pos] == rows, self.code[pos], -1)

    def of_rows(self, rows: np.ndarray, missing: str = "") -> pd.Categorical:
        """Stack strings of event rows as a categorical, `missing` where there is none."""
        return filled_categorical(self.codes_of(rows), self.stacks, missing)


def python_call_stacks(table: TraceTable) -> CallStacks:
    """The derived call stacks of a table's operators, computed once per table."""
    return memoised(table, "python_call_stacks", lambda: _derive(table))


def _empty(rows: np.ndarray, python_events: int = 0) -> CallStacks:
    # no stack anywhere: the codes are a zero-stride view of -1 (no memory per operator)
    return CallStacks(rows=rows.astype(np.int32), code=np.broadcast_to(np.int32(-1), len(rows)),
                      stacks=pd.Index([], dtype=object), python_events=python_events)


def _derive(table: TraceTable) -> CallStacks:
    events = table.events
    op_rows = complete_rows(events, STACK_KINDS)
    py_rows = complete_rows(events, (Kind.PYTHON_FUNCTION,))
    n_python = len(py_rows)
    if len(op_rows) == 0 or n_python == 0:
        return _empty(op_rows, n_python)
    codes = events["name"].cat.codes.to_numpy()
    labels, kept = _frame_labels(events["name"].cat.categories, codes[py_rows])
    # Dropped frames never reach a string, and leaving them out of the nesting changes no
    # kept frame's ancestors (nesting is by time), so they are left out from the start.
    py_rows = py_rows[kept[codes[py_rows]]]
    if len(py_rows) == 0:
        return _empty(op_rows, n_python)
    ts, dur = events["ts"].to_numpy(), events["dur"].to_numpy()
    py_group, op_group = _threads(events, py_rows, op_rows)
    start = ts[py_rows]
    order, parent, depth, end, _ = nest(py_group, start, start + dur[py_rows])
    # everything below is per pre-order position
    start, end, group = start[order], end[order], py_group[order]
    name_code = codes[py_rows[order]]
    stack_id, stack_parent, stack_name = _intern_stacks(parent, depth, name_code)
    leaf = _innermost(start, end, group, parent, ts[op_rows], op_group)
    ids = np.where(leaf >= 0, stack_id[np.maximum(leaf, 0)], -1)
    used = np.flatnonzero(np.bincount(ids[ids >= 0], minlength=len(stack_parent)))
    strings = _stack_strings(used, stack_parent, stack_name, labels)
    # cutting at MAX_FRAMES can make two ids spell the same string: intern the strings
    string_code, uniques = pd.factorize(pd.Series(strings, dtype=object), sort=False)
    per_id = np.full(len(stack_parent) + 1, -1, dtype=np.int64)  # last entry: id -1
    per_id[used] = string_code
    return CallStacks(rows=op_rows.astype(np.int32), code=per_id[ids].astype(np.int32),
                      stacks=pd.Index(uniques.to_numpy(dtype=object), dtype=object),
                      python_events=n_python)


def _threads(events: pd.DataFrame, py_rows: np.ndarray, op_rows: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Dense (pid, tid) group numbers of both row sets (shared numbering)."""
    pid = events["pid"].cat.codes.to_numpy().astype(np.int64) + 1
    tid = events["tid"].cat.codes.to_numpy().astype(np.int64) + 1
    width = len(events["tid"].cat.categories) + 1
    space = (len(events["pid"].cat.categories) + 1) * width
    py_key, op_key = pid[py_rows] * width + tid[py_rows], pid[op_rows] * width + tid[op_rows]
    if space > 4 * (len(py_key) + len(op_key)) + 1024:  # sparse: sort instead of a table
        _, group = np.unique(np.concatenate((py_key, op_key)), return_inverse=True)
        group = group.astype(np.int64)
        return group[:len(py_key)], group[len(py_key):]
    present = np.zeros(space, dtype=bool)
    present[py_key] = True
    present[op_key] = True
    dense = np.cumsum(present) - 1
    return dense[py_key], dense[op_key]


def _frame_labels(categories: pd.Index, name_code: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Frame text (object array) and whether the frame is kept, per name category (plus a
    last entry for code -1). Only the categories the Python events use are tested."""
    labels = np.empty(len(categories) + 1, dtype=object)
    kept = np.zeros(len(categories) + 1, dtype=bool)
    used = np.flatnonzero(np.bincount(name_code[name_code >= 0], minlength=len(categories)))
    for code in used.tolist():
        text = str(categories[code])
        if FRAME_RE.match(text):
            kept[code] = True
            labels[code] = text.replace(";", ",")
    return labels, kept


def _intern_stacks(parent: np.ndarray, depth: np.ndarray, name_code: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stack id per (kept) Python event and, per id, the id of the stack one frame shorter
    (-1 at the outermost frame) and the frame's name code.

    Top-down by depth level: an event's id interns the pair (its parent's id, its name) among
    the events of its level, so equal call paths share one id."""
    stack_id = np.full(len(parent), -1, dtype=np.int64)
    parents: list[np.ndarray] = []
    names: list[np.ndarray] = []
    count = 0
    width = np.int64(int(name_code.max(initial=0)) + 1)
    for level in levels(depth):
        above = parent[level]
        inherited = np.where(above >= 0, stack_id[np.maximum(above, 0)], -1)
        key = (inherited + 1) * width + name_code[level]
        unique, inverse = np.unique(key, return_inverse=True)
        stack_id[level] = count + inverse
        parents.append(unique // width - 1)
        names.append(unique % width)
        count += len(unique)
    return stack_id, np.concatenate(parents), np.concatenate(names)


def _innermost(start: np.ndarray, end: np.ndarray, group: np.ndarray, parent: np.ndarray,
               at: np.ndarray, at_group: np.ndarray) -> np.ndarray:
    """Pre-order position of the innermost Python event of `at_group` open at `at` (start <=
    at < end), -1 for none. The last event of the thread starting at or before `at` is that
    one or one of its descendants (laminar nesting): walk up from it while it has ended.
    Pre-order is sorted by (group, start), so each thread is one slice: one searchsorted each."""
    cand = np.full(len(at), -1, dtype=np.int64)
    bounds = np.searchsorted(group, np.arange(int(group.max()) + 2))
    for g in np.unique(at_group[at_group <= group.max()]).tolist():
        lo, hi = bounds[g], bounds[g + 1]
        if lo == hi:
            continue
        sel = np.flatnonzero(at_group == g)
        pos = np.searchsorted(start[lo:hi], at[sel], "right") - 1
        cand[sel] = np.where(pos >= 0, pos + lo, -1)
    active = np.flatnonzero(cand >= 0)
    while len(active):
        node = cand[active]
        closed = end[node] <= at[active]
        if not closed.any():
            break
        active, node = active[closed], node[closed]
        cand[active] = parent[node]
        active = active[parent[node] >= 0]
    return cand


def _stack_strings(ids: np.ndarray, stack_parent: np.ndarray, stack_name: np.ndarray,
                   labels: np.ndarray, chunk: int = 1 << 16) -> list[str]:
    """`file(line): func;...` for each stack id, innermost first, at most MAX_FRAMES frames:
    the frames are gathered one level at a time for a chunk of ids, then joined once per id."""
    out: list[str] = []
    for first in range(0, len(ids), chunk):
        current = ids[first:first + chunk].copy()
        frames = np.full((len(current), MAX_FRAMES), -1, dtype=np.int64)
        for column in range(MAX_FRAMES):
            alive = np.flatnonzero(current >= 0)
            if len(alive) == 0:
                break
            frames[alive, column] = stack_name[current[alive]]
            current[alive] = stack_parent[current[alive]]
        out.extend(";".join(labels[row[row >= 0]]) for row in frames)
    return out
