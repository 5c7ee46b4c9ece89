"""FSDP / module awareness of communication calls, per rank (part of `dist_summary`).

Module of a call: the innermost *module event* on the call's host thread that contains the
call's host start. Module events are
- `nn.Module: <Name>` python_function events (the profiler's `with_stack` + `with_modules`),
  labelled `<Name>`;
- FSDP record functions that name a module in parentheses (FSDP2:
  `FSDP::pre_forward (layers.0)`, `FSDP::post_backward_reduce (layers.1)`), labelled with that
  name.
FSDP1's `FullyShardedDataParallel.*` record functions name no module and are not module
events. Nesting is `nesting.nest` over module events and the calls' starts as instants (leaves),
so a call's parent is its innermost enclosing module event, vectorised.

Compute overlap of a call: the length of its device span (first communication kernel start to
last kernel end), else its host range, covered by computation (non-communication kernels, or
CPU ops when the trace has no kernels: the overlap chart's computation).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...ingest.schema import Kind, TraceTable
from .. import ranges as rg
from ..breakdown import CPU_EXEC, KERNEL, role_ranges
from ..nesting import nest

NN_MODULE = "nn.Module: "
FSDP_MODULE = re.compile(r"^FSDP::.*\(([^()]+)\)\s*$")
SOURCE_NN_MODULE, SOURCE_FSDP = "nn.Module", "FSDP annotations"


def thread_keys(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """(pid, tid) of `rows` as one integer, as `distributed._group_calls` numbers threads."""
    return (events["pid"].cat.codes.to_numpy()[rows].astype(np.int64)
            * (len(events["tid"].cat.categories) + 1)
            + events["tid"].cat.codes.to_numpy()[rows])


def module_events(table: TraceTable) -> tuple[np.ndarray, np.ndarray, str]:
    """(rows of module events, their labels, the source: nn.Module, FSDP annotations, both
    joined by " + ", or "")."""
    events = table.events
    names = events["name"].cat.categories.astype(str)
    nn_label = pd.Series(names).str.slice(len(NN_MODULE)).where(
        pd.Series(names).str.startswith(NN_MODULE))
    fsdp_label = pd.Series(names).str.extract(FSDP_MODULE, expand=False)
    label = nn_label.fillna(fsdp_label)
    codes = events["name"].cat.codes.to_numpy()
    has = np.append(label.notna().to_numpy(), False)[codes]  # code -1 (no name): none
    kind = events["kind"].to_numpy()
    host = np.isin(kind, (Kind.PYTHON_FUNCTION, Kind.USER_ANNOTATION, Kind.CPU_OP))
    rows = np.flatnonzero(has & host & np.isfinite(events["dur"].to_numpy()))
    labels = label.to_numpy(dtype=object)[codes[rows]]
    sources = [s for s, found in ((SOURCE_NN_MODULE, nn_label.notna().to_numpy()),
                                  (SOURCE_FSDP, fsdp_label.notna().to_numpy()))
               if found[np.unique(codes[rows])].any()] if rows.size else []
    return rows, labels, " + ".join(sources)


def call_modules(table: TraceTable, call_thread: np.ndarray, call_start: np.ndarray
                 ) -> tuple[list[str], str]:
    """Per call (its host thread key and start), the label of its innermost enclosing module
    event ("" when none), and the source of the labels."""
    rows, labels, source = module_events(table)
    n_calls = len(call_start)
    if rows.size == 0 or n_calls == 0:
        return [""] * n_calls, source
    events = table.events
    m_start = events["ts"].to_numpy()[rows]
    m_end = m_start + events["dur"].to_numpy()[rows]
    group = np.concatenate([thread_keys(events, rows), np.asarray(call_thread, np.int64)])
    start = np.concatenate([m_start, np.asarray(call_start, np.float64)])
    end = np.concatenate([m_end, np.asarray(call_start, np.float64)])
    nesting = nest(group, start, end)
    position = np.empty(len(start), dtype=np.int64)
    position[nesting.order] = np.arange(len(start))
    parent = nesting.parent[position[rows.size:]]  # sorted position of each call's parent
    parent_input = np.where(parent >= 0, nesting.order[np.maximum(parent, 0)], -1)
    is_module = (parent_input >= 0) & (parent_input < rows.size)
    out = np.where(is_module, labels[np.where(is_module, parent_input, 0)], "")
    return [str(x) for x in out], source


def compute_overlap(table: TraceTable, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per window [lo, hi): us covered by computation (see the module docstring)."""
    roles = role_ranges(table)
    compute = roles[KERNEL] if len(roles[KERNEL][0]) else roles[CPU_EXEC]
    return rg.length_in_windows(compute, lo, hi)
