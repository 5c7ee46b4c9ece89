"""Kernel-level diff of two traces: GPU kernels by name, or by operator -> kernel.

Every kernel event of each trace counts (all threads, all streams), grouped by kernel name or
by (launching operator, kernel name); the operator is the op-tree node that launched it (`N/A`
for kernels launched outside any operator). Rows are the outer join of both sides, sorted by
|delta| of total time, ties by name. On the `per_step` basis each side is divided by its own
ProfilerStep count (the Diff page's basis, `diff.build_diff`), falling back to totals when a
side has no step.

`operator_kernel` is not the Kernel view's `kernel_op_launch` (`analysis.kernels`), so the two
keep their names. They differ in exactly three ways: (1) `kernel_op_launch` also splits a
(kernel, operator) pair by launch configuration (grid, block, registers per thread, shared
memory): one `operator_kernel` row holds the calls and time of all the Kernel view's rows of
that pair; (2) a kernel replayed by a CUDA/HIP graph whose launch lies in a host annotation
and no operator is `N/A` here, where the Kernel view names the annotation
(`graphs.graph_annotations`): an annotation's name often carries the run's shapes (vLLM's
`execute_32_context_0(...)_generation_32(sq32sk55086...)`), so two traces' rows would not
line up by it; (3) a kernel the op trees do not reach (no launch, and no ProfilerStep thread
whose root takes such kernels: `optree`) counts here as `N/A` and is left out of
`kernel_op_launch` (not of the Kernel view's `kernel` grouping). Every other kernel has the
same operator in both (`tests/analysis/test_kernel_groupings.py`, on real traces too).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...ingest.schema import Kind, TraceTable
from ...views.diff.payload import DiffKernelsPayload
from ..kernels import NO_OPERATOR, kernel_frame
from ..memo import memoised
from ..node_kinds import NodeKind
from ..optree import build_op_tree
from .side import diff_side

GROUPS = ("kernel", "operator_kernel")
_KEYS = {"kernel": ["name"], "operator_kernel": ["operator", "name"]}


def kernel_launches(table: TraceTable) -> pd.DataFrame:
    """One row per kernel event: kernel name, launching operator (or N/A), duration (us)."""
    return memoised(table, "diff_kernel_launches", lambda: _kernel_launches(table))


def _kernel_launches(table: TraceTable) -> pd.DataFrame:
    frame = kernel_frame(table)
    tree = build_op_tree(table)
    kernel = table.events["kind"].to_numpy()[tree.device_rows] == Kind.KERNEL
    rows, owner = tree.device_rows[kernel], tree.device_owner[kernel]
    names = np.append(tree.name_categories.to_numpy(dtype=object), NO_OPERATOR)
    codes = np.where(tree.kind[owner] == NodeKind.ROOT, len(names) - 1, tree.name_code[owner])
    operator = pd.Series(names[codes], index=rows, dtype=object)
    return pd.DataFrame({
        "name": frame["name"].astype(str).to_numpy(dtype=object),
        "operator": operator.reindex(frame["event"].to_numpy()).fillna(NO_OPERATOR).to_numpy(),
        "dur": frame["dur"].to_numpy(dtype=np.float64),
    })


def _side(table: TraceTable, group_by: str, scale: float) -> pd.DataFrame:
    frame = kernel_launches(table)
    keys = _KEYS[group_by]
    grouped = frame.groupby(keys, sort=False)["dur"].agg(["count", "sum"])
    return grouped.rename(columns={"count": "calls", "sum": "total_us"}) / scale


def build_diff_kernels(base: TraceTable, exp: TraceTable, group_by: str = "kernel",
                       basis: str = "per_step") -> DiffKernelsPayload:
    """Kernel time per kernel name (or operator -> kernel) of two traces, and the deltas.

    ```
    {"group_by", "basis": "per_step" | "total", "base_steps", "exp_steps",
     "base_total_us", "exp_total_us", "delta_total_us",   # all kernels, on the basis
     "rows": [{"name", "operator" (operator_kernel only), "base_calls", "exp_calls",
               "delta_calls", "base_total_us", "exp_total_us", "delta_total_us",
               "base_mean_us", "exp_mean_us"}]}   # sorted by |delta_total_us|, then keys
    ```
    """
    if group_by not in GROUPS:
        raise ValueError(f"unknown group_by {group_by!r}; expected one of {', '.join(GROUPS)}")
    steps = (len(diff_side(base).steps), len(diff_side(exp).steps))
    per_step = basis == "per_step" and min(steps) > 0
    scales = (float(steps[0]), float(steps[1])) if per_step else (1.0, 1.0)
    left, right = _side(base, group_by, scales[0]), _side(exp, group_by, scales[1])
    joined = left.add_prefix("base_").join(right.add_prefix("exp_"), how="outer").fillna(0.0)
    joined["delta_calls"] = joined["exp_calls"] - joined["base_calls"]
    joined["delta_total_us"] = joined["exp_total_us"] - joined["base_total_us"]
    for side in ("base", "exp"):
        calls = joined[f"{side}_calls"].to_numpy()
        joined[f"{side}_mean_us"] = np.divide(joined[f"{side}_total_us"].to_numpy(), calls,
                                              out=np.zeros(len(joined)), where=calls > 0)
    keys = _KEYS[group_by]
    out = joined.reset_index().assign(_abs=joined["delta_total_us"].abs().to_numpy())
    out = out.sort_values(["_abs", *keys], ascending=[False] + [True] * len(keys))
    columns = [*keys, "base_calls", "exp_calls", "delta_calls", "base_total_us",
               "exp_total_us", "delta_total_us", "base_mean_us", "exp_mean_us"]
    out = out[columns].round(3)
    if not per_step:
        for column in ("base_calls", "exp_calls", "delta_calls"):
            out[column] = out[column].astype(np.int64)
    totals = (float(left["total_us"].sum()), float(right["total_us"].sum()))
    rows: list[dict[str, Any]] = out.to_dict("records")
    return {"group_by": group_by, "basis": "per_step" if per_step else "total",
            "base_steps": steps[0], "exp_steps": steps[1],
            "base_total_us": round(totals[0], 3), "exp_total_us": round(totals[1], 3),
            "delta_total_us": round(totals[1] - totals[0], 3), "rows": rows}
