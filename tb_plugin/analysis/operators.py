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
from ..views.operators.payload import CallStacksPayload, OperatorPiesPayload, OperatorsPayload
from .callstacks import python_call_stacks
from .events import filled_categorical
from .memo import memoised
from .op_categories import operator_categories
from .optree import build_op_tree

GROUP_BY_OPERATOR = "operator"
GROUP_BY_INPUT_SHAPE = "operator_input_shape"
GROUP_BY = (GROUP_BY_OPERATOR, GROUP_BY_INPUT_SHAPE)
#: The Operator view's columns after the key columns (name, input shape): us and percent.
TABLE_COLUMNS = ("calls", "host_self_us", "host_total_us", "device_self_us", "device_total_us",
                 "tc_eligible", "tc_self_pct", "tc_total_pct")


class UnknownOperatorError(KeyError):
    """No operator (group) with that name (and input shape): the server answers 404."""


def _check_group_by(group_by: str) -> None:
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {GROUP_BY}, not {group_by!r}")


def operator_frame(table: TraceTable) -> pd.DataFrame:
    """One row per operator node (spec 3.7 predicate), in the reference's visiting order
    (threads first-seen, each tree post-order): node, name, input shape and call stack.

    Kept for the table's lifetime, so only keys are stored; the times are read from the op tree
    when a table is aggregated (`_aggregate`)."""
    return memoised(table, "operator_frame", lambda: _operator_frame(table))


def _operator_frame(table: TraceTable) -> pd.DataFrame:
    tree = build_op_tree(table)
    nodes = np.flatnonzero(tree.is_operator)
    nodes = nodes[np.lexsort((-tree.depth[nodes], tree.subtree_end[nodes]))]  # post-order
    shape, stack = _op_args(table, tree.event[nodes])
    return pd.DataFrame({
        "node": nodes.astype(np.int32),
        "name": pd.Categorical.from_codes(tree.name_code[nodes], tree.name_categories),
        "input_shape": shape,
        "call_stack": stack,
        "has_call_stack": np.asarray(stack.categories != "")[stack.codes],
        "tc_eligible": tree.tc_eligible[nodes],
    })


def _op_args(table: TraceTable, rows: np.ndarray) -> tuple[pd.Categorical, pd.Categorical]:
    """Input shape ("[]" when absent, as the reference) and call stack ("" when absent)."""
    found = _op_arg_positions(table.op_args["event"].to_numpy(), rows, len(table.events))
    shape = _gathered(table.op_args["input_dims"], found, "[]")
    if has_recorded_call_stacks(table):
        return shape, _gathered(table.op_args["call_stack"], found, "")
    # PyTorch 2.x writes no `Call stack`: derive it from the python_function events
    return shape, python_call_stacks(table).of_rows(rows, "")


def _op_arg_positions(arg_events: np.ndarray, rows: np.ndarray, n_events: int) -> np.ndarray:
    """Position in the op_args table of each event row's arguments, -1 where it has none (one
    lookup table over all events: O(n), unlike a binary search per row)."""
    position = np.full(n_events, -1, dtype=np.int32)
    position[arg_events[::-1]] = np.arange(len(arg_events) - 1, -1, -1, dtype=np.int32)
    return position[rows]


def has_recorded_call_stacks(table: TraceTable) -> bool:
    """Whether the trace carries PyTorch 1.x `Call stack` arguments (then they are used)."""
    return bool(table.op_args["call_stack"].notna().any())


def _gathered(column: pd.Series, positions: np.ndarray, missing: str) -> pd.Categorical:
    """The categorical `column` at `positions`, `missing` where the position is -1 or the value
    is absent."""
    codes = column.cat.codes.to_numpy()[np.maximum(positions, 0)]
    return filled_categorical(np.where(positions >= 0, codes, -1), column.cat.categories, missing)


def has_device_work(table: TraceTable) -> bool:
    """Whether the trace has kernels, memcpy or memset (the table then sorts by device time)."""
    kind = table.events["kind"].to_numpy()
    return bool(np.isin(kind, np.asarray(DEVICE_KINDS, dtype=kind.dtype)).any())


def _keys(group_by: str) -> list[str]:
    return ["name", "input_shape"] if group_by == GROUP_BY_INPUT_SHAPE else ["name"]


def _aggregate(table: TraceTable, frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Sums and counts per distinct `keys`, one `np.bincount` per statistic: the per-op times
    are gathered from the op tree one column at a time, never as a full frame."""
    tree = build_op_tree(table)
    nodes = frame["node"].to_numpy()
    group, first = _groups(frame, keys)
    out = pd.DataFrame({key: frame[key].to_numpy()[first].astype(object) for key in keys})
    stats = {"host_total_us": tree.host_total, "host_self_us": tree.host_self,
             "device_total_us": tree.device_total, "device_self_us": tree.device_self,
             "tc_self_us": tree.tc_self, "tc_total_us": tree.tc_total}
    for column, per_node in stats.items():
        out[column] = np.bincount(group, weights=per_node[nodes], minlength=len(first))
    out["calls"] = np.bincount(group, minlength=len(first))
    out["tc_eligible"] = frame["tc_eligible"].to_numpy()[first]  # the reference takes the first
    out["has_call_stack"] = np.bincount(
        group, weights=frame["has_call_stack"].to_numpy(), minlength=len(first)) > 0
    return out


def _groups(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Group number per row (in order of first appearance) and each group's first row."""
    key = np.zeros(len(frame), dtype=np.int64)
    for column in keys:
        values = frame[column].array
        key = key * (len(values.categories) + 1) + values.codes + 1
    group, uniques = pd.factorize(key, sort=False)
    first = np.full(len(uniques), len(frame), dtype=np.int64)
    np.minimum.at(first, group, np.arange(len(frame)))
    return group, first


def _ratio(part: pd.Series, whole: pd.Series) -> np.ndarray:
    whole = whole.to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.round(np.where(whole > 0, 100.0 * part.to_numpy() / whole, 0.0), 2)


def _sort_column(table: TraceTable) -> str:
    """Rows sort by device self time when the trace has device work, else by host self time."""
    return "device_self_us" if has_device_work(table) else "host_self_us"


def _table(table: TraceTable, frame: pd.DataFrame, keys: list[str], shown: list[str]
           ) -> pd.DataFrame:
    """`frame` aggregated per `keys`, sorted (ties by `keys`) and cut to the `shown` columns."""
    agg = _aggregate(table, frame, keys)
    agg = agg.sort_values([_sort_column(table), *keys], ascending=[False] + [True] * len(keys),
                          kind="stable")
    agg = agg.assign(tc_self_pct=_ratio(agg["tc_self_us"], agg["device_self_us"]),
                     tc_total_pct=_ratio(agg["tc_total_us"], agg["device_total_us"]))
    return agg[shown].reset_index(drop=True)


def operator_table(table: TraceTable, group_by: str = GROUP_BY_OPERATOR) -> pd.DataFrame:
    """The Operator view as a DataFrame, the one source its payload is shaped from: one row per
    name (or name + input shape), in the view's order.

    Columns: name, [input_shape], category (`op_categories.operator_categories`), calls,
    host/device self/total time (us, unrounded),
    tc_eligible, tensor-core share of device self/total time (percent, 2 decimals) and
    has_call_stack. Rows sort by device self time when the trace has device work, else by host
    self time; ties by name (and shape).
    """
    _check_group_by(group_by)
    keys = _keys(group_by)
    out = _table(table, operator_frame(table), keys, [*keys, *TABLE_COLUMNS, "has_call_stack"])
    out.insert(len(keys), "category", operator_categories(table, out["name"].astype(str)))
    return out


def call_stack_table(table: TraceTable, name: str, input_shape: Optional[str] = None,
                     group_by: str = GROUP_BY_OPERATOR) -> pd.DataFrame:
    """Rows of one operator (group), one per distinct non-empty call stack, with the columns of
    `operator_table` and `call_stack` last (spec 1.2 stack).

    Raises `UnknownOperatorError` when no operator has that name (and input shape).
    """
    _check_group_by(group_by)
    frame = operator_frame(table)
    mask = frame["name"] == name
    if group_by == GROUP_BY_INPUT_SHAPE and input_shape is not None:
        mask &= frame["input_shape"] == input_shape
    if not mask.any():
        what = f"{name!r}" + (f" with input shape {input_shape!r}" if input_shape else "")
        raise UnknownOperatorError(f"no operator {what}")
    selected = frame[mask & frame["has_call_stack"]]
    keys = _keys(group_by)
    return _table(table, selected, [*keys, "call_stack"], [*keys, *TABLE_COLUMNS, "call_stack"])


def _payload(rows: pd.DataFrame, table: TraceTable) -> dict[str, Any]:
    """{"rows", "sort_by", "has_device"}: times rounded to 3 decimals for JSON."""
    out = rows.copy()
    for column in ("host_self_us", "host_total_us", "device_self_us", "device_total_us"):
        out[column] = out[column].round(3)
    out["calls"] = out["calls"].astype(int)
    sort_by = _sort_column(table)
    return {"rows": out.to_dict("records"), "sort_by": sort_by,
            "has_device": sort_by == "device_self_us"}


def build_operators(table: TraceTable, group_by: str = GROUP_BY_OPERATOR) -> OperatorsPayload:
    """The operator table (spec 1.2): `operator_table` shaped for JSON, durations us with 3
    decimals, ratios percent with 2."""
    return _payload(operator_table(table, group_by), table)


def build_call_stacks(table: TraceTable, name: str, input_shape: Optional[str] = None,
                      group_by: str = GROUP_BY_OPERATOR) -> CallStacksPayload:
    """`call_stack_table` shaped for JSON like `build_operators`."""
    return _payload(call_stack_table(table, name, input_shape, group_by), table)


def build_operator_pies(table: TraceTable, top_n: Optional[int] = 10,
                        group_by: str = GROUP_BY_OPERATOR) -> OperatorPiesPayload:
    """Top-N operators by device self/total and host self/total time.

    Each entry is a list of {"name", "value"} (value > 0, descending, ties by label), or None when
    no operator qualifies. In shape mode the label is "name input_shape", so two shapes of one op
    are told apart (the reference labelled both by name).
    """
    _check_group_by(group_by)
    agg = _aggregate(table, operator_frame(table), _keys(group_by))
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
