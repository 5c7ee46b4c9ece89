"""Per-step summaries of one trace: the small, versioned record `torch-prof compare` and the
baseline store work from (no trace is needed once it is made).

Per step (the Overview's steps, in order) it holds one value per metric, in us:

- `step:Total` (the step time) and `step:<category>` (the step-time breakdown);
- `operator:<name>`: self time of the operator's calls that start inside the step's host
  range (device self time in a trace with device work, else host self time);
- `kernel:<name>`: duration of the kernels that start inside the step's (device-adjusted)
  range;
- `op_category:<category>`: the sum of the operator metrics of the operators of that category
  (`op_categories.operator_categories`).

Besides the values it keeps what decides whether two traces are comparable at all (`device`,
`modules`, `operators`, `structure`) and, per operator with recorded stacks, the call stack
that took most of its time (`sources`, for the markdown report).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from ..breakdown import compute_breakdown
from ..diff.side import diff_side
from ..kernels import kernel_frame
from ..node_kinds import NodeKind
from ..op_categories import operator_categories
from ..operators import has_device_work, operator_frame
from ..optree import build_op_tree

SUMMARY_VERSION = 1
STEP_TOTAL = "step:Total"
SOURCE_FRAMES = 3  # user frames of the heaviest call stack kept per operator


def step_summary(table: TraceTable) -> dict[str, Any]:
    """The per-step summary of one trace (a JSON-able dict, `SUMMARY_VERSION`)."""
    breakdown = compute_breakdown(table)
    steps = breakdown.steps
    metrics: dict[str, list[float]] = {STEP_TOTAL: [float(v) for v in breakdown.totals]}
    for category in breakdown.shown_categories():
        metrics[f"step:{category}"] = [float(v) for v in breakdown.costs[category]]
    device = has_device_work(table)
    operators = _operator_steps(table, steps.host_starts, steps.host_ends, device)
    for name, values in operators.items():
        metrics[f"operator:{name}"] = values
    if operators:  # rows: operators, columns: steps
        frame = pd.DataFrame(list(operators.values()))
        by_category = frame.groupby(operator_categories(table, list(operators))).sum()
        for category, row in by_category.iterrows():
            metrics[f"op_category:{category}"] = [float(v) for v in row]
    for name, values in _kernel_steps(table, steps.starts, steps.ends).items():
        metrics[f"kernel:{name}"] = values
    tree = build_op_tree(table)
    return {
        "version": SUMMARY_VERSION,
        "steps": list(steps.names),
        "from_markers": bool(steps.from_markers),
        "device": _device(table, device),
        "modules": sorted({str(n) for n in tree.names[tree.kind == NodeKind.MODULE]}),
        "operators": sorted(operators),
        "structure": _structure(table),
        "metrics": metrics,
        "sources": _sources(table),
        "state": str(table.status.state),
        "messages": list(table.status.messages),
    }


def _step_index(starts: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    """Per start: the step whose [low, high) holds it, -1 when none does."""
    if len(lows) == 0:
        return np.full(len(starts), -1)
    at = np.searchsorted(lows, starts, side="right") - 1
    inside = (at >= 0) & (starts < highs[np.maximum(at, 0)])
    return np.where(inside, at, -1)


def _per_step(names: np.ndarray, step: np.ndarray, values: np.ndarray, n_steps: int
              ) -> dict[str, list[float]]:
    keep = step >= 0
    if not keep.any():
        return {}
    frame = pd.DataFrame({"name": names[keep].astype(str), "step": step[keep],
                          "value": values[keep]})
    table = frame.pivot_table(index="name", columns="step", values="value", aggfunc="sum",
                              fill_value=0.0).reindex(columns=range(n_steps), fill_value=0.0)
    return {str(name): [float(v) for v in row] for name, row in table.iterrows()}


def _operator_steps(table: TraceTable, lows: np.ndarray, highs: np.ndarray, device: bool
                    ) -> dict[str, list[float]]:
    tree = build_op_tree(table)
    nodes = np.flatnonzero(tree.is_operator)
    values = (tree.device_self if device else tree.host_self)[nodes]
    step = _step_index(tree.start[nodes], lows, highs)
    return _per_step(tree.names[nodes], step, values, len(lows))  # float64 per node


def _kernel_steps(table: TraceTable, lows: np.ndarray, highs: np.ndarray
                  ) -> dict[str, list[float]]:
    frame = kernel_frame(table)
    if frame.empty:
        return {}
    starts = table.events["ts"].to_numpy()[frame["event"].to_numpy()]
    step = _step_index(starts, lows, highs)
    return _per_step(frame["name"].to_numpy(), step, frame["dur"].to_numpy(), len(lows))


def _device(table: TraceTable, device_work: bool) -> str:
    """"CPU" for a trace without device work, else the devices' names."""
    if not device_work:
        return "CPU"
    names = sorted({str(p.get("name")) for p in table.metadata.device_properties or []
                    if isinstance(p, dict) and p.get("name")})
    return ", ".join(names) or "GPU (unnamed)"


def _structure(table: TraceTable) -> list[str]:
    """The most common sequence of anchors (modules, DataLoader, optimizer, backward nodes)
    directly under a step of the main thread, as "kind:name" strings."""
    side = diff_side(table)
    shapes = Counter()
    for step in side.steps.tolist():
        kids = side.children(int(step))
        shapes[tuple(":".join(side.key(k)) for k in kids if side.is_anchor(k))] += 1
    return list(shapes.most_common(1)[0][0]) if shapes else []


def _sources(table: TraceTable) -> dict[str, list[str]]:
    """Per operator with recorded stacks: the first frames of its heaviest call stack."""
    frame = operator_frame(table)
    frame = frame[frame["has_call_stack"]]
    if frame.empty:
        return {}
    tree = build_op_tree(table)
    nodes = frame["node"].to_numpy()
    stacks = pd.DataFrame({"name": frame["name"].astype(str).to_numpy(),
                           "stack": frame["call_stack"].astype(str).to_numpy(),
                           "time": tree.host_self[nodes] + tree.device_self[nodes]})
    heaviest = stacks.groupby(["name", "stack"])["time"].sum().reset_index()
    # a sort on two columns is a stable lexsort: equal times keep the stacks' text order
    heaviest = heaviest.sort_values(["name", "time"], ascending=[True, False])
    first = heaviest.drop_duplicates("name")
    return {name: user_frames(stack) for name, stack in zip(first["name"], first["stack"])}


def user_frames(stack: str) -> list[str]:
    """The innermost `SOURCE_FRAMES` frames of a ";"-joined call stack (innermost first)
    outside torch's own files ("torch/...", "<built-in ...>"); the innermost frames when every
    frame is torch's."""
    frames = [f.strip() for f in stack.split(";") if f.strip()]
    user = [f for f in frames if not f.startswith(("torch/", "<built-in", "<frozen"))
            and "site-packages/" not in f]
    return (user or frames)[:SOURCE_FRAMES]
