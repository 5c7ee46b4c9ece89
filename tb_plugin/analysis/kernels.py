"""Kernel view (spec 1.3, 3.8): kernels by name, or by name + operator + launch configuration.

Blocks/SM and est. achieved occupancy are Kineto's args; kernels without them (older Kineto,
ROCm, hand-made traces) get them derived from grid/block and `deviceProperties` with Kineto's own
formulas. Means are weighted by duration (a missing value counts as 0 but keeps its weight).
"""

from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable
from .correlation import complete_rows
from .optree import NodeKind, build_op_tree
from .tensor_cores import event_tc_eligible_flags, event_tc_flags, kernel_device_ids

GROUP_BY_KERNEL = "kernel"
GROUP_BY_KERNEL_OP = "kernel_op_launch"
GROUP_BY = (GROUP_BY_KERNEL, GROUP_BY_KERNEL_OP)
NO_OPERATOR = "N/A"
#: Max resident blocks per SM by compute capability (CUDA occupancy calculator); others 32.
_MAX_BLOCKS_PER_SM = {(7, 5): 16, (8, 6): 16, (8, 7): 16, (8, 9): 24, (3, 0): 16, (3, 5): 16,
                      (3, 7): 16}
_LAUNCH_KEYS = ("grid", "block", "registers_per_thread", "shared_memory")


def kernel_frame(table: TraceTable) -> pd.DataFrame:
    """One row per kernel event: name, duration, launch config, blocks/SM, occupancy (%)."""
    return table.memo("kernel_view_frame", lambda: _kernel_frame(table))


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
    _derive_missing(table, frame)
    return frame


def _derive_missing(table: TraceTable, frame: pd.DataFrame) -> None:
    """Fill absent blocks/SM and occupancy from the launch config, one vectorised pass per GPU."""
    missing = frame["blocks_per_sm"].isna() | frame["occupancy"].isna()
    if not missing.any():
        return
    blocks, threads = dims_product(frame["grid"]), dims_product(frame["block"])
    device = frame["device"].to_numpy()
    for gpu in np.unique(device[missing.to_numpy() & np.isfinite(device)]):
        sel = missing.to_numpy() & (device == gpu)
        bpsm, occ = estimate_launch(device_properties(table, int(gpu)), blocks[sel],
                                    threads[sel],
                                    frame["registers_per_thread"].to_numpy()[sel],
                                    frame["shared_memory"].to_numpy()[sel])
        for column, estimate in (("blocks_per_sm", bpsm), ("occupancy", occ)):
            current = frame.loc[sel, column].to_numpy()
            frame.loc[sel, column] = np.where(np.isfinite(current), current, estimate)


def dims_product(values: pd.Series) -> np.ndarray:
    """"[4, 106, 1]" -> 424 for each value (parsed once per distinct string); NaN if malformed."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    products = np.full(len(uniques) + 1, np.nan)
    for i, text in enumerate(uniques):
        numbers = [int(n) for n in re.findall(r"-?\d+", str(text))]
        if numbers and all(n > 0 for n in numbers):
            products[i] = float(np.prod(numbers))
    return products[codes]


def device_properties(table: TraceTable, device: int) -> dict[str, Any]:
    """`deviceProperties` of a GPU: the entry whose `id` matches, else the list position."""
    props = table.metadata.device_properties or []
    for entry in props:
        if isinstance(entry, dict) and entry.get("id") == device:
            return entry
    if 0 <= device < len(props) and isinstance(props[device], dict):
        return props[device]
    return {}


def estimate_launch(props: dict[str, Any], blocks: np.ndarray, threads: np.ndarray,
                    regs: np.ndarray, shmem: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kineto's blocks/SM (= blocks / SMs) and est. achieved occupancy % (= min(blocks/SM,
    active blocks per SM) * threads per block / max threads per SM). The active-block limit is
    approximated from the thread, register (256-per-warp granularity), shared-memory and
    block-count limits; NaN where the properties or the launch config are missing."""
    nan = np.full(len(blocks), np.nan)
    sms, max_threads = _positive(props.get("numSms")), _positive(
        props.get("maxThreadsPerMultiprocessor"))
    if sms is None or max_threads is None:
        return nan, nan
    warp = _positive(props.get("warpSize")) or 32.0
    with np.errstate(divide="ignore", invalid="ignore"):
        warps = np.ceil(threads / warp)
        limits = [np.floor(max_threads / (warps * warp))]
        regs_per_sm = _positive(props.get("regsPerMultiprocessor"))
        if regs_per_sm is not None:
            per_block = np.ceil(np.nan_to_num(regs) * warp / 256.0) * 256.0 * warps
            limits.append(np.where(per_block > 0, np.floor(regs_per_sm / per_block), np.inf))
        smem_per_sm = _positive(props.get("sharedMemPerMultiprocessor"))
        if smem_per_sm is not None:
            smem = np.nan_to_num(shmem)
            limits.append(np.where(smem > 0, np.floor(smem_per_sm / smem), np.inf))
        capability = (props.get("computeMajor"), props.get("computeMinor"))
        limits.append(np.full(len(blocks), float(_MAX_BLOCKS_PER_SM.get(capability, 32))))
        blocks_per_sm = blocks / sms
        active = np.minimum(blocks_per_sm, np.minimum.reduce(limits))
        occupancy = active * threads / max_threads * 100.0
    valid = np.isfinite(blocks) & np.isfinite(threads) & (threads > 0)
    return np.where(valid, blocks_per_sm, np.nan), np.where(valid, occupancy, np.nan)


def _positive(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


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


def build_kernels(table: TraceTable, group_by: str = GROUP_BY_KERNEL) -> dict[str, Any]:
    """The kernel table (spec 1.3): rows sorted by total time desc, ties by the key columns.

    `has_blocks_per_sm` / `has_occupancy` say whether any kernel had (or got derived) the value;
    when false the row value is None. Durations are us (3 decimals), means 2 decimals.
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
    flags = {"has_blocks_per_sm": bool(frame["blocks_per_sm"].notna().any()),
             "has_occupancy": bool(frame["occupancy"].notna().any())}
    agg = agg.sort_values(["total_us", *keys], ascending=[False] + [True] * len(keys),
                          kind="stable")
    return {"rows": _rows(agg, group_by, flags), **flags}


def _by_operator(table: TraceTable, frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Kernels reachable from the op trees, grouped like the reference's key
    name###operator###str(grid)###str(block)###(regs or 0)###(shmem or 0); operator N/A for
    kernels hanging off a root (staled, or launched outside any op)."""
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
    columns = ["name"]
    if group_by == GROUP_BY_KERNEL_OP:
        columns += ["operator", *_LAUNCH_KEYS, "op_tc_eligible"]
    columns += ["tensor_cores", "calls", "total_us", "mean_us", "max_us", "min_us",
                "blocks_per_sm", "occupancy_pct"]
    out = agg[columns].copy()
    for column in ("total_us", "mean_us", "max_us", "min_us"):
        out[column] = out[column].round(3)
    out["calls"] = out["calls"].astype(int)
    out["tensor_cores"] = out["tensor_cores"].astype(bool)
    for column, flag in (("blocks_per_sm", "has_blocks_per_sm"), ("occupancy_pct",
                                                                  "has_occupancy")):
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
    for column in ("grid", "block"):
        value = record[column]
        record[column] = None if value is None or (isinstance(value, float) and np.isnan(
            value)) else str(value)


def build_kernel_pies(table: TraceTable, top_n: Optional[int] = 10) -> dict[str, Any]:
    """Top-N kernels by total time (ties by name) and the tensor-core share of kernel time:
    {"total": [{"name", "value"}], "tensor_cores": {"using", "not_using"} or None}."""
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
    return {"total": pie, "tensor_cores": tensor_cores}
