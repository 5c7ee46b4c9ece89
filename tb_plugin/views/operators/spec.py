"""The Operator view's specs, builders and CSV rows."""

from __future__ import annotations

from typing import Any

from ...analysis.operators import (
    UnknownOperatorError,
    build_call_stacks,
    build_operator_pies,
    build_operators,
)
from ...output import rows
from ..errors import NotInTrace, OptionError
from ..spec import ViewSpec
from .options import OperatorOptions, OperatorPieOptions, OperatorStackOptions
from .payload import CallStacksPayload, OperatorPiesPayload, OperatorsPayload


def operators(table: Any, options: OperatorOptions) -> Any:
    return build_operators(table, group_by=options.group_by)

def operator_pies(table: Any, options: OperatorPieOptions) -> Any:
    return build_operator_pies(table, options.top_n, options.group_by)

def operator_stack(table: Any, options: OperatorStackOptions) -> Any:
    shape = options.input_shape
    if shape is not None and options.group_by != "operator_input_shape":
        raise OptionError("input_shape is only meaningful with group_by=operator_input_shape")
    try:
        return build_call_stacks(table, options.name, shape, options.group_by)
    except UnknownOperatorError as exc:
        shown = options.name[:120] + (f" with input shape {shape[:120]}" if shape else "")
        raise NotInTrace(f"no operator {shown!r} in this worker span") from exc


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("operators", "/operators", "Operator", operators,
             payload=OperatorsPayload, options=OperatorOptions,
             rows=rows.whole_payload,
             summary='Operator table (`{"rows": [...], "sort_by", "has_device", ...}`).'),
    ViewSpec("operator_pies", "/operators/pies", "Operator", operator_pies,
             payload=OperatorPiesPayload,
             options=OperatorPieOptions, rows=rows.whole_payload,
             summary="Top-N operator pies (device/host, self/total time)."),
    ViewSpec("operator_stack", "/operators/stack", "Operator", operator_stack,
             payload=CallStacksPayload,
             options=OperatorStackOptions, rows=rows.whole_payload,
             summary="The call stacks of one operator (one row per distinct stack).",
             errors={"404": "Unknown run/worker/span, or no such operator in this worker "
                            "span."}),
)
