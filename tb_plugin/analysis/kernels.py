"""Kernel view (spec 1.3, 3.8): kernels by name, or by name + operator + launch configuration.

`kernel_op_launch` is not the Diff view's `operator_kernel` (`analysis.diff.kernels`, which
says how they differ: the launch configuration, graph kernels in an annotation, and kernels
the op trees do not reach).

Blocks/SM and est. achieved occupancy are Kineto's args; kernels without them (older Kineto,
ROCm, hand-made traces) get them derived from grid/block and `deviceProperties` with Kineto's own
formulas. Means are weighted by duration (a missing value counts as 0 but keeps its weight).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable
from ..views.kernels.payload import KernelPiesPayload, KernelsPayload
from .correlation import complete_rows
from .efficiency.roofline import trace_matrix_units
from .efficiency.tensor_cores import event_tc_eligible_flags, event_tc_flags
from .events import kernel_device_ids
from .graphs import graph_annotations
from .launch import fill_launch_estimates
from .memo import memoised
from .node_kinds import NodeKind
from .op_categories import OTHER, categorize, category_rollup, device_categories, dominant
from .optree import build_op_tree

GROUP_BY_KERNEL = "kernel"
GROUP_BY_KERNEL_OP = "kernel_op_launch"
GROUP_BY = (GROUP_BY_KERNEL, GROUP_BY_KERNEL_OP)
NO_OPERATOR = "N/A"
_LAUNCH_KEYS = ("grid", "block", "registers_per_thread", "shared_memory")
_FLAG_COLUMNS = (("blocks_per_sm", "has_blocks_per_sm"), ("occupancy_pct", "has_occupancy"))


def kernel_frame(table: TraceTable) -> pd.DataFrame:
    """One row per kernel event: name, duration, launch config, blocks/SM, occupancy (%)."""
    return memoised(table, "kernel_view_frame", lambda: _kernel_frame(table))


def _kernel_frame(table: TraceTable) -> pd.DataFrame:
    events = table.events
    rows = complete_rows(events, (Kind.KERNEL,))
    args = table.device_args.drop_duplicates("event").set_index("event").reindex(rows)
    frame = pd.DataFrame({
        "event": rows,
        "name": events["name"].array[rows],
        "dur": events["dur"].to_numpy()[rows],
        "tensor_cores": event_tc_flags(table)[rows],
        "device": kernel_device_ids(table, rows),
        "grid": args["grid"].astype("category").array,
        "block": args["block"].astype("category").array,
        "registers_per_thread": args["registers_per_thread"].to_numpy(dtype=np.float64),
        "shared_memory": args["shared_memory"].to_numpy(dtype=np.float64),
        "blocks_per_sm": args["blocks_per_sm"].to_numpy(dtype=np.float64),
        "occupancy": args["occupancy"].to_numpy(dtype=np.float64),
    })
    fill_launch_estimates(table, frame, frame["grid"], frame["block"],
                          frame["registers_per_thread"].to_numpy(),
                          frame["shared_memory"].to_numpy())
    return frame


def _weighted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """calls, total, mean, max, min and duration-weighted blocks/SM and occupancy per group."""
    dur = frame["dur"]
    work = frame.assign(bpsm_w=frame["blocks_per_sm"].fillna(0.0) * dur,
                        occ_w=frame["occupancy"].fillna(0.0) * dur)
    grouped = work.groupby(keys, sort=False, observed=True, dropna=False)
    out = grouped.agg(calls=("dur", "size"), total_us=("dur", "sum"), max_us=("dur", "max"),
                      min_us=("dur", "min"), bpsm_w=("bpsm_w", "sum"), occ_w=("occ_w", "sum"),
                      tensor_cores=("tensor_cores", "first"))
    out["mean_us"] = out["total_us"] / out["calls"]
    total = out["total_us"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["blocks_per_sm"] = np.where(total > 0, out["bpsm_w"] / total, 0.0)
        out["occupancy_pct"] = np.where(total > 0, out["occ_w"] / total, 0.0)
    return out.drop(columns=["bpsm_w", "occ_w"])


def kernel_table(table: TraceTable, group_by: str = GROUP_BY_KERNEL) -> pd.DataFrame:
    """The Kernel view as a DataFrame, the one source its payload is shaped from (spec 1.3):
    rows sorted by total time desc, ties by the key columns.

    Columns: name, category (`op_categories`), [operator, grid, block (text or None),
    registers_per_thread, shared_memory (NaN when absent), op_tc_eligible] when grouped by
    kernel_op_launch, then tensor_cores, calls, total/mean/max/min duration (us, unrounded),
    duration-weighted blocks_per_sm and occupancy_pct (NaN in every row when no kernel had,
    or got derived, the value).
    """
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {GROUP_BY}, not {group_by!r}")
    frame = kernel_frame(table)
    if group_by == GROUP_BY_KERNEL:
        agg, keys = _weighted(frame, ["name"]).reset_index(), ["name"]
        agg["name"] = agg["name"].astype(object)
    else:
        agg, keys = _by_operator(table, frame)
        for column in ("grid", "block"):
            agg[f"{column}_text"] = agg[column].map(lambda v: "None" if pd.isna(v) else str(v))
            agg[column] = pd.Series([None if pd.isna(v) else str(v) for v in agg[column]],
                                    index=agg.index, dtype=object)
        agg["op_tc_eligible"] = agg["op_tc_eligible"].astype(bool)
    agg = agg.sort_values(["total_us", *keys], ascending=[False] + [True] * len(keys),
                          kind="stable")
    flags = _flags(frame)
    for column, flag in _FLAG_COLUMNS:
        if not flags[flag]:
            agg[column] = np.nan
    agg["category"] = _categories(table, agg, group_by)
    out = agg[_columns(group_by)].reset_index(drop=True)
    return out.astype({"tensor_cores": bool, "calls": np.int64})


def _categories(table: TraceTable, agg: pd.DataFrame, group_by: str) -> np.ndarray:
    """Per row, its op category (`op_categories`): by operator then kernel name when grouped
    with the operator; else the category holding most of the kernel name's time."""
    if len(agg) == 0:
        return np.empty(0, dtype=object)
    if group_by == GROUP_BY_KERNEL_OP:
        return np.asarray([_category(str(name), str(op))
                           for name, op in zip(agg["name"], agg["operator"])], dtype=object)
    lookup = dominant(device_categories(table), "kernel")
    return np.asarray([lookup.get(name, OTHER) for name in agg["name"]], dtype=object)


def _category(kernel: str, operator: str) -> str:
    category = categorize(operator, True) if operator != NO_OPERATOR else OTHER
    return category if category != OTHER else categorize(kernel, False)


def _columns(group_by: str) -> list[str]:
    columns = ["name", "category"]
    if group_by == GROUP_BY_KERNEL_OP:
        columns += ["operator", *_LAUNCH_KEYS, "op_tc_eligible"]
    return columns + ["tensor_cores", "calls", "total_us", "mean_us", "max_us", "min_us",
                      "blocks_per_sm", "occupancy_pct"]


def _flags(frame: pd.DataFrame) -> dict[str, bool]:
    """Whether any kernel had (or got derived) blocks/SM, occupancy."""
    return {"has_blocks_per_sm": bool(frame["blocks_per_sm"].notna().any()),
            "has_occupancy": bool(frame["occupancy"].notna().any())}


def build_kernels(table: TraceTable, group_by: str = GROUP_BY_KERNEL) -> KernelsPayload:
    """`kernel_table` shaped for JSON: durations us with 3 decimals, blocks/SM and occupancy
    with 2, or None in every row when `has_blocks_per_sm` / `has_occupancy` is false."""
    rows = kernel_table(table, group_by)
    flags = _flags(kernel_frame(table))
    return {"rows": _rows(rows, group_by, flags), **flags,
            "categories": category_rollup(table)}


def _by_operator(table: TraceTable, frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Kernels reachable from the op trees, grouped like the reference's key
    name###operator###str(grid)###str(block)###(regs or 0)###(shmem or 0); operator N/A for
    kernels hanging off a root (staled, or launched outside any op), except the kernels of a
    graph launch inside a host annotation: that annotation (`graphs.graph_annotations`)."""
    tree = build_op_tree(table)
    kernel = table.events["kind"].to_numpy()[tree.device_rows] == Kind.KERNEL
    rows, owner = tree.device_rows[kernel], tree.device_owner[kernel]
    order = np.argsort(rows, kind="stable")
    rows, owner = rows[order], owner[order]
    work = frame.set_index("event").loc[rows].reset_index()
    is_root = tree.kind[owner] == NodeKind.ROOT
    codes = np.where(is_root, len(tree.name_categories), tree.name_code[owner])
    work["operator"] = pd.Categorical.from_codes(
        codes, tree.name_categories.append(pd.Index([NO_OPERATOR])))
    annotation = graph_annotations(table, rows)  # replayed graph kernels: the annotation
    if (annotation != "").any():
        work["operator"] = pd.Categorical(np.where(
            annotation != "", annotation, work["operator"].astype(object).to_numpy()))
    work["op_tc_eligible"] = ~is_root & event_tc_eligible_flags(table)[np.maximum(
        tree.event[owner], 0)]
    for column in ("registers_per_thread", "shared_memory"):  # the reference's `x or '0'`
        work[f"{column}_key"] = np.nan_to_num(work[column].to_numpy(), nan=0.0)
    keys = ["name", "operator", "grid", "block", "registers_per_thread_key",
            "shared_memory_key"]
    agg = _weighted(work, keys)
    first = work.groupby(keys, sort=False, observed=True, dropna=False)[
        ["op_tc_eligible", "registers_per_thread", "shared_memory"]].first()
    agg = agg.join(first).reset_index()
    for key in ("name", "operator", "grid", "block"):
        agg[key] = agg[key].astype(object)
    return agg, ["name", "operator", "grid_text", "block_text", "registers_per_thread_key",
                 "shared_memory_key"]


def _rows(agg: pd.DataFrame, group_by: str, flags: dict[str, bool]) -> list[dict[str, Any]]:
    out = agg.copy()
    for column in ("total_us", "mean_us", "max_us", "min_us"):
        out[column] = out[column].round(3)
    out["calls"] = out["calls"].astype(int)
    for column, flag in _FLAG_COLUMNS:
        out[column] = out[column].round(2).astype(object) if flags[flag] else None
    records = out.to_dict("records")
    if group_by == GROUP_BY_KERNEL_OP:
        for record in records:
            _clean_launch(record)
    return records


def _clean_launch(record: dict[str, Any]) -> None:
    """JSON-friendly launch attributes: ints, and None where the kernel had none."""
    record["op_tc_eligible"] = bool(record["op_tc_eligible"])
    for column in ("registers_per_thread", "shared_memory"):
        value = record[column]
        record[column] = int(value) if value is not None and np.isfinite(value) else None


def build_kernel_pies(table: TraceTable, top_n: Optional[int] = 10) -> KernelPiesPayload:
    """Top-N kernels by total time (ties by name) and the tensor-core share of kernel time:
    {"total": [{"name", "value"}], "tensor_cores": {"using", "not_using"} or None,
    "matrix_units": "tensor cores" | "matrix cores" (AMD)}."""
    frame = kernel_frame(table)
    totals = frame.groupby("name", sort=False, observed=True)["dur"].sum().reset_index()
    totals["name"] = totals["name"].astype(object)  # lexical ties, not category order
    totals = totals.sort_values(["dur", "name"], ascending=[False, True], kind="stable")
    if top_n is not None:
        totals = totals.head(max(int(top_n), 0))
    pie = [{"name": str(n), "value": round(float(v), 3)} for n, v in zip(totals["name"],
                                                                           totals["dur"])]
    total = float(frame["dur"].sum())
    using = float(frame.loc[frame["tensor_cores"], "dur"].sum()) / total if total > 0 else 0.0
    tensor_cores = {"using": using, "not_using": 1.0 - using} if len(frame) else None
    return {"total": pie, "tensor_cores": tensor_cores,
            "matrix_units": trace_matrix_units(table)}
