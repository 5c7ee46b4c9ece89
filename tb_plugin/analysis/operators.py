"""Operator view (spec 1.2, 3.7): the op table, its top-N pies and per-call-stack rows.

Aggregates the operator nodes of every thread's tree (`optree`) with one pandas groupby; the
rows are reference-faithful (the golden 76 rows of resnet50_gpu_pt19), with ties sorted by name.
Call stacks are the recorded `Call stack` args of PyTorch 1.x traces, or, for PyTorch 2.x traces
(which have none), derived from their `python_function` events (`callstacks`).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import DEVICE_KINDS, TraceTable
from .callstacks import python_call_stacks
from .optree import build_op_tree

GROUP_BY_OPERATOR = "operator"
GROUP_BY_INPUT_SHAPE = "operator_input_shape"
GROUP_BY = (GROUP_BY_OPERATOR, GROUP_BY_INPUT_SHAPE)
_SUMS = ("host_total_us", "host_self_us", "device_total_us", "device_self_us", "tc_self_us",
         "tc_total_us")


class UnknownOperatorError(KeyError):
    """No operator (group) with that name (and input shape): the server answers 404."""


def _check_group_by(group_by: str) -> None:
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {GROUP_BY}, not {group_by!r}")


def operator_frame(table: TraceTable) -> pd.DataFrame:
    """One row per operator node (spec 3.7 predicate), in the reference's visiting order
    (threads first-seen, each tree post-order), with stats, input shape and call stack."""
    return table.memo("operator_frame", lambda: _operator_frame(table))


def _operator_frame(table: TraceTable) -> pd.DataFrame:
    tree = build_op_tree(table)
    nodes = np.flatnonzero(tree.is_operator)
    nodes = nodes[np.lexsort((-tree.depth[nodes], tree.subtree_end[nodes]))]  # post-order
    shape, stack = _op_args(table, tree.event[nodes])
    return pd.DataFrame({
        "node": nodes,
        "name": pd.Categorical.from_codes(tree.name_code[nodes], tree.name_categories),
        "input_shape": shape,
        "call_stack": stack,
        "has_call_stack": np.asarray(stack.categories != "")[stack.codes],
        "host_total_us": tree.host_total[nodes],
        "host_self_us": tree.host_self[nodes],
        "device_total_us": tree.device_total[nodes],
        "device_self_us": tree.device_self[nodes],
        "tc_self_us": tree.tc_self[nodes],
        "tc_total_us": tree.tc_total[nodes],
        "tc_eligible": tree.tc_eligible[nodes],
    })


def _op_args(table: TraceTable, rows: np.ndarray) -> tuple[pd.Categorical, pd.Categorical]:
    """Input shape ("[]" when absent, as the reference) and call stack ("" when absent)."""
    args = table.op_args.drop_duplicates("event").set_index("event").reindex(rows)
    return _filled(args["input_dims"], "[]"), _call_stacks(table, rows, args["call_stack"])


def has_recorded_call_stacks(table: TraceTable) -> bool:
    """Whether the trace carries PyTorch 1.x `Call stack` arguments (then they are used)."""
    return bool(table.op_args["call_stack"].notna().any())


def _call_stacks(table: TraceTable, rows: np.ndarray, recorded: pd.Series) -> pd.Categorical:
    """Per op: the recorded 1.x `Call stack` when the trace has any, else the stack derived
    from the PyTorch 2.x `python_function` events around it (`callstacks`); "" when none.
    Both are `file(line): func;...` strings, innermost frame first."""
    if has_recorded_call_stacks(table):
        return _filled(recorded, "")
    return python_call_stacks(table).of_rows(rows, "")


def _filled(column: pd.Series, value: str) -> pd.Categorical:
    values = column.astype("category").array
    if value not in values.categories:
        values = values.add_categories([value])
    return values.fillna(value)


def has_device_work(table: TraceTable) -> bool:
    """Whether the trace has kernels, memcpy or memset (the table then sorts by device time)."""
    kind = table.events["kind"].to_numpy()
    return bool(np.isin(kind, np.asarray(DEVICE_KINDS, dtype=kind.dtype)).any())


def _keys(group_by: str) -> list[str]:
    return ["name", "input_shape"] if group_by == GROUP_BY_INPUT_SHAPE else ["name"]


def _aggregate(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    grouped = frame.groupby(keys, sort=False, observed=True, dropna=False)
    out = grouped[list(_SUMS)].sum()
    out["calls"] = grouped.size()
    out["tc_eligible"] = grouped["tc_eligible"].first()  # the reference takes the first op's
    out["has_call_stack"] = grouped["has_call_stack"].any()
    out = out.reset_index()
    for key in keys:
        out[key] = out[key].astype(object)
    return out


def _ratio(part: pd.Series, whole: pd.Series) -> np.ndarray:
    whole = whole.to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.round(np.where(whole > 0, 100.0 * part.to_numpy() / whole, 0.0), 2)


def _sort(agg: pd.DataFrame, by: str, keys: list[str]) -> pd.DataFrame:
    return agg.sort_values([by, *keys], ascending=[False] + [True] * len(keys), kind="stable")


def _rows(agg: pd.DataFrame, shape_mode: bool, extra: str) -> list[dict[str, Any]]:
    agg = agg.assign(tc_self_pct=_ratio(agg["tc_self_us"], agg["device_self_us"]),
                     tc_total_pct=_ratio(agg["tc_total_us"], agg["device_total_us"]))
    columns = ["name", *(["input_shape"] if shape_mode else []), "calls", "host_self_us",
               "host_total_us", "device_self_us", "device_total_us", "tc_eligible",
               "tc_self_pct", "tc_total_pct", extra]
    out = agg[columns].copy()
    for column in ("host_self_us", "host_total_us", "device_self_us", "device_total_us"):
        out[column] = out[column].round(3)
    out["calls"] = out["calls"].astype(int)
    return out.to_dict("records")


def build_operators(table: TraceTable, group_by: str = GROUP_BY_OPERATOR) -> dict[str, Any]:
    """The operator table: one row per name (or name + input shape), spec 1.2.

    Rows sort by device self time when the trace has device work, else by host self time;
    ties by name (and shape). Durations are us (3 decimals), ratios percent (2 decimals).
    """
    _check_group_by(group_by)
    frame, keys = operator_frame(table), _keys(group_by)
    has_device = has_device_work(table)
    sort_by = "device_self_us" if has_device else "host_self_us"
    agg = _aggregate(frame, keys)
    rows = _rows(_sort(agg, sort_by, keys), group_by == GROUP_BY_INPUT_SHAPE, "has_call_stack")
    return {"rows": rows, "sort_by": sort_by, "has_device": has_device}


def build_call_stacks(table: TraceTable, name: str, input_shape: Optional[str] = None,
                      group_by: str = GROUP_BY_OPERATOR) -> dict[str, Any]:
    """Rows of one operator (group), one per distinct non-empty call stack (spec 1.2 stack).

    Raises `UnknownOperatorError` when no operator has that name (and input shape).
    """
    _check_group_by(group_by)
    shape_mode = group_by == GROUP_BY_INPUT_SHAPE
    frame = operator_frame(table)
    mask = frame["name"] == name
    if shape_mode and input_shape is not None:
        mask &= frame["input_shape"] == input_shape
    if not mask.any():
        what = f"{name!r}" + (f" with input shape {input_shape!r}" if input_shape else "")
        raise UnknownOperatorError(f"no operator {what}")
    selected = frame[mask & frame["has_call_stack"]]
    keys = [*_keys(group_by), "call_stack"]
    has_device = has_device_work(table)
    sort_by = "device_self_us" if has_device else "host_self_us"
    agg = _sort(_aggregate(selected, keys), sort_by, keys)
    return {"rows": _rows(agg, shape_mode, "call_stack"), "sort_by": sort_by,
            "has_device": has_device}


def build_operator_pies(table: TraceTable, top_n: Optional[int] = 10,
                        group_by: str = GROUP_BY_OPERATOR) -> dict[str, Any]:
    """Top-N operators by device self/total and host self/total time.

    Each entry is a list of {"name", "value"} (value > 0, descending, ties by label), or None when
    no operator qualifies. In shape mode the label is "name input_shape", so two shapes of one op
    are told apart (the reference labelled both by name).
    """
    _check_group_by(group_by)
    agg = _aggregate(operator_frame(table), _keys(group_by))
    labels = agg["name"]
    if group_by == GROUP_BY_INPUT_SHAPE:
        labels = agg["name"] + " " + agg["input_shape"]
    out: dict[str, Any] = {}
    for key, column in (("device_total", "device_total_us"), ("device_self", "device_self_us"),
                        ("host_total", "host_total_us"), ("host_self", "host_self_us")):
        out[key] = _top(labels, agg[column], top_n)
    return out


def _top(labels: pd.Series, values: pd.Series, top_n: Optional[int]
         ) -> Optional[list[dict[str, Any]]]:
    frame = pd.DataFrame({"name": labels.to_numpy(), "value": values.to_numpy()})
    frame = frame[frame["value"] > 0].sort_values(["value", "name"], ascending=[False, True])
    if top_n is not None:
        frame = frame.head(max(int(top_n), 0))
    if frame.empty:
        return None
    frame["value"] = frame["value"].round(3)
    return frame.to_dict("records")
